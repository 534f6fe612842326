package blobcache

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/invariants"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// segmentLayout keeps records in append-only segment files, the default layout. It owns the
// segments and everything about where the next record goes: each region's active segment,
// rotation to a new one, growth of its preallocation, the room MaxSize leaves (evicting, or
// waiting for a seal), seals, eviction's work on the files, and the space they count
// (space.go). The writer asks it for room and a place, for a batch (place) and for a streamed
// record (reserveStream) alike, through reserve; nothing else decides where a record goes.
//
// Locking. The placement state (active, poisoned, mainFloor, roomWait, and segHandle.logSpace,
// streams, sealDeferred and sealBase) is guarded by the write pipeline's lock, writer.mu: every
// method that places, rotates, grows, seals an active segment or makes room is called with it
// held, and waits only through the pipeline (pipe.waitLocked), which releases it. The segment
// table is guarded by segments.mu, below writer.mu in the lock order (see writer.go).
type segmentLayout struct {
	c   *Cache
	dir string // the segments directory

	segments                            // the live segments (segments.go); embedded for readers' acquire
	lastID     atomic.Uint32            // the last segment id used
	regionDisk [numRegions]atomic.Int64 // Cache.diskBytes by region (region.go)
	// sealingTails is the sum of the tails of segments being sealed (segHandle.tail), which
	// Cache.diskBytes counts until each seal cuts its tail off.
	sealingTails atomic.Int64
	sealers      sync.WaitGroup // seal goroutines (see seal)
	// unsynced is the sum of the segments' segHandle.unsynced: bytes written through the page
	// cache that the kernel had not written back when last counted, and no seal has synced
	// (writeback.go).
	unsynced atomic.Int64
	// costs is what a MiB written through the page cache has cost the CPU lately, which
	// writesBack weighs (writecost.go).
	costs routeCost
	// closing is closed when the cache closes: seals waiting for the kernel's write-back stop
	// waiting (hurryAll).
	closing   chan struct{}
	closeOnce sync.Once
	// recountDue is when the bytes counted in unsynced may be counted again (recountUnsynced).
	recountDue interval

	reclaimMu sync.Mutex
	toReclaim map[*segHandle]struct{} // segments with ranges waiting to be punched

	// pipe is the write pipeline (nil until the writer exists, and for a read-only cache).
	pipe pipeline

	// Guarded by writer.mu.
	active [numRegions]*segHandle // each region's segment that new records are placed in
	// poisoned is a region's segment with a failed write in it: it gets no more records and is
	// sealed before anything else.
	poisoned [numRegions]*segHandle
	// mainFloor is the lowest id main's active segment may have for a record placed now:
	// promotions and some tombstones must land in a segment newer than others (region.go).
	mainFloor uint32
	// roomWait is the segment makeRoom waits to see sealed, since when, and whether a timer
	// will wake the waiters when its streams' grace ends.
	roomWait struct {
		seg   *segHandle
		since time.Time
		woken bool
	}
}

// pipeline is what the segment layout needs of the write pipeline (writer.go), whose lock
// guards the layout's placement state. Every method but wake is called with that lock held.
type pipeline interface {
	// waitLocked waits for the pipeline to change (a batch recycled, a seal ended, the writer
	// closed), releasing the lock meanwhile.
	waitLocked()
	// wake wakes the waiters; the lock is not held.
	wake()
	// queueSealLocked queues the seal of s, whose records end at base, after every job queued
	// before it.
	queueSealLocked(s *segHandle, base int64)
	// sealed notes the end of a seal (err, if it failed); the lock is not held.
	sealed(err error)
	// brokenLocked is the error every write is refused with, or nil.
	brokenLocked() error
	// breakLocked makes the pipeline refuse every write with err, for good, and returns the
	// error it refuses them with.
	breakLocked(err error) error
	// outrunLocked tells the streamed records being written into s to give up (ErrOutrun).
	outrunLocked(s *segHandle)
}

func newSegmentLayout(c *Cache) *segmentLayout {
	l := &segmentLayout{c: c, dir: filepath.Join(c.dir, segDir), toReclaim: make(map[*segHandle]struct{}), closing: make(chan struct{})}
	l.table.Store(&segTable{})
	return l
}

