package blobcache

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Disk space is tracked with counters, never by scanning the index: each segment knows the
// space it takes (its preallocated size while active, its file size once sealed, less what was
// punched out), and Cache.diskBytes is their sum.

// seal writes the footer of segment s, whose records end at dataEnd. The commit goroutine calls
// it once every batch placed in s is committed. Without Fsync the work runs on a goroutine of
// its own (Close waits for it) so commits do not wait for the sync; with Fsync the data is
// already synced and the seal runs in line, so a Drain that follows a seal waits for it.
//
// The data is synced before the footer is written, Fsync or not: a footer on disk then always
// describes data on disk, so a sealed segment, which recovery trusts without reading its values,
// never holds torn values after a power loss.
func (l *segmentLayout) seal(s *segHandle, dataEnd int64) {
	c := l.c
	s.dataEnd = dataEnd
	s.sealing.Store(true)
	l.sealers.Add(1)
	work := func() {
		defer l.sealers.Done()
		err := l.sealSegment(s, dataEnd)
		// Marked sealed even if the footer cannot be written, so eviction can still take it
		// (the segment is then recovered by scanning on the next open).
		s.sealed.Store(true)
		if err != nil {
			c.stats.flushErrors.Add(1)
			c.noteCorruption(err)
		}
		l.pipe.sealed(err) // a rotation may be waiting to evict s
		l.reclaim()        // records freed while s was active may be punched now
		c.pokeReinserter()
	}
	if c.opts.Fsync {
		work()
	} else {
		go work()
	}
}

// sealSegment syncs the data of s, writes its footer and counts its sealed size.
func (l *segmentLayout) sealSegment(s *segHandle, dataEnd int64) error {
	l.awaitWriteBack(s, dataEnd)
	err := s.f.Sync()
	var size int64
	if err == nil {
		s.synced.Store(true)
		l.releaseUnsynced(s)
		size, err = s.active.Seal(dataEnd)
	}
	// The entry log is done with: its entries are in the footer, or the segment is left without
	// one and the next open scans it. A log whose removal fails is removed by the next sweep
	// (sweepOrphans) or open; until then it is not counted.
	_ = s.active.DropLog()
	if err != nil {
		return fmt.Errorf("blobcache: seal segment %d: %w", s.id, err)
	}
	if fi, err := s.f.Stat(); err == nil {
		size = vfs.AllocatedBytes(fi)
	}
	l.mu.Lock()
	if l.table.Load().get(s.id) == s {
		l.addDisk(s, size-s.disk.Swap(size))
		l.sealingTails.Add(-s.tail.Swap(0))
	}
	l.mu.Unlock()
	return nil
}

// evict removes the oldest sealed segments, whole, until the disk space is at most limit.
func (l *segmentLayout) evictTo(limit int64) error {
	c := l.c
	for c.diskBytes.Load() > limit {
		evicted, err := l.evictOldest()
		if err != nil || !evicted {
			return err
		}
	}
	return nil
}

// evictOldestSealed evicts the oldest segment, waiting a moment for a seal in progress (sealing
// runs on its own goroutine); false if there is nothing to evict.
func (l *segmentLayout) evictOldestSealed() (bool, error) {
	c := l.c
	for range 100 {
		if evicted, err := l.evictOldest(); evicted || err != nil {
			return evicted, err
		}
		s := c.victim()
		if s == nil || !s.sealing.Load() {
			return false, nil // nothing sealed, nor being sealed
		}
		l.hurrySeal(s)
		time.Sleep(10 * time.Millisecond)
	}
	return false, nil
}

// evictOldest evicts the oldest segment if it is sealed. Segments go strictly oldest first: a
// newer one may hold the tombstone or the newer record that hides a record of an older one, and
// must not be gone while the older one is still there, on disk or after a crash. With
// PolicyProbation the oldest segment of a region goes, as Cache.victim chooses (region.go says
// why that is safe).
func (l *segmentLayout) evictOldest() (bool, error) {
	c := l.c
	l.mu.Lock()
	defer l.mu.Unlock()
	s := c.victim()
	if s == nil || !s.sealed.Load() {
		return false, nil
	}
	err := l.evictSegment(s)
	return l.table.Load().get(s.id) != s, err
}

// evictSegment removes the file of s (and, with Fsync, makes the removal durable), then drops
// every index entry that points into s and unpublishes it. Readers holding a reference keep
// reading the unlinked file; its space is freed when the last of them is done. If the file
// cannot be removed, nothing changes and the error is returned; if its removal cannot be made
// durable, s is evicted all the same (its file is gone) and the error is returned. The caller
// holds l.mu.
func (l *segmentLayout) evictSegment(s *segHandle) error {
	c := l.c
	path := filepath.Join(l.dir, segment.FileName(s.id))
	hashes, herr := l.segmentHashes(s) // before the removal: reading the footer may need the name
	if err := c.opts.fs.Remove(path); err != nil {
		return fmt.Errorf("blobcache: evict segment %d: %w", s.id, err)
	}
	var syncErr error
	if c.opts.Fsync {
		if err := c.opts.fs.SyncDir(l.dir); err != nil {
			syncErr = fmt.Errorf("blobcache: evict segment %d: sync %s: %w", s.id, l.dir, err)
		}
	}
	if herr != nil {
		// No footer to read: find the entries the slow way.
		c.noteCorruption(fmt.Errorf("blobcache: evict segment %d: %w", s.id, herr))
		hashes = hashes[:0]
		c.idx.Range(func(h uint64, loc index.Loc) bool {
			if loc.Segment == s.id {
				hashes = append(hashes, h)
			}
			return true
		})
	}
	remember := c.evicting(s) // before the keys go (region.go)
	counts := c.countsAccess()
	for _, h := range hashes {
		unfetched := false
		if loc, ok := c.idx.Get(h); counts && ok && loc.Segment == s.id {
			unfetched = c.idx.Hits(h, loc) == 0
		}
		_, dropped := c.idx.DeleteIf(h, s.id)
		if !dropped {
			continue
		}
		c.stats.evictedBlobs.Add(1)
		if unfetched {
			c.stats.evictedUnfetched.Add(1)
		}
		if remember != nil && !c.unflushed.hasHash(h) {
			// Dropped unread: the policy may remember it. Not a key whose newer record (a
			// promotion, a Put) waits to be committed: that one was not dropped.
			remember(h)
		}
	}
	l.remove(s)
	disk := s.disk.Load()
	l.addDisk(s, -disk)
	l.sealingTails.Add(-s.tail.Swap(0))
	c.stats.evictions.Add(1)
	c.stats.evictedBytes.Add(uint64(disk))
	s.unref()
	return syncErr
}

