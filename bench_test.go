package blobcache

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/cputime"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// readSyscalls returns the process's count of read syscalls (read, pread64, preadv, ...) from
// /proc/self/io, or -1 where there is no such file.
func readSyscalls() int64 { return procIO("syscr") }

// procIO returns the counter name ("syscr", "write_bytes", ...) of /proc/self/io, or -1 where
// there is no such file.
func procIO(name string) int64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+": "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

func benchKey(buf []byte, prefix byte, i uint64) []byte {
	buf = buf[:32]
	for j := range buf {
		buf[j] = prefix
	}
	binary.LittleEndian.PutUint64(buf[8:], i)
	binary.LittleEndian.PutUint64(buf[16:], i*0x9e3779b97f4a7c15)
	return buf
}

// benchKeys returns n keys made by benchKey.
func benchKeys(prefix byte, n int) [][]byte {
	var kb [32]byte
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = append([]byte(nil), benchKey(kb[:], prefix, uint64(i))...)
	}
	return keys
}

// fixture is a cache shared by benchmarks (building it is the slow part).
type fixture struct {
	once sync.Once
	dir  string
	c    *Cache
	n    int
}

var (
	missFixture fixture // 1M blobs of 16 bytes
	hitFixture  fixture // 16K blobs of 4 KiB (no memory tier, the default): hits from the segments
	memFixture  fixture // 16K blobs of 4 KiB, a memory tier that holds them all
	hotFixture  fixture // 256 blobs of 4 KiB in a memory tier: 1 MiB, in the CPU caches
)

