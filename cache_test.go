package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// small options keep segments and batches tiny so tests exercise rotation, sealing and eviction.
// They write through the page cache, so that the byte layouts the recovery scenarios record
// (testdata/recovery) carry no direct-I/O padding; the direct writes of the default are what the
// tests that add WithBufferedWrites(false) run (the model, stress, torture and fault tests each
// have such variants).
func small(extra ...Option) []Option {
	return append([]Option{
		WithBufferedWrites(true),
		WithWriteBufferSize(64 << 10),
		WithSegmentSize(2 << 20),
		WithExpectedBlobs(1 << 12),
	}, extra...)
}

func open(t testing.TB, dir string, opts ...Option) *Cache {
	t.Helper()
	c, err := New(dir, opts...)
	if err != nil {
		t.Fatalf("New(%s): %v", dir, err)
	}
	return c
}

// value derives a blob from key and version, so any byte of the wrong blob is detected.
func value(key string, version, size int) []byte {
	v := make([]byte, size)
	seed := crc32.ChecksumIEEE([]byte(fmt.Sprintf("%s/%d", key, version)))
	r := rand.New(rand.NewPCG(uint64(seed), uint64(size)))
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	return v
}

// getBytes reads key whole: its bytes, or ok false on a miss; a failed read fails the test.
func getBytes(t testing.TB, c *Cache, key string) (b []byte, ok bool) {
	t.Helper()
	r, ok := c.Get([]byte(key))
	if !ok {
		return nil, false
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return b, true
}

func mustGet(t testing.TB, c *Cache, key string) []byte {
	t.Helper()
	r, ok := c.Get([]byte(key))
	if !ok {
		t.Fatalf("Get(%q): miss", key)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("Get(%q): read: %v", key, err)
	}
	return b
}

func expect(t testing.TB, c *Cache, key string, want []byte) {
	t.Helper()
	if want == nil {
		if r, ok := c.Get([]byte(key)); ok {
			b, _ := io.ReadAll(r)
			t.Fatalf("Get(%q): hit with %d bytes, want a miss", key, len(b))
		}
		return
	}
	if got := mustGet(t, c, key); !bytes.Equal(got, want) {
		t.Fatalf("Get(%q): %d bytes differ from the %d put", key, len(got), len(want))
	}
}

func TestPutGetSizes(t *testing.T) {
	for _, opts := range [][]Option{
		small(),
		small(WithIndex(IndexSkipList)),
		small(WithBufferedWrites(false)),
		small(WithDirectIOReads(true)),
		small(WithBufferedWrites(false), WithDirectIOReads(true), WithChecksum(true), WithVerifyOnRead(true)),
		small(WithChecksum(true), WithVerifyOnRead(true)),
		small(WithPerBlobFiles(true)),
	} {
		c := open(t, t.TempDir(), opts...)
		sizes := []int{0, 1, 31, 32, 4095, 4096, 4097, 50 << 10}
		for i, n := range sizes {
			k := fmt.Sprintf("key-%d", i)
			if err := c.Put([]byte(k), value(k, 0, n)); err != nil {
				t.Fatal(err)
			}
			expect(t, c, k, value(k, 0, n)) // from the write buffer
		}
		c.Drain()
		for i, n := range sizes {
			k := fmt.Sprintf("key-%d", i)
			expect(t, c, k, value(k, 0, n)) // from a segment
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLargeBlobStreams(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			dir := t.TempDir()
			opts := []Option{WithWriteBufferSize(8 << 20), WithSegmentSize(16 << 20), WithVerifyOnRead(true)}
			if direct {
				opts = append(opts, WithDirectIOReads(true))
			}
			c := open(t, dir, opts...)
			big := value("big", 0, 3<<20+123)
			if err := c.Put([]byte("big"), big); err != nil {
				t.Fatal(err)
			}
			c.Drain()
			expect(t, c, "big", big)
			r, ok := c.GetRange([]byte("big"), 1<<20+7, 1<<20)
			if !ok {
				t.Fatal("GetRange: miss")
			}
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, big[1<<20+7:2<<20+7]) {
				t.Fatalf("GetRange: %d bytes, err %v", len(got), err)
			}
			r2, _ := c.Get([]byte("big"))
			if err := iotest.TestReader(r2, big); err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 5000)
			if n, err := c.ReadAt([]byte("big"), p, 2<<20+1); n != len(p) || err != nil || !bytes.Equal(p, big[2<<20+1:2<<20+1+5000]) {
				t.Fatalf("ReadAt inside: %d, %v", n, err)
			}
			c.Close()
			c = open(t, dir, opts...)
			defer c.Close()
			expect(t, c, "big", big)
		})
	}
}

