package memtier

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/ghost"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/sizeclass"
)

// SmallShare is the share of the capacity the small (probation) queue holds, as S3-FIFO's.
const SmallShare = 0.1

// MaxEntryShare is the largest share of the capacity one entry may take, and MaxEntry the most
// bytes: a larger value is read in pieces (it would take a buffer of its size to enter), and a
// few of them would be most of the tier.
const (
	MaxEntryShare = 1.0 / 16
	MaxEntry      = 4 << 20
)

// EntryOverhead is what an entry costs beyond its key, value and attributes: the Entry, its
// slot in a shard's map and in a queue. Bytes counts it.
const EntryOverhead = int64(unsafe.Sizeof(Entry{})) + 64

// Entry is one record's value held in memory. Its fields are set when it is made (Tier.Prepare),
// its Tag when it enters (Tier.Publish), and never change after; Value lies in a buffer of the
// tier's, which it takes back, for another entry, once neither the tier nor a reader holds the
// entry (refs).
//
// Value comes first in the buffer, at its start (a page boundary for a buffer mapped on its own).
// Where a value starts in its page decides how fast the kernel copies it into a socket: on the
// AMD machine of docs/BENCHMARKS.md (session 25), a copy whose destination lay a few bytes past
// the source modulo the page size ran at a third of the speed, and values placed behind their
// key hit that with memaslap's keys and replies; at the page's start they did not.
//
// Key lies in the Entry itself when it has at most inlineKey bytes, and in the buffer behind the
// value otherwise. A hit compares the key, so an inline key is one memory access fewer than a
// key at the far end of the value (on a page of its own for a large one), and a value of a size
// class's exact size (4 KiB) fills its class instead of spilling into the next one.
type Entry struct {
	Hash   uint64
	Tag    uint64 // the record's place on disk
	Key    []byte
	inline [inlineKey]byte // Key's bytes, when they fit
	Hdr    record.Header
	Attrs  string
	Value  []byte

	buf []byte // Key and Value, and the rest of a size class
	// resident is the bytes of buf the entry counts for: the pages written so far of a buffer
	// mapped on its own (the rest of its class is never touched, so never resident), all of
	// one cut from a slab.
	resident int
	refs     atomic.Int32  // the tier's reference, while it holds the entry, and each reader's
	hits     atomic.Uint32 // saturating at maxHits
	state    atomic.Uint32 // queue it is in (inSmall, inMain) or gone
}

// inlineKey is the longest key an Entry holds in itself (memaslap's keys, and most others).
const inlineKey = 64

const (
	inSmall = iota
	inMain
	gone
)

const maxHits = 3

// Size is the memory the entry counts for.
func (e *Entry) Size() int64 {
	return int64(e.resident+len(e.Attrs)) + EntryOverhead
}

const numShards = 64

type shard struct {
	mu sync.RWMutex
	m  map[uint64]*Entry
}

// Tier is the memory tier. The zero Tier is not usable: call New.
type Tier struct {
	capacity int64
	maxEntry int64
	shards   [numShards]shard

	bytes atomic.Int64
	items atomic.Int64

	// free holds buffers of entries no one holds any more, by size class, for the next entries:
	// values that come and go then reuse memory instead of leaving it to the garbage collector.
	// freeBytes counts them; Bytes and freeBytes together stay within the capacity.
	freeMu    sync.Mutex
	free      [numClasses][]freeBuffer
	freeBytes int64
	arena     arena // where buffers come from and go back to

	mu    sync.Mutex // the queues and the ghost
	small queue
	main  queue
	// smallBytes is the bytes of the entries in the small queue that are not gone.
	smallBytes int64
	// stale counts the queue slots of entries gone before they reached the head: they keep
	// their values alive, so the queues are compacted once they are half of them.
	stale int
	ghost *ghost.Set

	inserts, evictions, declined atomic.Uint64

	closed bool // Close was called (under mu): nothing enters any more
}

// New returns a tier of capacity bytes (> 0).
func New(capacity int64) *Tier {
	t := &Tier{capacity: capacity, maxEntry: min(int64(float64(capacity)*MaxEntryShare), MaxEntry)}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*Entry)
	}
	t.ghost = ghost.New(minGhost)
	return t
}

