package blobcache

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/policy"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
)

// The write pipeline: Put appends a record to the open batch under writer.mu. A full batch (or
// one older than FlushInterval, or any batch on Drain) is cut: it is placed at the end of the
// active segment and handed to one of MaxInflightBatches flush workers, which write batches in
// parallel at their disjoint offsets. One commit goroutine then applies finished batches strictly
// in cut order: index updates, footer entries, reclaiming overwritten records, recycling the
// batch. In-order commit is what makes "the later Put wins" and "a Delete wins over the Put
// before it" hold even though batches are written out of order.
//
// Lock order: writer.mu, then segments.mu, then segHandle.mu or segmentLayout.reclaimMu;
// writer.commitMu, the two job queues' locks and the stale queue's (stale.go) are leaves (nothing
// is taken while they are held). The placement state of the segment layout (seglayout.go) is
// guarded by writer.mu. The commit goroutine and the seal goroutines take writer.mu, so nothing
// may wait for them with writer.mu held except through writer.cond, whose Wait releases it. In
// particular no send into the pipeline ever blocks: the job queues have no capacity to run out
// of (see jobQueue for why they stay small).
//
// Backpressure, always applied before writer.mu is taken or through writer.cond:
//   - at most MaxInflightBatches+1 batches exist (one open, the rest in flight); a Put that
//     needs a batch when all are in flight waits on writer.cond until the commit goroutine
//     recycles one;
//   - a PutFrom waits for its publication to be committed once more than maxStreamLag
//     publications are ahead of the commit goroutine (putFromStream);
//   - with MaxSize, a cut or reservation that needs room waits on writer.cond until the oldest
//     segment is sealed and can be evicted (makeRoom), so the records held stay within MaxSize
//     and the files within MaxSize plus one segment at any moment.

// flushJob is one unit of the ordered pipeline, in one of three roles:
//   - a batch (b != nil): written by a flush worker (layout.write), then committed in order
//     (layout.commit; layout.lose if err is set: it could not be placed, or its write failed);
//   - a seal (seal): seg's footer is written once every job placed in it before is committed;
//   - a streamed record's publication (stream != nil): its footer entry, and its index entry
//     unless endStream put it there already (indexed). See stream.go.
type flushJob struct {
	seq    uint64     // its place in the commit order
	seg    *segHandle // the segment it belongs to; nil for a blob-file batch or one not placed
	base   int64      // a batch: its offset in seg; a seal: seg's data end
	length int64      // a batch or a streamed record: its bytes

	// A batch.
	b       *batch.Batch
	bufs    [][]byte // segments: what the flush worker writes at base
	seqBase uint64   // blob files: the seq of the batch's first record
	err     error    // it could not be placed, or its write failed

	// A seal.
	seal bool

	// A streamed record's publication.
	stream  *segment.Entry
	key     []byte // to forget it if it is lost
	indexed bool
}

// offset is where the job's bytes start in its segment.
func (j *flushJob) offset() int64 {
	if j.stream != nil {
		return int64(j.stream.Offset)
	}
	return j.base
}

