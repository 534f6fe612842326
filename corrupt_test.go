package blobcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// Damage on disk: bytes flipped one at a time in every part of a small cache directory (segment
// header, record headers, keys, values, hint footer, the zero tail of an unsealed segment,
// bloom.dat, the identity file), the cache reopened each time. Every Get must be the exact value
// or a miss or an error; the damage must be counted (or refuse the open, for the identity file);
// what the damage did not touch must read back whole; the cache must stay usable.

// damageSet is a cache directory to damage: its files' bytes and what each key must hold.
type damageSet struct {
	files   map[string][]byte // path relative to the directory -> content
	trimmed map[string]int    // length of the file without its trailing zeros
	vals    map[string][]byte // live keys and their values
	gone    []string          // keys deleted (must always miss)
	stale   map[string][]byte // earlier values of live keys (must never be returned)
	recs    []recordSpan      // records of segment 1, in order
	// dataEnd is where segment 1's records end (its footer starts there when sealed).
	dataEnd int64
}

type recordSpan struct {
	off, end int64
	key      string
	kind     record.Kind
	live     bool // the key's current value is this record
}

// buildDamageSet writes a one-segment cache. sealed closes it (footer, bloom.dat); otherwise it
// is left as a crash leaves it, every batch drained. Without sealing, keys are distinct: no
// overwrite or delete (a damaged record in an unsealed segment hides the records after it, so
// an older value or a deleted key could come back: see fault_regression_test.go).
func buildDamageSet(t testing.TB, sealed bool, opts []Option) *damageSet {
	dir := t.TempDir()
	c := open(t, dir, opts...)
	ds := &damageSet{files: map[string][]byte{}, vals: map[string][]byte{}, stale: map[string][]byte{}}
	put := func(k string, ver, size int) {
		v := value(k, ver, size)
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		if old, ok := ds.vals[k]; ok {
			ds.stale[k] = old
		}
		ds.vals[k] = v
	}
	if sealed {
		put("gone", 0, 90)
	}
	for i := range 5 {
		put(fmt.Sprintf("k%d", i), 0, 60+i*23)
	}
	c.Drain()
	if sealed {
		put("over", 0, 80)
		if err := c.Delete([]byte("gone")); err != nil {
			t.Fatal(err)
		}
		delete(ds.vals, "gone")
		ds.gone = append(ds.gone, "gone")
		put("over", 1, 70)
	}
	put("k5", 0, 100)
	put("k6", 0, 40)
	c.Drain()
	if sealed {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	} else {
		c.crash()
	}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || fi.Name() == lockFile {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		ds.files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ds.trimmed = map[string]int{}
	for rel, b := range ds.files {
		n := len(b)
		for n > 0 && b[n-1] == 0 {
			n--
		}
		ds.trimmed[rel] = n
	}
	seg := ds.files[filepath.Join(segDir, segment.FileName(1))]
	if seg == nil || len(ds.files) < 2 {
		t.Fatalf("unexpected files: %d", len(ds.files))
	}
	latest := map[string]int{}
	for off := int64(segment.HeaderSize); off < int64(len(seg)); {
		h, k, err := record.Decode(seg[off:])
		if err != nil {
			break
		}
		ds.recs = append(ds.recs, recordSpan{off: off, end: off + h.Len(), key: string(k), kind: h.Kind})
		if h.Kind != record.KindPad {
			latest[string(k)] = len(ds.recs) - 1
		}
		off += h.Len()
		ds.dataEnd = off
	}
	for k, i := range latest {
		if _, live := ds.vals[k]; live {
			ds.recs[i].live = true
		}
	}
	if len(ds.recs) < 7 {
		t.Fatalf("found %d records", len(ds.recs))
	}
	return ds
}

// restore writes the original files into dir (all of them, or those named), removing segment
// files added since. Files are rewritten in place, and cut back and extended only if their size
// changed (recovery cut them or wrote a footer), so a long run of zeros at the end is a hole:
// truncating and rewriting every file each time costs more than the rest of the test.
func (ds *damageSet) restore(t testing.TB, dir string, only ...string) {
	t.Helper()
	if len(only) == 0 {
		for rel := range ds.files {
			only = append(only, rel)
		}
	}
	for _, rel := range only {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := ds.files[rel]
		n := ds.trimmed[rel]
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b[:n], 0); err != nil {
			t.Fatal(err)
		}
		if fi, err := f.Stat(); err != nil {
			t.Fatal(err)
		} else if fi.Size() != int64(len(b)) {
			if err := f.Truncate(int64(n)); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	ents, _ := os.ReadDir(filepath.Join(dir, segDir))
	for _, e := range ents {
		if _, ok := ds.files[filepath.Join(segDir, e.Name())]; !ok {
			os.Remove(filepath.Join(dir, segDir, e.Name()))
		}
	}
}

// target is one byte to damage, and what may happen to the keys.
type target struct {
	file string
	off  int64
	what string
	// noticed: the damage must be counted (or, for the identity file, refuse the open).
	noticed bool
}

func anyKey(string) bool { return true }

// mayLose returns which keys XORing mask into the bytes of file from off on may cost (nil:
// none). The rest must read back whole.
func (ds *damageSet) mayLose(sealed bool, file string, from int64, mask []byte) func(string) bool {
	to := from + int64(len(mask))
	if file != filepath.Join(segDir, segment.FileName(1)) {
		return nil // bloom.dat is rebuilt; a bad identity file refuses the open
	}
	if from < segment.HeaderLen {
		return anyKey // the segment is dropped
	}
	damaged := append([]byte(nil), ds.files[file]...)
	for i := range mask {
		damaged[from+int64(i)] ^= mask[i]
	}
	lose := map[string]bool{}
	for i, r := range ds.recs {
		if r.end <= from || r.off >= to {
			continue
		}
		if sealed {
			// The footer is intact: only this record's key, if this is its value.
			if r.live {
				lose[r.key] = true
			}
			continue
		}
		// Recovery scans: the scan stops at (or steps over) the damaged record, so it and
		// the records after it may be lost; and so may the key the damaged record now
		// seems to hold, which recovery forgets in case it is the key's newest record.
		for _, r2 := range ds.recs[i:] {
			lose[r2.key] = true
		}
		if n := int64(binary.LittleEndian.Uint32(damaged[r.off+4:])); n <= record.MaxKeyLen && r.off+record.HeaderSize+n <= int64(len(damaged)) {
			lose[string(damaged[r.off+record.HeaderSize:r.off+record.HeaderSize+n])] = true
		}
	}
	if len(lose) == 0 {
		return nil
	}
	return func(k string) bool { return lose[k] }
}

// targets lists the bytes to damage: every byte of the segment header, of every record header and
// key, of the footer and of the identity file, and a sample of the rest.
func (ds *damageSet) targets(sealed bool) []target {
	segName := filepath.Join(segDir, segment.FileName(1))
	seg := ds.files[segName]
	var ts []target
	add := func(file string, off int64, what string, noticed bool) {
		ts = append(ts, target{file: file, off: off, what: what, noticed: noticed})
	}
	for off := range int64(segment.HeaderLen) {
		add(segName, off, "segment header", true)
	}
	for _, off := range []int64{segment.HeaderLen, 1000, segment.HeaderSize - 1} {
		add(segName, off, "header block padding", false)
	}
	for i, r := range ds.recs {
		keyEnd := r.off + record.HeaderSize + int64(len(r.key))
		var offs []int64
		for off := r.off; off < keyEnd; off++ {
			offs = append(offs, off)
		}
		for off := keyEnd; off < r.end; off += 31 {
			offs = append(offs, off)
		}
		if r.end > keyEnd {
			offs = append(offs, r.end-1)
		}
		for _, off := range offs {
			// A Get of the key notices damage to its live record; a scan notices any.
			add(segName, off, fmt.Sprintf("record %d (%v %s)", i, r.kind, r.key), r.live || !sealed)
		}
	}
	if sealed {
		for off := ds.dataEnd; off < int64(len(seg)); off++ {
			add(segName, off, "footer", true)
		}
	} else {
		for _, off := range []int64{ds.dataEnd, ds.dataEnd + 1, ds.dataEnd + 700, int64(len(seg)) - 1} {
			add(segName, off, "zero tail", false)
		}
	}
	if b, ok := ds.files[bloomFile]; ok {
		for off := range int64(len(b)) {
			if off < 56 || off >= int64(len(b))-4 || off%61 == 0 {
				add(bloomFile, off, "bloom.dat", true)
			}
		}
	}
	for off := range int64(len(ds.files[identityFile])) {
		add(identityFile, off, "identity", true)
	}
	return ts
}

// damage XORs mask into the bytes of file in dir from off on.
func damage(t testing.TB, dir, file string, off int64, orig, mask []byte) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, len(mask))
	for i := range mask {
		b[i] = orig[off+int64(i)] ^ mask[i]
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// checkDamaged opens the damaged cache in dir and checks every key: never a wrong value, never a
// deleted one, a miss or error only where mayLose allows. It returns the keys lost, whether the
// damage was noticed (counted, or an error from a read or from New), and the cache (nil if New
// refused to open it).
func (ds *damageSet) checkDamaged(t testing.TB, dir string, opts []Option, desc string, mayLose func(string) bool) (lost int, noticed bool, c *Cache) {
	t.Helper()
	c, err := New(dir, opts...)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotBlobCache) {
			t.Fatalf("%s: New: %v", desc, err)
		}
		return 0, true, nil
	}
	checked := false
	defer func() {
		if !checked {
			c.crash() // a check failed: free the directory for the next fuzz input
		}
	}()
	for k, v := range ds.vals {
		switch got := lookup(t, c, k, v); got {
		case readErr, miss:
			if mayLose == nil || !mayLose(k) {
				t.Fatalf("%s: Get(%s): %v, want the value (the damage is elsewhere)", desc, k, got)
			}
			lost++
			noticed = noticed || got == readErr
		}
	}
	for _, k := range ds.gone {
		if got := lookup(t, c, k); got == hit {
			t.Fatalf("%s: deleted %s is back", desc, k)
		}
	}
	st := c.Stats()
	checked = true
	return lost, noticed || st.CorruptRecord+st.TornTails > 0, c
}