func (t *Tier) shard(h uint64) *shard { return &t.shards[h>>58] }

// Get returns the entry of key (hash h) for the record tagged tag, held for the caller, who
// calls Release once done with its bytes, and notes the hit for eviction; nil if the tier holds
// none. The caller counts hits and misses.
func (t *Tier) Get(h, tag uint64, key []byte) *Entry {
	s := t.shard(h)
	s.mu.RLock()
	e := s.m[h]
	if e != nil && e.Tag == tag {
		e.refs.Add(1) // the tier's reference is held while the entry is in the map
	} else {
		e = nil
	}
	s.mu.RUnlock()
	if e == nil {
		return nil
	}
	if !bytes.Equal(e.Key, key) {
		t.Release(e)
		return nil
	}
	if e.hits.Load() < maxHits {
		e.hits.Add(1)
	}
	return e
}

// Holds reports whether the tier holds the entry of key (hash h) for the record tagged tag. It
// takes no reference and notes no hit.
func (t *Tier) Holds(h, tag uint64, key []byte) bool {
	s := t.shard(h)
	s.mu.RLock()
	ok := s.holding(h, tag, key) != nil
	s.mu.RUnlock()
	return ok
}

// holding is the shard's entry of key (hash h) for the record tagged tag, or nil. The caller
// holds s.mu.
func (s *shard) holding(h, tag uint64, key []byte) *Entry {
	e := s.m[h]
	if e == nil || e.Tag != tag || !bytes.Equal(e.Key, key) {
		return nil
	}
	return e
}

// CopyTo copies the value bytes [off, off+len(p)) of the entry of key (hash h) for the record
// tagged tag into p, and returns how many it copied, the entry's header, and whether the tier
// holds the entry. The copy is made under the shard's read lock, which keeps the entry from
// leaving (and its buffer from being reused) meanwhile: no reference is taken.
func (t *Tier) CopyTo(h, tag uint64, key, p []byte, off int64) (n int, hdr record.Header, ok bool) {
	s := t.shard(h)
	s.mu.RLock()
	e := s.holding(h, tag, key)
	if e == nil {
		s.mu.RUnlock()
		return 0, hdr, false
	}
	if off < int64(len(e.Value)) {
		n = copy(p, e.Value[off:])
	}
	hdr = e.Hdr
	if e.hits.Load() < maxHits {
		e.hits.Add(1)
	}
	s.mu.RUnlock()
	return n, hdr, true
}

// Release drops a reference Get took (or the tier's own). The last one hands the entry's buffer
// back for another entry.
func (t *Tier) Release(e *Entry) {
	if e.refs.Add(-1) != 0 {
		return
	}
	t.keep(e.buf, e.resident)
}

// freeBuffer is a buffer kept for another entry, with the bytes of it that are resident.
type freeBuffer struct {
	b        []byte
	resident int
}

// keep keeps buf, of which resident bytes are in memory, for another entry of its class while
// that leaves the tier within its capacity, or gives it back.
func (t *Tier) keep(buf []byte, resident int) {
	c := classOf(cap(buf))
	if c < 0 {
		return // made to measure on the heap: the garbage collector's
	}
	t.freeMu.Lock()
	if !t.arena.closed && t.bytes.Load()+t.freeBytes+int64(resident) <= t.capacity {
		t.free[c] = append(t.free[c], freeBuffer{buf, resident})
		t.freeBytes += int64(resident)
	} else {
		t.arena.release(c, buf)
	}
	t.freeMu.Unlock()
}

// Fits reports whether an entry of n bytes (its Size) may enter the tier.
func (t *Tier) Fits(n int64) bool { return n <= t.maxEntry }

// Add puts a copy of key and value in the tier as the entry of hash h for the record tagged
// tag, with the record's header and attributes, replacing the entry of h, and evicts what it
// must first; the copy goes into a buffer an evicted entry left when one fits. False if the
// entry may not enter (too large, or no room).
func (t *Tier) Add(h, tag uint64, key []byte, hdr record.Header, attrs string, value []byte) bool {
	e := t.Prepare(h, key, hdr, attrs, value)
	if e == nil {
		return false
	}
	t.Publish(e, tag)
	return true
}

