package index

import (
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	// shardBits top bits of a hash pick the shard; the rest pick the slot inside it.
	shardBits = 8
	numShards = 1 << shardBits

	// slotBytes is the memory of one slot: the hash in one array, the Loc in the other.
	slotBytes = int(unsafe.Sizeof(uint64(0)) + unsafe.Sizeof(Loc{}))

	// minShardCap is the smallest shard. At 7/8 load it still has an empty slot, and an
	// empty slot is what ends every probe.
	minShardCap = 8

	// A shard grows before an insert would take its load past maxLoadNum/maxLoadDen, to
	// growNum/growDen times its capacity. After growing, the load is 7/8 / 5/4 = 0.7.
	maxLoadNum, maxLoadDen = 7, 8
	growNum, growDen       = 5, 4

	cacheLine = 64
)

// HashTable is the default Index: 256 shards, each an open-addressing table with linear probing,
// selected by the top 8 bits of the hash.
//
// A slot costs 20 bytes (an 8-byte hash in hashes, a 12-byte Loc in locs) and a two-bit hit
// count (marks, see Touch). Both arrays hold no
// pointers, so the garbage collector never scans them, whatever their size. A probe walks hashes
// alone, 8 per cache line, and reads locs once, on a hit.
//
// Memory against probe length: a shard grows when its load would pass 7/8, by 1.25x, so its load
// stays between 0.7 (just grown; the allocator's rounding, see allocWords, moves that by a few
// percent) and 0.875, and the table costs 20/0.875 = 22.9 to about 20/0.7 = 28.6 bytes per entry
// at every size; doubling would swing between 22.9 and 45.7. TestMemoryPerEntry checks <= 29 from
// 1M to 5M entries. The price is long probes near the top of that band: with linear probing a hit
// reads about (1+1/(1-a))/2 slots, 4.5 at a = 0.875, and a miss about (1+1/(1-a)^2)/2, 32.5 at
// a = 0.875, that is four or five cache lines of hashes read in sequence (TestProbeLengths
// measures both). Hits stay short, and most misses never reach the index: the cache's bloom filter
// answers them first. An insert is a miss too, and growing by 1.25x moves each entry about 4 times
// over the table's life instead of once; both are paid on the write path, which is batched behind
// segment writes, and a capacity hint avoids the moves.
type HashTable struct {
	shards [numShards]shard
}

// shard pads a shardTable to whole cache lines, so that calls on neighbouring shards do not
// contend for one line (even RLock writes the lock word).
type shard struct {
	mu shardTable
	_  [(cacheLine - unsafe.Sizeof(shardTable{})%cacheLine) % cacheLine]byte
}

// shardTable is one open-addressing table and the lock that guards all of it: nothing in it is read
// without holding the lock (readers take the read lock).
//
// marks holds a two-bit hit count per slot (bits markShift(i) of word i/slotsPerMarkWord):
// counted up by Touch under the read lock (a compare-and-swap, so readers never contend for
// more than the word, and none once the count is at MaxHits), cleared when the slot gets a new
// location, moved with its entry. It costs 1/4 byte per slot.
//
// Invariants: len(hashes) == len(locs) >= minShardCap; len(marks) == (len(hashes)+31)/32;
// hashes[i] == 0 marks an empty slot (and then locs[i] is zero and its mark clear); count is the number of non-empty slots and count*8 <= len(hashes)*7, so at
// least one slot is empty; every entry sits in the probe run that starts at its home slot, with no
// empty slot between its home and itself (going forward, wrapping at the end).
type shardTable struct {
	sync.RWMutex
	hashes []uint64
	locs   []Loc
	marks  []atomic.Uint64
	count  int
}

// NewHashTable returns an empty HashTable sized to hold capacityHint entries without growing.
// A hint <= 0 starts every shard at the minimum size.
func NewHashTable(capacityHint int) *HashTable {
	t := new(HashTable)
	c := shardCapFor(capacityHint)
	for i := range t.shards {
		t.shards[i].mu.resize(c)
	}
	return t
}

