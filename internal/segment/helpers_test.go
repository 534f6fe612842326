package segment

import (
	"github.com/seed57392e9e/blobcache/internal/corruption"

	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// rec is a record as the tests build it.
type rec struct {
	kind  record.Kind
	key   []byte
	value []byte
}

func (r rec) encode() []byte {
	h := record.Header{Kind: r.kind, KeyLen: uint32(len(r.key)), ValueLen: uint32(len(r.value)), CTime: 1700000000000000000, ValueCRC: record.CRC(r.value)}
	b := make([]byte, record.HeaderSize+len(r.key)+len(r.value))
	h.Encode(b, r.key)
	copy(b[record.HeaderSize:], r.key)
	copy(b[record.HeaderSize+len(r.key):], r.value)
	return b
}

// randomRecs returns n puts and deletes with random keys and non-zero
// random values of up to maxValue bytes.
func randomRecs(rng *rand.Rand, n, maxValue int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		r := rec{kind: record.KindPut, key: fmt.Appendf(nil, "key-%d-%d", i, rng.Uint32())}
		if rng.IntN(5) == 0 {
			r.kind = record.KindDelete
		} else {
			r.value = make([]byte, rng.IntN(maxValue+1))
			for j := range r.value {
				r.value[j] = byte(rng.IntN(255) + 1)
			}
		}
		recs[i] = r
	}
	return recs
}

// layout encodes recs back to back from HeaderSize and returns the bytes,
// the entries a seal would write and the offset after the last record.
func layout(recs []rec) (data []byte, entries []Entry, end int64) {
	off := int64(HeaderSize)
	for _, r := range recs {
		b := r.encode()
		entries = append(entries, Entry{Hash: record.KeyHash(r.key), Offset: uint32(off), Length: uint32(len(b)), Kind: r.kind})
		data = append(data, b...)
		off += int64(len(b))
	}
	return data, entries, off
}

// scanned collects what Scan hands its callback, checking every record
// against the file as it goes.
type scanned struct {
	entries []Entry
	keys    [][]byte
	damaged []Entry // damaged records, handed over as deletes of their keys
}

func (s *scanned) fn(t testing.TB, f vfs.File) func(Entry, record.Header, []byte) error {
	return func(e Entry, h record.Header, key []byte) error {
		t.Helper()
		// A damaged record comes as a delete of its key with no key bytes; so does a good
		// tombstone with an empty key, which its checksums tell apart from a damaged one.
		if key == nil && e.Kind == record.KindDelete && (h.Kind != record.KindDelete || !checksOut(t, f, e)) {
			checkDamagedAt(t, f, e, h)
			s.damaged = append(s.damaged, e)
			return nil
		}
		checkRecordAt(t, f, e, h, key)
		s.entries = append(s.entries, e)
		s.keys = append(s.keys, append([]byte(nil), key...))
		return nil
	}
}

// checksOut reports whether the record e points at passes its value and attribute checks.
func checksOut(t testing.TB, f vfs.File, e Entry) bool {
	t.Helper()
	b := make([]byte, e.Length)
	if _, err := f.ReadAt(b, int64(e.Offset)); err != nil {
		t.Fatalf("read record at %d: %v", e.Offset, err)
	}
	h, _, err := record.Decode(b)
	return err == nil && record.CheckValue(h, b[h.ValueOffset():]) == nil && record.CheckAttrs(h, b[h.AttrOffset():]) == nil
}

// checkDamagedAt checks a damaged record handed over as a delete: its header and key check, its
// value does not, and e names its key and extent.
func checkDamagedAt(t testing.TB, f vfs.File, e Entry, h record.Header) {
	t.Helper()
	b := make([]byte, e.Length)
	if _, err := f.ReadAt(b, int64(e.Offset)); err != nil {
		t.Fatalf("read damaged record at %d: %v", e.Offset, err)
	}
	dh, dkey, err := record.Decode(b)
	if err != nil || dh != h || dh.Len() != int64(e.Length) || record.KeyHash(dkey) != e.Hash {
		t.Fatalf("damaged record at %d: %v, or the entry does not describe it", e.Offset, err)
	}
	if record.CheckValue(dh, b[dh.ValueOffset():]) == nil && record.CheckAttrs(dh, b[dh.AttrOffset():]) == nil {
		t.Fatalf("Scan called a record at %d damaged, but its value and attributes check", e.Offset)
	}
}

