package blobcache

import (
	"errors"
	"fmt"
	"time"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/policy"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
)

// Reinsertion (PolicyReinsert): the records of the oldest segment that were hit since they were
// written are written again at the head before the segment is evicted, so that a popular blob
// is not evicted with the unpopular ones around it.
//
// Where the counts live: every index entry has a two-bit hit count (index.Index.Touch, Hits),
// raised by a read that returned bytes of the record at that location, saturating at
// index.MaxHits, and reset by every Put of the key. No lock beyond the index shard's read lock,
// no memory beyond a quarter of a byte a slot.
//
// When: the writer pokes the reinserter, a goroutine of its own, at every rotation and every
// seal. Once the disk is within two segments of MaxSize, the oldest sealed segment is the next
// to go, and the reinserter scans it once: it reads its footer, and for each put whose index
// entry still points at it with hits, and that the policy finds worth copying (policy.Rules.Copy),
// reads the record (checking header, key,
// value and attributes; damage is never copied), skips it if it is expired or invalidated, and
// appends the same record bytes (version, expiry, flags, attributes, checksum and creation time
// kept) to the open batch, under the writer's lock, as a conditional write: only if the key's
// newest record is still the one read (no newer record in the write buffer, the same index
// location). A Put, a Delete or an eviction of the key that lands first makes the copy a no-op;
// one that lands after it is newer in commit order and wins. A crash is no different from one
// after any write: recovery applies segments in id order, and the copy, in a newer segment than
// the original and older than any later write of its key, is what the original was.
//
// The bound: reinserting n bytes spends n bytes of credit, which Puts and Deletes earn at
// ReinsertShare/(1-ReinsertShare) per byte written (capped at one segment), and, with
// WriteBudget, the budget's bytes. A record with no credit left is dropped (counted), never
// waited for; the reinserter takes the writer's lock once per record for a copy into the
// batch, as a Put does, so Puts never wait for it beyond that. The scan happens one
// segment's fill ahead of the eviction: a record first hit after its segment was scanned goes
// with the segment.

// reinserter scans the next segment to be evicted for records to write again.
type reinserter struct {
	c    *Cache
	kick chan struct{} // capacity 1: a poke while a scan runs is remembered once
	sync chan chan struct{}
	stop chan struct{}
	done chan struct{}
	last [numRegions]uint32 // the newest segment scanned, by region; owned by run
	buf  []byte             // the record being copied, during a scan (dropped after it); owned by run
}

func newReinserter(c *Cache) *reinserter {
	r := &reinserter{c: c, kick: make(chan struct{}, 1), sync: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// poke asks for a look at the oldest segment. It never blocks.
func (r *reinserter) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// close stops the reinserter and waits for it. A copy it appended before is written like any
// Put.
func (r *reinserter) close() {
	close(r.stop)
	<-r.done
}

func (r *reinserter) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
			r.scanOldest()
		case ch := <-r.sync:
			r.scanOldest()
			close(ch)
		}
	}
}

// wait returns once the reinserter has looked at the oldest segment (scanned it if it is due):
// the way for tests to wait for reinsertion instead of sleeping.
func (r *reinserter) wait() {
	ch := make(chan struct{})
	select {
	case r.sync <- ch:
		<-ch
	case <-r.done:
	}
}

func (r *reinserter) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// scanOldest scans the oldest segment of each region if it is sealed, not scanned yet, and the
// disk is within about a segment's worth of writes of MaxSize. In the probation region, the
// records copied are promotions into main.
func (r *reinserter) scanOldest() {
	c := r.c
	if c.diskBytes.Load() <= c.opts.MaxSize-2*c.opts.SegmentSize {
		return
	}
	var oldest [numRegions]*segHandle
	for _, s := range c.segs.table.Load().list {
		if s != nil && oldest[s.region] == nil {
			oldest[s.region] = s
		}
	}
	for _, s := range oldest {
		if s != nil && !s.open.Load() {
			// A segment that takes no more records but whose seal is still in the pipeline is
			// waited for, not passed over: the regions are then scanned in one order whatever
			// the seal's timing (TestPolicyReference relies on it).
			r.waitSealed(s)
			r.scan(s)
		}
	}
}

// waitSealed waits until s is sealed (a seal that fails marks it sealed too) or the reinserter is
// stopping. A seal waiting for the kernel's write-back is hurried (writeback.go): s is the oldest
// segment, soon evicted. Seals then take a sync and a footer write, so a short poll costs nothing
// noticeable, and unlike a wait on the writer's condition it cannot outlive Close.
func (r *reinserter) waitSealed(s *segHandle) {
	r.c.segs.hurrySeal(s)
	for !s.sealed.Load() && !r.stopping() {
		time.Sleep(50 * time.Microsecond)
	}
}

