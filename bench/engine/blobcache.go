package engine

import (
	"errors"
	"fmt"
	"io"

	"github.com/seed57392e9e/blobcache"
)

func init() {
	register("blobcache", "BlobCache with default options (Start for the background worker)", openBlobcache)
	register("blobcache-prod", "BlobCache with seed 000's production settings, write buffers scaled to the budget", openBlobcacheProd)
}

type blobcacheEngine struct {
	c        *blobcache.Cache
	stop     func() error
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
	return startBlobcache(cfg.Dir, s)
}

// The seed's production settings (seed 000: "use 2GB for production", "use 1GB for production",
// DirectIO "opt-in for production", 6 in-flight batches). A 1 GiB buffer times 7 is 7 GiB, far
// past any budget here, so the buffer is the budget divided by the 7 buffers that can be full.
func openBlobcacheProd(cfg Config) (Engine, error) {
	const inflight = 6
	wb := max(cfg.MemoryBudget/(inflight+1)>>20<<20, 64<<20)
	exp := max(cfg.ExpectedKeys, blobcache.DefaultExpectedBlobs)
	opts := []blobcache.Option{
		blobcache.WithSegmentSize(2 << 30),
		blobcache.WithWriteBufferSize(wb),
		blobcache.WithMaxInflightBatches(inflight),
		blobcache.WithDirectIOWrites(),
		blobcache.WithExpectedBlobs(exp),
	}
	s := []Setting{
		{"SegmentSize", mib(2 << 30)},
		{"WriteBufferSize x (MaxInflightBatches+1)", fmt.Sprintf("%s x %d (seed: 1 GiB x 7)", mib(wb), inflight+1)},
		{"DirectIOWrites", "true"},
		{"ExpectedBlobs", fmt.Sprint(exp)},
		{"BloomBitsPerKey", fmt.Sprint(blobcache.DefaultBloomBitsPerKey)},
	}
	return startBlobcache(cfg.Dir, s, opts...)
}

func startBlobcache(dir string, s []Setting, opts ...blobcache.Option) (Engine, error) {
	c, err := blobcache.New(dir, opts...)
	if err != nil {
		return nil, err
	}
	stop, err := c.Start()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &blobcacheEngine{c: c, stop: stop, settings: s}, nil
}

func (e *blobcacheEngine) Put(key, value []byte) error { return e.c.Put(key, value) }

func (e *blobcacheEngine) Get(key, buf []byte) (int, bool, error) {
	r, ok := e.c.Get(key)
	if !ok {
		return 0, false, nil
	}
	n, err := readToEnd(r, buf)
	if c, ok := r.(io.Closer); ok {
		c.Close()
	}
	return n, true, err
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
	}
}