// Prepare makes the entry a record of key (hash h) is to have once it has its place on disk: a
// copy of key and value, with the record's header and attributes, in a buffer of the tier's
// (the older entry of h, if any, leaves first, and what must is evicted). The entry counts in
// Bytes from now, so the tier stays within its capacity while the record waits for its place,
// but no lookup finds it, and no eviction takes it, until Publish. The caller publishes it or
// gives it up (Discard), once. Nil if it may not enter (too large, or no room).
//
// The copy is made without the tier's lock: a cache prepares a written value while its bytes
// are at hand, and publishes it when its batch is committed.
func (t *Tier) Prepare(h uint64, key []byte, hdr record.Header, attrs string, value []byte) *Entry {
	n := len(value) // the bytes the buffer holds: the value, and a key too long for the Entry
	if len(key) > inlineKey {
		n += len(key)
	}
	size := int64(residentOf(n, 0)+len(attrs)) + EntryOverhead // the least it counts for
	if !t.Fits(size) {
		t.declined.Add(1)
		return nil
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		t.declined.Add(1)
		return nil
	}
	t.remove(h) // the older entry of the hash, if any, leaves first
	if !t.makeRoom(size) {
		t.mu.Unlock()
		t.declined.Add(1)
		return nil
	}
	buf, resident := t.takeBuffer(n)
	// A buffer kept from a larger entry has more of it resident: make room for that too.
	size = int64(resident+len(attrs)) + EntryOverhead
	if !t.makeRoom(size) {
		t.keep(buf, resident)
		t.mu.Unlock()
		t.declined.Add(1)
		return nil
	}
	t.trimFree(size)
	t.bytes.Add(size)
	t.mu.Unlock()
	v := len(value)
	copy(buf, value)
	e := &Entry{Hash: h, Hdr: hdr, Attrs: attrs, Value: buf[:v:v], buf: buf, resident: resident}
	if len(key) <= inlineKey {
		e.Key = e.inline[:len(key):len(key)]
	} else {
		e.Key = buf[v:n:n]
	}
	copy(e.Key, key)
	e.refs.Store(1)
	e.state.Store(gone) // in no queue until Publish
	return e
}

// Publish makes e, which Prepare returned, the entry of its hash for the record tagged tag,
// replacing the one the tier holds, if any. Lookups find it from now on.
func (t *Tier) Publish(e *Entry, tag uint64) {
	e.Tag = tag // before the entry is in the map, which orders it before every lookup's read
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.Discard(e)
		return
	}
	t.remove(e.Hash)
	size := e.Size()
	if t.ghost.Contains(e.Hash) {
		t.ghost.Remove(e.Hash)
		e.state.Store(inMain)
		t.main.push(e)
	} else {
		e.state.Store(inSmall)
		t.small.push(e)
		t.smallBytes += size
	}
	s := t.shard(e.Hash)
	s.mu.Lock()
	s.m[e.Hash] = e
	s.mu.Unlock()
	t.items.Add(1)
	t.inserts.Add(1)
}

// Discard gives up e, which Prepare returned and which was not published: its bytes no longer
// count, and its buffer goes back for another entry.
func (t *Tier) Discard(e *Entry) {
	t.bytes.Add(-e.Size())
	t.Release(e)
}

// Close empties the tier and lets its memory go: every entry leaves (a reader that holds one
// keeps its bytes until it releases it), the buffers kept for reuse are unmapped, and the rest
// of the tier's memory is as its last entries are released. Nothing enters after (Prepare and
// Add refuse, Publish discards). An entry prepared and never published or discarded keeps its
// buffer. A nil Tier is closed already.
func (t *Tier) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	t.freeMu.Lock()
	for c := range t.free {
		for _, f := range t.free[c] {
			t.arena.release(c, f.b)
		}
		t.free[c] = nil
	}
	t.freeBytes = 0
	t.arena.close()
	t.freeMu.Unlock()
	for _, q := range []*queue{&t.small, &t.main} {
		for q.len() > 0 {
			if e := q.pop(); e.state.Load() != gone {
				t.take(e)
			}
		}
	}
	t.smallBytes, t.stale = 0, 0
}

