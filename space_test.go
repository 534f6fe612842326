package blobcache

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestEvictionFIFO(t *testing.T) {
	const seg = 2 << 20
	dir := t.TempDir()
	opts := small(WithMaxSize(4*seg), WithPolicy(PolicyFIFO)) // two regions (the default policy) evict out of order
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
	c.segs.sealers.Wait()
	c.segs.reclaim()
	st := c.Stats()
	if st.PunchedBytes < 40*28<<10 {
		t.Fatalf("punched %d bytes after 119 overwrites of 40 KiB", st.PunchedBytes)
	}
	// One hole per record: each 40 KiB record's holes are one range.
	if blocks := st.PunchedBytes / (36 << 10); st.PunchedRecords == 0 || st.PunchedRecords > 119 || st.PunchedRecords < blocks*9/10 {
		t.Fatalf("punched %d records for %d bytes", st.PunchedRecords, st.PunchedBytes)
	}
	expect(t, c, "k", value("k", 119, 40<<10))
}

// TestEffectiveCapacity: with the segment size derived from MaxSize, the data the cache holds
// (Stats.DataBytes), once it is full, never passes MaxSize (an eviction comes first), stays above
// MaxSize less two segments (an eviction frees one segment, and holes punched into dead records
// free a little more until the writes fill it again), and averages at least 0.97 of MaxSize. The
// same with two regions (PolicyProbation, the default), whose two active segments count by what
// they hold. BenchmarkEffectiveCapacity reports the figures.
func TestEffectiveCapacity(t *testing.T) {
	const maxSize = 128 << 20
	for _, p := range []Policy{PolicyFIFO, PolicyProbation} {
		t.Run(p.String(), func(t *testing.T) {
			mean, lo, hi, seg := effectiveCapacity(t, maxSize, 2, p)
			t.Logf("segment %d MiB (%d per cache): DataBytes mean %.4f of MaxSize, min %.4f, max %.4f",
				seg>>20, maxSize/seg, mean, float64(lo)/maxSize, float64(hi)/maxSize)
			if hi > maxSize || lo < maxSize-2*seg || mean < 0.97 {
				t.Fatalf("DataBytes from %d to %d, mean %.4f of MaxSize; want within (%d, %d], mean at least 0.97",
					lo, hi, mean, maxSize-2*seg, int64(maxSize))
			}
		})
	}
}

// BenchmarkEffectiveCapacity reports the mean share of MaxSize that the data held
// (Stats.DataBytes) fills once the cache is full, with the segment size a MaxSize alone derives
// (a thirty-second of it), and its lowest and highest share. Run with -benchtime=1x.
func BenchmarkEffectiveCapacity(b *testing.B) {
	const maxSize = 512 << 20
	for _, p := range []Policy{PolicyFIFO, PolicyProbation} {
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				mean, lo, hi, _ := effectiveCapacity(b, maxSize, 3, p)
				b.ReportMetric(mean, "mean-share")
				b.ReportMetric(float64(lo)/maxSize, "min-share")
				b.ReportMetric(float64(hi)/maxSize, "max-share")
			}
		})
	}
}

// effectiveCapacity writes rounds*maxSize bytes of 60 KiB blobs under distinct keys into a cache
// of maxSize with the derived segment size and policy p, and samples Stats.DataBytes every 8
// Puts once the first eviction happened: its mean share of maxSize, lowest and highest, and the
// segment size. Under PolicyProbation every other Put writes again the blob put a fifth of
// MaxSize before, by then dropped from probation and remembered by the ghost set: it goes to
// main, so both regions have an active segment, which is the cost to see.
func effectiveCapacity(tb testing.TB, maxSize int64, rounds int64, p Policy) (mean float64, lo, hi, seg int64) {
	c := open(tb, tb.TempDir(), WithMaxSize(maxSize), WithPolicy(p), WithBufferedWrites(true))
	defer c.Close()
	seg = c.opts.SegmentSize
	v := make([]byte, 60<<10)
	var kb [32]byte
	var sum, n int64
	lo = math.MaxInt64
	for i := range rounds * maxSize / int64(len(v)) {
		if err := c.Put(benchKey(kb[:], 'c', uint64(i)), v); err != nil {
			tb.Fatal(err)
		}
		if lag := maxSize / 5 / int64(len(v)); p == PolicyProbation && i%2 == 1 && i >= lag {
			if err := c.Put(benchKey(kb[:], 'c', uint64(i-lag)), v); err != nil {
				tb.Fatal(err)
			}
		}
		if i%8 != 0 {
			continue
		}
		st := c.Stats()
		if st.Evictions == 0 {
			continue // filling up
		}
		sum += st.DataBytes
		n++
		lo, hi = min(lo, st.DataBytes), max(hi, st.DataBytes)
	}
	if n == 0 {
		tb.Fatal("no eviction")
	}
	return float64(sum) / float64(n) / float64(maxSize), lo, hi, seg
}