func (f *fixture) get(b *testing.B, n, size int, opts ...Option) *Cache {
	f.once.Do(func() {
		dir, err := os.MkdirTemp("", "blobcache-bench-")
		if err != nil {
			b.Fatal(err)
		}
		f.dir, f.n = dir, n
		// A bounded cache, as in production: the hit path then sets access bits (PolicyReinsert).
		f.c, err = New(dir, append([]Option{WithExpectedBlobs(int64(n)), WithMaxSize(1 << 40)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		v := make([]byte, size)
		var kb [32]byte
		for i := range n {
			binary.LittleEndian.PutUint64(v, uint64(i))
			if err := f.c.Put(benchKey(kb[:], 'k', uint64(i)), v); err != nil {
				b.Fatal(err)
			}
		}
		f.c.Drain()
	})
	return f.c
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bigDir.dir != "" {
		os.RemoveAll(bigDir.dir)
	}
	for _, f := range []*fixture{&missFixture, &hitFixture, &memFixture} {
		if f.c != nil {
			f.c.Close()
			os.RemoveAll(f.dir)
		}
	}
	os.Exit(code)
}

// BenchmarkGetMiss looks up absent keys in a cache holding 1M blobs: the bloom filter answers.
func BenchmarkGetMiss(b *testing.B) {
	c := missFixture.get(b, 1<<20, 16)
	keys := benchKeys('m', 1024)
	b.ReportAllocs()
	sys0 := readSyscalls()
	i := 0
	for b.Loop() {
		if _, ok := c.Get(keys[i&1023]); ok {
			b.Fatal("hit")
		}
		i++
	}
	if sys0 >= 0 {
		b.ReportMetric(float64(readSyscalls()-sys0)/float64(b.N), "reads/op")
	}
	st := c.Stats()
	b.ReportMetric(float64(st.BloomFalsePositives)/float64(st.Misses), "fp-rate")
}

// BenchmarkGetMissMemory is BenchmarkGetMiss on a cache with a memory tier that holds every
// blob it has: a miss is answered before the tier is asked, as without one.
func BenchmarkGetMissMemory(b *testing.B) {
	const n = 16 << 10
	c := memFixture.get(b, n, 4<<10, WithMemorySize(256<<20))
	memoryWarm(b, c, benchKeys('k', n), 4<<10)
	keys := benchKeys('m', 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok := c.Get(keys[i&1023]); ok {
			b.Fatal("hit")
		}
		i++
	}
}

func BenchmarkGetMissParallel(b *testing.B) {
	c := missFixture.get(b, 1<<20, 16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var kb [32]byte
		i := uint64(0)
		for pb.Next() {
			c.Get(benchKey(kb[:], 'm', i&1023))
			i++
		}
	})
}

// BenchmarkGetHit4K reads random 4 KiB blobs that are in the page cache: Get, read to the end
// into a reused buffer, Close. There is no memory tier: every hit reads from a segment file.
func BenchmarkGetHit4K(b *testing.B) {
	const n = 16 << 10
	c := hitFixture.get(b, n, 4<<10)
	keys := benchKeys('k', n)
	buf := make([]byte, 4<<10)
	// Warm the page cache.
	for _, k := range keys {
		c.ReadAt(k, buf, 0)
	}
	benchGetHits(b, c, keys, 4<<10)
}

// BenchmarkReadAt4K is the zero-allocation hit path from a segment file (no memory tier).
func BenchmarkReadAt4K(b *testing.B) {
	const n = 16 << 10
	benchReadAtHits(b, hitFixture.get(b, n, 4<<10), benchKeys('k', n), 4<<10)
}

// BenchmarkReadAt4KMemory is BenchmarkReadAt4K with every blob in the memory tier: a hit is a
// copy from memory, with no system call and no allocation.
func BenchmarkReadAt4KMemory(b *testing.B) {
	const n = 16 << 10
	c := memFixture.get(b, n, 4<<10, WithMemorySize(256<<20))
	keys := benchKeys('k', n)
	memoryWarm(b, c, keys, 4<<10)
	benchReadAtHits(b, c, keys, 4<<10)
}

// BenchmarkReadAt4KMemoryHot is BenchmarkReadAt4KMemory over 256 blobs, 1 MiB that the CPU's
// caches hold: the cost of the hit path itself, without waiting for memory.
func BenchmarkReadAt4KMemoryHot(b *testing.B) {
	const n = 256
	c := hotFixture.get(b, n, 4<<10, WithMemorySize(256<<20))
	keys := benchKeys('k', n)
	memoryWarm(b, c, keys, 4<<10)
	benchReadAtHits(b, c, keys, 4<<10)
}

// BenchmarkGetHit4KMemory is BenchmarkGetHit4K with every blob in the memory tier.
func BenchmarkGetHit4KMemory(b *testing.B) {
	const n = 16 << 10
	c := memFixture.get(b, n, 4<<10, WithMemorySize(256<<20))
	keys := benchKeys('k', n)
	memoryWarm(b, c, keys, 4<<10)
	benchGetHits(b, c, keys, 4<<10)
}

// memoryWarm reads every key of c three times in a row, so that all are in its memory tier (a
// value enters on its second hit, and keeps entering while those that entered are read from
// memory), and fails b if they are not.
func memoryWarm(b *testing.B, c *Cache, keys [][]byte, size int) {
	buf := make([]byte, size)
	for _, k := range keys {
		for range 3 {
			if _, err := c.ReadAt(k, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	if st := c.Stats(); st.MemoryItems != int64(len(keys)) {
		b.Fatalf("the memory tier holds %d of %d blobs", st.MemoryItems, len(keys))
	}
}

// benchReadAtHits times ReadAt of whole blobs of size bytes under keys, in a fixed scattered
// order, and reports the read system calls per hit.
func benchReadAtHits(b *testing.B, c *Cache, keys [][]byte, size int) {
	n := uint64(len(keys))
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	sys0 := readSyscalls()
	i := uint64(0)
	for b.Loop() {
		if m, err := c.ReadAt(keys[(i*7919)%n], buf, 0); err != nil || m != len(buf) {
			b.Fatal(m, err)
		}
		i++
	}
	if sys0 >= 0 {
		b.ReportMetric(float64(readSyscalls()-sys0)/float64(b.N), "reads/op")
	}
}

// benchGetHits is benchReadAtHits with Get, a read to the end into a reused buffer and Close.
func benchGetHits(b *testing.B, c *Cache, keys [][]byte, size int) {
	n := uint64(len(keys))
	buf := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	sys0 := readSyscalls()
	i := uint64(0)
	for b.Loop() {
		r, ok := c.Get(keys[(i*7919)%n])
		if !ok {
			b.Fatal("miss")
		}
		if m, err := io.ReadFull(r, buf); err != nil || m != len(buf) {
			b.Fatal(m, err)
		}
		r.Close()
		i++
	}
	if sys0 >= 0 {
		b.ReportMetric(float64(readSyscalls()-sys0)/float64(b.N), "reads/op")
	}
}

// bigDir holds 512 blobs of 1 MiB written with direct writes (so their values are aligned),
// shared by the BenchmarkReadAt1MiB variants; TestMain removes it.
var bigDir struct {
	once sync.Once
	dir  string
}

const bigBlobs = 512

// BenchmarkReadAt1MiB reads 1 MiB blobs into an aligned buffer (a Go allocation of 1 MiB is
// one) with ReadAt, each variant reporting the CPU (user + system) the process spent per read:
//   - buffered-hot: through the page cache, every blob already in it (the kernel copies);
//   - buffered-cold: through the page cache after dropping it (root; run with -benchtime=Nx,
//     N <= 512, so every read is of a blob not yet read: the kernel allocates pages, fills them
//     from the device and copies);
//   - direct: DirectIOReads, every read from the device into the buffer in place.
//
// Wall time is the device's or the copy's; cpu-ns/op is what a hit costs the machine.
func BenchmarkReadAt1MiB(b *testing.B) {
	bigDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "blobcache-bench-1mib-")
		if err != nil {
			b.Fatal(err)
		}
		bigDir.dir = dir
		c, err := New(dir, WithBufferedWrites(false), WithExpectedBlobs(bigBlobs))
		if err != nil {
			b.Fatal(err)
		}
		v := make([]byte, 1<<20)
		for i, k := range benchKeys('m', bigBlobs) {
			binary.LittleEndian.PutUint64(v, uint64(i))
			if err := c.Put(k, v); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	})
	keys := benchKeys('m', bigBlobs)
	for _, tc := range []struct {
		name               string
		direct, cold, huge bool
	}{{"buffered-hot", false, false, false}, {"buffered-cold", false, true, false}, {"direct", true, false, false}, {"direct-hugebuf", true, false, true}} {
		b.Run(tc.name, func(b *testing.B) {
			opts := []Option{WithBufferedWrites(false)}
			if tc.direct {
				opts = append(opts, WithDirectIOReads(true))
			}
			c, err := New(bigDir.dir, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 1<<20)
			if tc.huge {
				buf = NewReadBuffer(1 << 20)
			}
			switch {
			case tc.cold && b.N > bigBlobs:
				b.Skipf("%d reads: at most %d are cold (use -benchtime=%dx)", b.N, bigBlobs, bigBlobs)
			case tc.cold:
				exec.Command("sync").Run()
				if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
					b.Skipf("cannot drop the page cache: %v", err)
				}
			case !tc.direct:
				for _, k := range keys {
					c.ReadAt(k, buf, 0)
				}
			}
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			cpu0, cpuOK := cputime.Process()
			sys0, dev0 := readSyscalls(), deviceReads()
			b.ResetTimer()
			for i := range b.N {
				// 7919 is prime to 512: the first 512 reads are of distinct blobs.
				if m, err := c.ReadAt(keys[(i*7919)%bigBlobs], buf, 0); err != nil || m != len(buf) {
					b.Fatal(m, err)
				}
			}
			b.StopTimer()
			if cpu1, _ := cputime.Process(); cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			if sys0 >= 0 {
				b.ReportMetric(float64(readSyscalls()-sys0)/float64(b.N), "reads/op")
			}
			if dev0 >= 0 {
				b.ReportMetric(float64(deviceReads()-dev0)/float64(b.N), "dev-reads/op")
			}
		})
	}
}

// deviceReads returns the read requests completed by the machine's disks (/sys/block/*/stat,
// loop and RAM devices left out), or -1 where there is no such file. Other processes' reads count
// too: a figure for a quiet machine.
func deviceReads() int64 {
	stats, _ := filepath.Glob("/sys/block/*/stat")
	if len(stats) == 0 {
		return -1
	}
	var n int64
	for _, f := range stats {
		if dev := filepath.Base(filepath.Dir(f)); strings.HasPrefix(dev, "loop") || strings.HasPrefix(dev, "ram") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 {
			v, _ := strconv.ParseInt(fields[0], 10, 64)
			n += v
		}
	}
	return n
}

var ddRate = regexp.MustCompile(`copied, ([0-9.]+) s`)

// ddWrite measures the disk's sequential write bandwidth in dir with dd, in bytes per second:
// O_DIRECT writes of 16 MiB (a default write buffer) if direct, else buffered writes of 1 MiB;
// synced at the end either way.
func ddWrite(b *testing.B, dir string, mib int, direct bool) float64 {
	args := []string{"if=/dev/zero", "of=" + filepath.Join(dir, "dd.tmp"), "bs=1M", fmt.Sprintf("count=%d", mib), "conv=fdatasync"}
	if direct {
		args = []string{"if=/dev/zero", "of=" + filepath.Join(dir, "dd.tmp"), "bs=16M", fmt.Sprintf("count=%d", (mib+15)/16), "oflag=direct", "conv=fdatasync"}
		mib = (mib + 15) / 16 * 16
	}
	out, err := exec.Command("dd", args...).CombinedOutput()
	os.Remove(filepath.Join(dir, "dd.tmp"))
	if err != nil {
		b.Skipf("dd: %v: %s", err, out)
	}
	m := ddRate.FindSubmatch(out)
	if m == nil {
		b.Fatalf("dd output: %s", out)
	}
	secs, _ := strconv.ParseFloat(string(m[1]), 64)
	return float64(mib<<20) / secs
}

// BenchmarkPut1MiB puts 1 MiB blobs and reports, measured in the same directory in the same
// run, the disk's sequential write bandwidth with O_DIRECT (dd, 16 MiB blocks, one fdatasync at
// the end: the comparator, "ratio" is put-MB/s over it) and with buffered writes (dd, 1 MiB
// blocks, "dd-buffered-MB/s"). Each variant is timed until its data is on disk, like dd's:
// through Close (sealing a segment syncs its data; with Fsync every batch is synced).
// Run with -benchtime=2048x (2 GiB) or more so the disk, not the page cache, sets the pace.
func BenchmarkPut1MiB(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"default", nil}, // through the page cache while it has room (writeback.go), then direct
		{"direct", []Option{WithDirectWrites(true)}},
		{"fsync", []Option{WithFsync(true)}},
		{"buffered", []Option{WithBufferedWrites(true)}},
		{"buffered-fsync", []Option{WithBufferedWrites(true), WithFsync(true)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			ddBuffered := ddWrite(b, dir, max(b.N, 256), false)
			dd := ddWrite(b, dir, max(b.N, 256), true)
			c, err := New(dir, append([]Option{WithSegmentSize(1 << 30)}, tc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			v := bytes.Repeat([]byte("blobcache"), 1<<20/9+1)[:1<<20]
			var kb [32]byte
			// Warm up: the write buffers are allocated (and faulted in) on first use.
			for i := range 512 {
				if err := c.Put(benchKey(kb[:], 'w', uint64(i)), v); err != nil {
					b.Fatal(err)
				}
			}
			c.Drain()
			b.SetBytes(1 << 20)
			b.ReportAllocs()
			start := time.Now()
			i := uint64(0)
			for b.Loop() {
				if err := c.Put(benchKey(kb[:], 'p', i), v); err != nil {
					b.Fatal(err)
				}
				i++
			}
			written := c.Stats().WrittenBackBytes
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			rate := float64(b.N) * (1 << 20) / time.Since(start).Seconds()
			b.ReportMetric(float64(written)/float64(b.N<<20), "written-back")
			b.ReportMetric(ddBuffered/1e6, "dd-buffered-MB/s")
			b.ReportMetric(dd/1e6, "dd-direct-MB/s")
			b.ReportMetric(rate/1e6, "put-MB/s")
			b.ReportMetric(rate/dd, "ratio")
		})
	}
}

// BenchmarkCapacity is seed 001's capacity test: load N blobs of 100 bytes under 32-byte keys,
// then report the load rate, RAM per blob (index + bloom, and the growth of the Go heap and of
// the RSS less the cache's buffers: after the last Put with batches in flight, after Drain with
// the segment open, and after a reopen), reopen time after a clean close and after a crash, and
// cold and hot random Get latency. Run with -benchtime=1x.
func BenchmarkCapacity(b *testing.B) {
	for _, n := range []int{1_000_000, 3_000_000, 10_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				capacity(b, n)
			}
		})
	}
}