// scan writes the records of s that were hit again, unless s was scanned already.
func (r *reinserter) scan(s *segHandle) {
	c := r.c
	if s.id <= r.last[s.region] || !s.sealed.Load() || !s.tryRef() {
		return
	}
	defer s.unref()
	if c.segs.table.Load().get(s.id) != s {
		return // evicted meanwhile
	}
	r.last[s.region] = s.id
	defer func() { r.buf = nil }() // an idle cache holds no copy buffer (up to a write buffer)
	fi, err := s.f.Stat()
	if err != nil {
		return
	}
	count, dataEnd, err := segment.CheckFooter(s.f, fi.Size())
	if err != nil {
		return // no footer (a seal that failed): nothing is reinserted from it
	}
	perBlob := c.diskBytes.Load() / int64(max(c.idx.Len(), 1))
	// The footer is read a chunk at a time: a segment of small records has millions of entries.
	_ = segment.EachFooterEntry(s.f, dataEnd, count, func(e segment.Entry) error {
		if e.Kind != record.KindPut {
			return nil
		}
		loc := index.Loc{Segment: s.id, Offset: e.Offset, Length: e.Length}
		hits := c.idx.Hits(e.Hash, loc)
		if hits == 0 {
			return nil
		}
		keep, ok := c.keep.Copy(policy.Candidate{Region: s.region, Bytes: int64(e.Length), Hits: hits, PerBlob: perBlob})
		if !ok {
			c.stats.reinsertDropped.Add(1)
			return nil
		}
		if r.stopping() || c.segs.table.Load().get(s.id) != s {
			return errStopScan // closing, or evicted: too late for the rest
		}
		r.copyRecord(s, e.Hash, loc, uint8(keep))
		return nil
	}) // an error is the stop, or a footer that no longer reads: nothing more is copied
}

// errStopScan ends a walk over a footer early.
var errStopScan = errors.New("blobcache: footer walk stopped")

// copyRecord reads the record at loc in s (hash h) and appends it again, if it is whole, fresh,
// within the budget and still the key's newest record.
func (r *reinserter) copyRecord(s *segHandle, h uint64, loc index.Loc, hits uint8) {
	c := r.c
	n := int64(loc.Length)
	if int64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	if _, err := s.rd.ReadAt(b, int64(loc.Offset)); err != nil {
		return
	}
	hdr, key, err := record.Decode(b)
	if err == nil && (hdr.Kind != record.KindPut || hdr.Legacy || hdr.Len() != n) {
		err = fmt.Errorf("%w: not a put of %d bytes", record.ErrBadLength, n)
	}
	if err == nil {
		err = record.CheckValue(hdr, b[hdr.ValueOffset():hdr.AttrOffset()])
	}
	if err == nil {
		err = record.CheckAttrs(hdr, b[hdr.AttrOffset():])
	}
	if err != nil {
		// Overwritten and punched out since the index was asked (the writer's check would
		// refuse it), or damaged (a reader will find it): not copied either way.
		return
	}
	var now int64
	if c.vers.fateOf(hdr.Version, hdr.CTime, hdr.Expires, &now) != fresh {
		return
	}
	switch c.w.reinsert(h, hdr, key, b[hdr.ValueOffset():hdr.AttrOffset()], b[hdr.AttrOffset():], loc, hits) {
	case reinsertDone:
		c.bloomAdd(h)
		c.stats.reinserted.Add(1)
		if s.region == probationRegion {
			c.stats.promoted.Add(1)
		}
		c.stats.reinsertedBytes.Add(uint64(n))
	case reinsertOver:
		c.stats.reinsertDropped.Add(1)
	}
}

type reinsertResult uint8

const (
	reinsertDone reinsertResult = iota
	reinsertGone                // the key changed, or the writer is closed or failing
	reinsertOver                // no budget
)

// pokeReinserter asks the reinserter, if eviction reinserts, to look at the oldest segments: one
// may have become due for a scan (a rotation, a seal, an eviction).
func (c *Cache) pokeReinserter() {
	if c.rs != nil {
		c.rs.poke()
	}
}

// countsHits reports whether reads count hits in the index (for the reinserter's choice).
func (c *Cache) countsHits() bool { return c.rs != nil }

// newCredit is the reinsertion credit of c's writer (policy.Credit): none unless eviction
// reinserts.
func newCredit(c *Cache) policy.Credit {
	return policy.NewCredit(c.keep, c.opts.ReinsertShare, c.opts.SegmentSize)
}

// earn adds the reinsertion credit of n bytes written by a Put or Delete. The caller holds mu.
func (w *writer) earn(n int64) { w.credit.Earn(n) }

// reinsert appends a copy of the record of key (hash h) at loc, with header hdr, value and
// attrs, if the key's newest record is still the one at loc and the budget allows.
func (w *writer) reinsert(h uint64, hdr record.Header, key, value, attrs []byte, loc index.Loc, hits uint8) reinsertResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.broken != nil {
		return reinsertGone
	}
	n := hdr.Len()
	o := &observation{inIndex: true, loc: loc}
	if !w.unchanged(h, key, o) {
		return reinsertGone
	}
	if !w.credit.Covers(n) || !w.c.keep.AffordsCopy(n) {
		return reinsertOver
	}
	// A copy goes to main, newer than the segment it is copied from (region.go, rule 2).
	w.c.segs.raiseMainFloor(loc.Segment + 1)
	// appendLocked checks o again right before the record goes in, after any wait for a
	// batch or for room (which release mu).
	if err := w.appendLocked(h, hdr, key, value, true, nil, &writeMeta{attrs: attrs, obs: o, toMain: true, hits: hits}); err != nil {
		return reinsertGone
	}
	w.credit.Spend(n)
	return reinsertDone
}
