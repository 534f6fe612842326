package index

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/hugemem"
)

const (
	// shardBits top bits of a hash pick the shard; the rest pick the slot inside it.
	shardBits = 8
	numShards = 1 << shardBits

	// slotBytes is the memory of one slot: the tag in one array, the Loc in the other.
	slotBytes = int(unsafe.Sizeof(uint32(0)) + unsafe.Sizeof(Loc{}))

	// tagShift places a shard's tag in a canonical hash: the 32 bits below the shard bits.
	tagShift = 64 - shardBits - 32

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
// A slot costs 16 bytes (a 4-byte tag in tags, a 12-byte Loc in locs) and a two-bit hit count
// (marks, see Touch). The shard and the tag are the 40 bits of a hash the index keeps (see
// Canonical): the shard's 8 bits are where the entry is, so the slot stores only the next 32.
// Both arrays hold no pointers, so the garbage collector never scans them, whatever their size.
// A probe walks tags alone, 16 per cache line, and reads locs once, on a hit.
//
// Memory against probe length: a shard grows when its load would pass 7/8, by 1.25x, so its load
// stays between 0.7 (just grown; the allocator's rounding, see allocWords, moves that by a few
// percent) and 0.875, and the table costs 16/0.875 = 18.3 to about 16/0.7 = 22.9 bytes per entry
// at every size; doubling would swing between 18.3 and 36.6. TestMemoryPerEntry checks the band
// from 1M to 5M entries. The price is long probes near the top of that band: with linear probing
// a hit reads about (1+1/(1-a))/2 slots, 4.5 at a = 0.875, and a miss about (1+1/(1-a)^2)/2,
// 32.5 at a = 0.875, that is two or three cache lines of tags read in sequence
// (TestProbeLengths measures both). Hits stay short, and most misses never reach the index: the cache's bloom filter
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
// Invariants: len(tags) == len(locs) >= minShardCap; len(marks) == (len(tags)+31)/32; tags[i]
// == 0 marks an empty slot (and then locs[i] is zero and its mark clear; no hash has tag 0, see
// Canonical); count is the number of non-empty slots and count*8 <= len(tags)*7, so at least
// one slot is empty; every entry sits in the probe run that starts at its home slot, with no
// empty slot between its home and itself (going forward, wrapping at the end).
type shardTable struct {
	sync.RWMutex
	tags  []uint32
	locs  []Loc
	marks []atomic.Uint64
	count int
}

// NewHashTable returns an empty HashTable sized to hold capacityHint entries without growing.
// A hint <= 0 starts every shard at the minimum size.
//
// With a hint, the shards' first tables are cut from one allocation on transparent huge pages
// (hugemem) when it spans at least one: a lookup reads a tag's line and a Loc's line at random
// places in the whole table, and on 4 KiB pages each is a TLB miss as well (in a virtual machine, a
// page walk of the guest's and the host's tables). A shard that grows takes a table from the heap
// like any other; the first allocation lives until every shard has left it.
func NewHashTable(capacityHint int) *HashTable {
	t := new(HashTable)
	c := shardCapFor(capacityHint)
	words := allocWords(c, true)
	var arena []uint64
	if capacityHint > 0 && numShards*words*8 >= hugemem.PageBytes {
		arena = hugemem.Slice[uint64](numShards * words)
	}
	for i := range t.shards {
		var buf []uint64
		if arena != nil {
			buf = arena[i*words : (i+1)*words : (i+1)*words]
		}
		t.shards[i].mu.resizeInto(buf, c, true)
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

// shard returns h's shard and its tag there.
func (t *HashTable) shard(h uint64) (*shardTable, uint32) {
	checkHash(h)
	return &t.shards[h>>(64-shardBits)].mu, tagOf(h)
}

// tagOf is the part of h a slot stores: the 32 bits below the shard bits of Canonical(h), never 0.
func tagOf(h uint64) uint32 { return uint32(Canonical(h) >> tagShift) }

// hashOf is the canonical hash of the entry with tag in shard sh.
func hashOf(sh int, tag uint32) uint64 { return uint64(sh)<<(64-shardBits) | uint64(tag)<<tagShift }

// Get returns the location stored for h.
func (t *HashTable) Get(h uint64) (Loc, bool) {
	s, tag := t.shard(h)
	s.RLock()
	i, ok := s.find(tag)
	var loc Loc
	if ok {
		loc = s.locs[i]
	}
	s.RUnlock()
	return loc, ok
}

// Lookup returns the location stored for h and its hit count.
func (t *HashTable) Lookup(h uint64) (Loc, int, bool) {
	s, tag := t.shard(h)
	s.RLock()
	i, ok := s.find(tag)
	var loc Loc
	hits := 0
	if ok {
		loc, hits = s.locs[i], s.hits(i)
	}
	s.RUnlock()
	return loc, hits, ok
}

// Touch counts a hit on h's entry if its location is loc. It takes the shard's read lock and
// allocates nothing; once the count is at MaxHits it writes nothing either.
func (t *HashTable) Touch(h uint64, loc Loc) {
	s, tag := t.shard(h)
	s.RLock()
	if i, ok := s.find(tag); ok && s.locs[i] == loc {
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

// Hits returns h's hit count if its location is loc, else 0.
func (t *HashTable) Hits(h uint64, loc Loc) int {
	s, tag := t.shard(h)
	s.RLock()
	n := 0
	if i, ok := s.find(tag); ok && s.locs[i] == loc {
		n = s.hits(i)
	}
	s.RUnlock()
	return n
}

// SetHits sets h's hit count to min(n, MaxHits) if its location is loc.
func (t *HashTable) SetHits(h uint64, loc Loc, n int) {
	s, tag := t.shard(h)
	s.Lock()
	if i, ok := s.find(tag); ok && s.locs[i] == loc {
		s.setHits(i, n)
	}
	s.Unlock()
}

// Put inserts or replaces the location of h and returns the previous one, if any.
func (t *HashTable) Put(h uint64, loc Loc) (old Loc, replaced bool) {
	s, tag := t.shard(h)
	s.Lock()
	old, replaced = s.put(tag, loc)
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
	// jumping around both. The copy's buffer is pooled: recovery applies a segment in many
	// calls, and a new buffer each time would be garbage the size of the entries.
	gp := groupedPool.Get().(*[]Op)
	defer groupedPool.Put(gp)
	if cap(*gp) < len(ops) {
		*gp = make([]Op, len(ops))
	}
	grouped := (*gp)[:len(ops)]
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
						if j, ok := s.find(tagOf(op.Hash)); ok {
							s.removeAt(j)
						}
					} else {
						s.put(tagOf(op.Hash), op.Loc)
					}
				}
				s.Unlock()
			}
		}()
	}
	wg.Wait()
}