func TestBitFlipsOnDisk(t *testing.T) {
	for _, sealed := range []bool{true, false} {
		name := "unsealed"
		if sealed {
			name = "sealed"
		}
		t.Run(name, func(t *testing.T) {
			fs := faultyFS(t)
			fs.Add(&errorfs.Fault{Ops: errorfs.OpSync | errorfs.OpSyncDir, Action: errorfs.Ignore})
			opts := small(withFS(fs), WithVerifyOnRead(true), WithExpectedBlobs(64))
			ds := buildDamageSet(t, sealed, opts)
			dir := filepath.Join(t.TempDir(), "cache")
			masks := []byte{0x01, 0x80, 0xff, 0x10}
			lost, noticed := 0, 0
			ts := ds.targets(sealed)
			ds.restore(t, dir)
			segName := filepath.Join(segDir, segment.FileName(1))
			if raceEnabled {
				// One byte in three (see raceEnabled).
				var sample []target
				for i := 0; i < len(ts); i += 3 {
					sample = append(sample, ts[i])
				}
				ts = sample
			}
			for i, tg := range ts {
				if i > 0 {
					// Recovery may have rewritten the segment; the last target was damaged.
					ds.restore(t, dir, segName, ts[i-1].file)
				}
				mask := masks[i%len(masks)]
				damage(t, dir, tg.file, tg.off, ds.files[tg.file], []byte{mask})
				desc := fmt.Sprintf("%s byte %d (%s) ^%#02x", tg.file, tg.off, tg.what, mask)
				n, seen, c := ds.checkDamaged(t, dir, opts, desc, ds.mayLose(sealed, tg.file, tg.off, []byte{mask}))
				lost += n
				if tg.file == identityFile && c != nil {
					c.Close()
					t.Fatalf("%s: New succeeded", desc)
				}
				if seen {
					noticed++
				}
				if c == nil {
					continue
				}
				if !seen && tg.noticed && c.Stats().Blobs > 0 {
					t.Fatalf("%s: not counted: %+v", desc, c.Stats())
				}
				if i%16 == 0 {
					// Still usable: a new blob is written and read back.
					v := value("new", i, 500)
					if err := c.Put([]byte("new"), v); err != nil {
						t.Fatalf("%s: Put: %v", desc, err)
					}
					c.Drain()
					expect(t, c, "new", v)
				}
				c.crash()
			}
			t.Logf("%d bytes damaged one at a time; %d times noticed, %d keys lost in all", len(ts), noticed, lost)
		})
	}
}