// shardCapFor returns the shard capacity that takes hint random hashes without any shard growing:
// the mean per shard plus four standard deviations of the binomial spread (so that the fullest of
// 256 shards still fits, in all but about 1 table in 100), at 7/8 load. At hint = 5M the table then
// costs about 23.5 bytes per entry when full.
func shardCapFor(hint int) int {
	if hint <= 0 {
		return minShardCap
	}
	n := float64(hint) / numShards
	n += 4 * math.Sqrt(n)
	return max(int(math.Ceil(n*maxLoadDen/maxLoadNum)), minShardCap)
}

func (t *HashTable) shard(h uint64) *shardTable {
	checkHash(h)
	return &t.shards[h>>(64-shardBits)].mu
}

// Get returns the location stored for h.
func (t *HashTable) Get(h uint64) (Loc, bool) {
	s := t.shard(h)
	s.RLock()
	i, ok := s.find(h)
	var loc Loc
	if ok {
		loc = s.locs[i]
	}
	s.RUnlock()
	return loc, ok
}

// Touch counts a hit on h's entry if its location is loc. It takes the shard's read lock and
// allocates nothing; once the count is at MaxHits it writes nothing either.
func (t *HashTable) Touch(h uint64, loc Loc) {
	s := t.shard(h)
	s.RLock()
	if i, ok := s.find(h); ok && s.locs[i] == loc {
		w, sh := &s.marks[i/slotsPerMarkWord], markShift(i)
		for {
			old := w.Load()
			if old>>sh&MaxHits == MaxHits || w.CompareAndSwap(old, old+1<<sh) {
				break
			}
		}
	}
	s.RUnlock()
}

// Accessed reports whether h's location is loc and its hit count is not zero.
func (t *HashTable) Accessed(h uint64, loc Loc) bool { return t.Hits(h, loc) > 0 }

// Hits returns h's hit count if its location is loc, else 0.
func (t *HashTable) Hits(h uint64, loc Loc) int {
	s := t.shard(h)
	s.RLock()
	n := 0
	if i, ok := s.find(h); ok && s.locs[i] == loc {
		n = s.hits(i)
	}
	s.RUnlock()
	return n
}

// SetHits sets h's hit count to min(n, MaxHits) if its location is loc.
func (t *HashTable) SetHits(h uint64, loc Loc, n int) {
	s := t.shard(h)
	s.Lock()
	if i, ok := s.find(h); ok && s.locs[i] == loc {
		s.setHits(i, n)
	}
	s.Unlock()
}

// Put inserts or replaces the location of h and returns the previous one, if any.
func (t *HashTable) Put(h uint64, loc Loc) (old Loc, replaced bool) {
	s := t.shard(h)
	s.Lock()
	old, replaced = s.put(h, loc)
	s.Unlock()
	return old, replaced
}

// Apply performs ops. They are grouped by shard (stably, so the ops of one hash keep their
// order) and each shard is then locked once and updated by one of up to GOMAXPROCS goroutines.
func (t *HashTable) Apply(ops []Op) {
	var start [numShards + 1]int
	for i := range ops {
		checkHash(ops[i].Hash)
		start[ops[i].Hash>>(64-shardBits)+1]++
	}
	for i := 1; i <= numShards; i++ {
		start[i] += start[i-1]
	}
	// Copy the ops into one run per shard: each worker then reads its runs in sequence and
	// writes into one shard's table at a time (a few hundred KiB, cache-resident), instead of
	// jumping around both.
	grouped := make([]Op, len(ops))
	next := start
	for i := range ops {
		sh := ops[i].Hash >> (64 - shardBits)
		grouped[next[sh]] = ops[i]
		next[sh]++
	}
	workers := max(1, min(runtime.GOMAXPROCS(0), 8))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sh := w; sh < numShards; sh += workers {
				s := &t.shards[sh].mu
				s.Lock()
				for i := start[sh]; i < start[sh+1]; i++ {
					op := &grouped[i]
					if op.Delete {
						if j, ok := s.find(op.Hash); ok {
							s.removeAt(j)
						}
					} else {
						s.put(op.Hash, op.Loc)
					}
				}
				s.Unlock()
			}
		}()
	}
	wg.Wait()
}