type writer struct {
	c *Cache

	// mu is first in the lock order (see the top of this file): segments.mu, segHandle.mu and
	// segmentLayout.reclaimMu may be taken under it, never the other way round; nothing waits with it
	// held except on cond.
	mu   sync.Mutex
	cond *sync.Cond // broadcast when a batch is recycled, a seal ends or the writer closes
	// Fields below are guarded by mu.
	// open is each region's open batch (region.go; only mainRegion's without
	// PolicyProbation), since openSince.
	open      [numRegions]*batch.Batch
	openSince [numRegions]time.Time
	free      []*batch.Batch // write buffers not in use, released after idleRelease
	allocated int
	lastCut   time.Time // when the last batch was cut
	closed    bool
	failErr   error // a flush error not yet reported to a caller
	lastErr   error // the last flush error
	broken    error // set once, for good: every write is refused with it (breakLocked)
	// forgotten are keys of failed batches, forgotten in memory, whose tombstones have yet to be
	// written so that a restart does not bring back an older record of theirs.
	forgotten [][]byte
	nextSeq   uint64
	// credit is the bytes reinsertion may still write, earned by Puts and Deletes (reinsert.go).
	credit policy.Credit
	// intentFrom is, for each batch opened and not committed yet, the position in the intent
	// log (intents.go) before which none of its records' intents is.
	intentFrom map[*batch.Batch]uint64
	// intentWaits counts the writes that waited for a slot of the intent log (tests).
	intentWaits int
	// streams are the PutFrom calls between reservation and publication (stream.go);
	// streamWG counts them for close.
	streams  []*stream
	streamWG sync.WaitGroup

	// toWrite feeds the flush workers; done carries their finished jobs to the commit
	// goroutine. Pushes never block (see jobQueue).
	toWrite *jobQueue
	done    *jobQueue

	commitMu   sync.Mutex
	commitCond *sync.Cond
	committed  uint64 // highest seq committed, guarded by commitMu

	workers sync.WaitGroup // flush workers
	wg      sync.WaitGroup // commit loop and ticker
	stop    chan struct{}
}

func newWriter(c *Cache) *writer {
	n := c.opts.MaxInflightBatches
	w := &writer{
		c:          c,
		credit:     newCredit(c),
		intentFrom: make(map[*batch.Batch]uint64),
		toWrite:    newJobQueue(),
		done:       newJobQueue(),
		stop:       make(chan struct{}),
	}
	w.cond = sync.NewCond(&w.mu)
	w.commitCond = sync.NewCond(&w.commitMu)
	c.segs.pipe = w
	for range n {
		w.workers.Add(1)
		go w.flushWorker()
	}
	w.wg.Add(2)
	go w.commitLoop()
	go w.ticker()
	return w
}

// append adds one record to the open batch, cutting and waiting for a batch as needed.
// accepted reports whether the record was taken (it may be, with an error about an earlier
// batch).
//
// With m's observation (a conditional write), the record is taken only if the key's newest
// record is still the observed one; otherwise append returns errChanged.
//
// held, if not nil, is the memory tier's entry prepared for the record (prepareWritten): it goes
// with the record into its batch, to be published when the batch is committed, or is discarded
// here if the record is not appended.
func (w *writer) append(h uint64, hdr record.Header, key, value []byte, copyValue bool, held *memtier.Entry, m *writeMeta) (accepted bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken != nil {
		if held != nil {
			w.c.mem.Discard(held)
		}
		return false, w.broken
	}
	// An earlier batch that failed is reported once, to this caller, but this record is still
	// taken: the error says writes are failing and blobs were lost, not that this one was.
	var earlier error
	if w.failErr != nil {
		earlier = w.failErr
		if !errors.Is(earlier, ErrWriteFailed) {
			earlier = fmt.Errorf("%w: %w", ErrWriteFailed, earlier)
		}
		w.failErr = nil
	}
	w.writeForgotten()
	w.writeStale()
	if err := w.appendLocked(h, hdr, key, value, copyValue, held, m); err != nil {
		return false, err
	}
	w.earn(hdr.Len())
	return true, earlier
}

// stillObserved is the check of a conditional write that saw o of its key (none without an
// observation: nil): nil if the key's newest record is still the observed one, errChanged if
// not, or if a PutFrom of the key is publishing its record (after waiting for it). The caller
// holds mu, and appends at once if it returns nil, without releasing mu in between.
func (w *writer) stillObserved(h uint64, key []byte, o *observation) error {
	if o == nil {
		return nil
	}
	if w.streaming(key) {
		w.cond.Wait() // look again once it is published
		return errChanged
	}
	if !w.unchanged(h, key, o) {
		return errChanged
	}
	return nil
}

