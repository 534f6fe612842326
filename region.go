package blobcache

import (
	"github.com/seed57392e9e/blobcache/internal/ghost"
)

// Regions (PolicyProbation): S3-FIFO on flash. With PolicyProbation the segments form two FIFO
// logs, each with an active segment of its own:
//
//   - the probation region takes the Puts of keys the cache holds no record of and has not
//     dropped recently: new blobs, most of which are never asked for again;
//   - the main region takes the blobs that proved themselves: those hit while in probation
//     (promoted, that is copied, when their probation segment is evicted), the Puts of keys in
//     the ghost set (dropped from probation recently and asked for again), and every write of a
//     key whose newest record is already in main.
//
// Eviction takes the oldest segment of main while main holds more than 1-probationShare of
// MaxSize, and otherwise the oldest of probation, as S3-FIFO does: probation gets what main does
// not use, at least probationShare of MaxSize once main is full. Its records that were not hit
// are dropped and their key hashes go to the ghost set; main's are reinserted or dropped as under
// PolicyReinsert (reinsert.go).
//
// Why evicting out of id order is safe. Recovery applies segments in id order, so eviction must
// never leave an older record of a key on disk without the newer one that hides it. Three rules
// keep that so:
//
//  1. A write goes to the region of the key's newest record (in the write buffer or the index),
//     so every record that hides another of its key sits in the same log, after it. A key goes
//     to a region afresh only when it has no record: then its older records, if any are still
//     on disk, are hidden by a tombstone in their own log, after them.
//  2. A promotion copies a record into a main segment newer than the probation segment it came
//     from (mainFloor forces a rotation if needed), so recovery meets the copy after the
//     original and every later write of the key after both.
//  3. A main segment is evicted only once no older probation segment is live. A probation
//     segment may go before older main segments: what it holds hides nothing in main (rule 1),
//     and its own older records left with older probation segments.
//
// Tombstones that must hide records anywhere (those for keys forgotten after a failed write)
// go to main, into a segment newer than every segment live when they were queued.
//
// After a reopen every recovered segment counts as main (the region is not stored on disk):
// they are evicted in id order, which is always safe, and new writes fill both regions again.

// region is one of the two logs of PolicyProbation. Without it every write is in mainRegion.
type region int

const (
	mainRegion region = iota
	probationRegion
	numRegions
)

// probationShare is the share of MaxSize probation keeps once main is full. S3-FIFO's small
// queue is 10% of the cache; with segments, 5% missed less on the hit-ratio benchmark: 0.6965
// against 0.7013-0.7030 on Zipf 0.8 at 1% (7%: 0.6977), and the same within noise on the other
// traces (docs/BENCHMARKS.md, "2026-11-25: what is worth copying").
const probationShare = 0.05

// ghostPerBlob sizes the ghost set: it remembers as many dropped keys as main holds blobs
// (S3-FIFO's ghost holds 90% of the cache's objects).
const ghostPerBlob = 0.9

// probationOn reports whether the cache runs two regions.
func (c *Cache) probationOn() bool { return c.regions }

// minProbationSegments is the fewest segments MaxSize must hold for PolicyProbation to run two
// regions: with fewer, the two active segments would be most of the cache, so the cache runs
// one region (PolicyReinsert).
const minProbationSegments = 4

// newGhost returns the ghost set for PolicyProbation with two regions, nil otherwise. It starts
// small and is replaced by a larger one as the cache learns how many blobs it holds
// (resizeGhost).
func newGhost(o *Options) *ghost.Set {
	if o.Policy != PolicyProbation || o.MaxSize < minProbationSegments*o.SegmentSize || o.PerBlobFiles {
		return nil
	}
	return ghost.New(minGhost)
}

// minGhost is the fewest key hashes the ghost set remembers. It is small because a ghost set
// much larger than the blobs the cache holds sends blobs asked for twice in a long while
// straight to main: a cache of a few hundred large blobs with a floor of 1024 missed 0.015
// more on the Zipf 1.0 lognormal trace at 1% (docs/BENCHMARKS.md).
const minGhost = 64

// regionFor chooses the region a write of key (hash h) goes to; m marks copies and tombstones
// that must go to main. ghost says the key went to main because the ghost set remembered it.
// The caller holds mu and appends at once, without releasing it.
func (w *writer) regionFor(h uint64, key []byte, m *writeMeta) (r region, ghost bool) {
	c := w.c
	if !c.probationOn() || m != nil && m.toMain {
		return mainRegion, false
	}
	for _, b := range *w.live.Load() { // newest first
		if _, ok := b.Lookup(h, key, false); ok {
			return region(b.Stream), false
		}
	}
	if loc, ok := c.idx.Get(h); ok {
		if s := c.segs.table.Load().get(loc.Segment); s != nil {
			return s.region, false
		}
	}
	if c.ghost.Load().Contains(h) {
		return mainRegion, true
	}
	return probationRegion, false
}

// admitGhost notes that a write of key hash h went to main because the ghost set remembered it,
// and makes the set forget it, as S3-FIFO does: if the blob is dropped from main unread, its
// next write starts in probation again.
func (c *Cache) admitGhost(h uint64) {
	c.ghost.Load().Remove(h)
	c.stats.ghostAdmits.Add(1)
}

// regionBytes is the disk space of region r's segments.
func (l *segmentLayout) regionBytes(r region) int64 { return l.regionDisk[r].Load() }

// addDisk changes the space s counts toward Stats.DiskBytes (and its region's share) by n.
func (l *segmentLayout) addDisk(s *segHandle, n int64) {
	l.c.diskBytes.Add(n)
	l.regionDisk[s.region].Add(n)
}

// victim returns the segment eviction takes next, sealed or not (the caller waits for a seal),
// and the active segment of another region that must be sealed first for it to go (rule 3),
// if any; nil if nothing may go. The caller holds segs.mu or writer.mu.
func (c *Cache) victim() *segHandle {
	t := c.segs.table.Load()
	if !c.probationOn() {
		return t.oldest()
	}
	var oldest [numRegions]*segHandle
	for _, s := range t.list {
		if s != nil && oldest[s.region] == nil {
			oldest[s.region] = s
			if oldest[mainRegion] != nil && oldest[probationRegion] != nil {
				break
			}
		}
	}
	p, m := oldest[probationRegion], oldest[mainRegion]
	switch {
	case p == nil:
		return m
	case m == nil:
		return p
	case p.id < m.id:
		return p // rule 3: no main segment goes before an older probation one
	case float64(c.segs.regionBytes(mainRegion)) > (1-probationShare)*float64(c.opts.MaxSize) || p.open.Load():
		return m // main over its share, or probation has only its active segment
	}
	return p
}

// resizeGhost replaces the ghost set with one sized for the blobs the cache holds, when that
// is more than twice or less than half what it remembers now. What the old set remembered is
// forgotten: a few keys go to probation that would have gone to main.
func (c *Cache) resizeGhost() {
	want := max(int(float64(c.idx.Len())*ghostPerBlob), minGhost)
	if g := c.ghost.Load(); want > 2*g.Cap() || 2*want < g.Cap() {
		c.ghost.Store(ghost.New(want))
	}
}