// distinctInIndex is how many entries the index holds for capacity's n keys: keys whose hashes
// agree on the bits the index keeps (index.Canonical) share one, a few in millions.
func distinctInIndex(n int) int64 {
	var kb [32]byte
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = index.Canonical(record.KeyHash(benchKey(kb[:], 'c', uint64(i))))
	}
	slices.Sort(hs)
	return int64(len(slices.Compact(hs)))
}

func capacity(b *testing.B, n int) {
	dir := b.TempDir()
	blobs := distinctInIndex(n) // before the baseline: it allocates
	runtime.GC()
	debug.FreeOSMemory()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rss0 := rssBytes()
	c, err := New(dir, WithExpectedBlobs(int64(n)), WithSegmentSize(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	v := make([]byte, 100)
	var kb [32]byte
	var m1 runtime.MemStats
	// perBlob reports the heap and the RSS grown since before New, per blob of k, less the
	// buffers the cache holds whatever the number of blobs (write and read buffers, reported
	// as Stats.BufferBytes and ReadBufferBytes, and let go when idle): RAM per blob.
	perBlob := func(k int, name string) {
		runtime.GC()
		runtime.ReadMemStats(&m1)
		st := c.Stats()
		buffers := st.BufferBytes + st.ReadBufferBytes
		b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)-buffers)/float64(k), name+"-heap-B/blob")
		b.ReportMetric(float64(rssBytes()-rss0-buffers)/float64(k), name+"-rss-B/blob")
	}
	start := time.Now()
	for i := range n {
		binary.LittleEndian.PutUint64(v, uint64(i))
		if err := c.Put(benchKey(kb[:], 'c', uint64(i)), v); err != nil {
			b.Fatal(err)
		}
		if i == n-1 {
			perBlob(n, "writing") // the segment open, batches in flight
		}
	}
	c.Drain()
	load := time.Since(start)
	perBlob(n, "loaded")
	st := c.Stats()
	b.ReportMetric(float64(n)/load.Seconds(), "puts/s")
	b.ReportMetric(float64(st.IndexBytes+st.BloomBytes)/float64(n), "index+bloom-B/blob")
	hot := func() time.Duration {
		buf := make([]byte, 100)
		const reads = 20000
		t0 := time.Now()
		for i := range reads {
			k := benchKey(kb[:], 'c', uint64(i*7919)%uint64(n))
			if _, err := c.ReadAt(k, buf, 0); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0) / reads
	}
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
	c = nil
	runtime.GC()
	debug.FreeOSMemory()
	runtime.ReadMemStats(&m0)
	rss0 = rssBytes()
	t0 := time.Now()
	c, err = New(dir, WithExpectedBlobs(int64(n)), WithSegmentSize(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "reopen-s")
	// After a reopen the heap holds the index and the filter (no write buffer yet).
	perBlob(n, "reopened")
	if c.Stats().Blobs != blobs {
		b.Fatalf("reopened with %d blobs, want %d", c.Stats().Blobs, blobs)
	}
	if os.Geteuid() == 0 {
		exec.Command("sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches").Run()
		b.ReportMetric(float64(hot().Nanoseconds())/1e3, "cold-get-us")
	}
	b.ReportMetric(float64(hot().Nanoseconds())/1e3, "hot-get-us")
	// A crash leaves the active segment unsealed: reopen scans it.
	for i := range n / 10 {
		c.Put(benchKey(kb[:], 'd', uint64(i)), v)
	}
	c.Drain()
	c.crash()
	t0 = time.Now()
	c, err = New(dir, WithExpectedBlobs(int64(n)), WithSegmentSize(1<<30))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "crash-reopen-s")
	c.Close()
}