// stillSees is stillObserved taking mu for the check: a conditional write whose precondition
// failed on o asks it before it reports the failure, so that the failure is what the key held at
// one moment, not a mix of two (a lookup that found the index entry gone with its segment while
// the record's copy waited in the write buffer).
func (w *writer) stillSees(h uint64, key []byte, o *observation) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stillObserved(h, key, o) == nil
}

// streaming reports whether a PutFrom of key is between its reservation and its publication.
// The caller holds mu.
func (w *writer) streaming(key []byte) bool {
	for _, s := range w.streams {
		if string(s.key) == string(key) {
			return true
		}
	}
	return false
}

// unchanged reports whether the newest record of key (hash h) is still the one o saw: the same
// record in the write buffer (by its version), or the same index location. The caller holds mu.
func (w *writer) unchanged(h uint64, key []byte, o *observation) bool {
	v, ok := w.c.unflushed.lookup(h, key)
	if ok || o.buffered {
		return ok && o.buffered && v.Version == o.rawVersion
	}
	loc, in := w.c.idx.Get(h)
	return in == o.inIndex && (!in || loc == o.loc)
}

// writeStale appends tombstones for the keys reads queued as stale (stale.go) whose newest
// record is still the stale one. The caller holds mu.
func (w *writer) writeStale() {
	for !w.closed {
		sk, ok := w.c.stale.pop()
		if !ok {
			return
		}
		h := record.KeyHash(sk.key)
		if !w.unchanged(h, sk.key, &sk.obs) {
			continue
		}
		version, err := w.c.vers.next()
		if err != nil {
			return
		}
		hdr := record.Header{Kind: record.KindDelete, KeyLen: uint32(len(sk.key)), CTime: w.c.opts.Clock().UnixNano(), Version: version}
		if err := w.appendLocked(h, hdr, sk.key, nil, true, nil, nil); err != nil {
			return
		}
	}
}

// writeForgotten appends tombstones for the keys of failed batches, except keys written again
// since (in the index or an unflushed batch: that newer record decides). The caller holds mu.
func (w *writer) writeForgotten() {
	for len(w.forgotten) > 0 && !w.closed {
		key := w.forgotten[0]
		w.forgotten = w.forgotten[1:]
		h := record.KeyHash(key)
		if _, ok := w.c.idx.Get(h); ok {
			continue
		}
		if _, ok := w.c.unflushed.lookup(h, key); ok {
			continue
		}
		version, err := w.c.vers.next()
		if err != nil {
			return
		}
		hdr := record.Header{Kind: record.KindDelete, KeyLen: uint32(len(key)), CTime: w.c.opts.Clock().UnixNano(), Version: version}
		var m *writeMeta
		if w.c.probationOn() {
			// The record the tombstone hides may be in either region: it goes to main, in a
			// segment newer than every live one (region.go).
			m = &writeMeta{toMain: true}
			w.c.segs.raiseMainFloor(w.c.segs.lastID.Load() + 1)
		}
		if err := w.appendLocked(h, hdr, key, nil, true, nil, m); err != nil {
			return
		}
	}
}

