package blobcache

import (
	"fmt"
	"math"
	"testing"
)

func TestEvictionFIFO(t *testing.T) {
	const seg = 2 << 20
	dir := t.TempDir()
	opts := small(WithMaxSize(4 * seg))
	c := open(t, dir, opts...)
	const n = 1200 // ~12 MiB of 10 KiB blobs: three times MaxSize
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		if err := c.Put([]byte(k), value(k, 0, 10<<10)); err != nil {
			t.Fatal(err)
		}
		if d := c.Stats().DiskBytes; d > 5*seg {
			t.Fatalf("after %d puts disk is %d bytes, over MaxSize plus one segment (%d)", i, d, 5*seg)
		}
	}
	c.Drain()
	st := c.Stats()
	if st.Evictions == 0 {
		t.Fatal("nothing was evicted")
	}
	// FIFO: every blob that is still there is newer than every one that is gone, and every hit
	// is the right value.
	firstHit := -1
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		r, ok := c.Get([]byte(k))
		if !ok {
			if firstHit >= 0 {
				t.Fatalf("%s missing after %d was present: not FIFO", k, firstHit)
			}
			continue
		}
		r.Close()
		if firstHit < 0 {
			firstHit = i
		}
		expect(t, c, k, value(k, 0, 10<<10))
	}
	if firstHit <= 0 || firstHit > n*3/4 {
		t.Fatalf("first surviving blob %d of %d", firstHit, n)
	}
	t.Logf("evictions %d, disk %d, first survivor %d", st.Evictions, st.DiskBytes, firstHit)
	c.Close()
	c = open(t, dir, opts...)
	defer c.Close()
	if d := c.Stats().DiskBytes; d > 5*seg {
		t.Fatalf("after reopen disk is %d", d)
	}
	expect(t, c, fmt.Sprintf("k%05d", n-1), value(fmt.Sprintf("k%05d", n-1), 0, 10<<10))
}

func TestOverwriteFreesSpace(t *testing.T) {
	c := open(t, t.TempDir(), small()...)
	defer c.Close()
	// 120 overwrites of 40 KiB fill two 2 MiB segments; the freed records of the sealed ones
	// are punched out (whole blocks past the header and key).
	for v := range 120 {
		if err := c.Put([]byte("k"), value("k", v, 40<<10)); err != nil {
			t.Fatal(err)
		}
		c.Drain()
	}
	// A range is punched once the segment of the record that freed it is synced, by its seal,
	// which runs on a goroutine of its own.
	c.sealers.Wait()
	c.reclaim()
	st := c.Stats()
	if st.PunchedBytes < 40*28<<10 {
		t.Fatalf("punched %d bytes after 119 overwrites of 40 KiB", st.PunchedBytes)
	}
	expect(t, c, "k", value("k", 119, 40<<10))
}

// TestEffectiveCapacity: with the segment size derived from MaxSize, the data the cache holds
// (Stats.DataBytes) stays within one segment of MaxSize at every moment once the cache is full,
// never above MaxSize plus one segment, and averages 97% of MaxSize or more (about MaxSize less
// half a segment: eviction frees a segment at a time).
func TestEffectiveCapacity(t *testing.T) {
	const maxSize = 128 << 20
	c := open(t, t.TempDir(), WithMaxSize(maxSize), WithPolicy(PolicyFIFO), WithBufferedWrites(true))
	defer c.Close()
	seg := c.opts.SegmentSize
	v := make([]byte, 60<<10)
	var kb [32]byte
	var sum, n, lo, hi int64
	lo = math.MaxInt64
	for i := range 3 * maxSize / len(v) {
		if err := c.Put(benchKey(kb[:], 'c', uint64(i)), v); err != nil {
			t.Fatal(err)
		}
		st := c.Stats()
		if st.Evictions == 0 {
			continue // filling up
		}
		sum += st.DataBytes
		n++
		lo, hi = min(lo, st.DataBytes), max(hi, st.DataBytes)
	}
	mean := float64(sum) / float64(n) / maxSize
	t.Logf("segment %d MiB (%d per cache): DataBytes over %d Puts: mean %.4f of MaxSize, min %.4f, max %.4f",
		seg>>20, maxSize/seg, n, mean, float64(lo)/maxSize, float64(hi)/maxSize)
	if n == 0 || mean < 0.97 || hi > maxSize+seg || lo < maxSize-seg {
		t.Fatalf("mean %.4f of MaxSize (want >= 0.97), min %d, max %d (want within one segment, %d, of %d)", mean, lo, hi, seg, int64(maxSize))
	}
}
