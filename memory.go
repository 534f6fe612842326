package blobcache

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

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
//
// What enters: a record's value on its second hit from the segments (the index's hit count for
// the location, before this hit, is at least one), read whole by Get, Open or a ReadAt of the
// whole value, no larger than the tier allows (memtier.MaxEntryShare), while entering pays
// (memoryGate), and checked against the record's CRC-32C as it enters: a value that fails the
// check is damage, counted, and the read is a miss. Values are checked once; a hit from memory
// makes no other pass over them.

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
	if e != nil {
		st.memHits.Add(1)
	} else {
		st.memMisses.Add(1)
	}
	return e
}

// admitsToMemory reports whether the record l found, of n bytes, enters the memory tier if this
// read brings it in whole: the tier is on, the record is small enough, and this is its second hit
// or later. Otherwise the refusal is counted.
func (l *keyLookup) admitsToMemory(n int64) bool {
	c := l.c
	if c.mem == nil || !l.memOK {
		return false
	}
	if !c.mem.Fits(n+memtier.EntryOverhead) || c.idx.Hits(l.h, l.loc) == 0 || !c.memGate.open(c) {
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
// attributes attrs) against its CRC-32C and puts a copy in the memory tier. A value that fails
// is damage: counted and noted, and false (the read is then a miss).
func (l *keyLookup) admitToMemory(hdr record.Header, attrs string, value []byte) bool {
	if err := record.CheckValue(hdr, value); err != nil {
		l.c.stats.corrupt.Add(1)
		l.c.noteCorruption(fmt.Errorf("%w: segment %d offset %d: %w", ErrCorrupt, l.loc.Segment, l.loc.Offset, err))
		return false
	}
	l.c.mem.Add(l.h, memTag(l.loc), l.key, hdr, attrs, value)
	return true
}

// memoryReader is Get's reader of value bytes [off, off+n) of e (n < 0: to the end), which lies
// in memory: no buffer, no file. The Reader holds e until it delivers its last byte or is
// closed; one dropped without either leaves e's buffer to the garbage collector rather than to
// the tier's reuse.
func (c *Cache) memoryReader(e *memtier.Entry, off, n int64) *Reader {
	vlen := int64(len(e.Value))
	off = min(off, vlen)
	end := vlen
	if n >= 0 {
		end = min(end, off+n)
	}
	r := &Reader{c: c, val: e.Value[off:end], size: end - off, hdr: e.Hdr, attrs: e.Attrs, mem: e}
	if r.size == 0 {
		r.finish()
	}
	return r
}

// memoryReadAt is ReadAt's copy of value bytes [off, off+len(p)) of e into p. It releases e.
func (c *Cache) memoryReadAt(e *memtier.Entry, p []byte, off int64) (int, error) {
	want := clampTo(p, off, int64(len(e.Value)))
	copy(want, e.Value[min(off, int64(len(e.Value))):])
	c.mem.Release(e)
	if len(want) < len(p) {
		return len(want), io.EOF
	}
	return len(want), nil
}

// forgetMemory drops the memory tier's entry of key hash h, whose record was deleted or evicted:
// it could not be served (the index no longer names its record), and its memory is better used.
func (c *Cache) forgetMemory(h uint64) {
	if c.mem != nil {
		c.mem.Remove(h)
	}
}
