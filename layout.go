package blobcache

import (
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// layout is where records live on disk: in append-only segment files (segmentLayout, the
// default; space.go, segments.go, recover.go, stream.go) or one file per blob (blobFiles,
// Options.PerBlobFiles; perblob.go). The cache, the writer and the read path ask it what differs;
// none of them branches on the mode.
type layout interface {
	// recover rebuilds the index from the files when the cache opens.
	recover() (bloom.Stamp, error)
	// evict removes the oldest data until the disk holds at most limit bytes (at open).
	evict(limit int64) error
	// maxValueSize is the largest value a key of keyLen bytes may have.
	maxValueSize(keyLen int) int64
	// streams reports whether a value too large for a write buffer (or for PutFrom's chunk) is
	// written straight to disk as it is read (stream.go) rather than read whole first.
	streams() bool

	// room is called by cut, with writer.mu held, before it takes the open batch (n bytes once
	// sealed, entries records): false if it waited (releasing writer.mu), and cut must look
	// again.
	room(w *writer, r region, n int64, entries int) (bool, error)
	// place gives the sealed batch b (bufs, n bytes) its place on disk and returns its flush
	// job. A batch that cannot be placed still gets a job, failed (its err set, and returned):
	// it goes through the pipeline so that forgetting its keys happens after the batches
	// before it are committed. writer.mu is held.
	place(w *writer, r region, b *batch.Batch, bufs [][]byte, n int64) (*flushJob, error)
	// write writes a placed batch; a flush worker calls it.
	write(j *flushJob) error
	// commit applies a written batch to the index (and the footer to be); the commit goroutine
	// calls it, in order.
	commit(j *flushJob)
	// lose applies a batch that failed: every key it touched is forgotten in the index. It
	// returns the keys whose forgetting still needs a tombstone to last a restart.
	lose(j *flushJob) [][]byte

	// acquire returns the file holding the record at loc, with a reader reference, and the
	// record's offset in it; nil if the file is gone.
	acquire(h uint64, loc index.Loc) (*segHandle, int64)
	// checksValues reports whether a read of a whole value checks its CRC even without
	// VerifyOnRead (blob files are not scanned on open, so a torn one is found only so).
	checksValues() bool
}

// segmentLayout keeps records in segment files.
type segmentLayout struct{ c *Cache }

func (l segmentLayout) recover() (bloom.Stamp, error) { return l.c.recover() }
func (l segmentLayout) evict(limit int64) error       { return l.c.evict(limit) }
func (l segmentLayout) streams() bool                 { return true }
func (l segmentLayout) checksValues() bool            { return false }

// maxValueSize: a record must fit in one segment, with its footer entry, the trailer and (with
// DirectIO) its padding. A record larger than a write buffer is not buffered: Put and PutFrom
// write it straight into its segment (see stream.go).
func (l segmentLayout) maxValueSize(keyLen int) int64 {
	o := &l.c.opts
	n := segment.MaxRecordLen(o.SegmentSize) - record.HeaderSize - int64(keyLen)
	if o.directWrites() {
		n -= 2 * (vfs.DirectIOAlignment + record.HeaderSize) // the most a lead and a pad add
	}
	return min(n, 1<<31)
}

func (l segmentLayout) room(w *writer, r region, n int64, entries int) (bool, error) {
	return w.makeRoom(r, n, entries)
}

// place puts the batch at the end of region r's active segment, rotating to a new segment when
// it does not fit.
func (l segmentLayout) place(w *writer, r region, b *batch.Batch, bufs [][]byte, n int64) (*flushJob, error) {
	if !w.fits(r, n, b.Len()) {
		if err := w.rotate(r); err != nil {
			err = fmt.Errorf("%w: create segment: %w", ErrWriteFailed, err)
			return &flushJob{b: b, length: n, err: err}, err
		}
	}
	a := w.active[r]
	off, _ := a.active.Reserve(n, b.Len()) // it fits: rotate made a segment it fits in
	w.grow(a)
	return &flushJob{b: b, seg: a, base: off, bufs: bufs, length: n}, nil
}

func (l segmentLayout) write(j *flushJob) error { return j.seg.active.WriteBatch(j.bufs, j.base) }

// commit adds the batch's records to the segment's footer to be and to the index, and frees
// the records they replace.
func (l segmentLayout) commit(j *flushJob) {
	c, seg := l.c, j.seg
	for _, be := range j.b.Entries() {
		e := be.Entry
		e.Offset += uint32(j.base)
		seg.active.AddEntry(e)
		switch e.Kind {
		case record.KindPut:
			loc := index.Loc{Segment: seg.id, Offset: e.Offset, Length: e.Length}
			if old, ok := c.idx.Put(e.Hash, loc); ok {
				c.freeRecord(old, seg.id)
			}
			if be.Hits > 0 {
				c.idx.SetHits(e.Hash, loc, int(be.Hits))
			}
		case record.KindDelete:
			if old, ok := c.idx.Delete(e.Hash); ok {
				c.freeRecord(old, seg.id)
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
func (l segmentLayout) lose(j *flushJob) [][]byte {
	var keys [][]byte
	for i, e := range j.b.Entries() {
		l.c.idx.Delete(e.Hash)
		keys = append(keys, j.b.Key(i))
	}
	return keys
}

func (l segmentLayout) acquire(h uint64, loc index.Loc) (*segHandle, int64) {
	return l.c.segs.acquire(loc.Segment), int64(loc.Offset)
}

// blobFiles keeps each blob in a file of its own (perblob.go).
type blobFiles struct{ c *Cache }

func (l blobFiles) recover() (bloom.Stamp, error) { return l.c.recoverBlobs() }
func (l blobFiles) evict(limit int64) error       { return l.c.evictBlobs(limit) }
func (l blobFiles) streams() bool                 { return false }
func (l blobFiles) checksValues() bool            { return true }

// maxValueSize: a record must fit in one write buffer.
func (l blobFiles) maxValueSize(keyLen int) int64 {
	return min(l.c.opts.WriteBufferSize-record.HeaderSize-int64(keyLen), 1<<31)
}

// room: blob files are evicted as they are committed (commitBlobs), not before.
func (l blobFiles) room(*writer, region, int64, int) (bool, error) { return true, nil }

// place numbers the batch's records: each gets the next seq, its file's name.
func (l blobFiles) place(w *writer, _ region, b *batch.Batch, _ [][]byte, n int64) (*flushJob, error) {
	count := uint64(b.Len())
	return &flushJob{b: b, length: n, seqBase: l.c.blobSeq.Add(count) - count + 1}, nil
}

func (l blobFiles) write(j *flushJob) error { return l.c.writeBlobFiles(j) }

func (l blobFiles) commit(j *flushJob) {
	l.c.commitBlobs(j)
	l.c.stats.flushedBytes.Add(uint64(j.length))
}

// lose forgets the batch's keys and removes their older files, which makes the forgetting
// durable (no tombstones needed), and whatever files of the batch were written.
func (l blobFiles) lose(j *flushJob) [][]byte {
	for _, e := range j.b.Entries() {
		if old, ok := l.c.idx.Delete(e.Hash); ok {
			// The batch's failure is reported; a file left behind is one more reason the
			// forgetting may not last a restart, which finding 10 allows.
			_ = l.c.removeBlob(e.Hash, old)
		}
	}
	l.c.forgetBlobFiles(j)
	return nil
}

func (l blobFiles) acquire(h uint64, loc index.Loc) (*segHandle, int64) {
	return l.c.openBlobFile(h, loc), 0
}