// BenchmarkGetManyMiss looks up random missing keys over the 1M-blob fixture, 64 at a time with
// GetMany, and one at a time with Get over the same keys; ns/op is per key.
func BenchmarkGetManyMiss(b *testing.B) {
	c := missFixture.get(b, 1<<20, 16)
	const n = 1 << 16
	keys := benchKeys('r', n) // not in the cache
	b.Run("GetMany", func(b *testing.B) {
		b.ReportAllocs()
		hit := func(int, *Reader) error { b.Fatal("hit"); return nil }
		for i := 0; i < b.N; i += 64 {
			j := i & (n - 1) &^ 63
			c.GetMany(keys[j:j+64], hit)
		}
	})
	b.Run("Get", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := c.Get(keys[i&(n-1)]); ok {
				b.Fatal("hit")
			}
		}
	})
}

// rssBytes is the process's resident set (VmRSS), or 0 where /proc is not there.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

var budgetSeconds = flag.Int("budget.seconds", 60, "how long BenchmarkWriteBudget writes")

// BenchmarkWriteBudget puts 64 KiB blobs as fast as it can for a minute (-budget.seconds) into a
// cache with a write budget of 32 MiB/s, well below what the disk takes, and reports the rate
// the cache wrote at as a share of the budget: the bytes its batches wrote (Stats.FlushedBytes)
// and the bytes the process wrote to the device (write_bytes of /proc/self/io: direct writes,
// segment headers and footers included). The budget lets one second's worth through at once, so
// a minute comes to about 61/60 of it. Run with -benchtime=1x.
func BenchmarkWriteBudget(b *testing.B) {
	const budget = 32 << 20
	v := make([]byte, 64<<10-100)
	var kb [32]byte
	for b.Loop() {
		c := open(b, b.TempDir(), WithMaxSize(1<<30), WithWriteBudget(budget))
		dev0, start := procIO("write_bytes"), time.Now()
		var i uint64
		for time.Since(start) < time.Duration(*budgetSeconds)*time.Second {
			if err := c.Put(benchKey(kb[:], 'w', i), v); err != nil {
				b.Fatal(err)
			}
			i++
		}
		if err := c.Flush(); err != nil {
			b.Fatal(err)
		}
		secs := time.Since(start).Seconds()
		st := c.Stats()
		b.ReportMetric(float64(st.FlushedBytes)/secs/budget, "flushed/budget")
		if dev := procIO("write_bytes"); dev0 >= 0 {
			b.ReportMetric(float64(dev-dev0)/secs/budget, "device/budget")
		}
		b.ReportMetric(float64(st.Declined)/float64(i), "declined/put")
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutSmall puts 100-byte values under 16-byte keys, the per-record costs of the write
// path (the batch, the version, the intent log) with little copying: ns/op is a Put's. The
// flushed variant waits after each Put until its record is written (Flush), what acknowledging a
// write only once its batch reached the kernel would cost a lone writer (the alternative to the
// intent log, docs/DESIGN.md "Durability").
func BenchmarkPutSmall(b *testing.B) {
	for _, flush := range []bool{false, true} {
		name := "put"
		if flush {
			name = "put-then-flush"
		}
		b.Run(name, func(b *testing.B) {
			c, err := New(b.TempDir(), WithExpectedBlobs(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			v := bytes.Repeat([]byte("x"), 100)
			var kb [32]byte
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				if err := c.Put(benchKey(kb[:], 's', i&(1<<20-1)), v); err != nil {
					b.Fatal(err)
				}
				if flush {
					if err := c.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				i++
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRefused: a conditional write refused (memcached's add of a key that has a blob), the
// key in the index, alone and beside a writer of other keys. A refusal is confirmed under the
// writer's lock (Cache.refused), so it waits for that lock as a write does.
func BenchmarkRefused(b *testing.B) {
	for _, busy := range []bool{false, true} {
		name := "alone"
		if busy {
			name = "beside-puts"
		}
		b.Run(name, func(b *testing.B) {
			c, err := New(b.TempDir(), WithExpectedBlobs(1<<16))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			v := bytes.Repeat([]byte("x"), 100)
			var kb [32]byte
			const keys = 1024
			for i := range uint64(keys) {
				if err := c.Put(benchKey(kb[:], 'r', i), v); err != nil {
					b.Fatal(err)
				}
			}
			c.Drain()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if busy {
				wg.Go(func() {
					var pk [32]byte
					for i := uint64(0); ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						c.Put(benchKey(pk[:], 'p', i&(1<<16-1)), v)
					}
				})
			}
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				if _, err := c.PutWith(benchKey(kb[:], 'r', i%keys), v, PutOptions{If: IfAbsent()}); !errors.Is(err, ErrExists) {
					b.Fatalf("add of a present key: %v", err)
				}
				i++
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
		})
	}
}