// Delete removes h and returns the location it had.
func (t *HashTable) Delete(h uint64) (old Loc, ok bool) {
	s := t.shard(h)
	s.Lock()
	i, ok := s.find(h)
	if ok {
		old = s.locs[i]
		s.removeAt(i)
	}
	s.Unlock()
	return old, ok
}

// DeleteIf removes h only if its location is in segment seg.
func (t *HashTable) DeleteIf(h uint64, seg uint32) (old Loc, ok bool) {
	s := t.shard(h)
	s.Lock()
	i, ok := s.find(h)
	if ok = ok && s.locs[i].Segment == seg; ok {
		old = s.locs[i]
		s.removeAt(i)
	}
	s.Unlock()
	return old, ok
}

// Len returns the number of entries. It locks each shard in turn, so under concurrent writes it
// is a recent figure, not an instant one.
func (t *HashTable) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i].mu
		s.RLock()
		n += s.count
		s.RUnlock()
	}
	return n
}

// Range calls fn for every entry until fn returns false. It copies one shard's entries under that
// shard's read lock, then calls fn on the copy without any lock held, so a slow fn never stalls
// writers; the copy costs one buffer the size of the largest shard (1/256 of the entries).
func (t *HashTable) Range(fn func(h uint64, loc Loc) bool) {
	var hs []uint64
	var ls []Loc
	for i := range t.shards {
		s := &t.shards[i].mu
		s.RLock()
		if cap(hs) < s.count {
			hs = make([]uint64, 0, s.count)
			ls = make([]Loc, 0, s.count)
		}
		hs, ls = hs[:0], ls[:0]
		for j, h := range s.hashes {
			if h != 0 {
				hs = append(hs, h)
				ls = append(ls, s.locs[j])
			}
		}
		s.RUnlock()
		for j, h := range hs {
			if !fn(h, ls[j]) {
				return
			}
		}
	}
}

// MemoryBytes returns the capacity of all shards times 20 bytes, their hit counts, plus the
// fixed shard array.
func (t *HashTable) MemoryBytes() int64 {
	n := int64(unsafe.Sizeof(*t))
	for i := range t.shards {
		s := &t.shards[i].mu
		s.RLock()
		n += int64(len(s.hashes))*int64(slotBytes) + int64(len(s.marks))*8
		s.RUnlock()
	}
	return n
}

// home is the slot where the probe for h starts: the hash without its shard bits, scaled to the
// capacity by a 64x64->128 multiply (Lemire's multiply-shift range reduction), so the capacity
// need not be a power of two. It keeps hash order: a larger hash never has a smaller home.
func (s *shardTable) home(h uint64) int {
	hi, _ := bits.Mul64(h<<shardBits, uint64(len(s.hashes)))
	return int(hi)
}

// find returns the slot that holds h and true, or the empty slot that ends h's probe and false.
func (s *shardTable) find(h uint64) (int, bool) {
	hs := s.hashes
	i := s.home(h)
	for {
		switch hs[i] {
		case h:
			return i, true
		case 0:
			return i, false
		}
		if i++; i == len(hs) {
			i = 0
		}
	}
}

func (s *shardTable) put(h uint64, loc Loc) (Loc, bool) {
	i, ok := s.find(h)
	if ok {
		old := s.locs[i]
		s.locs[i] = loc
		s.setHits(i, 0) // a new record: not hit yet
		return old, true
	}
	if c := len(s.hashes); (s.count+1)*maxLoadDen > c*maxLoadNum {
		s.resize(c * growNum / growDen)
		i, _ = s.find(h)
	}
	s.hashes[i] = h
	s.locs[i] = loc
	s.count++
	return Loc{}, false
}