func (l *segmentLayout) recover() (bloom.Stamp, error) { return l.c.recover() }
func (l *segmentLayout) evict(limit int64) error       { return l.evictTo(limit) }
func (l *segmentLayout) streams() bool                 { return true }
func (l *segmentLayout) checksValues() bool            { return false }

// maxValueSize: a record must fit in one segment, with its footer entry, the trailer and (with
// DirectIO) its padding. A record larger than a write buffer is not buffered: Put and PutFrom
// write it straight into its segment (see stream.go).
func (l *segmentLayout) maxValueSize(keyLen int) int64 {
	o := &l.c.opts
	n := segment.MaxRecordLen(o.SegmentSize) - record.HeaderSize - int64(keyLen)
	if o.directWrites() {
		n -= 2 * (vfs.DirectIOAlignment + record.HeaderSize) // the most a lead and a pad add
	}
	return min(n, 1<<31)
}

func (l *segmentLayout) room(r region, n int64, entries int) (bool, error) {
	return l.makeRoom(r, n, entries)
}

// place puts the batch at the end of region r's active segment (reserve).
func (l *segmentLayout) place(r region, b *batch.Batch, bufs [][]byte, n int64) (*flushJob, error) {
	a, off, err := l.reserve(r, n, b.Len())
	if err != nil {
		return &flushJob{b: b, length: n, err: err}, err
	}
	return &flushJob{b: b, seg: a, base: off, bufs: bufs, length: n}, nil
}

// reserve places n bytes of records, with entries footer entries, at the end of region r's
// active segment, rotating to a new segment when they do not fit, and returns the segment and
// their offset in it. Batches (place) and streamed records (reserveStream) are placed through
// it alone, so offsets in a segment follow the order of the calls. makeRoom made room for them
// under MaxSize. The caller holds writer.mu.
func (l *segmentLayout) reserve(r region, n int64, entries int) (*segHandle, int64, error) {
	if !l.fits(r, n, entries) {
		if err := l.rotate(r); err != nil {
			return nil, 0, fmt.Errorf("%w: create segment: %w", ErrWriteFailed, err)
		}
	}
	a := l.active[r]
	off, _ := a.active.Reserve(n, entries) // it fits: rotate made a segment it fits in
	l.grow(a)
	return a, off, nil
}

// commit adds the batch's records to the segment's footer to be and to the index, and frees
// the records they replace.
func (l *segmentLayout) commit(j *flushJob) {
	c, seg := l.c, j.seg
	admit := c.admitsOnWrite()
	for i, be := range j.b.Entries() {
		e := be.Entry
		e.Offset += uint32(j.base)
		seg.active.AddEntry(e)
		switch e.Kind {
		case record.KindPut:
			loc := index.Loc{Segment: seg.id, Offset: e.Offset, Length: e.Length}
			if admit {
				c.admitWritten(j.b, i, e.Hash, loc) // before the index names loc: no read misses it
			}
			if old, ok := c.idx.Put(e.Hash, loc); ok {
				l.freeRecord(old, seg.id)
			}
			if be.Hits > 0 {
				c.idx.SetHits(e.Hash, loc, int(be.Hits))
			}
		case record.KindDelete:
			if old, ok := c.idx.Delete(e.Hash); ok {
				l.freeRecord(old, seg.id)
			}
		}
	}
	seg.dataEnd = j.base + j.length
	c.stats.flushedBytes.Add(uint64(j.length))
	c.stats.flushes.Add(1)
}

// lose forgets the batch's keys. Their older records are not freed (punched out): until the
// tombstones that make the forgetting durable are on disk, a crash brings them back through
// their footers, and they must come back whole.
func (l *segmentLayout) lose(j *flushJob) [][]byte {
	var keys [][]byte
	for i, e := range j.b.Entries() {
		l.c.idx.Delete(e.Hash)
		keys = append(keys, j.b.Key(i))
	}
	return keys
}

// forgetAtOpen: the key joins the keys New writes tombstones for.
func (l *segmentLayout) forgetAtOpen(h uint64, _ index.Loc, key []byte) {
	l.c.idx.Delete(h)
	if !l.c.opts.ReadOnly {
		l.c.lost = append(l.c.lost, append([]byte(nil), key...))
	}
}

func (l *segmentLayout) acquire(h uint64, loc index.Loc) (*segHandle, int64) {
	return l.segments.acquire(loc.Segment), int64(loc.Offset)
}

