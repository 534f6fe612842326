package blobcache

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/codec"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// The memory tier (Options.MemorySize; internal/memtier) in the lookup protocol. It is step 3's
// first look: once the index has given the key's location, a tier that holds the record at that
// location serves the read from memory, and the file is not taken. Because an entry is bound to
// its record's location, which no other record has while the process lives (segment ids only
// grow, and blob files' seqs), a key that was overwritten, deleted, evicted or moved by
// reinsertion is never served from an entry of its older record: the index no longer names that
// location. Expiry and InvalidateAll are checked on the entry's header as on one read from disk.
// An entry no lookup can reach any more is not taken out when its record goes: it is never hit,
// and the tier's eviction takes it as it takes any value nobody reads.
//
// What enters: a record's value on its second hit from the segments (the index's hit count for
// the location, before this hit, is at least one), read whole by Get, Open or a ReadAt of the
// whole value, no larger than the tier allows (memtier.MaxEntryShare), while entering pays
// (memoryGate), and checked against the record's CRC-32C as it enters: a value that fails the
// check is damage, counted, and the read is a miss. Values are checked once; a hit from memory
// makes no other pass over them. With MemoryOnWrite a value also enters as its batch is
// committed (admitWritten), before the index names its record's place: a copy made as it was
// written (prepareWritten), or else from the batch's bytes.

// memTag is the tier's tag of the record at loc: its place, unique among the process's records.
func memTag(loc index.Loc) uint64 { return uint64(loc.Segment)<<32 | uint64(loc.Offset) }

// fromMemory looks the record the index gave l up in the memory tier, and counts the lookup
// (Stat's too, which counts no hit or miss of its own). An entry it returns is held: the caller
// releases it (releaseMemory) once done with its bytes. The caller ran idx.Get.
func (l *keyLookup) fromMemory(loc index.Loc) *memtier.Entry {
	if l.c.mem == nil || !l.memOK {
		return nil
	}
	e := l.c.mem.Get(l.h, memTag(loc), l.key)
	st := l.st
	if st == nil {
		st = l.c.stats.stripe(l.h)
	}
	if e != nil || !l.residentOnly {
		st.countMemory(e != nil) // a resident-only read that stops here is asked again
	}
	return e
}

// admitsToMemory reports whether the record l found, of n bytes, enters the memory tier if this
// read brings it in whole: the tier is on, the record is small enough, and this is its second hit
// or later. Otherwise the refusal is counted.
func (l *keyLookup) admitsToMemory(n int64) bool {
	c := l.c
	if c.mem == nil {
		return false
	}
	if !c.mem.Fits(n+memtier.EntryOverhead) || l.hits == 0 || !c.memGate.open(c) {
		c.mem.NoteDeclined()
		return false
	}
	return true
}

// memoryGate tells whether values entering the memory tier pay for the copy and the check they
// cost (and, for large values, the memory the garbage collector then reclaims): over the last
// memWindow admissions asked for, the hits the tier served must be at least memPayoff times the
// values that entered; otherwise one value in memProbe still enters, so that data turning hot is
// noticed. With data read evenly over far more than the tier holds, values would enter and leave
// unread; with a hot set, each is read many times from memory. It starts open.
type memoryGate struct {
	asked, probes atomic.Uint64
	closed        atomic.Bool
	mu            sync.Mutex
	hits, inserts uint64 // at the start of the window
}

const (
	memWindow = 256
	memPayoff = 1
	memProbe  = 8
)

// open reports whether a value may enter now, and once a window reckons the window that ended.
func (g *memoryGate) open(c *Cache) bool {
	if g.asked.Add(1)%memWindow == 0 && g.mu.TryLock() {
		hits, inserts := c.memoryHits(), c.mem.Stats().Inserts
		g.closed.Store(hits-g.hits < memPayoff*(inserts-g.inserts))
		g.hits, g.inserts = hits, inserts
		g.mu.Unlock()
	}
	return !g.closed.Load() || g.probes.Add(1)%memProbe == 0
}

// memoryHits is the reads the memory tier has served.
func (c *Cache) memoryHits() uint64 {
	var n uint64
	for i := range c.stats.stripes {
		n += c.stats.stripes[i].memHits.Load()
	}
	return n
}

// admitToMemory checks value (the whole value of the record l found, with header hdr and
// attributes attrs) against its record's checksums, unless the read checked it already
// (checked), and puts a copy in the memory tier. A value that fails is damage: counted and
// noted, and false (the read is then a miss).
func (l *keyLookup) admitToMemory(hdr record.Header, attrs string, value []byte, checked bool) bool {
	if !checked {
		vc := l.c.readCheck(hdr)
		vc.write(value)
		if err := vc.verify(hdr, l.loc); err != nil {
			l.c.stats.corrupt.Add(1)
			l.c.noteCorruption(err)
			return false
		}
	}
	l.c.mem.Add(l.h, memTag(l.loc), l.key, hdr, attrs, value)
	return true
}

