package blobcache

import (
	"os"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// The write path's route: how a batch reaches its segment file.
//
// With neither DirectWrites, BufferedWrites nor Fsync set, each batch picks its route (write):
//
//   - while the cache's data fits in RAM (fillGate.pressured is false, the read path's own
//     signal: readroute.go), the bytes written through the page cache that the kernel has not
//     written back yet (as last counted: recountUnsynced) stay under writeBackShare of the memory
//     the page cache could have, and such a write costs the CPU less than its ceiling (measured:
//     writecost.go), the batch is written
//     through the page cache, and the kernel writes it back in its own time (write-back). Until
//     then the device does not see it, and its hits, the first one included, are served from
//     memory: each byte written is read from the device never, as a page-cache engine's is;
//   - except with a memory tier that values enter as they are written (MemoryOnWrite): a batch
//     whose values all enter it is in memory already, so it goes direct (a batch with a value too
//     large for the tier, and streamed chunks, whose values enter on a second hit, are routed as
//     above);
//   - otherwise it is written with O_DIRECT, as every batch was before: data bigger than RAM,
//     memory taken by others, writes coming faster than the kernel writes them back (the
//     unsynced bytes reach their share), or a page cache dearer than its ceiling (but for the
//     probes that measure it again); and always where the kernel cannot tell what it has
//     written back (cachestat(2), Linux 6.5: segHandle.seesWriteBack), since a seal there could
//     not wait for it and would write the segment back at once, stalling the writes behind it.
//
// A segment holding bytes written back this way is sealed lazily (awaitWriteBack): its seal waits
// until the kernel has written its pages back (cachestat(2) counts none dirty or under
// writeback), writeBackMaxDelay at most, before it syncs the data, now a formality, and writes
// the footer. A footer on disk so still describes data on disk, and the seal's sync costs the
// writes no stall. Whatever waits for the seal hurries it (hurrySeal): a rotation that must evict
// the segment or waits for the tails of segments being sealed, the reinserter scanning the
// oldest segment, and Close.
//
// What waits with the seal: the punching of the ranges the segment's records freed (a range is
// punched once the record that freed it is synced; space.go), so overwritten bytes are given
// back to the file system up to writeBackMaxDelay later than with direct writes. What does not
// change: a process crash loses nothing more (the kernel holds the pages; recovery scans a
// segment without a footer, as it always did), and a power loss without Fsync may lose what the
// kernel had not written back, as it always could (docs/RELIABILITY.md).

// writeBackShare is the most of the memory available to the page cache (vfs.MemoryAvailable)
// that the bytes written back and not yet synced may take: the kernel's own default
// dirty_background_ratio, the point where it starts to write back on its own.
const writeBackShare = 0.1

// writeBackMaxDelay bounds how long a seal waits for the kernel to write a segment back: a little
// more than the kernel's default dirty_expire_centisecs (30 s) and one period of its flusher
// (5 s). Past it the seal syncs the segment itself.
const writeBackMaxDelay = 40 * time.Second

// writeBackPoll is how often a waiting seal asks the kernel what it still has to write back.
const writeBackPoll = 250 * time.Millisecond

// routesWrites reports whether batches pick their route (see above): neither DirectWrites,
// BufferedWrites nor Fsync (which syncs every batch: direct writes do that cheaper).
func (c *Cache) routesWrites() bool {
	return !c.opts.DirectWrites && !c.opts.BufferedWrites && !c.opts.Fsync
}

// write writes batch j to its segment: through the page cache while write-back pays, measuring
// what that costs (writecost.go), else as the segment writes (with O_DIRECT unless the file
// system refused it). A batch whose values all enter the memory tier as it is committed
// (MemoryOnWrite, heldOnWrite) goes as the segment writes: the tier serves their hits, and a copy
// in the page cache would hold the same bytes twice, paid for by the writes.
func (l *segmentLayout) write(j *flushJob) error {
	if !l.c.heldOnWrite(j.b) && l.writesBack(j.seg, j.length) {
		return l.costs.measure(j.length, func() error { return j.seg.active.WriteThroughCache(j.bufs, j.base) })
	}
	return j.seg.active.WriteBatch(j.bufs, j.base)
}

// writeChunk writes a chunk of a streamed record (stream.go) into s at off, routed as a batch is
// (its bytes counted against the share as a batch's are).
// The pad a stream writes first is not routed: it goes as the segment writes, before any of the
// record's chunks, so that no direct write follows a write through the page cache to the same
// bytes.
func (l *segmentLayout) writeChunk(s *segHandle, b []byte, off int64) error {
	if l.writesBack(s, int64(len(b))) {
		return s.active.WriteThroughCache([][]byte{b}, off)
	}
	return s.active.Write([][]byte{b}, off)
}

// writesBack reports whether a batch of n bytes into s goes through the page cache, and if so
// counts its bytes against the share, until the seal of s or a recount finds them written back,
// and in Stats.WrittenBackBytes.
// It must not be called with writer.mu held: asking the fit again (refreshFit) takes it to read
// the cache's data bytes. So a stream's pad, written during the reservation under writer.mu,
// is not routed (stream.go).
func (l *segmentLayout) writesBack(s *segHandle, n int64) bool {
	c := l.c
	if !c.routesWrites() || !s.active.Direct() || !s.seesWriteBack {
		return false
	}
	c.fills.refreshFit(time.Now(), c.dataBytes)
	if c.fills.pressured() || !l.costs.backPays(n) {
		return false
	}
	limit := int64(writeBackShare * float64(c.fills.avail.Load()))
	if l.unsynced.Load()+n > limit {
		l.recountUnsynced(time.Now())
	}
	if l.unsynced.Add(n) > limit {
		l.unsynced.Add(-n)
		return false
	}
	s.unsynced.Add(n)
	c.stats.writtenBack.Add(uint64(n))
	return true
}

// recountUnsynced, at most once per recountInterval, counts against the share only what the
// kernel has not written back yet of each segment whose seal is still to come (its pages dirty
// or under writeback): a segment fills and seals long after its first bytes were written back
// when the writes are slow or the segments large. The count is an estimate: a batch being
// written into a segment at that moment may be missed until the next recount or the seal.
func (l *segmentLayout) recountUnsynced(now time.Time) {
	if !l.recountDue.due(now, recountInterval) {
		return
	}
	for _, s := range l.table.Load().list {
		if s == nil || s.unsynced.Load() == 0 {
			continue
		}
		if st, err := vfs.StatPageCache(s.f, 0, l.c.opts.SegmentSize); err == nil {
			dirty := st.Dirty * int64(os.Getpagesize())
			l.unsynced.Add(dirty - s.unsynced.Swap(dirty))
		}
	}
}

// recountInterval is how often a full share is counted again (recountUnsynced).
const recountInterval = time.Second

// awaitWriteBack waits, in the seal of s (whose records end at dataEnd), until the kernel has
// written back the bytes written to s through the page cache: writeBackMaxDelay at most, and no
// longer than until s is hurried (hurrySeal) or the cache closes. It returns at once for a
// segment written direct, and where the kernel cannot tell (vfs.StatPageCache).
func (l *segmentLayout) awaitWriteBack(s *segHandle, dataEnd int64) {
	if s.unsynced.Load() == 0 {
		return
	}
	deadline := time.Now().Add(writeBackMaxDelay)
	t := time.NewTimer(writeBackPoll)
	defer t.Stop()
	for time.Now().Before(deadline) {
		st, err := vfs.StatPageCache(s.f, 0, dataEnd)
		if err != nil || st.Dirty == 0 {
			return
		}
		select {
		case <-t.C:
			t.Reset(writeBackPoll)
		case <-s.hurry:
			return
		case <-l.closing:
			return
		}
	}
}

// releaseUnsynced stops counting the bytes of s written back against writeBackShare: its seal
// synced them, or the kernel wrote them back.
func (l *segmentLayout) releaseUnsynced(s *segHandle) { l.unsynced.Add(-s.unsynced.Swap(0)) }

// hurrySeal tells the seal of s, if it waits for the kernel's write-back, to sync now: something
// waits for the seal.
func (l *segmentLayout) hurrySeal(s *segHandle) {
	if s.hurry != nil {
		s.hurryOnce.Do(func() { close(s.hurry) })
	}
}

// hurrySealing hurries the seal of every segment being sealed: a rotation waits for their tails.
func (l *segmentLayout) hurrySealing() {
	for _, s := range l.table.Load().list {
		if s != nil && s.sealing.Load() && !s.sealed.Load() {
			l.hurrySeal(s)
		}
	}
}

// hurryAll hurries every seal, now and to come: the cache closes.
func (l *segmentLayout) hurryAll() { l.closeOnce.Do(func() { close(l.closing) }) }