// groupedPool holds Apply's buffers for grouping ops by shard.
var groupedPool = sync.Pool{New: func() any { return new([]Op) }}

// Delete removes h and returns the location it had.
func (t *HashTable) Delete(h uint64) (old Loc, ok bool) {
	s, tag := t.shard(h)
	s.Lock()
	i, ok := s.find(tag)
	if ok {
		old = s.locs[i]
		s.removeAt(i)
	}
	s.Unlock()
	return old, ok
}

// DeleteIf removes h only if its location is in segment seg.
func (t *HashTable) DeleteIf(h uint64, seg uint32) (old Loc, ok bool) {
	s, tag := t.shard(h)
	s.Lock()
	i, ok := s.find(tag)
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
	var ts []uint32
	var ls []Loc
	for i := range t.shards {
		s := &t.shards[i].mu
		s.RLock()
		if cap(ts) < s.count {
			ts = make([]uint32, 0, s.count)
			ls = make([]Loc, 0, s.count)
		}
		ts, ls = ts[:0], ls[:0]
		for j, tag := range s.tags {
			if tag != 0 {
				ts = append(ts, tag)
				ls = append(ls, s.locs[j])
			}
		}
		s.RUnlock()
		for j, tag := range ts {
			if !fn(hashOf(i, tag), ls[j]) {
				return
			}
		}
	}
}

// MemoryBytes returns the capacity of all shards times 16 bytes, their hit counts, plus the
// fixed shard array.
func (t *HashTable) MemoryBytes() int64 {
	n := int64(unsafe.Sizeof(*t))
	for i := range t.shards {
		s := &t.shards[i].mu
		s.RLock()
		n += int64(len(s.tags))*int64(slotBytes) + int64(len(s.marks))*8
		s.RUnlock()
	}
	return n
}

// home is the slot where the probe for tag starts: the tag scaled to the capacity by a multiply
// and a shift (Lemire's multiply-shift range reduction), so the capacity need not be a power of
// two. It keeps tag order: a larger tag never has a smaller home.
func (s *shardTable) home(tag uint32) int {
	return int(uint64(tag) * uint64(len(s.tags)) >> 32)
}