// segmentHashes lists the key hashes of the puts in sealed segment s, from its footer.
func (l *segmentLayout) segmentHashes(s *segHandle) ([]uint64, error) {
	fi, err := s.f.Stat()
	if err != nil {
		return nil, err
	}
	count, dataEnd, err := segment.CheckFooter(s.f, fi.Size())
	if err != nil {
		return nil, err
	}
	hashes := make([]uint64, 0, count)
	err = segment.EachFooterEntry(s.f, dataEnd, count, func(e segment.Entry) error {
		if e.Kind == record.KindPut {
			hashes = append(hashes, e.Hash)
		}
		return nil
	})
	return hashes, err
}

// freeRecord notes that the record at loc is no longer referenced (overwritten or deleted by a
// record in segment by) and queues the whole blocks inside it to be punched out.
func (l *segmentLayout) freeRecord(loc index.Loc, by uint32) {
	// The header and key stay, so a scan of the segment (when its footer is damaged) can
	// still step over the record.
	start, end := segment.FreedRange(int64(loc.Offset), int64(loc.Length))
	if end <= start {
		return
	}
	s := l.table.Load().get(loc.Segment)
	if s == nil {
		return
	}
	s.mu.Lock()
	s.mu.punches = append(s.mu.punches, freedRange{start, end - start, by})
	s.mu.Unlock()
	l.reclaimMu.Lock()
	l.toReclaim[s] = struct{}{}
	l.reclaimMu.Unlock()
}

// reclaim punches out the freed ranges of segments that no reader holds. A reader that found a
// location before it was freed either still holds its segment reference (and the punch waits) or
// re-checks the index after its read and retries (see Cache.stillAt), so no reader ever returns
// punched-out bytes.
func (l *segmentLayout) reclaim() {
	// The ranges are taken under reclaimMu and punched after it is released: punching can take
	// a while (hundreds of holes after a seal), and freeRecord, which the writer calls with its
	// lock held, needs reclaimMu.
	type work struct {
		s     *segHandle
		ready []freedRange
	}
	var todo []work
	l.reclaimMu.Lock()
	for s := range l.toReclaim {
		if s.refs.Load() == 0 {
			delete(l.toReclaim, s) // evicted: the file is gone anyway
			continue
		}
		if s.refs.Load() != 1 || !s.sealed.Load() {
			// Readers in progress (or the segment is gone, refs 0); or the segment is still
			// active, and a crash would have recovery scan it.
			continue
		}
		s.mu.Lock()
		var ready, wait []freedRange
		for _, p := range s.mu.punches {
			if l.durable(p.by) {
				ready = append(ready, p)
			} else {
				wait = append(wait, p)
			}
		}
		s.mu.punches = wait
		s.mu.Unlock()
		if len(wait) == 0 {
			delete(l.toReclaim, s)
		}
		if len(ready) > 0 {
			todo = append(todo, work{s, ready})
		}
	}
	l.reclaimMu.Unlock()
	for _, w := range todo {
		l.punch(w.s, w.ready)
	}
}

// durable reports whether the records of segment id are on stable storage: with Fsync every
// committed batch is; otherwise a segment's are once its seal synced them. A segment no longer
// live was evicted, and with it every older one.
func (l *segmentLayout) durable(id uint32) bool {
	c := l.c
	if c.opts.Fsync {
		return true
	}
	s := l.table.Load().get(id)
	return s == nil || s.synced.Load()
}

// punch punches out freed ranges of s and takes them off the space counters, unless s was
// evicted meanwhile (its space was then counted off whole).
func (l *segmentLayout) punch(s *segHandle, punches []freedRange) {
	c := l.c
	// segs.mu is held per hole, not across them all: rotation takes it to publish a new
	// segment, with the writer's lock held. A segment evicted in between is left alone (its
	// space went with it); one evicted after a punch counts the punch as done.
	live := func() bool { return l.table.Load().get(s.id) == s }
	for _, p := range punches {
		l.mu.Lock()
		ok := live()
		l.mu.Unlock()
		if !ok {
			return
		}
		if err := s.f.PunchHole(p.off, p.n); err != nil {
			return // unsupported or failing: the space comes back on eviction
		}
		l.mu.Lock()
		if live() {
			s.disk.Add(-p.n)
			l.addDisk(s, -p.n)
		}
		l.mu.Unlock()
		c.stats.punchedBytes.Add(uint64(p.n))
		c.stats.punchedRecords.Add(1)
	}
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// fsBlock is the unit a file system allocates a file's space in, as vfs.AllocatedBytes counts it.
const fsBlock = 4096
