package index

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	// maxHeight bounds a tower. With p = 1/4 a list of n entries needs about log4(n) levels:
	// 16 levels serve 4^16 = 4G entries, far beyond what fits in memory.
	maxHeight = 16
	// lowLevels links live inside the node, so a step along the list costs one cache miss, not
	// two (node, then a separate tower). Only 1 node in 4^lowLevels = 256 is taller and needs a
	// second allocation for its upper links; with 4 the node is exactly one 64-byte size class.
	lowLevels = 4
)

// SkipList is the Index behind WithIndex(IndexSkipList): a skip list ordered by hash, with p = 1/4.
//
// Readers (Get, Range) take no lock: they follow atomic.Pointer links. Writers take one mutex.
// A node's hash and Loc never change once the node is published; Put on an existing hash links a
// new node in place of the old one, so a reader sees the old Loc or the new Loc, never a mix.
// An unlinked node keeps its forward links, so a reader standing on it walks back into the list.
//
// Memory: a node is one 64-byte allocation (hash, Loc, height, 4 inline links, a pointer to the
// upper links), plus 96 bytes for the 1 node in 256 taller than 4 levels: about 64 bytes per
// entry, against about 24 for HashTable (TestMemoryPerEntry; figures in docs/BENCHMARKS.md). The nodes
// hold pointers, so every GC cycle walks all of them. A lookup loads about 36 links at 1M entries
// (3 per level over log4(n) levels), each a dependent cache miss once the list outgrows the
// caches: microseconds per Get, against one or two misses for HashTable.
type SkipList struct {
	head   node         // hash 0 (never a key), tower of maxHeight; read by readers without lock
	height atomic.Int32 // levels in use; readers may start from a stale value, both are correct
	count  atomic.Int64
	bytes  atomic.Int64 // memory of the nodes linked in, by allocator size class

	mu struct {
		sync.Mutex                  // serializes writers
		preds      [maxHeight]*node // scratch for the writer holding mu
	}
}

// node is one entry. hash, loc, its height and high are immutable after the node is published; the
// links (next) are written only by the writer holding SkipList.mu. meta packs the height (low 8
// bits, immutable) and the hit count (two bits at hitsShift, counted by Touch without a lock) into the 4 bytes
// the alignment of low would otherwise leave empty, so the node stays 64 bytes.
type node struct {
	hash uint64
	loc  Loc
	meta atomic.Uint32
	low  [lowLevels]atomic.Pointer[node]
	high *[maxHeight - lowLevels]atomic.Pointer[node] // nil unless height > lowLevels
}

// hitsShift is where node.meta keeps the hit count.
const hitsShift = 8

func newNode(h uint64, loc Loc, height int) *node {
	n := &node{hash: h, loc: loc}
	n.meta.Store(uint32(height))
	if height > lowLevels {
		n.high = new([maxHeight - lowLevels]atomic.Pointer[node])
	}
	return n
}

// height is the number of levels n is linked at.
func (n *node) height() int { return int(n.meta.Load() & 0xff) }

// next returns the link of n at level lv < n.height().
func (n *node) next(lv int) *atomic.Pointer[node] {
	if lv < lowLevels {
		return &n.low[lv]
	}
	return &n.high[lv-lowLevels]
}

// NewSkipList returns an empty SkipList.
func NewSkipList() *SkipList {
	l := new(SkipList)
	l.head.meta.Store(maxHeight)
	l.head.high = new([maxHeight - lowLevels]atomic.Pointer[node])
	l.height.Store(1)
	return l
}

// Get returns the location stored for h, without taking a lock.
func (l *SkipList) Get(h uint64) (Loc, bool) {
	h = canonical(h)
	x := &l.head
	for lv := int(l.height.Load()) - 1; lv >= 0; lv-- {
		for {
			n := x.next(lv).Load()
			if n == nil || n.hash > h {
				break
			}
			if n.hash == h {
				return n.loc, true
			}
			x = n
		}
	}
	return Loc{}, false
}

// Lookup returns the location stored for h and its hit count, without taking a lock.
func (l *SkipList) Lookup(h uint64) (Loc, int, bool) {
	if n := l.find(h); n != nil {
		return n.loc, int(n.meta.Load() >> hitsShift & MaxHits), true
	}
	return Loc{}, 0, false
}

// find returns the node of h, without taking a lock; nil if there is none.
func (l *SkipList) find(h uint64) *node {
	h = canonical(h)
	x := &l.head
	for lv := int(l.height.Load()) - 1; lv >= 0; lv-- {
		for {
			n := x.next(lv).Load()
			if n == nil || n.hash > h {
				break
			}
			if n.hash == h {
				return n
			}
			x = n
		}
	}
	return nil
}

// Touch counts a hit on h's node if its location is loc, without taking a lock. A node replaced
// meanwhile is a copy with its count clear: the hits counted on the old one go with it.
func (l *SkipList) Touch(h uint64, loc Loc) {
	if n := l.find(h); n != nil && n.loc == loc {
		for {
			old := n.meta.Load()
			if old>>hitsShift&MaxHits == MaxHits || n.meta.CompareAndSwap(old, old+1<<hitsShift) {
				return
			}
		}
	}
}

// Hits returns h's hit count if its location is loc, else 0.
func (l *SkipList) Hits(h uint64, loc Loc) int {
	if n := l.find(h); n != nil && n.loc == loc {
		return int(n.meta.Load() >> hitsShift & MaxHits)
	}
	return 0
}