// memoryReader is Get's reader of value bytes [off, off+n) of e (n < 0: to the end), which lies
// in memory: no file. Up to OpenHead bytes are copied into a pooled buffer and e is released at
// once; a larger range, or any range into a Reader the caller owns (GetInto, whose hold costs no
// allocation), is read from e in place, and the Reader holds e until it delivers its last byte or
// is closed, with a cleanup that releases it for a Reader dropped without either (the tier's
// buffers lie outside the Go heap).
func (c *Cache) memoryReader(dst *Reader, e *memtier.Entry, off, n int64) *Reader {
	vlen := int64(len(e.Value))
	off = min(off, vlen)
	end := vlen
	if n >= 0 {
		end = min(end, off+n)
	}
	r := c.newReader(dst)
	r.size, r.hdr, r.attrs = end-off, e.Hdr, e.Attrs
	if r.size <= OpenHead && r.owned == nil {
		r.buf = getBuf(int(r.size))
		copy(*r.buf, e.Value[off:end])
		r.val = *r.buf
		c.mem.Release(e)
	} else {
		r.val = e.Value[off:end]
		r.holdMemory(e)
	}
	if r.size == 0 {
		r.finish()
	}
	return r
}

// readAtMemory is ReadAt's step 3 from the memory tier: the value bytes [off, off+len(p)) of
// the record at l.loc, copied into p, if the tier holds it (done false otherwise). An expired or
// invalidated record is a miss, as from disk.
func (l *keyLookup) readAtMemory(p []byte, off int64) (n int, err error, done bool) {
	n, hdr, ok := l.c.mem.CopyTo(l.h, memTag(l.loc), l.key, p, off)
	l.st.countMemory(ok)
	if !ok {
		return 0, nil, false
	}
	if !l.live(hdr.Version, hdr.CTime, hdr.Expires) {
		l.miss()
		return 0, ErrNotFound, true
	}
	l.hit()
	l.touched()
	if n < len(p) {
		return n, io.EOF, true
	}
	return n, nil, true
}

// writtenSize is what admitWritten and prepareWritten ask the tier to fit for a record of length
// bytes whose value decompresses to dataLen (0 without a codec): at least the entry's Size,
// whatever the record's key and attributes.
func writtenSize(length int64, dataLen uint32) int64 {
	return length + int64(dataLen) + memtier.EntryOverhead
}

// heldOnWrite reports whether every value of batch b enters the memory tier as the batch is
// committed (admitWritten), as far as their sizes tell: with MemoryOnWrite, each put the tier fits.
func (c *Cache) heldOnWrite(b *batch.Batch) bool {
	if !c.admitsOnWrite() {
		return false
	}
	for _, be := range b.Entries() {
		if be.Kind == record.KindPut && !c.mem.Fits(writtenSize(int64(be.Length), be.DataLen)) {
			return false
		}
	}
	return true
}

// prepareWritten makes the memory tier's entry for a record being written (MemoryOnWrite), with
// header hdr (stamped and sealed; its codec's, if compressed), key, the value as given (value,
// before any compression) and attributes attrs: the copy is made while the caller has the value's
// bytes at hand, just checked, rather than from the write buffer at commit, and goes with the
// record into its batch (writer.append), to be published as the batch is committed
// (admitWritten). Nil if the tier does not take values on write, or not this one.
func (c *Cache) prepareWritten(h uint64, hdr record.Header, key, value, attrs []byte) *memtier.Entry {
	if !c.admitsOnWrite() {
		return nil
	}
	if !c.mem.Fits(writtenSize(hdr.Len(), hdr.DataLen)) {
		c.mem.NoteDeclined()
		return nil
	}
	return c.mem.Prepare(h, key, plainHeader(hdr), string(attrs), value)
}

// discardPrepared gives up the memory tier's entries prepared for records of b that were not
// published (a batch that was lost), before b is reused.
func (c *Cache) discardPrepared(b *batch.Batch) {
	if !c.admitsOnWrite() {
		return
	}
	for i := range b.Len() {
		if e, ok := b.TakeHeld(i).(*memtier.Entry); ok {
			c.mem.Discard(e)
		}
	}
}

// admitWritten puts the value of record i of batch b, committed at loc, in the memory tier
// (MemoryOnWrite): the entry prepared for it as it was written (prepareWritten), or else a copy of
// the batch's bytes. A record the batch holds in one piece is copied once, into the tier; one that
// spans its chunks is first gathered (batch.RecordBytes).
func (c *Cache) admitWritten(b *batch.Batch, i int, h uint64, loc index.Loc) {
	if e, ok := b.TakeHeld(i).(*memtier.Entry); ok {
		c.mem.Publish(e, memTag(loc))
		return
	}
	if be := b.Entries()[i]; !c.mem.Fits(writtenSize(int64(be.Length), be.DataLen)) {
		c.mem.NoteDeclined()
		return
	}
	rec := b.RecordBytes(i, nil) // a copy only for a record across the batch's chunks

	hdr, key, err := record.Decode(rec)
	if err != nil {
		return // the batch's own bytes: not reached; the value enters on its second hit instead
	}
	v := hdr.ValueOffset()
	value, attrs := rec[v:v+int64(hdr.ValueLen)], string(rec[v+int64(hdr.ValueLen):])
	if hdr.Codec != 0 {
		// Held decompressed (compress.go): decompressed once here, from the bytes just written.
		buf := getBuf(int(hdr.DataLen))
		defer putBuf(buf)
		if err := codec.DecodeAll(codec.Codec(hdr.Codec), *buf, value); err != nil {
			return // not reached (the batch's own bytes); the value enters on its second hit instead
		}
		value, hdr = *buf, plainHeader(hdr)
	}
	c.mem.Add(h, memTag(loc), key, hdr, attrs, value)
}