// find returns the slot that holds tag and true, or the empty slot that ends its probe and false.
func (s *shardTable) find(tag uint32) (int, bool) {
	ts := s.tags
	i := s.home(tag)
	for {
		switch ts[i] {
		case tag:
			return i, true
		case 0:
			return i, false
		}
		if i++; i == len(ts) {
			i = 0
		}
	}
}

func (s *shardTable) put(tag uint32, loc Loc) (Loc, bool) {
	i, ok := s.find(tag)
	if ok {
		old := s.locs[i]
		s.locs[i] = loc
		s.setHits(i, 0) // a new record: not hit yet
		return old, true
	}
	if c := len(s.tags); (s.count+1)*maxLoadDen > c*maxLoadNum {
		s.resize(c*growNum/growDen, false)
		i, _ = s.find(tag)
	}
	s.tags[i] = tag
	s.locs[i] = loc
	s.count++
	return Loc{}, false
}

// removeAt empties slot i by backward shift: each later entry of the run moves back into the
// hole unless its home lies in the cyclic interval (hole, its slot], where moving it would put it
// before its home. No tombstones, so probe lengths depend only on the load.
func (s *shardTable) removeAt(i int) {
	ts, ls := s.tags, s.locs
	j := i
	for {
		if j++; j == len(ts) {
			j = 0
		}
		tag := ts[j]
		if tag == 0 {
			break
		}
		k := s.home(tag)
		var stays bool
		if i <= j {
			stays = i < k && k <= j
		} else { // the run wrapped past the end between i and j
			stays = i < k || k <= j
		}
		if stays {
			continue
		}
		ts[i], ls[i] = tag, ls[j]
		s.setHits(i, s.hits(j))
		i = j
	}
	ts[i], ls[i] = 0, Loc{}
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
// in slot order, which is nearly tag order, so they land in the new arrays nearly in order too.
//
// Both arrays live in one pointer-free allocation, tags first, then locs (a Loc needs 4-byte
// alignment, as the tags have), so the allocator's rounding is paid once,
// not twice, and the rounded-up bytes become slots instead of hidden waste. With two separate
// arrays that waste was 2 B/entry of heap at 1M entries, 7% of the budget.
func (s *shardTable) resize(c int, atLeast bool) { s.resizeInto(nil, c, atLeast) }

// resizeInto is resize into buf, zeroed, of allocWords(c, atLeast) words; nil allocates it.
func (s *shardTable) resizeInto(buf []uint64, c int, atLeast bool) {
	if buf == nil {
		buf = slices.Grow([]uint64(nil), allocWords(c, atLeast)) // capacity: what the allocator really gives
	}
	buf = buf[:cap(buf)]
	c = len(buf) * 8 / slotBytes
	ot, ol, om := s.tags, s.locs, s.marks
	// tags covers bytes [0, 4c) of buf and locs [4c, 16c), and 16c <= 8*len(buf).
	base := unsafe.Pointer(unsafe.SliceData(buf))
	s.tags = unsafe.Slice((*uint32)(base), c)
	s.locs = unsafe.Slice((*Loc)(unsafe.Add(base, 4*c)), c)
	s.marks = make([]atomic.Uint64, (c+slotsPerMarkWord-1)/slotsPerMarkWord)
	for i, tag := range ot {
		if tag != 0 {
			j, _ := s.find(tag)
			s.tags[j], s.locs[j] = tag, ol[i]
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

// allocWords returns the buffer size, in 8-byte words, for about c slots (at least c with
// atLeast). Above maxSmallAlloc a growth step rounds to the nearest whole page rather than up:
// rounding up would make a shard of 2560 slots (5 pages) grow to 7 pages, 1.4x, and leave it at
// 0.62 load, 26 bytes per entry. Rounding down never undoes a growth step: it loses at most half
// a page, 256 slots, and a step that reaches this size adds more than 409 (0.25 of a capacity
// above 1638). A capacity hint rounds up: it promises room for the hinted entries.
func allocWords(c int, atLeast bool) int {
	b := c * slotBytes
	switch {
	case b <= maxSmallAlloc:
	case atLeast:
		b = (b + allocPage - 1) / allocPage * allocPage
	default:
		b = (b + allocPage/2) / allocPage * allocPage
	}
	return (b + 7) / 8
}
