package engine

import (
	"errors"
	"fmt"
	"io"

	"github.com/seed57392e9e/blobcache"
)

func init() {
	register("blobcache", "BlobCache with default options (Start for the background worker)", openBlobcache)
	register("blobcache-prod", "BlobCache with seed 000's production settings, write buffers sized for the disk, not the budget", openBlobcacheProd)
	register("blobcache-direct", "blobcache-prod reading with O_DIRECT too (DirectIOReads): no page cache on either path", openBlobcacheDirect)
}

type blobcacheEngine struct {
	c        *blobcache.Cache
	stop     func() error
	readAt   bool
	settings []Setting
}

func openBlobcache(cfg Config) (Engine, error) {
	s := []Setting{
		{"options", "defaults (blobcache.New(dir))"},
		{"SegmentSize", mib(blobcache.DefaultSegmentSize)},
		{"WriteBufferSize x (MaxInflightBatches+1)", fmt.Sprintf("%s x %d", mib(blobcache.DefaultWriteBufferSize), blobcache.DefaultMaxInflightBatches+1)},
		{"ExpectedBlobs", fmt.Sprint(blobcache.DefaultExpectedBlobs)},
		{"BloomBitsPerKey", fmt.Sprint(blobcache.DefaultBloomBitsPerKey)},
		{"memory budget", "not applied: defaults are fixed"},
	}
	return startBlobcache(cfg, s)
}

// prodInflight is seed 000's 6 in-flight batches.
const prodInflight = 6

// blobcacheWriteBuffer is blobcache-prod's WriteBufferSize: asked (whole MiB, at least 1 MiB)
// or, when asked is 0, the budget divided by the 7 buffers that can be full at once. Never more
// than that seventh: the budget is a cap.
func blobcacheWriteBuffer(budget, asked int64) int64 {
	seventh := max(budget/(prodInflight+1)>>20<<20, 1<<20)
	if asked <= 0 {
		return seventh
	}
	return min(max(asked>>20<<20, 1<<20), seventh)
}

// The seed's production settings (seed 000: "use 2GB for production" segments, DirectIO "opt-in
// for production", 6 in-flight batches). The seed's 1 GiB write buffer times 7 is 7 GiB, past
// any budget here; the buffer is what Config.BlobcacheWriteBuffer asks (the driver's default is
// what keeps the disk busy with DirectIO writes, see BENCHMARKS.md) or a seventh of the budget.
func openBlobcacheProd(cfg Config) (Engine, error) { return openProd(cfg, false) }

// openBlobcacheDirect is blobcache-prod with DirectIOReads: hits bypass the page cache as the
// writes do, so each costs a device read and no kernel page-cache work (the production shape for
// a cache much larger than RAM). Its write buffers are Config.BlobcacheDirectWriteBuffer (the
// driver's default is 3 MiB, two 1 MiB blobs a batch: with reads on the device too, smaller
// batches queue less ahead of them, and a sweep found no throughput in larger ones; see
// BENCHMARKS.md).
func openBlobcacheDirect(cfg Config) (Engine, error) { return openProd(cfg, true) }

func openProd(cfg Config, directReads bool) (Engine, error) {
	asked, flag := cfg.BlobcacheWriteBuffer, "-blobcache-buffer"
	if directReads {
		asked, flag = cfg.BlobcacheDirectWriteBuffer, "-blobcache-direct-buffer"
	}
	wb := blobcacheWriteBuffer(cfg.MemoryBudget, asked)
	why := "a seventh of the budget"
	if asked > 0 {
		why = "asked (" + flag + ")"
	}
	// The index and the bloom filter are sized for the keys the phase can write, as an operator
	// sizes them for the blobs a cache holds; they grow if the guess is short.
	exp := cfg.ExpectedKeys
	if exp <= 0 {
		exp = blobcache.DefaultExpectedBlobs
	}
	opts := []blobcache.Option{
		blobcache.WithSegmentSize(2 << 30),
		blobcache.WithWriteBufferSize(wb),
		blobcache.WithMaxInflightBatches(prodInflight),
		blobcache.WithBufferedWrites(false),
		blobcache.WithExpectedBlobs(exp),
	}
	if directReads {
		opts = append(opts, blobcache.WithDirectIOReads(true))
	}
	verify := "false (the seed's production setting; RocksDB checks every block it reads)"
	if cfg.BlobcacheVerify {
		opts = append(opts, blobcache.WithVerifyOnRead(true))
		verify = "true (asked: -blobcache-verify)"
	}
	s := []Setting{
		{"SegmentSize", mib(2 << 30)},
		{"WriteBufferSize x (MaxInflightBatches+1)", fmt.Sprintf("%s x %d, %s (seed: 1 GiB x 7)", mib(wb), prodInflight+1, why)},
		{"BufferedWrites", "false (direct writes, the default)"},
		{"DirectIOReads", fmt.Sprint(directReads)},
		{"VerifyOnRead", verify},
		{"ExpectedBlobs", fmt.Sprintf("%d (the most keys the phase writes)", exp)},
		{"BloomBitsPerKey", fmt.Sprint(blobcache.DefaultBloomBitsPerKey)},
	}
	return startBlobcache(cfg, s, opts...)
}

