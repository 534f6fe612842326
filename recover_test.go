package blobcache

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/segment"
)

// TestTornTail cuts the unsealed segment left by a crash at many offsets: every blob before
// the cut survives whole, the rest are misses, none is wrong.
func TestTornTail(t *testing.T) {
	base := t.TempDir()
	c := open(t, base, small()...)
	const n = 40
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		c.Put([]byte(k), value(k, 0, 1000+i*37))
		if i%7 == 0 {
			c.Drain()
		}
	}
	c.Drain()
	c.crash()
	seg := filepath.Join(base, "segments", segment.FileName(1))
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The fallocated file is longer than what was written: cut within the written part.
	written := len(full)
	for written > 0 && full[written-1] == 0 {
		written--
	}
	for cut := segment.HeaderSize + 1; cut < written+500; cut += 1499 {
		dir := t.TempDir()
		copyDir(t, base, dir, "segments")
		if err := os.WriteFile(filepath.Join(dir, "segments", segment.FileName(1)), full[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		c := open(t, dir, small()...)
		present, gone := 0, ""
		for i := range n {
			k := fmt.Sprintf("k%d", i)
			if _, ok := c.Get([]byte(k)); !ok {
				gone = k
				continue
			}
			if gone != "" {
				t.Fatalf("cut %d: %s is present but the earlier %s is gone", cut, k, gone)
			}
			expect(t, c, k, value(k, 0, 1000+i*37))
			present++
		}
		if present < n && c.Stats().TornTails == 0 {
			t.Fatalf("cut %d: torn tail not counted", cut)
		}
		c.Close()
	}
}

// TestStrayFiles: the cache removes only leftovers of its own (a temporary copy of one of its
// files, a segment a crash left with nothing written); files it did not write are left where
// they are and counted, and a file with a segment's name that is not a segment is moved aside.
func TestStrayFiles(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	c.Put([]byte("k"), []byte("v"))
	c.Close()
	own := []string{
		filepath.Join(dir, "bloom.dat.tmp"),
		filepath.Join(dir, "STATE.tmp"),
		filepath.Join(dir, "segments", segment.FileName(98)), // created, never written
	}
	for _, p := range own {
		os.WriteFile(p, nil, 0o644)
	}
	strays := []string{
		filepath.Join(dir, "notes.txt"),
		filepath.Join(dir, "other.tmp"),
		filepath.Join(dir, "segments", "garbage.tmp"),
		filepath.Join(dir, "segments", "foo.txt"),
	}
	for _, p := range strays {
		os.WriteFile(p, []byte("somebody's"), 0o644)
	}
	foreign := filepath.Join(dir, "segments", segment.FileName(99))
	os.WriteFile(foreign, []byte("not a segment at all"), 0o644)

	// A read-only open changes nothing, and counts what is not the cache's.
	ro, err := New(dir, WithReadOnly(true))
	if err != nil {
		t.Fatal(err)
	}
	expect(t, ro, "k", []byte("v"))
	if got := ro.Stats().StrayFiles; got != int64(len(strays))+1 {
		t.Errorf("read-only open: StrayFiles %d, want %d", got, len(strays)+1)
	}
	ro.Close()
	for _, p := range append(append(own, strays...), foreign) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("read-only open: %v", err)
		}
	}

	c = open(t, dir, small()...)
	defer c.Close()
	for _, p := range own {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s (the cache's own leftover) survived", p)
		}
	}
	for _, p := range strays {
		if b, err := os.ReadFile(p); err != nil || string(b) != "somebody's" {
			t.Errorf("stray %s: %q, %v; want it left alone", p, b, err)
		}
	}
	if b, err := os.ReadFile(foreign + ".stray"); err != nil || string(b) != "not a segment at all" {
		t.Errorf("%s moved aside: %q, %v", foreign, b, err)
	}
	st := c.Stats()
	if st.StrayFiles != int64(len(strays))+1 || st.Orphans != uint64(len(own)) {
		t.Errorf("StrayFiles %d, Orphans %d; want %d and %d", st.StrayFiles, st.Orphans, len(strays)+1, len(own))
	}
	if st.LastCorruption == "" {
		t.Errorf("the file moved aside is not reported")
	}
	expect(t, c, "k", []byte("v"))
}

func TestBloomSavedAndRebuilt(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	for i := range 500 {
		c.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
	}
	c.Close()
	// A clean reopen trusts bloom.dat; a damaged one is rebuilt and every key is still found.
	b, _ := os.ReadFile(filepath.Join(dir, "bloom.dat"))
	b[len(b)/2] ^= 1
	os.WriteFile(filepath.Join(dir, "bloom.dat"), b, 0o644)
	c = open(t, dir, small()...)
	for i := range 500 {
		expect(t, c, fmt.Sprintf("k%d", i), []byte("v"))
	}
	if c.Stats().CorruptRecord == 0 {
		t.Fatal("a damaged bloom.dat went unnoticed")
	}
	// Deletes leave bits set; a rebuild clears them and keeps every live key.
	for i := range 400 {
		c.Delete([]byte(fmt.Sprintf("k%d", i)))
	}
	c.Drain()
	c.rebuildBloom()
	for i := 400; i < 500; i++ {
		expect(t, c, fmt.Sprintf("k%d", i), []byte("v"))
	}
	c.Close()
}