// removeAt empties slot i by backward shift: each later entry of the run moves back into the
// hole unless its home lies in the cyclic interval (hole, its slot], where moving it would put it
// before its home. No tombstones, so probe lengths depend only on the load.
func (s *shardTable) removeAt(i int) {
	hs, ls := s.hashes, s.locs
	j := i
	for {
		if j++; j == len(hs) {
			j = 0
		}
		h := hs[j]
		if h == 0 {
			break
		}
		k := s.home(h)
		var stays bool
		if i <= j {
			stays = i < k && k <= j
		} else { // the run wrapped past the end between i and j
			stays = i < k || k <= j
		}
		if stays {
			continue
		}
		hs[i], ls[i] = h, ls[j]
		s.setHits(i, s.hits(j))
		i = j
	}
	hs[i], ls[i] = 0, Loc{}
	s.setHits(i, 0)
	s.count--
}

// slotsPerMarkWord is how many slots' hit counts (two bits each) one word of marks holds.
const slotsPerMarkWord = 32

// markShift is where slot i's hit count sits in its word of marks.
func markShift(i int) uint { return uint(i%slotsPerMarkWord) * 2 }

// hits returns slot i's hit count. The caller holds the lock (either mode).
func (s *shardTable) hits(i int) int {
	return int(s.marks[i/slotsPerMarkWord].Load() >> markShift(i) & MaxHits)
}

// setHits sets slot i's hit count to min(n, MaxHits). The caller holds the write lock; the
// atomic operations are for readers' Touch, which are excluded meanwhile but use atomics too.
func (s *shardTable) setHits(i, n int) {
	w, sh := &s.marks[i/slotsPerMarkWord], markShift(i)
	v := uint64(min(n, MaxHits)) << sh
	if old := w.Load(); old&(MaxHits<<sh) != v {
		w.Store(old&^(MaxHits<<sh) | v)
	}
}

// resize moves the entries into new arrays of about c slots (see allocWords). Entries are visited
// in slot order, which is nearly hash order, so they land in the new arrays nearly in order too.
//
// Both arrays live in one pointer-free allocation, hashes first, then locs (a Loc needs 4-byte
// alignment and the hashes end on an 8-byte boundary), so the allocator's rounding is paid once,
// not twice, and the rounded-up bytes become slots instead of hidden waste. With two separate
// arrays that waste was 2 B/entry of heap at 1M entries, 7% of the budget.
func (s *shardTable) resize(c int) {
	buf := slices.Grow([]uint64(nil), allocWords(c)) // capacity: what the allocator really gives
	buf = buf[:cap(buf)]
	c = len(buf) * 8 / slotBytes
	oh, ol, om := s.hashes, s.locs, s.marks
	s.hashes = buf[:c:c]
	// locs covers bytes [8c, 20c) of buf, and 20c <= 8*len(buf).
	s.locs = unsafe.Slice((*Loc)(unsafe.Pointer(unsafe.SliceData(buf[c:]))), c)
	s.marks = make([]atomic.Uint64, (c+slotsPerMarkWord-1)/slotsPerMarkWord)
	for i, h := range oh {
		if h != 0 {
			j, _ := s.find(h)
			s.hashes[j], s.locs[j] = h, ol[i]
			if n := om[i/slotsPerMarkWord].Load() >> markShift(i) & MaxHits; n != 0 {
				s.marks[j/slotsPerMarkWord].Or(n << markShift(j))
			}
		}
	}
}

const (
	// The Go allocator serves requests up to maxSmallAlloc from size classes (up to 19%
	// apart) and larger ones in whole pages of allocPage bytes. Only memory use depends on these
	// figures, never correctness.
	maxSmallAlloc = 32 << 10
	allocPage     = 8 << 10
)

// allocWords returns the buffer size, in 8-byte words, for about c slots. Above maxSmallAlloc it
// rounds to the nearest whole page rather than up: rounding up would make a shard of 2048 slots
// (5 pages) grow to 7 pages, 1.4x, and leave it at 0.62 load, 32 bytes per entry. Rounding down
// never undoes a growth step: it loses at most half a page, 205 slots, and a step that reaches
// this size adds more than 327 (0.25 of a capacity above 1311).
func allocWords(c int) int {
	b := c * slotBytes
	if b > maxSmallAlloc {
		b = (b + allocPage/2) / allocPage * allocPage
	}
	return (b + 7) / 8
}
