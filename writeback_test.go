package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// writeBackCache opens a cache on a real directory for the write-back tests, with segments of
// segSize, and skips the test where the kernel cannot tell what the page cache holds
// (cachestat(2), Linux 6.5) or the file system refuses O_DIRECT: there every batch is written
// one way.
func writeBackCache(t *testing.T, dir string, segSize int64, opts ...Option) *Cache {
	t.Helper()
	c := open(t, dir, append([]Option{WithSegmentSize(segSize), WithWriteBufferSize(2 << 20)}, opts...)...)
	skipUnlessWritesBack(t, c, dir)
	c.segs.costs.fixed = true // the route's other rules alone: TestRouteCostPicks tests its costs
	return c
}

// skipUnlessWritesBack skips the test, closing c, where c's batches cannot be written back: the
// file system under dir refuses O_DIRECT, or the kernel has no cachestat(2).
func skipUnlessWritesBack(t *testing.T, c *Cache, dir string) {
	t.Helper()
	if c.Stats().DirectIOOff != "" {
		c.Close()
		t.Skipf("the file system refuses O_DIRECT: %s", c.Stats().DirectIOOff)
	}
	f, err := vfs.Default.OpenFile(dir+"/probe", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := vfs.StatPageCache(f, 0, 1); errors.Is(err, errors.ErrUnsupported) {
		c.Close()
		t.Skipf("cachestat: %v", err)
	}
}

// segmentPages is what the page cache holds of segment s's records.
func segmentPages(t *testing.T, c *Cache, id uint32) vfs.PageCacheStat {
	t.Helper()
	s := c.segs.table.Load().get(id)
	if s == nil {
		t.Fatalf("segment %d is gone", id)
	}
	end := s.dataEnd
	if end == 0 {
		end = segment.HeaderSize
	}
	st, err := vfs.StatPageCache(s.f, segment.HeaderSize, end-segment.HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestWriteBackRoute: by default a batch is written through the page cache while the data fits in
// RAM and the bytes not yet synced stay under their share of memory, and its blobs' hits, the
// first included, are served from the page cache; under pressure, past the share, and with
// DirectWrites or Fsync, batches go with O_DIRECT and leave nothing in the page cache.
func TestWriteBackRoute(t *testing.T) {
	v := value("k", 1, 1<<20)
	put := func(c *Cache, key string) {
		t.Helper()
		if err := c.Put([]byte(key), v); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	c := writeBackCache(t, t.TempDir(), 64<<20)
	defer c.Close()
	put(c, "a")
	if s := c.Stats(); s.WrittenBackBytes < uint64(len(v)) {
		t.Fatalf("WrittenBackBytes %d after a 1 MiB Put that fits in RAM", s.WrittenBackBytes)
	}
	if st := segmentPages(t, c, 1); st.Cached < st.Pages || st.Dirty == 0 {
		t.Fatalf("after a write back: the page cache holds %d of %d pages, %d dirty; want all, dirty", st.Cached, st.Pages, st.Dirty)
	}
	for i := range 2 {
		if b, ok := getBytes(t, c, "a"); !ok || !bytes.Equal(b, v) {
			t.Fatalf("hit %d: wrong bytes or missing", i+1)
		}
	}
	if s := c.Stats(); s.ReadsPageCache != 2 || s.ReadsFilled+s.ReadsDirect != 0 {
		t.Fatalf("hits of a blob written back: routes (page cache, filled, direct) %d, %d, %d; want 2, 0, 0",
			s.ReadsPageCache, s.ReadsFilled, s.ReadsDirect)
	}

	// Under pressure, and past the share of memory, batches go direct.
	c.fills.fitDue.next.Store(math.MaxInt64) // the fit is not asked again: the test sets it
	c.fills.unfit.Store(true)
	before := c.Stats().WrittenBackBytes
	put(c, "b")
	if got := c.Stats().WrittenBackBytes; got != before {
		t.Fatalf("under pressure %d bytes were written back", got-before)
	}
	c.fills.unfit.Store(false)
	c.fills.avail.Store(int64(float64(c.segs.unsynced.Load()+3<<20) / writeBackShare)) // room for 3 MiB more
	for i := range 6 {
		put(c, fmt.Sprint("c", i))
	}
	if got := c.Stats().WrittenBackBytes - before; got < 2<<20 || got > 3<<20 {
		t.Fatalf("%d bytes written back with room for 3 MiB, in batches of a little more than 1 MiB", got)
	}
	if u, limit := c.segs.unsynced.Load(), int64(writeBackShare*float64(c.fills.avail.Load())); u > limit {
		t.Fatalf("%d bytes unsynced, over the limit of %d", u, limit)
	}
	// Once the kernel has written those bytes back (an outside sync stands in for its flusher),
	// the share has room again, before any seal: the count is taken again.
	before = c.Stats().WrittenBackBytes
	put(c, "full")
	if got := c.Stats().WrittenBackBytes; got != before {
		t.Fatalf("%d bytes written back past the share", got-before)
	}
	f, err := os.OpenFile(c.segs.dir+"/"+segment.FileName(1), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	c.segs.recountDue.next.Store(0)
	put(c, "d")
	if got := c.Stats().WrittenBackBytes; got == before {
		t.Fatal("nothing written back once the kernel had written the rest back")
	}
	if s1 := c.segs.table.Load().get(1); s1.sealing.Load() {
		t.Fatal("segment 1 is being sealed: the test wanted the share freed before any seal")
	}

	// A value larger than the write buffer is streamed, chunk by chunk, routed the same way.
	c.fills.avail.Store(math.MaxInt64 / 2)
	before = c.Stats().WrittenBackBytes
	streamed := value("s", 1, 5<<20)
	if err := c.Put([]byte("s"), streamed); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().WrittenBackBytes - before; got < uint64(len(streamed)) {
		t.Fatalf("a streamed value of %d bytes: %d bytes written back", len(streamed), got)
	}
	if b, ok := getBytes(t, c, "s"); !ok || !bytes.Equal(b, streamed) {
		t.Fatal("the streamed value: wrong bytes or missing")
	}
	for _, k := range []string{"a", "b", "c0", "c5"} {
		if b, ok := getBytes(t, c, k); !ok || !bytes.Equal(b, v) {
			t.Fatalf("%s: wrong bytes or missing", k)
		}
	}

	for _, opt := range []Option{WithDirectWrites(true), WithFsync(true)} {
		c := writeBackCache(t, t.TempDir(), 64<<20, opt)
		put(c, "a")
		if s := c.Stats(); s.WrittenBackBytes != 0 {
			t.Fatalf("%d bytes written back with %+v", s.WrittenBackBytes, c.opts)
		}
		if st := segmentPages(t, c, 1); st.Cached != 0 {
			t.Fatalf("a direct write left %d pages in the page cache", st.Cached)
		}
		if b, ok := getBytes(t, c, "a"); !ok || !bytes.Equal(b, v) {
			t.Fatal("wrong bytes or missing")
		}
		c.Close()
	}
	// Values that enter the memory tier as they are written: their batches go direct (the tier
	// serves the hits), and the hits come from memory.
	mc := writeBackCache(t, t.TempDir(), 64<<20, WithMemorySize(64<<20), WithMemoryAdmission(MemoryOnWrite))
	put(mc, "a")
	if s := mc.Stats(); s.WrittenBackBytes != 0 {
		t.Fatalf("%d bytes written back with MemoryOnWrite", s.WrittenBackBytes)
	}
	if st := segmentPages(t, mc, 1); st.Cached != 0 {
		t.Fatalf("a batch of values held in memory left %d pages in the page cache", st.Cached)
	}
	if b, ok := getBytes(t, mc, "a"); !ok || !bytes.Equal(b, v) {
		t.Fatal("MemoryOnWrite: wrong bytes or missing")
	}
	if s := mc.Stats(); s.MemoryHits != 1 || s.ReadsPageCache+s.ReadsFilled+s.ReadsDirect != 0 {
		t.Fatalf("MemoryOnWrite: %d hits from memory, %d from the segments; want 1, 0", s.MemoryHits, s.ReadsPageCache+s.ReadsFilled+s.ReadsDirect)
	}
	mc.Close()
	// A value too large for the tier (a sixteenth of it at most) is routed as without one.
	mc = writeBackCache(t, t.TempDir(), 64<<20, WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite))
	put(mc, "a")
	if s := mc.Stats(); s.WrittenBackBytes < uint64(len(v)) || s.MemoryDeclined == 0 {
		t.Fatalf("a value the tier declined (%d declined): %d bytes written back", s.MemoryDeclined, s.WrittenBackBytes)
	}
	mc.Close()
	if _, err := New(t.TempDir(), WithDirectWrites(true), WithBufferedWrites(true)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("DirectWrites with BufferedWrites: %v, want ErrInvalidOptions", err)
	}
}

// TestLazySeal: the seal of a segment written back waits until the kernel has written its pages
// back (here a sync from outside, standing in for the kernel's flusher), and only then syncs and
// writes the footer; Close, and a rotation that must evict the segment, do not wait for the
// kernel. Every value reads back after the reopen, from footers.
func TestLazySeal(t *testing.T) {
	dir := t.TempDir()
	const segSize = 4 << 20
	c := writeBackCache(t, dir, segSize)
	v := value("k", 1, 256<<10)
	keys := 0
	putUntil := func(done func() bool) {
		t.Helper()
		for !done() {
			if err := c.Put(fmt.Appendf(nil, "k%d", keys), v); err != nil {
				t.Fatal(err)
			}
			keys++
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	putUntil(func() bool { s := c.segs.table.Load().get(1); return s != nil && s.sealing.Load() })
	s1 := c.segs.table.Load().get(1)
	if c.Stats().WrittenBackBytes == 0 || s1.unsynced.Load() == 0 {
		t.Fatal("segment 1 was not written back")
	}
	time.Sleep(3 * writeBackPoll)
	if st := segmentPages(t, c, 1); st.Dirty == 0 {
		t.Skip("the kernel wrote segment 1 back at once: nothing to wait for") // memory pressure on the machine
	}
	if s1.sealed.Load() || s1.synced.Load() {
		t.Fatal("segment 1 was sealed while its pages were dirty")
	}
	// The kernel writes it back (a sync from outside does the same): the seal follows.
	f, err := os.Open(dir + "/" + segDir + "/" + segment.FileName(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deadline := time.Now().Add(writeBackMaxDelay / 2)
	for !s1.sealed.Load() && time.Now().Before(deadline) {
		time.Sleep(writeBackPoll / 5)
	}
	if !s1.sealed.Load() || !s1.synced.Load() || s1.unsynced.Load() != 0 {
		t.Fatal("segment 1 was not sealed once written back")
	}

	// Segment 2 seals behind the write-back too; Close hurries it.
	putUntil(func() bool { s := c.segs.table.Load().get(2); return s != nil && s.sealing.Load() })
	if s2 := c.segs.table.Load().get(2); s2.sealed.Load() {
		t.Fatal("segment 2 was sealed at once")
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > writeBackMaxDelay/4 {
		t.Fatalf("Close waited %v for the kernel's write-back", d)
	}
	if c.segs.unsynced.Load() != 0 {
		t.Fatalf("%d bytes unsynced after Close", c.segs.unsynced.Load())
	}
	for id := uint32(1); id <= 2; id++ {
		f, size, err := segment.Open(vfs.Default, dir+"/"+segDir, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := segment.ReadFooter(f, size); err != nil {
			t.Fatalf("segment %d: %v", id, err)
		}
		f.Close()
	}
	c = open(t, dir)
	defer c.Close()
	for i := range keys {
		if b, ok := getBytes(t, c, fmt.Sprint("k", i)); !ok || !bytes.Equal(b, v) {
			t.Fatalf("k%d: wrong bytes or missing after the reopen", i)
		}
	}
}

// TestWriteBackEviction: a cache that writes its whole disk faster than the kernel writes back
// evicts segments whose seal was waiting for the write-back (the rotation hurries it), and Puts
// do not wait for the kernel.
func TestWriteBackEviction(t *testing.T) {
	const segSize = 4 << 20
	c := writeBackCache(t, t.TempDir(), segSize, WithMaxSize(4*segSize))
	defer c.Close()
	v := value("k", 1, 256<<10)
	start := time.Now()
	const n = 12 * segSize / (256 << 10) // three times the disk
	for i := range n {
		if err := c.Put(fmt.Appendf(nil, "k%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > writeBackMaxDelay/4 {
		t.Fatalf("writing three times the disk took %v: the rotation waited for the kernel's write-back", d)
	}
	s := c.Stats()
	if s.Evictions == 0 || s.WrittenBackBytes == 0 {
		t.Fatalf("evictions %d, bytes written back %d: want both", s.Evictions, s.WrittenBackBytes)
	}
	if b, ok := getBytes(t, c, fmt.Sprint("k", n-1)); !ok || !bytes.Equal(b, v) {
		t.Fatal("the last blob: wrong bytes or missing")
	}
}

// TestLazySealCrash: a process that dies while seals wait for the kernel's write-back leaves
// segments without footers, written through the page cache; the kernel keeps their pages, and
// the next open scans them and finds every value that was flushed. The crash is a copy of the
// live directory, read through the page cache as a new process would after a SIGKILL.
func TestLazySealCrash(t *testing.T) {
	dir := t.TempDir()
	const segSize = 4 << 20
	c := writeBackCache(t, dir, segSize)
	defer c.Close()
	v := value("k", 1, 256<<10)
	keys := 0
	for {
		s := c.segs.table.Load().get(3)
		if s != nil && c.segs.table.Load().get(2).sealing.Load() {
			break
		}
		if err := c.Put(fmt.Appendf(nil, "k%d", keys), v); err != nil {
			t.Fatal(err)
		}
		keys++
		if keys%4 == 0 {
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	pending := 0
	for id := uint32(1); id <= 2; id++ {
		if s := c.segs.table.Load().get(id); s.sealing.Load() && !s.sealed.Load() {
			pending++
		}
	}
	if pending == 0 {
		t.Skip("the kernel wrote the segments back at once: no seal was waiting") // memory pressure on the machine
	}
	crashed := t.TempDir()
	copyDir(t, dir, crashed, "")
	c2 := open(t, crashed)
	defer c2.Close()
	for i := range keys {
		if b, ok := getBytes(t, c2, fmt.Sprint("k", i)); !ok || !bytes.Equal(b, v) {
			t.Fatalf("k%d: wrong bytes or missing after the crash (%d seals were waiting)", i, pending)
		}
	}
}

// TestWriteBackStreams: Puts larger than a write buffer are streamed, chunk by chunk, through
// the page cache, from four goroutines, while segments fill, seal lazily and are evicted and
// other goroutines read; everything finishes (a hang fails the test by its timeout) and every
// value read is whole.
func TestWriteBackStreams(t *testing.T) {
	c := writeBackCache(t, t.TempDir(), 32<<20, WithWriteBufferSize(1<<20), WithMaxSize(4*32<<20))
	defer c.Close()
	const perWriter = 150
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				k := fmt.Sprintf("k%d-%d", g, i)
				if err := c.Put([]byte(k), value(k, 1, 1<<20)); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					old := fmt.Sprintf("k%d-%d", g, i/2)
					if b, ok := getBytes(t, c, old); ok && !bytes.Equal(b, value(old, 1, 1<<20)) {
						t.Errorf("%s: wrong bytes", old)
						return
					}
				}
				if i%50 == 0 {
					c.Drain()
				}
			}
		}()
	}
	wg.Wait()
	if s := c.Stats(); s.WrittenBackBytes == 0 || s.Evictions == 0 {
		t.Fatalf("bytes written back %d, evictions %d: want both", s.WrittenBackBytes, s.Evictions)
	}
}

// TestWriteBackNeedsCachestat: where the kernel cannot tell what it has written back (a file
// system wrapper without cachestat here, a kernel before 6.5 in the field), every batch goes
// direct: a seal could not wait for the write-back.
func TestWriteBackNeedsCachestat(t *testing.T) {
	c := open(t, t.TempDir(), withFS(errorfs.New(vfs.Default, 1)), WithSegmentSize(64<<20), WithWriteBufferSize(2<<20))
	defer c.Close()
	if c.Stats().DirectIOOff != "" {
		t.Skipf("the file system refuses O_DIRECT: %s", c.Stats().DirectIOOff)
	}
	v := value("k", 1, 1<<20)
	if err := c.Put([]byte("k"), v); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.WrittenBackBytes != 0 || s.FlushedBytes == 0 {
		t.Fatalf("without cachestat: %d bytes written back of %d flushed, want none", s.WrittenBackBytes, s.FlushedBytes)
	}
	if b, ok := getBytes(t, c, "k"); !ok || !bytes.Equal(b, v) {
		t.Fatal("wrong bytes or missing")
	}
}
