package blobcache

import (
	"github.com/seed57392e9e/blobcache/internal/policy"
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
// Eviction takes the oldest segment of main while main holds more than 1-ProbationShare of
// MaxSize, and otherwise the oldest of probation, as S3-FIFO does: probation gets what main does
// not use, at least ProbationShare of MaxSize once main is full. Its records that were not hit
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
// What goes where, and which goes first, is internal/policy's decision; this file gives it the
// facts and carries the decisions out.
type region = policy.Region

const (
	mainRegion      = policy.Main
	probationRegion = policy.Probation
	numRegions      = policy.Regions
)

// probationOn reports whether the cache runs two regions.
func (c *Cache) probationOn() bool { return c.keep.Regions() == int(numRegions) }

// regionFor chooses the region a write of key (hash h) goes to; m marks copies and tombstones
// that must go to main. ghost says the key went to main because the ghost set remembered it.
// The caller holds mu and appends at once, without releasing it.
func (w *writer) regionFor(h uint64, key []byte, m *writeMeta) (r region, ghost bool) {
	c := w.c
	if !c.probationOn() {
		return mainRegion, false
	}
	wr := policy.Write{Hash: h, ToMain: m != nil && m.toMain}
	if !wr.ToMain {
		wr.Newest, wr.HasNewest = w.newestRegion(h, key)
	}
	return c.keep.Route(wr)
}

// newestRegion is the region of the key's newest record, in the write buffer or the index;
// false if it has none in a live segment. The caller holds mu.
func (w *writer) newestRegion(h uint64, key []byte) (region, bool) {
	for _, b := range w.c.unflushed.batches() { // newest first
		if _, ok := b.Lookup(h, key); ok {
			return region(b.Stream), true
		}
	}
	if loc, ok := w.c.idx.Get(h); ok {
		if s := w.c.segs.table.Load().get(loc.Segment); s != nil {
			return s.region, true
		}
	}
	return mainRegion, false
}

// admitGhost notes that a write of key hash h went to main because the ghost set remembered it
// (the set forgets it: if the blob is dropped from main unread, its next write starts in
// probation again).
func (c *Cache) admitGhost(h uint64) {
	c.keep.Admitted(h)
	c.stats.ghostAdmits.Add(1)
}

// evicting tells the policy that s is about to be evicted, and returns what to call with the
// hash of each key dropped from it unread (the ghost of probation), or nil if the policy
// remembers nothing of s's region.
func (c *Cache) evicting(s *segHandle) func(h uint64) {
	c.keep.Evicting(s.region, c.idx.Len()) // first: a resized ghost forgets what went before, not what goes now
	if !c.keep.Remembers(s.region) {
		return nil
	}
	return func(h uint64) { c.keep.Dropped(s.region, h) }
}

// regionBytes is the disk space of region r's segments.
func (l *segmentLayout) regionBytes(r region) int64 { return l.regionDisk[r].Load() }

// addDisk changes the space s counts toward Stats.DiskBytes (and its region's share) by n.
func (l *segmentLayout) addDisk(s *segHandle, n int64) {
	l.c.diskBytes.Add(n)
	l.regionDisk[s.region].Add(n)
}

// victim returns the segment eviction takes next, sealed or not (the caller waits for a seal),
// as the policy chooses from the oldest segment of each region; nil if nothing may go. The
// caller holds segs.mu or writer.mu.
func (c *Cache) victim() *segHandle {
	t := c.segs.table.Load()
	var oldest [numRegions]*segHandle
	var logs policy.Logs
	found, regions := 0, c.keep.Regions()
	for _, s := range t.list {
		if s != nil && oldest[s.region] == nil {
			oldest[s.region] = s
			logs.Oldest[s.region] = policy.Segment{ID: s.id, Live: true, Open: s.open.Load()}
			if found++; found == regions {
				break
			}
		}
	}
	logs.MainBytes = c.segs.regionBytes(mainRegion)
	r, ok := c.keep.Victim(logs)
	if !ok {
		return nil
	}
	return oldest[r]
}