// fits reports whether n more bytes of records, with entries footer entries, go in region r's
// active segment. The caller holds writer.mu.
func (l *segmentLayout) fits(r region, n int64, entries int) bool {
	a := l.active[r]
	return a != nil && a != l.poisoned[r] && (r != mainRegion || a.id >= l.mainFloor) && a.active.Fits(n, entries)
}

// isActive reports whether s is its region's active segment. The caller holds writer.mu.
func (l *segmentLayout) isActive(s *segHandle) bool { return l.active[s.region] == s }

// poison notes that seg has a failed write in it: it gets no more records and is sealed at the
// next cut or drain. The caller holds writer.mu.
func (l *segmentLayout) poison(seg *segHandle) { l.poisoned[seg.region] = seg }

// poisonedActive reports whether region r's active segment has a failed write in it. The
// caller holds writer.mu.
func (l *segmentLayout) poisonedActive(r region) bool {
	return l.poisoned[r] != nil && l.poisoned[r] == l.active[r]
}

// anyPoisonedActive reports whether an active segment has a failed write in it. The caller
// holds writer.mu.
func (l *segmentLayout) anyPoisonedActive() bool {
	for r := range numRegions {
		if l.poisonedActive(r) {
			return true
		}
	}
	return false
}

// raiseMainFloor makes the next record placed in main land in a segment with an id of at least
// id. The caller holds writer.mu.
func (l *segmentLayout) raiseMainFloor(id uint32) { l.mainFloor = max(l.mainFloor, id) }

// makeRoom evicts the oldest segments until n more bytes of records, with entries footer
// entries, can be placed in region r without either bound being passed:
//
//   - the records held (Stats.DataBytes: the files less what the active segments have not filled
//     yet and the tails of segments being sealed), with these and, for a new segment, its header
//     and trailer, stay within MaxSize;
//   - if they need a new segment, the files stay within MaxSize plus one segment once it is
//     created: every segment counted as it stands, an active one whole (it is preallocated) and
//     one being sealed with its tail (until the seal cuts it off).
//
// The first bound keeps what the cache holds within a segment of MaxSize once it is full (an
// eviction frees a segment, and the next ones wait until the records fill it); the second is the
// disk's promise, with one region as with two. When the victim is not sealed yet (its seal is
// still in the pipeline, or waits for a PutFrom writing into it), makeRoom waits for the
// pipeline (releasing writer.mu; see waitForSeal) and returns false: the caller must look at the
// writer's state again, since other goroutines may have run. The caller holds writer.mu.
//
// An eviction whose removal is not durable breaks the pipeline (see writer.breakLocked); the
// error is returned.
func (l *segmentLayout) makeRoom(r region, n int64, entries int) (ready bool, err error) {
	c := l.c
	if c.opts.MaxSize == 0 {
		return true, nil
	}
	rotate := !l.fits(r, n, entries)
	records := n + int64(entries)*segment.EntrySize
	// over reports whether a bound would be passed; the files counted with the tails of
	// segments being sealed, or without them (as they will be once the seals are done).
	over := func(tails bool) bool {
		files := c.diskBytes.Load()
		held := files - l.unfilled() - l.sealingTails.Load() + records
		if !tails {
			files -= l.sealingTails.Load()
		}
		// What the files grow by: a new segment's preallocation, or the rest of the active
		// one's once these records pass its first half; and the entry log of their entries.
		var grows int64
		if rotate {
			held += segment.HeaderSize + segment.TrailerSize
			grows = segment.Allocation(c.opts.SegmentSize, segment.HeaderSize+records+segment.TrailerSize) +
				segment.LogSpace(int64(entries))
		} else {
			a := l.active[r].active
			grows = segment.Allocation(c.opts.SegmentSize, a.SealedSize()+records) - a.Allocated() +
				segment.LogSpace(a.Entries()+int64(entries)) - segment.LogSpace(a.Entries())
		}
		return held > c.opts.MaxSize || files+grows > c.opts.MaxSize+c.opts.SegmentSize
	}
	for over(true) {
		if err := l.pipe.brokenLocked(); err != nil {
			// No eviction may follow one that failed (see writer.breakLocked).
			return false, err
		}
		if !over(false) && l.tailsWithoutStreams() {
			// Over only by tails that seals in progress are about to cut off: wait for them
			// rather than evict, so that what is evicted does not depend on when the seal
			// goroutine runs. Seals waiting for the kernel's write-back sync now.
			l.hurrySealing()
			l.pipe.waitLocked()
			return false, nil
		}
		evicted, err := l.evictOldest()
		if err != nil {
			return false, l.pipe.breakLocked(err)
		}
		if evicted {
			c.pokeReinserter() // the next victim is due for a scan
			continue
		}
		next := c.victim()
		if next == nil || next == l.active[r] && !c.probationOn() {
			// Only the active segment is left: with MaxSize at least two segments (Validate)
			// this cannot be over the limit.
			return true, nil
		}
		if next.open.Load() {
			// An active segment must go first (with two regions: the oldest of its region,
			// or older than the oldest of the other; region.go): seal it, and the next write
			// to its region starts a new one.
			l.sealActive(next.region)
		}
		l.waitForSeal(next)
		return false, nil
	}
	l.roomWait.seg = nil
	return true, nil
}