// appendLocked is append with mu held. Waiting for a batch releases mu, so a conditional
// write's check (stillObserved) is made once the batch is there, just before the record goes
// in.
func (w *writer) appendLocked(h uint64, hdr record.Header, key, value []byte, copyValue bool, held *memtier.Entry, m *writeMeta) error {
	defer func() {
		if held != nil {
			w.c.mem.Discard(held) // the record was not appended
		}
	}()
	n := hdr.Len()
	for {
		r, ghost := w.regionFor(h, key, m)
		b, waited, err := w.openBatch(r)
		if err != nil {
			return err
		}
		if waited {
			continue // mu was released: the key's newest record may have moved meanwhile
		}
		if b.Fits(n) {
			if w.intentsFull() {
				// Every slot of the intent log holds a write not yet committed: cut and wait
				// for commits (intents.go), then look again.
				if err := w.cutAll(); err != nil {
					return err
				}
				w.cond.Wait()
				continue
			}
			if err := w.stillObserved(h, key, m.observed()); err != nil {
				return err
			}
			// From the check to here mu is held: the record is the key's newest now, and the
			// streams of the key in progress are older.
			if len(w.streams) > 0 {
				w.supersede(h, key)
			}
			b.Append(h, hdr, key, value, attrsOf(m), copyValue)
			if held != nil {
				b.SetLastHeld(held)
				held = nil
			}
			w.intend(h, hdr.Version)
			if m != nil && m.hits > 0 {
				b.SetLastHits(m.hits)
			}
			if ghost {
				w.c.admitGhost(h)
			}
			if !b.Fits(record.HeaderSize + 64) {
				return w.cut(r)
			}
			return nil
		}
		if err := w.cut(r); err != nil {
			return err
		}
	}
}

// openBatch returns region r's open batch, taking a free one (or waiting for one) if there is
// none; waited says it released mu to wait, and the caller must look at what it decided before
// the call again. The caller holds mu.
func (w *writer) openBatch(r region) (_ *batch.Batch, waited bool, _ error) {
	for w.open[r] == nil {
		if w.closed {
			return nil, waited, ErrClosed
		}
		var b *batch.Batch
		switch {
		case len(w.free) > 0:
			b = w.free[len(w.free)-1]
			w.free = w.free[:len(w.free)-1]
		case w.allocated < w.c.opts.MaxInflightBatches+w.regions():
			b = batch.New(w.c.opts.WriteBufferSize, w.c.opts.directWrites())
			w.allocated++
		default:
			w.c.stats.putWaits.Add(1)
			w.cond.Wait()
			waited = true
			continue
		}
		b.Stream = int(r)
		w.open[r] = b
		w.openSince[r] = time.Now()
		w.c.unflushed.add(b)
		w.intendFrom(b)
	}
	return w.open[r], waited, nil
}

// regions is the number of regions writes go to: each may have a batch open.
func (w *writer) regions() int {
	if w.c.probationOn() {
		return int(numRegions)
	}
	return 1
}

// cutAll cuts every region's open batch. The caller holds mu.
func (w *writer) cutAll() error {
	var first error
	for r := range numRegions {
		if err := w.cut(r); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// cut seals region r's open batch, has the layout place it (in the region's active segment,
// rotating to a new segment when it does not fit) and queues it for a flush worker. The caller
// holds mu; cut may release it while it waits for room under MaxSize (layout.room), but never
// once it has taken the batch, so batches are placed in the order they were cut.
func (w *writer) cut(r region) error {
	for {
		b := w.open[r]
		if b == nil || b.Len() == 0 {
			return nil
		}
		ready, err := w.c.layout.room(r, b.SealedSize(), b.Len())
		if err != nil {
			return err
		}
		if ready {
			break
		}
	}
	b := w.open[r]
	w.open[r] = nil
	w.lastCut = time.Now()
	bufs, n := b.Seal()
	job, err := w.c.layout.place(r, b, bufs, n)
	w.nextSeq++
	job.seq = w.nextSeq
	w.toWrite.push(job)
	return err
}

// breakLocked makes the writer refuse every further write with err, for good: after a segment
// file could not be removed, or its removal not made durable, evicting the next one could leave
// a newer segment gone and an older one back after a crash, and with it a value that was
// deleted or overwritten. Reads go on; reopening the cache recovers. The caller holds mu.
func (w *writer) breakLocked(err error) error {
	if w.broken == nil {
		if !errors.Is(err, ErrWriteFailed) {
			err = fmt.Errorf("%w: %w", ErrWriteFailed, err)
		}
		w.broken = err
		w.lastErr = err
		w.c.stats.flushErrors.Add(1)
	}
	return w.broken
}

// brokenLocked is the error the writer refuses writes with, or nil. The caller holds mu.
func (w *writer) brokenLocked() error { return w.broken }

// waitLocked waits on cond. The caller holds mu; Wait releases it meanwhile.
func (w *writer) waitLocked() { w.cond.Wait() }

// wake wakes the goroutines waiting on cond.
func (w *writer) wake() {
	w.mu.Lock()
	w.cond.Broadcast()
	w.mu.Unlock()
}

// queueSealLocked queues the seal of s, whose records end at base, behind every job queued
// before it. The caller holds mu.
func (w *writer) queueSealLocked(s *segHandle, base int64) {
	w.nextSeq++
	w.toWrite.push(&flushJob{seq: w.nextSeq, seg: s, seal: true, base: base})
}

// outrunLocked tells the PutFrom calls writing into s to give up at their next chunk. The
// caller holds mu.
func (w *writer) outrunLocked(s *segHandle) {
	for _, st := range w.streams {
		if st.seg == s {
			st.evicting.Store(true)
		}
	}
}

// dataBytes is Stats.DataBytes (segmentLayout.dataBytes), read under mu.
func (w *writer) dataBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.segs.dataBytes()
}

// takeUnreported returns the failure no caller has been told of yet, wrapped in
// ErrWriteFailed, and marks it told; nil if there is none.
func (w *writer) takeUnreported() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.failErr
	w.failErr = nil
	if err != nil && !errors.Is(err, ErrWriteFailed) {
		err = fmt.Errorf("%w: %w", ErrWriteFailed, err)
	}
	return err
}