// Mapped is the memory the tier has mapped and not given back: its entries', those a reader
// still holds after Close, the buffers it keeps for reuse and what is left of its slabs.
func (t *Tier) Mapped() int64 {
	t.freeMu.Lock()
	defer t.freeMu.Unlock()
	return t.arena.mapped
}

// makeRoom evicts until size more bytes fit within the capacity; false if they cannot (the tier
// is empty). The caller holds t.mu.
func (t *Tier) makeRoom(size int64) bool {
	for t.bytes.Load()+size > t.capacity {
		if !t.evictOne() {
			return false
		}
	}
	return true
}

// takeBuffer returns a buffer of n bytes (its capacity its size class's), one kept for reuse or
// a new one, and how many of its bytes are resident once n are written.
func (t *Tier) takeBuffer(n int) (buf []byte, resident int) {
	c := classOf(n)
	if c < 0 {
		return make([]byte, n), n
	}
	t.freeMu.Lock()
	if l := len(t.free[c]); l > 0 {
		f := t.free[c][l-1]
		t.free[c][l-1] = freeBuffer{}
		t.free[c] = t.free[c][:l-1]
		t.freeBytes -= int64(f.resident)
		buf, resident = f.b, f.resident
	}
	if buf == nil {
		buf = t.arena.alloc(c)
	}
	t.freeMu.Unlock()
	return buf[:n], residentOf(n, resident)
}

// residentOf is how many bytes of the buffer of an entry of n key and value bytes are resident
// once they are written, when before resident were: for a buffer mapped on its own, the pages
// written (the tail of its class is never touched), at least as many as before; for one cut from
// a slab, its class's size; for one made to measure, n.
func residentOf(n, resident int) int {
	c := classOf(n)
	switch {
	case c < 0:
		return n
	case classSize(c) < slabBytes || !mapsOnDemand:
		return classSize(c)
	}
	return max(resident, (n+pageSize-1)/pageSize*pageSize)
}

// pageSize is the granularity at which a buffer mapped on its own becomes resident.
var pageSize = os.Getpagesize()

// remove drops the entry of h from the map and counts it gone; its queue slot is skipped when it
// reaches the head. The caller holds t.mu.
func (t *Tier) remove(h uint64) {
	s := t.shard(h)
	s.mu.Lock()
	e := s.m[h]
	delete(s.m, h)
	s.mu.Unlock()
	if e != nil {
		t.drop(e)
	}
}

// drop counts e gone and releases the tier's reference. The caller holds t.mu and has taken e
// out of the map.
func (t *Tier) drop(e *Entry) {
	if e.state.Swap(gone) == inSmall {
		t.smallBytes -= e.Size()
	}
	t.bytes.Add(-e.Size())
	t.items.Add(-1)
	t.Release(e)
	t.stale++
	if t.stale > 64 && 2*t.stale > t.small.len()+t.main.len() {
		t.small.compact()
		t.main.compact()
		t.stale = 0
	}
}

// evictOne evicts one entry, as S3-FIFO does: from the small queue while it holds more than its
// share (an entry hit there moves to main instead, and one not hit leaves its hash in the
// ghost), else from main (an entry hit since it was last at the head goes round again with one
// hit less). False if the tier is empty. The caller holds t.mu.
func (t *Tier) evictOne() bool {
	for t.small.len() > 0 || t.main.len() > 0 {
		if t.small.len() > 0 && (float64(t.smallBytes) > SmallShare*float64(t.capacity) || t.main.len() == 0) {
			e := t.small.pop()
			if e.state.Load() == gone {
				t.stale--
				continue
			}
			t.smallBytes -= e.Size()
			if e.hits.Load() > 0 {
				e.hits.Store(0)
				e.state.Store(inMain)
				t.main.push(e)
				continue
			}
			t.remember(e.Hash)
			t.evict(e)
			return true
		}
		e := t.main.pop()
		if e.state.Load() == gone {
			t.stale--
			continue
		}
		if h := e.hits.Load(); h > 0 {
			e.hits.Store(h - 1)
			t.main.push(e)
			continue
		}
		t.evict(e)
		return true
	}
	return false
}