// FuzzDamagedCache damages a cache directory with a burst of up to 4 bytes anywhere in its
// segment (sealed or unsealed), bloom.dat or identity file, reopens it and checks every key as
// TestBitFlipsOnDisk does. sel picks the set and the file; off is taken modulo the file size.
func FuzzDamagedCache(f *testing.F) {
	fs := faultyFS(f)
	fs.Add(&errorfs.Fault{Ops: errorfs.OpSync | errorfs.OpSyncDir, Action: errorfs.Ignore})
	opts := small(withFS(fs), WithVerifyOnRead(true), WithExpectedBlobs(64))
	sets := [2]*damageSet{buildDamageSet(f, true, opts), buildDamageSet(f, false, opts)}
	dirs := [2]string{filepath.Join(f.TempDir(), "sealed"), filepath.Join(f.TempDir(), "unsealed")}
	segName := filepath.Join(segDir, segment.FileName(1))
	files := []string{segName, segName, segName, segName, bloomFile, identityFile}
	for _, seed := range []struct {
		sel  uint8
		off  uint32
		mask []byte
	}{
		{0, 20, []byte{1}},                           // segment header
		{0, segment.HeaderSize + 2, []byte{0x80}},    // first record's kind
		{1, segment.HeaderSize + 40, []byte{1, 2}},   // a key or value, unsealed
		{2, 1 << 30, []byte{0xff, 0xff, 0xff, 0xff}}, // somewhere
		{8, 30, []byte{4}},                           // bloom.dat
		{10, 3, []byte{0x20}},                        // identity
	} {
		f.Add(seed.sel, seed.off, seed.mask)
	}
	f.Fuzz(func(t *testing.T, sel uint8, off uint32, mask []byte) {
		mask = mask[:min(len(mask), 4)]
		if len(mask) == 0 || record.IsZero(mask) {
			return
		}
		set := int(sel % 2)
		ds, dir := sets[set], dirs[set]
		file := files[int(sel/2)%len(files)]
		b, ok := ds.files[file]
		if !ok {
			return // no bloom.dat in the unsealed set
		}
		at := int64(off) % int64(len(b))
		mask = mask[:min(int64(len(mask)), int64(len(b))-at)]
		// Undo whatever the last input did, to every file.
		for rel := range ds.files {
			if p := filepath.Join(dir, rel); !bytes.Equal(ds.files[rel], readOrNil(p)) {
				ds.restore(t, dir, rel)
				if err := os.Truncate(p, int64(ds.trimmed[rel])); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(p, int64(len(ds.files[rel]))); err != nil {
					t.Fatal(err)
				}
			}
		}
		damage(t, dir, file, at, b, mask)
		desc := fmt.Sprintf("set %d, %s bytes %d..%d ^%x", set, file, at, at+int64(len(mask)), mask)
		_, _, c := ds.checkDamaged(t, dir, opts, desc, ds.mayLose(set == 0, file, at, mask))
		if c != nil {
			c.crash()
		}
	})
}