// brokenErr is the error the writer refuses writes with, or nil.
func (w *writer) brokenErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.broken
}

// drain cuts the open batch and waits until everything cut so far is committed. It returns an
// error wrapping ErrWriteFailed if a batch failed to write meanwhile.
func (w *writer) drain(consume bool) error {
	before := w.c.stats.flushErrors.Load()
	for round := 0; ; round++ {
		w.mu.Lock()
		w.writeForgotten()
		if err := w.cutAll(); err != nil && w.failErr == nil {
			w.failErr = err
		}
		for r := range numRegions {
			if w.c.segs.poisonedActive(r) {
				// A failed batch left a gap: seal the segment so that what was written
				// after the gap is reachable through its footer before Drain returns.
				w.c.segs.sealActive(r)
			}
		}
		target := w.nextSeq
		w.mu.Unlock()
		w.waitCommitted(target)
		w.mu.Lock()
		again := w.c.segs.anyPoisonedActive() || len(w.forgotten) > 0 && w.failErr == nil
		w.mu.Unlock()
		if !again || round == 8 {
			break
		}
	}
	// A failure not yet reported to anyone (failErr) is reported here too, even if it happened
	// before this drain began: a Flush that returns nil promises the next Put no earlier error.
	w.mu.Lock()
	pending := w.failErr != nil
	if consume {
		w.failErr = nil // reported here, not again by the next Put
	}
	broken := w.broken
	w.mu.Unlock()
	if broken != nil {
		return broken
	}
	if w.c.stats.flushErrors.Load() == before && !pending {
		return nil
	}
	return w.lastError()
}

// failed reports err, from a durable step of the commit goroutine, like a failed batch: to the
// next caller (Put, Delete, Flush) and in Stats.FlushErrors.
func (w *writer) failed(err error) {
	w.c.stats.flushErrors.Add(1)
	w.mu.Lock()
	w.failErr = err
	w.lastErr = err
	w.mu.Unlock()
}

// sealed notes the end of a segment's seal (err says whether it failed) and wakes a rotation
// waiting in makeRoom to evict it. A failed seal loses nothing (the segment is scanned on the
// next open), so it is not returned to a caller as a failed batch is: it is counted in
// Stats.FlushErrors and noted in Stats.LastCorruption, and Close reports it if it happens
// during Close.
func (w *writer) sealed(err error) {
	w.mu.Lock()
	if err != nil {
		w.lastErr = err
	}
	w.cond.Broadcast()
	w.mu.Unlock()
}