// tailsWithoutStreams reports whether segments being sealed hold tails (sealingTails) and none
// of them waits for a PutFrom to end before its seal: their seals are then only a sync and a
// footer away. The caller holds writer.mu.
func (l *segmentLayout) tailsWithoutStreams() bool {
	if l.sealingTails.Load() == 0 {
		return false
	}
	for _, s := range l.table.Load().list {
		if s != nil && s.tail.Load() > 0 && (s.streams > 0 || s.sealDeferred) {
			return false
		}
	}
	return true
}

// streamGrace is how long a rotation waits for the PutFrom calls still writing into the oldest
// segment before it tells them to give up (ErrOutrun), so that a reader that stalls cannot
// hold every other write back for longer.
const streamGrace = time.Second

// waitForSeal waits for the pipeline (releasing writer.mu) until a seal ends, the oldest
// segment's seal being the one makeRoom needs. If PutFrom calls still writing into that segment
// hold its seal back for streamGrace, they are told to give up. The caller holds writer.mu.
func (l *segmentLayout) waitForSeal(oldest *segHandle) {
	l.hurrySeal(oldest)
	rw := &l.roomWait
	now := time.Now()
	if rw.seg != oldest {
		rw.seg, rw.since, rw.woken = oldest, now, false
		l.c.stats.roomWaits.Add(1)
	}
	if oldest.streams > 0 {
		if now.Sub(rw.since) >= streamGrace {
			l.pipe.outrunLocked(oldest)
		} else if !rw.woken {
			// Wake up to look again when the grace ends, sealed or not (once per segment
			// waited for: other wake-ups come and go meanwhile).
			rw.woken = true
			time.AfterFunc(streamGrace-now.Sub(rw.since), l.pipe.wake)
		}
	}
	l.pipe.waitLocked()
}

// unfilled is the space the active segments are counted for and hold no record in yet: what
// they give back when they are sealed. The caller holds writer.mu.
func (l *segmentLayout) unfilled() int64 {
	var n int64
	for r, a := range l.active {
		if a != nil {
			n += max(a.disk.Load()-l.activeFinal(region(r)), 0)
		}
	}
	return n
}

// activeFinal is the size region r's active segment will have once sealed. The caller holds
// writer.mu.
func (l *segmentLayout) activeFinal(r region) int64 {
	return l.active[r].active.SealedSize()
}

// dataBytes is Stats.DataBytes: the disk bytes without the parts of the active segments that
// are counted and have nothing placed in them yet, nor the tails of segments being sealed (two
// regions). The caller holds writer.mu, which rotations and evictions hold, so that a rotation
// cannot fall between them.
func (l *segmentLayout) dataBytes() int64 {
	return l.c.diskBytes.Load() - l.unfilled() - l.sealingTails.Load()
}

