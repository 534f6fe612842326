package memtier

import (
	"bytes"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/ghost"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// SmallShare is the share of the capacity the small (probation) queue holds, as S3-FIFO's.
const SmallShare = 0.1

// MaxEntryShare is the largest share of the capacity one entry may take.
const MaxEntryShare = 1.0 / 16

// EntryOverhead is what an entry costs beyond its key, value and attributes: the Entry, its
// slot in a shard's map and in a queue. Bytes counts it.
const EntryOverhead = int64(unsafe.Sizeof(Entry{})) + 64

// Entry is one record's value held in memory. Its fields are set before it is inserted and
// never change after.
type Entry struct {
	Hash  uint64
	Tag   uint64 // the record's place on disk
	Key   []byte
	Hdr   record.Header
	Attrs string
	Value []byte

	hits  atomic.Uint32 // saturating at maxHits
	state atomic.Uint32 // queue it is in (inSmall, inMain) or gone
}

const (
	inSmall = iota
	inMain
	gone
)

const maxHits = 3

// Size is the memory the entry counts for.
func (e *Entry) Size() int64 {
	return int64(len(e.Key)+len(e.Value)+len(e.Attrs)) + EntryOverhead
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
}

// New returns a tier of capacity bytes (> 0).
func New(capacity int64) *Tier {
	t := &Tier{capacity: capacity, maxEntry: int64(float64(capacity) * MaxEntryShare)}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]*Entry)
	}
	t.ghost = ghost.New(minGhost)
	return t
}

func (t *Tier) shard(h uint64) *shard { return &t.shards[h>>58] }

// Get returns the entry of key (hash h) for the record tagged tag, noting the hit for eviction;
// nil if the tier holds none. The caller counts hits and misses.
func (t *Tier) Get(h, tag uint64, key []byte) *Entry {
	s := t.shard(h)
	s.mu.RLock()
	e := s.m[h]
	s.mu.RUnlock()
	if e == nil || e.Tag != tag || !bytes.Equal(e.Key, key) {
		return nil
	}
	if e.hits.Load() < maxHits {
		e.hits.Add(1)
	}
	return e
}

// Fits reports whether an entry of n bytes (its Size) may enter the tier.
func (t *Tier) Fits(n int64) bool { return n <= t.maxEntry }

// Insert adds e, replacing the entry of its hash, and evicts what it must first. An entry
// larger than Fits allows is refused (counted as declined); false then.
func (t *Tier) Insert(e *Entry) bool {
	n := e.Size()
	if !t.Fits(n) {
		t.declined.Add(1)
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(e.Hash) // the older entry of the hash, if any, leaves first
	for t.bytes.Load()+n > t.capacity {
		if !t.evictOne() {
			break
		}
	}
	if t.bytes.Load()+n > t.capacity {
		t.declined.Add(1)
		return false
	}
	if t.ghost.Contains(e.Hash) {
		t.ghost.Remove(e.Hash)
		e.state.Store(inMain)
		t.main.push(e)
	} else {
		e.state.Store(inSmall)
		t.small.push(e)
		t.smallBytes += n
	}
	s := t.shard(e.Hash)
	s.mu.Lock()
	s.m[e.Hash] = e
	s.mu.Unlock()
	t.bytes.Add(n)
	t.items.Add(1)
	t.inserts.Add(1)
	return true
}

// Remove drops the entry of hash h, if any: its record was overwritten, deleted or evicted.
func (t *Tier) Remove(h uint64) {
	s := t.shard(h)
	s.mu.RLock()
	_, ok := s.m[h]
	s.mu.RUnlock()
	if !ok {
		return // the common case: nothing to take the tier's lock for
	}
	t.mu.Lock()
	t.remove(h)
	t.mu.Unlock()
}

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

// drop counts e gone. The caller holds t.mu and has taken e out of the map.
func (t *Tier) drop(e *Entry) {
	if e.state.Swap(gone) == inSmall {
		t.smallBytes -= e.Size()
	}
	t.bytes.Add(-e.Size())
	t.items.Add(-1)
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

// evict takes e, at the head of a queue and not gone, out of the tier. The caller holds t.mu.
func (t *Tier) evict(e *Entry) {
	s := t.shard(e.Hash)
	s.mu.Lock()
	if s.m[e.Hash] == e {
		delete(s.m, e.Hash)
	}
	s.mu.Unlock()
	e.state.Store(gone)
	t.bytes.Add(-e.Size())
	t.items.Add(-1)
	t.evictions.Add(1)
}

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