// copyDir copies a cache directory; files under skip are left out (the test writes them).
func copyDir(t *testing.T, from, to, skip string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if filepath.Dir(rel) == skip {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPerBlobRecoveryAndEviction(t *testing.T) {
	dir := t.TempDir()
	opts := small(WithPerBlobFiles(true), WithMaxSize(1<<20), WithFsync(true))
	c := open(t, dir, opts...)
	for i := range 400 {
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 5000)); err != nil {
			t.Fatal(err)
		}
	}
	c.Delete([]byte("k399"))
	c.crash() // the Delete returned with Fsync on: it must stay done
	c = open(t, dir, opts...)
	st := c.Stats()
	if st.DiskBytes > 1<<20 {
		t.Fatalf("disk %d over MaxSize", st.DiskBytes)
	}
	expect(t, c, "k399", nil)
	expect(t, c, "k398", value("k398", 0, 5000))
	if _, ok := c.Get([]byte("k0")); ok {
		t.Fatal("the oldest blob survived eviction")
	}
	c.Close()
	res, err := Verify(dir, nil)
	if err != nil || len(res.Corrupt) != 0 || res.Records == 0 {
		t.Fatalf("Verify: %+v, %v", res, err)
	}
	// A cache keeps the mode it was created with: opened without PerBlobFiles, it still reads
	// its blob files.
	c = open(t, dir, small()...)
	defer c.Close()
	if !c.opts.PerBlobFiles {
		t.Fatal("the per-blob mode was not adopted from the directory")
	}
	expect(t, c, "k398", value("k398", 0, 5000))
}

// TestBadFooterScanned damages the footer of a sealed segment: its records are recovered by
// scanning and the damage is counted.
func TestBadFooterScanned(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		c.Put([]byte(k), value(k, 0, 3000))
	}
	c.Close()
	seg := filepath.Join(dir, "segments", segment.FileName(1))
	b, _ := os.ReadFile(seg)
	b[len(b)-40] ^= 0xff // inside the footer entries
	os.WriteFile(seg, b, 0o644)
	c = open(t, dir, small()...)
	defer c.Close()
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		expect(t, c, k, value(k, 0, 3000))
	}
	if c.Stats().CorruptRecord == 0 {
		t.Fatal("a damaged footer went uncounted")
	}
}

// TestCreationCutShort: a crash while a new cache writes its identity file leaves only the
// temporary file; the directory opens as a new, empty cache, not as a foreign directory.
func TestCreationCutShort(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, identityFile+".tmp"), []byte("BLOB"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := open(t, dir, small()...)
	defer c.Close()
	if err := c.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "k", []byte("v"))
	if _, err := os.Stat(filepath.Join(dir, identityFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("temporary identity file left behind: %v", err)
	}
}

// TestEntryLogLifecycle: while a segment of small records is active its footer entries wait in
// its entry log on disk (counted in DiskBytes), not in memory; the seal writes them into the
// footer and removes the log; a crash leaves the log, which the next open removes, and the
// segment is scanned with nothing lost.
func TestEntryLogLifecycle(t *testing.T) {
	dir := t.TempDir()
	opts := []Option{WithSegmentSize(16 << 20), WithMaxSize(64 << 20)}
	c, err := New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	logs := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, segDir, "*.entries"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	const n = 20_000 // six chunks of entries, in one segment
	put := func(c *Cache, from int) {
		for i := from; i < from+n; i++ {
			if err := c.Put(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%06d", i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Drain()
	}
	check := func(c *Cache, upTo int) {
		t.Helper()
		buf := make([]byte, 16)
		for i := range upTo {
			n, err := c.ReadAt(fmt.Appendf(nil, "k%06d", i), buf, 0)
			if (err != nil && err != io.EOF) || string(buf[:n]) != fmt.Sprintf("v%06d", i) {
				t.Fatalf("key %d: %q, %v", i, buf[:n], err)
			}
		}
	}
	put(c, 0)
	if l := logs(); len(l) != 1 {
		t.Fatalf("entry logs while the segment is active: %v, want one", l)
	}
	files, err := segmentFilesAllocated(filepath.Join(dir, segDir))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Stats().DiskBytes; files > d+2*fsMetaPerFile {
		t.Fatalf("files take %d bytes, DiskBytes says %d: the entry log is not counted", files, d)
	}
	c.crash()
	if l := logs(); len(l) != 1 {
		t.Fatalf("entry logs after a crash: %v, want one", l)
	}
	c, err = New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if l := logs(); len(l) != 0 {
		t.Fatalf("entry logs after reopening: %v, want none", l)
	}
	check(c, n)
	put(c, n)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if l := logs(); len(l) != 0 {
		t.Fatalf("entry logs after Close: %v, want none", l)
	}
	c, err = New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check(c, 2*n)
	if st := c.Stats(); st.TornTails != 0 || st.CorruptRecord != 0 {
		t.Fatalf("reopening a closed cache: %d torn tails, %d corrupt: a footer was not written", st.TornTails, st.CorruptRecord)
	}
}