// rotate queues the seal of region r's active segment and creates the next one. makeRoom made
// room for it under MaxSize. The caller holds writer.mu.
func (l *segmentLayout) rotate(r region) error {
	l.sealActive(r)
	c := l.c
	id := l.lastID.Add(1)
	var a *segment.Active
	err := l.onFullDisk(func() (err error) {
		_ = c.opts.fs.Remove(filepath.Join(l.dir, segment.FileName(id))) // what a failed try left
		a, err = segment.Create(c.opts.fs, l.dir, id, c.opts.SegmentSize,
			segment.Options{Direct: c.opts.directWrites(), Sync: c.opts.Fsync})
		return err
	})
	if err != nil {
		_ = c.opts.fs.Remove(filepath.Join(l.dir, segment.FileName(id)))
		return err
	}
	s := &segHandle{id: id, region: r, f: a.File(), active: a, hurry: make(chan struct{})}
	_, statErr := vfs.StatPageCache(s.f, 0, 1)
	s.seesWriteBack = statErr == nil
	if err := c.openReads(s); err != nil {
		_ = a.Close()
		_ = c.opts.fs.Remove(filepath.Join(l.dir, segment.FileName(id)))
		return err
	}
	s.refs.Store(1)
	s.disk.Store(a.Allocated())
	s.open.Store(true)
	l.addDisk(s, a.Allocated())
	if bound := c.opts.MaxSize + c.opts.SegmentSize; invariants.Enabled && c.opts.MaxSize > 0 && c.diskBytes.Load() > bound {
		panic(fmt.Sprintf("blobcache: %d bytes on disk after a rotation, over %d (MaxSize %d, probation %v)", c.diskBytes.Load(), bound, c.opts.MaxSize, c.probationOn()))
	}
	l.mu.Lock()
	l.add(s)
	l.mu.Unlock()
	l.active[r] = s
	c.pokeReinserter() // the oldest segment may be the next to go
	return nil
}

// onFullDisk runs op and, while it fails for a full disk, evicts the oldest sealed segment (making
// room as MaxSize would) and runs it again, eight times at most. The caller holds writer.mu.
func (l *segmentLayout) onFullDisk(op func() error) error {
	err := op()
	for tries := 0; err != nil && errors.Is(err, syscall.ENOSPC) && tries < 8 && l.pipe.brokenLocked() == nil; tries++ {
		evicted, eerr := l.evictOldestSealed()
		if eerr != nil {
			l.pipe.breakLocked(eerr)
		}
		if !evicted {
			break
		}
		err = op()
	}
	return err
}

// grow preallocates the rest of active segment s once what is placed in it passes its first
// allocation (segment.Active.Grow), and counts it, evicting on a full disk as rotate does; if
// that fails too, the writes that follow report it. The caller holds writer.mu.
func (l *segmentLayout) grow(s *segHandle) {
	var n int64
	_ = l.onFullDisk(func() (err error) {
		n, err = s.active.Grow()
		return err
	})
	// The entry log the entries of the records placed take on disk until the seal (the seal
	// counts the sealed file in its place).
	if lg := segment.LogSpace(s.active.Entries()); lg > s.logSpace {
		n += lg - s.logSpace
		s.logSpace = lg
	}
	if n > 0 {
		s.disk.Add(n)
		l.addDisk(s, n)
	}
}

// sealActive queues the seal of region r's active segment, after the records placed in it. The
// caller holds writer.mu.
func (l *segmentLayout) sealActive(r region) {
	a := l.active[r]
	if a == nil {
		return
	}
	// The segment counts whole until its seal cuts the preallocated tail off (sealSegment): the
	// files are that large until then, and makeRoom's bound on them must see it. The tail is
	// noted so that what the records hold (dataBytes, makeRoom) leaves it out meanwhile: all of
	// it but the rest of the last block, so that the records count the same before the seal
	// ends as after (when the file takes whole blocks), and eviction does not depend on when
	// the seal goroutine gets to run.
	if tail := a.disk.Load() - alignUp(l.activeFinal(r), fsBlock); tail > 0 {
		a.tail.Store(tail)
		l.sealingTails.Add(tail)
	}
	if a.streams > 0 {
		// A streamed record is still being written: its last stream queues the seal
		// (streamEnded).
		a.sealDeferred = true
		a.sealBase = a.active.End()
	} else {
		l.pipe.queueSealLocked(a, a.active.End())
	}
	if l.poisoned[r] == a {
		l.poisoned[r] = nil
	}
	a.open.Store(false)
	l.active[r] = nil
}

// streamStarted notes a streamed record being written into s: its seal waits for it. The
// caller holds writer.mu.
func (l *segmentLayout) streamStarted(s *segHandle) { s.streams++ }

// streamEnded notes the end of a streamed record written into s, and queues the seal that
// sealActive deferred if it was the last. The caller holds writer.mu.
func (l *segmentLayout) streamEnded(s *segHandle) {
	s.streams--
	if s.streams == 0 && s.sealDeferred {
		s.sealDeferred = false
		l.pipe.queueSealLocked(s, s.sealBase)
	}
}