// checkRecordAt reads the record e points at and checks both checksums and
// that e, h and key describe it.
func checkRecordAt(t testing.TB, f vfs.File, e Entry, h record.Header, key []byte) {
	t.Helper()
	b := make([]byte, e.Length)
	if _, err := f.ReadAt(b, int64(e.Offset)); err != nil {
		t.Fatalf("read record at %d: %v", e.Offset, err)
	}
	dh, dkey, err := record.Decode(b)
	if err != nil {
		t.Fatalf("Scan handed over a record at %d that does not decode: %v", e.Offset, err)
	}
	if err := record.CheckValue(dh, b[dh.ValueOffset():]); err != nil {
		t.Fatalf("Scan handed over a record at %d with a bad value: %v", e.Offset, err)
	}
	if err := record.CheckAttrs(dh, b[dh.AttrOffset():]); err != nil {
		t.Fatalf("Scan handed over a record at %d with bad attributes: %v", e.Offset, err)
	}
	if dh != h || !bytes.Equal(dkey, key) || dh.Len() != int64(e.Length) || e.Hash != record.KeyHash(key) || e.Kind != h.Kind || e.Flags != h.Flags {
		t.Fatalf("Scan's entry %+v / header %+v / key %q disagree with the record on disk", e, h, key)
	}
	if h.Kind == record.KindPad {
		t.Fatalf("Scan handed over a pad at %d", e.Offset)
	}
}

func sameEntries(t testing.TB, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// writeUnsealed creates segment 1 in a new directory with the given
// capacity and writes data after the header block in one batch.
func writeUnsealed(t testing.TB, data []byte, capacity int64) (dir string, a *Active) {
	t.Helper()
	dir = t.TempDir()
	a, err := Create(vfs.Default, dir, 1, capacity, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if len(data) > 0 {
		if err := a.WriteBatch([][]byte{data}, HeaderSize); err != nil {
			t.Fatal(err)
		}
	}
	return dir, a
}

func fileSize(t testing.TB, f vfs.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// memFile is an in-memory vfs.File for the fuzzer, which runs Scan too
// often for real files.
type memFile struct {
	name string
	data []byte
}

var _ vfs.File = (*memFile)(nil)

func (m *memFile) Name() string { return m.name }
func (m *memFile) Close() error { return nil }
func (m *memFile) Sync() error  { return nil }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("memFile: negative offset")
	}
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := off + int64(len(p)); end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) ReadvAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := m.ReadAt(b, off)
		total += n
		off += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (m *memFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, _ := m.WriteAt(b, off)
		total += n
		off += int64(n)
	}
	return total, nil
}

func (m *memFile) Truncate(size int64) error {
	if size <= int64(len(m.data)) {
		m.data = m.data[:size]
		return nil
	}
	_, err := m.WriteAt(make([]byte, size-int64(len(m.data))), int64(len(m.data)))
	return err
}

func (m *memFile) Allocate(off, n int64) error {
	if off+n > int64(len(m.data)) {
		return m.Truncate(off + n)
	}
	return nil
}

func (m *memFile) PunchHole(off, n int64) error { return errors.ErrUnsupported }

func (m *memFile) Stat() (os.FileInfo, error) { return memInfo{m}, nil }

type memInfo struct{ m *memFile }

func (i memInfo) Name() string       { return filepath.Base(i.m.name) }
func (i memInfo) Size() int64        { return int64(len(i.m.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// wantCorruption checks that res stopped at off with a CorruptionError
// wrapping want, naming the file and the offset.
func wantCorruption(t testing.TB, res ScanResult, name string, off int64, want error) {
	t.Helper()
	if res.Torn {
		t.Fatalf("Scan reported a torn tail, want corruption at %d (%v)", off, res.Err)
	}
	if res.End != off {
		t.Fatalf("scan ends at %d, want the corruption at %d", res.End, off)
	}
	wantCorruptionAt(t, res, name, off, want)
}

// wantCorruptionAt is wantCorruption for a scan that went on past the damage.
func wantCorruptionAt(t testing.TB, res ScanResult, name string, off int64, want error) {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(res.Err, &ce) || !errors.Is(res.Err, corruption.ErrCorrupt) || !errors.Is(res.Err, want) {
		t.Fatalf("Scan error = %v, want a CorruptionError wrapping %v", res.Err, want)
	}
	if ce.Offset != off || ce.File != name {
		t.Fatalf("corruption at %s:%d, want %s:%d", ce.File, ce.Offset, name, off)
	}
	msg := res.Err.Error()
	if !strings.Contains(msg, name) || !strings.Contains(msg, fmt.Sprint(off)) {
		t.Fatalf("error %q does not name the file and offset", msg)
	}
	if (errors.Is(want, record.ErrHeaderChecksum) || errors.Is(want, record.ErrValueChecksum)) &&
		!(strings.Contains(msg, "stored") && strings.Contains(msg, "computed")) {
		t.Fatalf("error %q does not give both checksums", msg)
	}
}

// sealWith adds entries to a's footer and seals it at dataEnd.
func sealWith(a *Active, entries []Entry, dataEnd int64) (int64, error) {
	for _, e := range entries {
		a.AddEntry(e)
	}
	return a.Seal(dataEnd)
}

// recEntries returns what rec.Each hands over.
func recEntries(t testing.TB, rec *Recovered) []Entry {
	t.Helper()
	var entries []Entry
	if err := rec.Each(func(e Entry) error { entries = append(entries, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(entries) != rec.Count() {
		t.Fatalf("Each handed over %d entries, Count says %d", len(entries), rec.Count())
	}
	return entries
}