// lastError is the last flush error, wrapped in ErrWriteFailed.
func (w *writer) lastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if errors.Is(w.lastErr, ErrWriteFailed) {
		return w.lastErr
	}
	return fmt.Errorf("%w: %w", ErrWriteFailed, w.lastErr)
}

func (w *writer) waitCommitted(seq uint64) {
	w.commitMu.Lock()
	for w.committed < seq {
		w.commitCond.Wait()
	}
	w.commitMu.Unlock()
}

func (w *writer) flushWorker() {
	defer w.workers.Done()
	for {
		job, ok := w.toWrite.pop()
		if !ok {
			return
		}
		if job.b != nil && job.err == nil {
			start := time.Now()
			job.err = w.c.layout.write(job)
			w.c.stats.flushNanos.Add(uint64(time.Since(start)))
		}
		w.done.push(job)
	}
}

// commitLoop applies finished jobs in seq order.
func (w *writer) commitLoop() {
	defer w.wg.Done()
	waiting := make(map[uint64]*flushJob)
	next := uint64(1)
	for {
		job, ok := w.done.pop()
		if !ok {
			return
		}
		waiting[job.seq] = job
		for {
			j, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			w.commit(j)
			w.commitMu.Lock()
			w.committed = next
			w.commitCond.Broadcast()
			w.commitMu.Unlock()
			next++
		}
	}
}

func (w *writer) commit(j *flushJob) {
	c := w.c
	if j.seal {
		c.segs.seal(j.seg, j.base)
		return
	}
	if j.err == nil && j.seg != nil && j.seg.gapAt > 0 && j.offset() > j.seg.gapAt {
		// Placed behind a batch of its segment that failed, before the failure was known: a
		// recovery scan stops at the gap, so if the segment's seal failed too, this record
		// would be cut off at the next open and its key would read as an older value. It is
		// lost with the batch before it (finding 25 of docs/RELIABILITY.md).
		j.err = fmt.Errorf("%w: segment %d: written behind a batch that failed at offset %d", ErrWriteFailed, j.seg.id, j.seg.gapAt)
	}
	if j.stream != nil && j.err == nil {
		c.commitStream(j)
		c.segs.reclaim()
		return
	}
	if j.err != nil {
		// The batch (or streamed record) is lost. Forget every key it touched: a Put in it must
		// not fall back to the key's older value (a newer one was acknowledged), and a Delete
		// in it stays done while the process lives.
		var keys [][]byte
		if j.stream != nil {
			c.idx.Delete(j.stream.Hash) // published at once by endStream, or the older record
			keys = [][]byte{j.key}
		} else {
			keys = c.layout.lose(j)
		}
		c.stats.flushErrors.Add(1)
		w.mu.Lock()
		w.forgotten = append(w.forgotten, keys...)
		w.failErr = j.err
		w.lastErr = j.err
		// Its range in the segment is now a gap that a recovery scan would stop at: the segment
		// gets no more batches and is sealed at the next cut or drain, and whatever was placed
		// behind the gap before this commit is lost too (above).
		if j.seg != nil {
			w.c.segs.poison(j.seg)
			if j.seg.gapAt == 0 || j.offset() < j.seg.gapAt {
				j.seg.gapAt = j.offset()
			}
		}
		w.mu.Unlock()
		if j.stream != nil {
			c.segs.reclaim()
			return
		}
	} else {
		c.layout.commit(j)
	}
	w.mu.Lock()
	w.c.unflushed.drop(j.b)
	delete(w.intentFrom, j.b)
	w.recycle(j.b)
	w.intentsDone()
	w.mu.Unlock()
	c.segs.reclaim()
}