// readOrNil returns the content of a file, or nil.
func readOrNil(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// TestDamagedSegmentHeaderKeepsTombstones: a segment whose header block is damaged is dropped
// on open; the deletes it held must not be undone (a blob deleted there and stored in an older
// segment must not come back).
func TestDamagedSegmentHeaderKeepsTombstones(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	if err := c.Put([]byte("gone"), value("gone", 0, 500)); err != nil {
		t.Fatal(err)
	}
	c.Close() // segment 1 holds gone
	c = open(t, dir, small()...)
	if err := c.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	c.Close() // segment 2 holds its tombstone
	seg := filepath.Join(dir, segDir, segment.FileName(2))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0x01 // reserved field of the segment header
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	if got := lookup(t, c, "gone"); got == hit {
		t.Fatal("the deleted blob is back")
	}
}

// TestDamageInUnsealedSegmentNeverServesOlderValue: in a segment recovered by scanning (no
// footer: a crash), a damaged record hides the records after it. A newer value or a delete of a
// key among them must not give way to the key's older value.
func TestDamageInUnsealedSegmentNeverServesOlderValue(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	v1, v2 := value("k", 1, 300), value("k", 2, 300)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("gone"), value("gone", 0, 300)); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if err := c.Put([]byte("other"), value("other", 0, 300)); err != nil {
		t.Fatal(err)
	}
	if err := c.Put([]byte("k"), v2); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	c.crash()
	// Damage the header of "other", between the old and the new records of k and gone.
	seg, b, off, _ := segmentRecord(t, dir, "other")
	b[off+8] ^= 0x04 // valueLen
	if err := os.WriteFile(seg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	lookup(t, c, "k", v2)
	if got := lookup(t, c, "gone"); got == hit {
		t.Fatal("the deleted blob is back")
	}
}

// TestWriteToWithholdsADamagedTail: with VerifyOnRead, WriteTo (io.Copy) of a blob whose value
// was damaged on disk fails with ErrChecksumMismatch, and the writer never gets the whole value:
// a blob read whole into memory is checked before any byte is written, and a streamed one loses
// its last chunk, where the check fails. A consumer that counts bytes (a Content-Length, a
// memcached VALUE line) then sees a short value, not a wrong one.
func TestWriteToWithholdsADamagedTail(t *testing.T) {
	for _, size := range []int{4 << 10, 3 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, WithVerifyOnRead(true))
			v := value("big", 0, size)
			if err := c.Put([]byte("big"), v); err != nil {
				t.Fatal(err)
			}
			c.Close()
			_, b, off, h := segmentRecord(t, dir, "big")
			off += int64(h.ValueOffset()) + int64(size) - 1 // the value's last byte
			damage(t, dir, filepath.Join(segDir, segment.FileName(1)), off, b, []byte{0x20})
			c = open(t, dir, WithVerifyOnRead(true))
			defer c.Close()
			r, ok := c.Get([]byte("big"))
			if !ok {
				t.Fatal("big: miss")
			}
			var buf bytes.Buffer
			n, err := io.Copy(&buf, r)
			if !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("io.Copy = %d, %v; want ErrChecksumMismatch", n, err)
			}
			if buf.Len() >= size || int64(buf.Len()) != n {
				t.Fatalf("the writer got %d of %d bytes (io.Copy said %d): the damaged tail was written", buf.Len(), size, n)
			}
			if !bytes.Equal(buf.Bytes(), v[:buf.Len()]) {
				t.Fatal("the bytes written differ from the value's")
			}
		})
	}
}

// segmentRecord reads the first segment of the cache in dir and finds key's record in it: the
// segment's path and bytes, and the record's offset and header.
func segmentRecord(t *testing.T, dir, key string) (path string, seg []byte, off int64, h record.Header) {
	t.Helper()
	path = filepath.Join(dir, segDir, segment.FileName(1))
	seg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off, h = findRecord(t, seg, key)
	return path, seg, off, h
}

// findRecord returns the offset and header of the first record of key in seg, a segment file's
// bytes, scanning from its first record.
func findRecord(t *testing.T, seg []byte, key string) (int64, record.Header) {
	t.Helper()
	off := int64(segment.HeaderSize)
	for {
		h, k, err := record.Decode(seg[off:])
		if err != nil {
			t.Fatalf("record of %s not found: %v", key, err)
		}
		if string(k) == key {
			return off, h
		}
		off += h.Len()
	}
}