// SetHits sets h's hit count to min(n, MaxHits) if its location is loc.
func (l *SkipList) SetHits(h uint64, loc Loc, k int) {
	if n := l.find(h); n != nil && n.loc == loc {
		for {
			old := n.meta.Load()
			if n.meta.CompareAndSwap(old, old&^(MaxHits<<hitsShift)|uint32(min(k, MaxHits))<<hitsShift) {
				return
			}
		}
	}
}

// Put inserts or replaces the location of h and returns the previous one, if any.
func (l *SkipList) Put(h uint64, loc Loc) (old Loc, replaced bool) {
	h = canonical(h)
	l.mu.Lock()
	defer l.mu.Unlock()
	preds := &l.mu.preds
	if cur := l.findPreds(h, preds); cur != nil {
		// Replace cur by a copy with the new Loc and the same tower. The copy's links are
		// set before it is published, so a reader reaching it at any level finds a whole node.
		n := newNode(h, loc, cur.height())
		for lv := range n.height() {
			n.next(lv).Store(cur.next(lv).Load())
		}
		for lv := range n.height() {
			preds[lv].next(lv).Store(n)
		}
		return cur.loc, true
	}
	ht := randomHeight()
	if top := int(l.height.Load()); ht > top {
		for lv := top; lv < ht; lv++ {
			preds[lv] = &l.head
		}
		l.height.Store(int32(ht))
	}
	n := newNode(h, loc, ht)
	for lv := range ht {
		n.next(lv).Store(preds[lv].next(lv).Load())
	}
	for lv := range ht { // bottom up: once reachable at level 0 the entry is in
		preds[lv].next(lv).Store(n)
	}
	l.count.Add(1)
	l.bytes.Add(nodeBytes(ht))
	return Loc{}, false
}

// Delete removes h and returns the location it had.
func (l *SkipList) Delete(h uint64) (old Loc, ok bool) {
	return l.delete(h, false, 0)
}

// DeleteIf removes h only if its location is in segment seg.
func (l *SkipList) DeleteIf(h uint64, seg uint32) (old Loc, ok bool) {
	return l.delete(h, true, seg)
}

func (l *SkipList) delete(h uint64, onlyIn bool, seg uint32) (Loc, bool) {
	h = canonical(h)
	l.mu.Lock()
	defer l.mu.Unlock()
	preds := &l.mu.preds
	cur := l.findPreds(h, preds)
	if cur == nil {
		return Loc{}, false
	}
	if onlyIn && cur.loc.Segment != seg {
		return Loc{}, false
	}
	// Unlink top down; cur keeps its own links, so readers standing on it carry on.
	for lv := cur.height() - 1; lv >= 0; lv-- {
		preds[lv].next(lv).Store(cur.next(lv).Load())
	}
	top := int(l.height.Load())
	for top > 1 && l.head.next(top-1).Load() == nil {
		top--
	}
	l.height.Store(int32(top))
	l.count.Add(-1)
	l.bytes.Add(-nodeBytes(cur.height()))
	return cur.loc, true
}

// findPreds fills preds[lv] with the last node before h at every level in use and returns the node
// holding h, or nil. The caller holds l.mu.
func (l *SkipList) findPreds(h uint64, preds *[maxHeight]*node) *node {
	x := &l.head
	for lv := int(l.height.Load()) - 1; lv >= 0; lv-- {
		for {
			n := x.next(lv).Load()
			if n == nil || n.hash >= h {
				break
			}
			x = n
		}
		preds[lv] = x
	}
	if n := x.low[0].Load(); n != nil && n.hash == h {
		return n
	}
	return nil
}

// Len returns the number of entries.
func (l *SkipList) Len() int { return int(l.count.Load()) }

// Range calls fn for every entry, in increasing hash order, until fn returns false. It takes no
// lock: it walks level 0 as readers do.
func (l *SkipList) Range(fn func(h uint64, loc Loc) bool) {
	for n := l.head.low[0].Load(); n != nil; n = n.low[0].Load() {
		if !fn(n.hash, n.loc) {
			return
		}
	}
}

// MemoryBytes returns the memory of the linked nodes, rounded up to the allocator's size classes,
// plus the fixed head.
func (l *SkipList) MemoryBytes() int64 {
	return int64(unsafe.Sizeof(*l)) + sizeClass(int(unsafe.Sizeof(*l.head.high))) + l.bytes.Load()
}

// randomHeight returns 1 + the number of heads before the first tail in coin flips of
// probability 1/4, from two bits per flip of one random word.
func randomHeight() int {
	return min(1+bits.TrailingZeros64(rand.Uint64())/2, maxHeight)
}

// nodeBytes is the heap memory of a node of height ht, with its upper links if it has them.
func nodeBytes(ht int) int64 {
	n := sizeClass(int(unsafe.Sizeof(node{})))
	if ht > lowLevels {
		n += sizeClass(int(unsafe.Sizeof([maxHeight - lowLevels]atomic.Pointer[node]{})))
	}
	return n
}

// sizeClass rounds a small allocation up to the Go allocator's size class (the classes up to 128
// bytes; every size asked for here is at most 128).
func sizeClass(n int) int64 {
	for _, c := range [...]int{8, 16, 24, 32, 48, 64, 80, 96, 112, 128} {
		if n <= c {
			return int64(c)
		}
	}
	return int64(n)
}

// Apply performs ops one by one.
func (l *SkipList) Apply(ops []Op) {
	for i := range ops {
		if ops[i].Delete {
			l.Delete(ops[i].Hash)
		} else {
			l.Put(ops[i].Hash, ops[i].Loc)
		}
	}
}