// minGhost is the fewest key hashes the ghost remembers.
const minGhost = 64

// remember adds h to the ghost, which is sized, as S3-FIFO's, for as many hashes as the tier
// holds entries: replaced by an empty one of the right size when that is more than twice or less
// than half its size. The caller holds t.mu.
func (t *Tier) remember(h uint64) {
	want := max(int(t.items.Load()), minGhost)
	if c := t.ghost.Cap(); want > 2*c || 2*want < c {
		t.ghost = ghost.New(want)
	}
	t.ghost.Add(h)
}

// evict takes e, at the head of a queue and not gone, out of the tier, and counts an eviction.
// The caller holds t.mu.
func (t *Tier) evict(e *Entry) {
	t.take(e)
	t.evictions.Add(1)
}

// take takes e, popped from its queue and not gone, out of the tier. The caller holds t.mu.
func (t *Tier) take(e *Entry) {
	s := t.shard(e.Hash)
	s.mu.Lock()
	if s.m[e.Hash] == e {
		delete(s.m, e.Hash)
	}
	s.mu.Unlock()
	e.state.Store(gone)
	t.bytes.Add(-e.Size())
	t.items.Add(-1)
	t.Release(e)
}

// trimFree lets the garbage collector have kept buffers until n more bytes of entries fit
// beside them within the capacity. The caller holds t.mu.
func (t *Tier) trimFree(n int64) {
	t.freeMu.Lock()
	defer t.freeMu.Unlock()
	for c := numClasses - 1; c >= 0 && t.bytes.Load()+n+t.freeBytes > t.capacity; c-- {
		for len(t.free[c]) > 0 && t.bytes.Load()+n+t.freeBytes > t.capacity {
			l := len(t.free[c])
			f := t.free[c][l-1]
			t.freeBytes -= int64(f.resident)
			t.free[c][l-1] = freeBuffer{}
			t.free[c] = t.free[c][:l-1]
			t.arena.release(c, f.b)
		}
	}
}

// classes are the size classes of entry buffers (internal/sizeclass): 64 bytes up to 64 MiB; a
// larger buffer is made to measure and not kept.
var classes = sizeclass.Classes{Min: 6, Max: 26}

// numClasses is classes.Count(), for arrays.
const numClasses = 1 + (26-6)*4

// classOf is the class of a buffer of n bytes, the smallest that holds n; -1 past the largest.
func classOf(n int) int {
	c, _ := classes.Of(n)
	return c
}

// classSize is the bytes of a buffer of class c.
func classSize(c int) int { return classes.Size(c) }

// Stats is what the tier holds and has done.
type Stats struct {
	Capacity, Bytes, Items       int64
	Inserts, Evictions, Declined uint64
}

// Stats returns the tier's figures.
func (t *Tier) Stats() Stats {
	return Stats{Capacity: t.capacity, Bytes: t.bytes.Load(), Items: t.items.Load(),
		Inserts: t.inserts.Load(), Evictions: t.evictions.Load(), Declined: t.declined.Load()}
}

// NoteDeclined counts an entry the cache chose not to insert (its admission rule).
func (t *Tier) NoteDeclined() { t.declined.Add(1) }

// queue is a FIFO of entries, a ring that grows.
type queue struct {
	buf        []*Entry
	head, size int
}

func (q *queue) len() int { return q.size }

func (q *queue) push(e *Entry) {
	if q.size == len(q.buf) {
		nb := make([]*Entry, max(2*len(q.buf), 64))
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = e
	q.size++
}

func (q *queue) pop() *Entry {
	e := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return e
}

// compact drops the slots of entries that are gone, keeping the order of the others.
func (q *queue) compact() {
	nb := make([]*Entry, 0, max(q.size, 64))
	for i := range q.size {
		if e := q.buf[(q.head+i)%len(q.buf)]; e.state.Load() != gone {
			nb = append(nb, e)
		}
	}
	q.buf, q.head, q.size = nb[:cap(nb)], 0, len(nb)
}