// recycle returns b to the free list, with the memory tier's entries prepared for its records
// and not published given up. The caller holds mu.
func (w *writer) recycle(b *batch.Batch) {
	w.c.discardPrepared(b)
	b.Reset()
	w.free = append(w.free, b)
	w.cond.Broadcast()
}

// forget queues keys whose records were lost (to damage found by recovery) for tombstones, so
// that none of them falls back to an older record after a restart; drain writes them.
func (w *writer) forget(keys [][]byte) {
	w.mu.Lock()
	w.forgotten = append(w.forgotten, keys...)
	w.mu.Unlock()
}

// idleRelease is how long the writer waits with nothing to write before it lets go of its
// write buffers: FlushInterval times this.
const idleRelease = 10

// releaseIdle drops the free write buffers once nothing was written for idleRelease flush
// intervals and nothing is in flight, so an idle cache holds its index and filter and little
// else; the next write allocates a buffer again. The caller holds mu.
func (w *writer) releaseIdle() {
	if len(w.free) == 0 || w.open != [numRegions]*batch.Batch{} || len(w.c.unflushed.batches()) > 0 ||
		time.Since(w.lastCut) < idleRelease*w.c.opts.FlushInterval {
		return
	}
	w.allocated -= len(w.free)
	clear(w.free)
	w.free = w.free[:0]
	w.c.stats.bufferReleases.Add(1)
}

// bufferBytes is the memory the write buffers hold: the arenas of every batch allocated.
func (w *writer) bufferBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, b := range w.free {
		n += b.Capacity()
	}
	for _, b := range w.c.unflushed.batches() {
		n += b.Capacity()
	}
	return n
}

// pendingBlobs is what the write buffer changes in the index's count of blobs: keys whose newest
// buffered record is a put and that the index does not hold, less keys whose newest buffered
// record is a delete and that it does.
func (w *writer) pendingBlobs() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	live := w.c.unflushed.batches() // newest first
	newest := make(map[uint64]record.Kind)
	for i := len(live) - 1; i >= 0; i-- {
		for _, e := range live[i].Entries() {
			newest[e.Hash] = e.Kind
		}
	}
	var n int64
	for h, k := range newest {
		_, indexed := w.c.idx.Get(h)
		switch {
		case k == record.KindPut && !indexed:
			n++
		case k == record.KindDelete && indexed:
			n--
		}
	}
	return n
}

// ticker cuts a partly filled batch that has waited FlushInterval.
func (w *writer) ticker() {
	defer w.wg.Done()
	t := time.NewTicker(max(w.c.opts.FlushInterval/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			w.writeStale()
			w.releaseIdle()
			for r, b := range w.open {
				if b != nil && b.Len() > 0 && time.Since(w.openSince[r]) >= w.c.opts.FlushInterval {
					if err := w.cut(region(r)); err != nil && w.failErr == nil {
						w.failErr = err
					}
				}
			}
			w.mu.Unlock()
		}
	}
}

// close drains, seals the active segment and stops the goroutines. Puts after close get
// ErrClosed; Puts waiting for a batch are woken and get ErrClosed too.
func (w *writer) close() {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return
	}
	// Drain first, in rounds: a batch that fails while it is written is committed (and its keys
	// forgotten) only during the wait, and the tombstones that keep those keys from falling
	// back to older records after a restart must be written before the writer closes.
	_ = w.drain(false)
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.writeForgotten()
	_ = w.cutAll()
	w.closed = true
	for r := range numRegions {
		w.c.segs.sealActive(r)
	}
	w.cond.Broadcast()
	w.mu.Unlock()
	// Streams in progress stop at their next chunk; the last of a segment queues its seal.
	w.streamWG.Wait()
	w.mu.Lock()
	target := w.nextSeq
	w.mu.Unlock()
	w.waitCommitted(target)
	close(w.stop)
	w.toWrite.close()
	w.workers.Wait() // no worker can push on done after this
	w.done.close()
	w.wg.Wait()
}