func TestReaderContract(t *testing.T) {
	c := open(t, t.TempDir(), small(WithChecksum(true), WithVerifyOnRead(true))...)
	defer c.Close()
	v := value("k", 0, 10000)
	c.Put([]byte("k"), v)
	c.Drain()
	r, _ := c.Get([]byte("k"))
	if err := iotest.TestReader(r, v); err != nil {
		t.Fatal(err)
	}
	r, _ = c.Get([]byte("k"))
	got, err := io.ReadAll(iotest.OneByteReader(r))
	if err != nil || !bytes.Equal(got, v) {
		t.Fatalf("one-byte reads: %d bytes, %v", len(got), err)
	}
	r, _ = c.Get([]byte("k"))
	var buf bytes.Buffer
	if n, err := io.Copy(&buf, r); err != nil || n != int64(len(v)) || !bytes.Equal(buf.Bytes(), v) {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	if sum, ok := r.Checksum(); !ok || sum != crc32.Checksum(v, crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatalf("Checksum() = %#x, %v", sum, ok)
	}
}

func TestReadAt(t *testing.T) {
	c := open(t, t.TempDir(), small(WithVerifyOnRead(true), WithFlushInterval(time.Hour))...)
	defer c.Close()
	v := value("k", 0, 9000)
	c.Put([]byte("k"), v)
	p := make([]byte, 9000)
	ranges := func(where string) {
		for _, tc := range []struct{ off, n, want int }{{0, 9000, 9000}, {0, 100, 100}, {8000, 100, 100}, {8950, 100, 50}, {9000, 10, 0}} {
			p := make([]byte, tc.n)
			n, err := c.ReadAt([]byte("k"), p, int64(tc.off))
			if n != tc.want || !bytes.Equal(p[:n], v[tc.off:tc.off+n]) {
				t.Fatalf("%s ReadAt(off %d, %d) = %d, %v", where, tc.off, tc.n, n, err)
			}
			if (tc.off+tc.n > 9000) != (err == io.EOF) {
				t.Fatalf("%s ReadAt(off %d, %d): err %v", where, tc.off, tc.n, err)
			}
		}
	}
	// In the write buffer: copied straight into p.
	ranges("pending")
	key := []byte("k")
	if allocs := testing.AllocsPerRun(100, func() { c.ReadAt(key, p, 0) }); allocs != 0 {
		t.Fatalf("pending ReadAt: %v allocations", allocs)
	}
	c.Drain()
	ranges("drained")
	if _, err := c.ReadAt([]byte("nope"), p, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadAt miss: %v", err)
	}
}

func TestOverwriteAndDelete(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	for v := range 5 {
		for i := range 50 {
			k := fmt.Sprintf("k%d", i)
			if err := c.Put([]byte(k), value(k, v, 3000+i)); err != nil {
				t.Fatal(err)
			}
		}
		if v%2 == 0 {
			c.Drain()
		}
	}
	for i := 0; i < 50; i += 3 {
		if err := c.Delete([]byte(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	check := func(c *Cache) {
		for i := range 50 {
			k := fmt.Sprintf("k%d", i)
			if i%3 == 0 {
				expect(t, c, k, nil)
			} else {
				expect(t, c, k, value(k, 4, 3000+i))
			}
		}
	}
	check(c)
	c.Drain()
	check(c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	check(c)
	c.crash()
	c = open(t, dir, small()...)
	defer c.Close()
	check(c)
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	if err := c.Put(nil, []byte("v")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	if err := c.Put(make([]byte, MaxKeyLen+1), []byte("v")); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("long key: %v", err)
	}
	if err := c.Put([]byte("k"), make([]byte, c.MaxValueSize(1)+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("value past the limit: %v", err)
	}
	if err := c.Put([]byte("k"), make([]byte, 2<<20)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("value larger than a segment: %v", err)
	}
	// Larger than a write buffer (64 KiB here) but not than a segment: written straight.
	big := value("big", 0, 300<<10)
	if err := c.Put([]byte("big"), big); err != nil {
		t.Fatalf("value larger than a write buffer: %v", err)
	}
	expect(t, c, "big", big)
	if err := c.PutChecksummed([]byte("k"), []byte("v"), 1234); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("bad checksum: %v", err)
	}
	if _, ok := c.Get([]byte("k")); ok {
		t.Fatal("a refused Put stored something")
	}
	if _, err := New(dir, small()...); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	c.Close()
	if err := c.Put([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if err := c.Delete([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Delete after Close: %v", err)
	}
	if _, ok := c.Get([]byte("k")); ok {
		t.Fatal("Get after Close hit")
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if _, err := New(other); !errors.Is(err, ErrNotBlobCache) {
		t.Fatalf("foreign dir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(b) != "mine" {
		t.Fatal("foreign dir was touched")
	}
	if err := (Options{SegmentSize: 1 << 20, WriteBufferSize: 1 << 20}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Validate: %v", err)
	}
	// Direct reads read segments; one file per blob has none.
	if _, err := New(t.TempDir(), WithPerBlobFiles(true), WithDirectIOReads(true)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("PerBlobFiles with DirectIOReads: %v", err)
	}
}

func TestChecksumMismatchOnRead(t *testing.T) {
	dir := t.TempDir()
	opts := small(WithChecksum(true), WithVerifyOnRead(true))
	c := open(t, dir, opts...)
	v := value("k", 0, 5000)
	c.Put([]byte("k"), v)
	c.Close()
	// Flip one value byte in the segment.
	seg := filepath.Join(dir, "segments", segment.FileName(1))
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, v[100:200])
	if i < 0 {
		t.Fatal("value not found in segment")
	}
	b[i] ^= 0x40
	os.WriteFile(seg, b, 0o644)
	c = open(t, dir, opts...)
	defer c.Close()
	r, ok := c.Get([]byte("k"))
	if !ok {
		t.Fatal("miss")
	}
	got, err := io.ReadAll(iotest.OneByteReader(r))
	if !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("read of a flipped value: %d bytes, err %v", len(got), err)
	}
	if _, err := c.ReadAt([]byte("k"), make([]byte, 5000), 0); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("ReadAt of a flipped value: %v", err)
	}
	if c.Stats().CorruptRecord == 0 {
		t.Fatal("corruption not counted")
	}
}

func TestCustomChecksumHash(t *testing.T) {
	c := open(t, t.TempDir(), small(WithChecksumHash(crc32.NewIEEE), WithVerifyOnRead(true))...)
	defer c.Close()
	v := value("k", 0, 777)
	if err := c.PutChecksummed([]byte("k"), v, crc32.ChecksumIEEE(v)); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	r, _ := c.Get([]byte("k"))
	if sum, ok := r.Checksum(); !ok || sum != crc32.ChecksumIEEE(v) {
		t.Fatalf("Checksum() = %#x %v", sum, ok)
	}
	expect(t, c, "k", v)
}

func TestStat(t *testing.T) {
	c := open(t, t.TempDir(), small(WithChecksum(true))...)
	defer c.Close()
	v := value("k", 0, 5000)
	c.Put([]byte("k"), v)
	want := crc32.Checksum(v, crc32.MakeTable(crc32.Castagnoli))
	for _, drained := range []bool{false, true} {
		info, err := c.Stat([]byte("k"))
		if err != nil || info.Size != 5000 || !info.HasChecksum || info.Checksum != want || info.Created.IsZero() {
			t.Fatalf("Stat (drained %v) = %+v, %v", drained, info, err)
		}
		c.Drain()
	}
	if _, err := c.Stat([]byte("absent")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a missing key: %v", err)
	}
	c.Delete([]byte("k"))
	if _, err := c.Stat([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a deleted key: %v", err)
	}
}

// TestDirectAlignedValues: with direct writes, values of batch.AlignedValueMin bytes or more
// start at aligned offsets behind pad records (in batches) or lead pads (streamed), so
// DirectIOReads land them in an aligned buffer in place. Every read path returns them exactly, mixed with small records, after a drain, a
// clean reopen (footers) and a crash (the scan of the unsealed segment steps over the pads).
func TestDirectAlignedValues(t *testing.T) {
	dir := t.TempDir()
	opts := []Option{WithWriteBufferSize(4 << 20), WithSegmentSize(64 << 20), WithBufferedWrites(false), WithDirectIOReads(true)}
	c := open(t, dir, opts...)
	sizes := []int{5, 128 << 10, 3000, 1 << 20, 129<<10 + 7, 1, 700 << 10, 1<<20 - 1}
	vals := map[string][]byte{}
	c.Put([]byte("odd-key-length-first"), []byte("x")) // so that nothing is aligned by chance
	for round := range 3 {
		for i, n := range sizes {
			k := fmt.Sprintf("key-%d-%d", round, i)
			vals[k] = value(k, round, n)
			if err := c.Put([]byte(k), vals[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Streamed records (a PutFrom past StreamThreshold, a Put past the write buffer) are aligned
	// by a lead pad in their range.
	for i, n := range []int{300 << 10, 5<<20 + 3} {
		k := fmt.Sprintf("streamed-%d", i)
		vals[k] = value(k, 0, n)
		if err := c.PutFrom([]byte(k), bytes.NewReader(vals[k]), int64(n)); err != nil {
			t.Fatal(err)
		}
	}
	k := "streamed-put"
	vals[k] = value(k, 0, 4<<20+5)
	if err := c.Put([]byte(k), vals[k]); err != nil {
		t.Fatal(err)
	}
	check := func(stage string) {
		t.Helper()
		// An aligned buffer, and one of huge-page memory cut 4 KiB into a NewReadBuffer (as the
		// bench cuts one per goroutine).
		bufs := map[string][]byte{"aligned": vfs.AlignedBuffer(6 << 20), "NewReadBuffer": NewReadBuffer(7 << 20)[4096:]}
		for k, v := range vals {
			expect(t, c, k, v)
			for name, p := range bufs {
				clear(p)
				n, err := c.ReadAt([]byte(k), p[:len(v)], 0)
				if n != len(v) || err != nil || !bytes.Equal(p[:n], v) {
					t.Fatalf("%s: ReadAt(%s) into the %s buffer: %d bytes, %v", stage, k, name, n, err)
				}
			}
			if len(v) > 10 {
				r, ok := c.GetRange([]byte(k), 7, int64(len(v)-10))
				if !ok {
					t.Fatalf("%s: GetRange(%s): miss", stage, k)
				}
				got, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(got, v[7:len(v)-3]) {
					t.Fatalf("%s: GetRange(%s): %d bytes, %v", stage, k, len(got), err)
				}
			}
		}
	}
	c.Drain()
	check("drained")
	for k, v := range vals {
		loc, ok := c.idx.Get(record.KeyHash([]byte(k)))
		valueOff := int64(loc.Offset) + record.HeaderSize + int64(len(k))
		if ok && len(v) >= batch.AlignedValueMin && valueOff%vfs.DirectIOAlignment != 0 {
			t.Errorf("%s: %d-byte value at offset %d, not aligned", k, len(v), valueOff)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, opts...)
	check("reopened")
	more := "after-reopen"
	vals[more] = value(more, 0, 300<<10)
	if err := c.Put([]byte(more), vals[more]); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	c.crash()
	c = open(t, dir, opts...)
	defer c.Close()
	check("after a crash")
	if st := c.Stats(); st.CorruptRecord != 0 {
		t.Fatalf("%d corrupt records", st.CorruptRecord)
	}
}

// noDirectFS refuses O_DIRECT as some file systems do (open fails with EINVAL).
type noDirectFS struct{ vfs.FS }

func (noDirectFS) OpenDirect(name string, _ int, _ os.FileMode) (vfs.File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EINVAL}
}

// TestDirectIORefused: on a file system that refuses O_DIRECT, a cache asked for direct writes
// and reads works through the page cache instead, and says so in Stats.
func TestDirectIORefused(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small(withFS(noDirectFS{vfs.Default}), WithBufferedWrites(false), WithDirectIOReads(true))...)
	vals := putKeys(t, c, "k", 200, 0, 20000) // several segments
	if err := c.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	for k, v := range vals {
		expect(t, c, k, v)
	}
	if st := c.Stats(); !strings.Contains(st.DirectIOOff, "O_DIRECT") || st.FlushErrors != 0 {
		t.Fatalf("DirectIOOff %q, FlushErrors %d", st.DirectIOOff, st.FlushErrors)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small(WithBufferedWrites(false))...)
	defer c.Close()
	if st := c.Stats(); st.DirectIOOff != "" {
		t.Fatalf("DirectIOOff %q where O_DIRECT works", st.DirectIOOff)
	}
	for k, v := range vals {
		expect(t, c, k, v)
	}
}

// TestBlobsCountsTheWriteBuffer: Stats.Blobs counts a Put as soon as it returns, not once its
// batch is written, and a Delete likewise.
func TestBlobsCountsTheWriteBuffer(t *testing.T) {
	c := open(t, t.TempDir(), small(WithFlushInterval(time.Hour))...)
	defer c.Close()
	for _, k := range []string{"a", "b", "a"} {
		c.Put([]byte(k), []byte("v"))
	}
	if got := c.Stats().Blobs; got != 2 {
		t.Fatalf("after Puts of a, b, a in the write buffer: Blobs %d, want 2", got)
	}
	c.Drain()
	c.Delete([]byte("a"))
	c.Put([]byte("c"), []byte("v"))
	if got := c.Stats().Blobs; got != 2 {
		t.Fatalf("after Delete a, Put c in the write buffer: Blobs %d, want 2", got)
	}
	c.Drain()
	if got := c.Stats().Blobs; got != 2 {
		t.Fatalf("drained: Blobs %d, want 2", got)
	}
}