// TestStatsEvictedBlobs: Stats counts the blobs evictions took, and those of them no read had
// hit, as the keys that went and the reads made show; and the reads that found a blob expired
// that no read had hit before.
func TestStatsEvictedBlobs(t *testing.T) {
	const seg = 2 << 20
	for _, opts := range [][]Option{{WithPolicy(PolicyFIFO)}, {WithPolicy(PolicyFIFO), WithMemorySize(8 << 20)}} {
		c := open(t, t.TempDir(), small(append(opts, WithMaxSize(4*seg))...)...)
		if !c.Stats().HitsCounted {
			t.Fatal("the read route counts hits: HitsCounted false")
		}
		const n = 1200 // three times MaxSize of 10 KiB blobs
		read := map[int]bool{}
		for i := range n {
			k := fmt.Sprintf("k%05d", i)
			if err := c.Put([]byte(k), value(k, 0, 10<<10)); err != nil {
				t.Fatal(err)
			}
			if i%10 == 5 {
				// A key written again: its first record goes with its segment, not the key.
				k := fmt.Sprintf("k%05d", i-3)
				if err := c.Put([]byte(k), value(k, 0, 10<<10)); err != nil {
					t.Fatal(err)
				}
				delete(read, i-3)
			}
			if i%3 == 0 && i > 0 {
				// A recent key, still in the cache and out of the write buffer (a hit on a
				// record there is not counted; its segment's is).
				c.Drain()
				j := i - 1 - (i/3)%7
				if _, ok := getBytes(t, c, fmt.Sprintf("k%05d", j)); ok {
					read[j] = true
				}
			}
			if i%50 == 0 {
				c.Drain()
			}
		}
		c.Drain()
		st := c.Stats()
		var gone, goneUnread uint64
		for i := range n {
			if _, ok := c.Stat([]byte(fmt.Sprintf("k%05d", i))); ok != nil {
				gone++
				if !read[i] {
					goneUnread++
				}
			}
		}
		if st.Evictions == 0 || gone == 0 || st.EvictedBlobs != gone || st.EvictedUnfetched != goneUnread || goneUnread == gone {
			t.Fatalf("%d segments evicted, EvictedBlobs %d, EvictedUnfetched %d; %d keys gone, %d of them never read",
				st.Evictions, st.EvictedBlobs, st.EvictedUnfetched, gone, goneUnread)
		}
		c.Close()
	}

	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	c := open(t, t.TempDir(), small(WithClock(clock))...)
	defer c.Close()
	for _, k := range []string{"read", "unread", "buffered"} {
		if _, err := c.PutWith([]byte(k), []byte(k), PutOptions{Expires: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if k == "unread" {
			c.Drain()
		}
	}
	mustGet(t, c, "read")
	c.Drain()
	if _, err := c.PutWith([]byte("buffered"), []byte("buffered"), PutOptions{Expires: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	for _, k := range []string{"read", "unread", "buffered"} {
		if _, ok := getBytes(t, c, k); ok {
			t.Fatalf("%s read after it expired", k)
		}
	}
	// "buffered" was found expired in the write buffer, where no hit is counted: not counted.
	if st := c.Stats(); st.Expired != 3 || st.ExpiredUnfetched != 1 {
		t.Fatalf("Expired %d, ExpiredUnfetched %d; want 3 and 1 (only \"unread\")", st.Expired, st.ExpiredUnfetched)
	}
}
