package blobcache

import (
	"fmt"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// regionOf returns the region of key's indexed record, and false if the index has none.
func regionOf(c *Cache, key string) (region, bool) {
	loc, ok := c.idx.Get(record.KeyHash([]byte(key)))
	if !ok {
		return 0, false
	}
	s := c.segs.table.Load().get(loc.Segment)
	if s == nil {
		return 0, false
	}
	return s.region, true
}

func mustRegion(t *testing.T, c *Cache, key string, want region) {
	t.Helper()
	got, ok := regionOf(c, key)
	if !ok {
		t.Fatalf("%q: not in the index, want it in region %d", key, want)
	}
	if got != want {
		t.Fatalf("%q: in region %d, want %d", key, got, want)
	}
}

// TestProbationRegions walks S3-FIFO's decisions through the cache: a new blob goes to
// probation; one hit there is promoted into main when its segment goes, with its bytes; one
// not hit is dropped and remembered by the ghost set, so that its next Put goes straight to
// main; a key whose newest record is in main stays in main when it is written again.
func TestProbationRegions(t *testing.T) {
	c := open(t, t.TempDir(), small(WithSegmentSize(probationTestSegment), WithMaxSize(8*probationTestSegment))...)
	defer c.Close()
	if !c.probationOn() {
		t.Fatal("PolicyProbation (the default) with eight segments: want two regions")
	}
	hot, cold := value("hot", 0, 10<<10), value("cold", 0, 10<<10)
	for _, kv := range []struct {
		k string
		v []byte
	}{{"hot", hot}, {"cold", cold}} {
		if err := c.Put([]byte(kv.k), kv.v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	mustRegion(t, c, "hot", probationRegion)
	mustRegion(t, c, "cold", probationRegion)
	expect(t, c, "hot", hot) // one hit while in probation

	// New blobs push both out of probation: "hot" is promoted, "cold" dropped.
	for i := 0; ; i++ {
		if i == 4000 {
			t.Fatalf("after %d Puts: hot in %v, cold in %v", i, fmt.Sprint(regionOf(c, "hot")), fmt.Sprint(regionOf(c, "cold")))
		}
		k := fmt.Sprintf("n%05d", i)
		if err := c.Put([]byte(k), value(k, 0, 10<<10)); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 {
			c.Drain()
			c.rs.wait()
			if _, in := regionOf(c, "cold"); !in {
				break
			}
		}
	}
	c.Drain()
	mustRegion(t, c, "hot", mainRegion)
	expect(t, c, "hot", hot)
	expect(t, c, "cold", nil)
	if !c.keep.Ghost().Contains(record.KeyHash([]byte("cold"))) {
		t.Fatal("cold was dropped from probation but is not in the ghost set")
	}
	st := c.Stats()
	if st.Reinserted == 0 {
		t.Fatalf("Stats.Reinserted 0: the promotion of hot is not counted")
	}

	// The ghost sends cold's next Put to main; writes of a key in main stay there; a key
	// never seen goes to probation.
	cold2 := value("cold", 1, 10<<10)
	hot2 := value("hot", 1, 10<<10)
	for _, kv := range []struct {
		k string
		v []byte
	}{{"cold", cold2}, {"hot", hot2}, {"fresh", hot}} {
		if err := c.Put([]byte(kv.k), kv.v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	mustRegion(t, c, "cold", mainRegion)
	mustRegion(t, c, "hot", mainRegion)
	mustRegion(t, c, "fresh", probationRegion)
	if st := c.Stats(); st.GhostAdmits == 0 || st.Promoted == 0 || st.ProbationBytes <= 0 {
		t.Fatalf("Stats: GhostAdmits %d (want cold at least), Promoted %d (want hot), ProbationBytes %d", st.GhostAdmits, st.Promoted, st.ProbationBytes)
	}
	expect(t, c, "cold", cold2)
	expect(t, c, "hot", hot2)

	// A Delete of a key in main is a tombstone in main: after a reopen (every segment
	// recovered as main, evicted in id order) the key stays deleted.
	if err := c.Delete([]byte("hot")); err != nil {
		t.Fatal(err)
	}
	dir := c.dir
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small(WithSegmentSize(probationTestSegment), WithMaxSize(8*probationTestSegment))...)
	defer c.Close()
	expect(t, c, "hot", nil)
	expect(t, c, "cold", cold2)
	expect(t, c, "fresh", hot)
	mustRegion(t, c, "fresh", mainRegion) // recovered segments count as main
}

// TestProbationNeedsSegments: with fewer than four segments PolicyProbation runs one region.
func TestProbationNeedsSegments(t *testing.T) {
	c := open(t, t.TempDir(), small(WithSegmentSize(probationTestSegment), WithMaxSize(3*probationTestSegment))...)
	defer c.Close()
	if c.probationOn() {
		t.Fatal("two regions in three segments")
	}
	if err := c.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	mustRegion(t, c, "k", mainRegion)
}