func startBlobcache(cfg Config, s []Setting, opts ...blobcache.Option) (Engine, error) {
	switch cfg.BlobcacheBuffered {
	case "":
	case "none":
		opts = append(opts, blobcache.WithDirectWrites(true))
		s = append(s, Setting{"DirectWrites", "true: no batch through the page cache (asked: -blobcache-buffered none)"})
	case "reads", "writes", "both":
		if cfg.BlobcacheBuffered != "writes" {
			opts = append(opts, blobcache.WithBufferedReads(true))
			s = append(s, Setting{"BufferedReads", "true (asked: -blobcache-buffered)"})
		}
		if cfg.BlobcacheBuffered != "reads" {
			opts = append(opts, blobcache.WithBufferedWrites(true))
			s = append(s, Setting{"BufferedWrites", "true (asked: -blobcache-buffered)"})
		}
	default:
		return nil, fmt.Errorf("blobcache: -blobcache-buffered %q: want reads, writes, both or none", cfg.BlobcacheBuffered)
	}
	if cfg.BlobcacheMemory != 0 {
		opts = append(opts, blobcache.WithMemorySize(cfg.BlobcacheMemory))
		s = append(s, Setting{"MemorySize", fmt.Sprint(cfg.BlobcacheMemory)})
		if cfg.BlobcacheMemoryOnWrite {
			opts = append(opts, blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
			s = append(s, Setting{"MemoryAdmission", blobcache.MemoryOnWrite.String()})
		}
	}
	c, err := blobcache.New(cfg.Dir, opts...)
	if err != nil {
		return nil, err
	}
	stop, err := c.Start()
	if err != nil {
		c.Close()
		return nil, err
	}
	readAt := cfg.BlobcacheRead != Reader
	if readAt {
		s = append(s, Setting{"read path", "Cache.ReadAt into the caller's buffer (one pread of header and value, no allocation)"})
	} else {
		s = append(s, Setting{"read path", "Cache.Get, then Read into the caller's buffer (a pooled buffer and a copy)"})
	}
	return &blobcacheEngine{c: c, stop: stop, readAt: readAt, settings: s}, nil
}

func (e *blobcacheEngine) Put(key, value []byte) error { return e.c.Put(key, value) }

// ReadBuffer implements ReadBufferer.
func (e *blobcacheEngine) ReadBuffer(n int) []byte { return blobcache.NewReadBuffer(n) }

func (e *blobcacheEngine) Get(key, buf []byte) (int, bool, error) {
	if e.readAt {
		return e.getReadAt(key, buf)
	}
	r, ok := e.c.Get(key)
	if !ok {
		return 0, false, nil
	}
	n, err := readToEnd(r, buf)
	r.Close()
	return n, true, err
}

// getReadAt reads the value with ReadAt. A value shorter than buf comes back whole with io.EOF
// from one call; a longer one is read on, wrapping round in buf, until io.EOF.
func (e *blobcacheEngine) getReadAt(key, buf []byte) (int, bool, error) {
	var total int64
	for {
		n, err := e.c.ReadAt(key, buf, total)
		total += int64(n)
		switch {
		case errors.Is(err, blobcache.ErrNotFound) && total == 0:
			return 0, false, nil
		case err == io.EOF:
			return int(total), true, nil
		case err != nil:
			return int(total), true, err
		case n == 0:
			return int(total), true, io.ErrNoProgress
		}
	}
}

// readToEnd reads r to EOF into buf, wrapping round when the value is longer.
func readToEnd(r io.Reader, buf []byte) (int, error) {
	total, off := 0, 0
	for {
		if off == len(buf) {
			off = 0
		}
		n, err := r.Read(buf[off:])
		total += n
		off += n
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (e *blobcacheEngine) Flush() error { e.c.Drain(); return nil }

func (e *blobcacheEngine) Close() error {
	return errors.Join(e.stop(), e.c.Close())
}

func (e *blobcacheEngine) Settings() []Setting { return e.settings }

func (e *blobcacheEngine) Counters() map[string]int64 {
	s := e.c.Stats()
	return map[string]int64{
		"hits": int64(s.Hits), "misses": int64(s.Misses), "bloom_rejects": int64(s.BloomRejects),
		"bloom_false_positives": int64(s.BloomFalsePositives), "segments": int64(s.Segments),
		"index_bytes": s.IndexBytes, "bloom_bytes": s.BloomBytes, "disk_bytes": s.DiskBytes,
		"put_waits": int64(s.PutWaits), "bloom_rebuilds": int64(s.BloomRebuilds),
		"reads_page_cache": int64(s.ReadsPageCache), "reads_filled": int64(s.ReadsFilled),
		"reads_direct": int64(s.ReadsDirect), "written_back_bytes": int64(s.WrittenBackBytes),
		"flushed_bytes": int64(s.FlushedBytes),
		"memory_hits":   int64(s.MemoryHits), "memory_inserts": int64(s.MemoryInserts),
		"memory_evictions": int64(s.MemoryEvictions), "memory_bytes": s.MemoryBytes,
	}
}
