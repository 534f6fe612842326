package memtier

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/seed57392e9e/blobcache/internal/hugemem"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// add adds to t the entry of key, tagged tag, with a value of n bytes, the first of them v0,
// and returns it (nil if it did not enter).
func add(t *Tier, key string, tag uint64, n int, v0 byte) *Entry {
	v := make([]byte, n)
	if n > 0 {
		v[0] = v0
	}
	h := xxhash.Sum64String(key)
	if !t.Add(h, tag, []byte(key), record.Header{}, "", v) {
		return nil
	}
	s := t.shard(h)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m[h]
}

func TestGetIsBoundToTagAndKey(t *testing.T) {
	tr := New(1 << 20)
	e := add(tr, "k", 7, 100, 0)
	if e == nil {
		t.Fatal("insert refused")
	}
	if got := tr.Get(e.Hash, 7, []byte("k")); got != e {
		t.Fatal("entry not found")
	}
	if tr.Get(e.Hash, 8, []byte("k")) != nil {
		t.Fatal("found for another tag: a newer record of the key would read the older value")
	}
	if tr.Get(e.Hash, 7, []byte("other key, same hash")) != nil {
		t.Fatal("found for another key of the same hash")
	}
	newer := add(tr, "k", 9, 50, 0)
	if tr.Get(e.Hash, 7, []byte("k")) != nil || tr.Get(e.Hash, 9, []byte("k")) != newer {
		t.Fatal("a newer entry of the key did not replace the older")
	}
	if st := tr.Stats(); st.Items != 1 || st.Bytes != newer.Size() {
		t.Fatalf("after a replacement: %d items, %d bytes; want 1, %d", st.Items, st.Bytes, newer.Size())
	}
}

func TestRefusesLargeEntries(t *testing.T) {
	tr := New(1 << 20)
	if add(tr, "big", 1, 1<<20/16, 0) != nil {
		t.Fatal("an entry over MaxEntryShare of the capacity entered")
	}
	if tr.Stats().Declined != 1 {
		t.Fatal("refusal not counted")
	}
}

// TestS3FIFO: a key hit while in the small queue survives a scan of keys read once; keys read
// once are evicted from the small queue and remembered by the ghost, so their next entry goes to
// main.
func TestS3FIFO(t *testing.T) {
	const size = 1000
	tr := New(100 * (size + EntryOverhead + 8))
	hot := add(tr, "hot", 1, size, 0)
	tr.Get(hot.Hash, 1, hot.Key)
	for i := range 1000 {
		add(tr, fmt.Sprintf("cold%04d", i), 1, size, 0)
	}
	if tr.Get(hot.Hash, 1, hot.Key) == nil {
		t.Fatal("the hot key was evicted by a scan")
	}
	// The last cold key evicted went through the small queue unread: its hash is in the ghost,
	// so its next entry goes to main.
	last := -1
	for i := range 1000 {
		k := fmt.Sprintf("cold%04d", i)
		if tr.Get(xxhash.Sum64String(k), 1, []byte(k)) == nil {
			last = i
		}
	}
	c := add(tr, fmt.Sprintf("cold%04d", last), 2, size, 0)
	if c.state.Load() != inMain {
		t.Fatalf("cold%04d, which the ghost remembers, did not enter main", last)
	}
	if st := tr.Stats(); st.Evictions == 0 || st.Bytes > tr.capacity {
		t.Fatalf("stats %+v", st)
	}
}

// TestBoundUnderConcurrency inserts, reads and removes from several goroutines and checks the
// bound at every step, and that every entry found is the one asked for.
func TestBoundUnderConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int64
		maxValue int // values of 1 to maxValue bytes
		steps    int // for each of 4 goroutines
	}{
		{"slab buffers", 256 << 10, 8 << 10, 20000},
		{"mapped buffers", 8 << 20, 400 << 10, 4000}, // from 64 KiB each in a mapping of its own
	} {
		t.Run(tc.name, func(t *testing.T) { testBoundUnderConcurrency(t, tc.capacity, tc.maxValue, tc.steps) })
	}
}

func testBoundUnderConcurrency(t *testing.T, capacity int64, maxValue, steps int) {
	tr := New(capacity)
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range steps {
				k := fmt.Sprintf("k%03d", rng.IntN(300))
				h := xxhash.Sum64String(k)
				tag := uint64(rng.IntN(3))
				switch rng.IntN(10) {
				case 0, 1:
					add(tr, k, tag, 1+rng.IntN(maxValue), byte(tag))
				case 2:
					add(tr, k, tag+1, 1, byte(tag+1)) // a newer record of the key replaces the entry
				default:
					if e := tr.Get(h, tag, []byte(k)); e != nil {
						if e.Tag != tag || string(e.Key) != k || e.Value[0] != byte(tag) {
							t.Errorf("Get(%s, %d) found tag %d key %s value %d", k, tag, e.Tag, e.Key, e.Value[0])
						}
						tr.Release(e)
					}
				}
				if b := tr.Stats().Bytes; b > tr.capacity {
					over.Store(b)
				}
			}
		}()
	}
	wg.Wait()
	if b := over.Load(); b != 0 {
		t.Fatalf("%d bytes held, over the capacity of %d", b, tr.capacity)
	}
	// What the tier counts is what its map holds.
	var bytes, items int64
	for i := range tr.shards {
		for _, e := range tr.shards[i].m {
			bytes += e.Size()
			items++
		}
	}
	if st := tr.Stats(); st.Bytes != bytes || st.Items != items {
		t.Fatalf("counted %d bytes in %d items, the map holds %d in %d", st.Bytes, st.Items, bytes, items)
	}
}

// TestQueuesDropRemovedEntries: entries replaced by newer ones of their key do not stay in the
// queues (where they would keep their buffers) beyond the compaction.
func TestQueuesDropRemovedEntries(t *testing.T) {
	tr := New(64 << 20)
	for i := range 10000 {
		add(tr, fmt.Sprintf("k%02d", i%10), uint64(i), 10, 0)
	}
	if n := tr.small.len() + tr.main.len(); n > 200 {
		t.Fatalf("%d queue slots for 10 entries", n)
	}
}

// TestBuffersReused: entries that come and go reuse the buffers of those gone, and a buffer an
// entry still held by a reader has is not given to another until the reader releases it.
func TestBuffersReused(t *testing.T) {
	tr := New(1 << 20)
	held := add(tr, "held", 1, 10000, 'h')
	r := tr.Get(held.Hash, 1, held.Key) // a reader holds it
	add(tr, "held", 2, 10000, 'n')      // a newer record of the key replaces it
	for i := range 1000 {
		add(tr, fmt.Sprintf("k%04d", i), 1, 10000, 'x')
	}
	if r.Value[0] != 'h' || string(r.Key) != "held" {
		t.Fatal("the buffer of an entry a reader held was given to another entry")
	}
	tr.Release(r)
	st := tr.Stats()
	if made := st.Inserts; made != 1002 {
		t.Fatalf("%d inserts", made)
	}
	if tr.freeBytes+st.Bytes > tr.capacity {
		t.Fatalf("%d bytes held and %d kept for reuse, over the capacity %d", st.Bytes, tr.freeBytes, tr.capacity)
	}
	v := make([]byte, 10000)
	allocs := testing.AllocsPerRun(100, func() { tr.Add(42, 1, []byte("key"), record.Header{}, "", v) })
	if allocs > 1.5 { // the Entry; its buffer is one an evicted entry left
		t.Fatalf("%.1f allocations per entry that comes and goes: buffers are not reused", allocs)
	}
}

func TestClasses(t *testing.T) {
	if numClasses != classes.Count() {
		t.Fatalf("numClasses %d, classes %d", numClasses, classes.Count())
	}
}

func BenchmarkGet(b *testing.B) {
	tr := New(64 << 20)
	e := add(tr, "key", 1, 4096, 0)
	b.ReportAllocs()
	for b.Loop() {
		g := tr.Get(e.Hash, 1, e.Key)
		if g == nil {
			b.Fatal("miss")
		}
		tr.Release(g)
	}
}

// BenchmarkBareCopy4K is the comparator of a 4 KiB hit from the tier: a copy of 4 KiB from one
// of 16K separately allocated values (64 MiB, as the root's BenchmarkReadAt4KMemory holds), in
// the same order, with nothing else: what the memory itself costs.
func BenchmarkBareCopy4K(b *testing.B) {
	const n = 16 << 10
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = make([]byte, 4<<10)
		vals[i][0] = byte(i)
	}
	buf := make([]byte, 4<<10)
	b.SetBytes(4 << 10)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		copy(buf, vals[(i*7919)%n])
		i++
	}
}

// BenchmarkDRAMLatency is a comparator for the tier's hit: one load whose address depends on
// the load before it, over a random cycle of 64-byte lines in 64 MiB (the size of
// BenchmarkBareCopy4K's values), so that each op waits for memory as a lookup's first touch of
// an index slot or an entry does. The hugepages variant lays the 64 MiB on memory advised as
// transparent huge pages (internal/hugemem), so that the loads miss no TLB entry: the difference
// is what the page walks cost.
func BenchmarkDRAMLatency(b *testing.B) {
	b.Run("4k-pages", func(b *testing.B) { dramLatency(b, make([]uint64, 64<<20/8)) })
	b.Run("hugepages", func(b *testing.B) { dramLatency(b, hugemem.Slice[uint64](64<<20/8)) })
}

func dramLatency(b *testing.B, next []uint64) {
	const lines = 64 << 20 / 64
	perm := rand.New(rand.NewPCG(1, 2)).Perm(lines)
	for i := range lines {
		next[perm[i]*8] = uint64(perm[(i+1)%lines] * 8) // one used word per 64-byte line
	}
	p := uint64(perm[0] * 8)
	for b.Loop() {
		p = next[p]
	}
	sink = p
}

// BenchmarkRegionCopy4K is BenchmarkBareCopy4K from one 64 MiB region instead of 16K separate
// values, on ordinary pages and on transparent huge pages: what a tier whose small buffers lay
// on huge pages would save on the copy.
func BenchmarkRegionCopy4K(b *testing.B) {
	b.Run("4k-pages", func(b *testing.B) { regionCopy(b, make([]byte, 64<<20)) })
	b.Run("hugepages", func(b *testing.B) { regionCopy(b, hugemem.Slice[byte](64<<20)) })
}

func regionCopy(b *testing.B, region []byte) {
	const n = 16 << 10
	for i := range region {
		region[i] = byte(i)
	}
	buf := make([]byte, 4<<10)
	b.SetBytes(4 << 10)
	i := uint64(0)
	for b.Loop() {
		k := (i * 7919) % n
		copy(buf, region[k<<12:(k+1)<<12])
		i++
	}
}

// BenchmarkLookupCopy4K is the least a hit found through an index can cost: a dependent load of
// a slot in a 64 MiB table, the load of the entry it points to, and the copy of that entry's
// 4 KiB value, with no hashing, locking or key check; the same values and order as
// BenchmarkBareCopy4K.
func BenchmarkLookupCopy4K(b *testing.B) {
	const n = 16 << 10
	type entry struct {
		tag   uint64
		value []byte
	}
	entries := make([]*entry, n)
	for i := range entries {
		entries[i] = &entry{tag: uint64(i), value: make([]byte, 4<<10)}
	}
	const slots = 64 << 20 / 8
	table := make([]uint32, slots)
	for i := range n {
		table[uint64(i)*2654435761%slots] = uint32(i)
	}
	buf := make([]byte, 4<<10)
	b.SetBytes(4 << 10)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		k := (i * 7919) % n
		e := entries[table[k*2654435761%slots]]
		if e.tag != k {
			b.Fatal("wrong entry")
		}
		copy(buf, e.value)
		i++
	}
}

var sink uint64

// BenchmarkHitSteps4K splits a 4 KiB hit from the tier into the steps it takes, each a
// sub-benchmark that adds one to the one before, over 16K entries (64 MiB of values, as
// BenchmarkBareCopy4K) visited in the same order:
//   - value: the copy of the value from its entry buffer, the buffer known in advance;
//   - entry: the Entry known in advance, its tag checked, then the copy;
//   - map: the entry found in its shard's map under the read lock, then as entry;
//   - copyto: Tier.CopyTo, which adds the key's comparison and the hit's count.
//
// The differences are what each step costs while the copies keep pushing the tier's own lines
// out of the CPU's caches.
func BenchmarkHitSteps4K(b *testing.B) {
	const n = 16 << 10
	tr := New(256 << 20)
	keys := make([][]byte, n)
	hs := make([]uint64, n)
	value := make([]byte, 4<<10)
	for i := range n {
		keys[i] = fmt.Appendf(nil, "%032d", i)
		hs[i] = uint64(i)*0x9e3779b97f4a7c15 | 1
		if !tr.Add(hs[i], uint64(i), keys[i], record.Header{}, "", value) {
			b.Fatal("not added")
		}
	}
	entries := make([]*Entry, n)
	values := make([][]byte, n)
	for i, h := range hs {
		entries[i] = tr.shard(h).m[h]
		values[i] = entries[i].Value
	}
	buf := make([]byte, 4<<10)
	step := func(name string, hit func(k uint64)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(4 << 10)
			b.ReportAllocs()
			i := uint64(0)
			for b.Loop() {
				hit((i * 7919) % n)
				i++
			}
		})
	}
	step("value", func(k uint64) { copy(buf, values[k]) })
	step("entry", func(k uint64) {
		e := entries[k]
		if e.Tag != k {
			b.Fatal("wrong entry")
		}
		copy(buf, e.Value)
	})
	step("map", func(k uint64) {
		s := tr.shard(hs[k])
		s.mu.RLock()
		e := s.m[hs[k]]
		if e.Tag != k {
			b.Fatal("wrong entry")
		}
		copy(buf, e.Value)
		s.mu.RUnlock()
	})
	step("copyto", func(k uint64) {
		if _, _, ok := tr.CopyTo(hs[k], k, keys[k], buf, 0); !ok {
			b.Fatal("miss")
		}
	})
}

// TestValueAtBufferStart: an entry's value starts its buffer, whatever the key's length, so a
// value in a buffer mapped on its own starts a page; a key of at most inlineKey bytes lies in
// the Entry, a longer one follows the value.
func TestValueAtBufferStart(t *testing.T) {
	tr := New(64 << 20)
	for _, keyLen := range []int{1, 20, 64, 250} {
		for _, size := range []int{100, 4096, slabBytes, 1 << 20} {
			key := bytes.Repeat([]byte{'k'}, keyLen)
			value := bytes.Repeat([]byte{'v'}, size)
			if !tr.Add(uint64(keyLen*1000003+size), 1, key, record.Header{}, "", value) {
				t.Fatalf("key %d, value %d: not added", keyLen, size)
			}
			e := tr.Get(uint64(keyLen*1000003+size), 1, key)
			if e == nil {
				t.Fatalf("key %d, value %d: not found", keyLen, size)
			}
			if &e.Value[0] != &e.buf[0] || !bytes.Equal(e.Value, value) || !bytes.Equal(e.Key, key) {
				t.Errorf("key %d, value %d: the value does not start its buffer, or the bytes differ", keyLen, size)
			}
			switch inline := &e.Key[0] == &e.inline[0]; {
			case inline != (keyLen <= inlineKey):
				t.Errorf("key %d, value %d: key in the Entry %v", keyLen, size, inline)
			case !inline && &e.Key[0] != &e.buf[size]:
				t.Errorf("key %d, value %d: a long key does not follow the value", keyLen, size)
			}
			if size >= slabBytes && uintptr(unsafe.Pointer(&e.Value[0]))%uintptr(pageSize) != 0 && mapsOnDemand {
				t.Errorf("key %d, value %d: a mapped buffer's value starts at page offset %d", keyLen, size,
					uintptr(unsafe.Pointer(&e.Value[0]))%uintptr(pageSize))
			}
			tr.Release(e)
		}
	}
}

// TestPrepareThenPublish: a prepared entry counts in Bytes at once, within the capacity, but no
// lookup finds it and no eviction takes it until Publish binds it to its tag; Discard gives its
// bytes back.
func TestPrepareThenPublish(t *testing.T) {
	tr := New(1 << 20)
	old := add(tr, "k", 1, 100, 'o')
	h := old.Hash
	v := bytes.Repeat([]byte{'n'}, 200)
	e := tr.Prepare(h, []byte("k"), record.Header{Version: 9}, "a", v)
	if e == nil {
		t.Fatal("prepare refused")
	}
	if tr.Get(h, 1, []byte("k")) != nil {
		t.Fatal("the older entry of the key is still found once a newer one is prepared")
	}
	if tr.Get(h, 2, []byte("k")) != nil {
		t.Fatal("a prepared entry was found before it was published")
	}
	if st := tr.Stats(); st.Bytes != e.Size() || st.Items != 0 {
		t.Fatalf("prepared: %d bytes, %d items; want %d, 0", st.Bytes, st.Items, e.Size())
	}
	// Filling the tier evicts what it must, never the prepared entry.
	for i := range 100 {
		add(tr, fmt.Sprint("fill", i), uint64(100+i), 32<<10, 0)
		if st := tr.Stats(); st.Bytes > st.Capacity {
			t.Fatalf("%d bytes in a tier of %d", st.Bytes, st.Capacity)
		}
	}
	tr.Publish(e, 2)
	got := tr.Get(h, 2, []byte("k"))
	if got != e || !bytes.Equal(got.Value, v) || got.Hdr.Version != 9 || got.Attrs != "a" {
		t.Fatal("the published entry is not found whole under its tag")
	}
	tr.Release(got)

	before := tr.Stats().Bytes
	d := tr.Prepare(xxhash.Sum64String("d"), []byte("d"), record.Header{}, "", v)
	if d == nil || tr.Stats().Bytes != before+d.Size() {
		t.Fatal("a prepared entry is not counted")
	}
	tr.Discard(d)
	if st := tr.Stats(); st.Bytes != before {
		t.Fatalf("after Discard: %d bytes, want %d", st.Bytes, before)
	}
}

// TestCloseGivesMemoryBack: Close takes every entry out and unmaps what nobody holds; an entry a
// reader holds keeps its bytes until released, and then the tier has nothing mapped. Nothing
// enters after Close, and an entry prepared before it and published after is discarded.
func TestCloseGivesMemoryBack(t *testing.T) {
	tr := New(16 << 20)
	for i := range 50 {
		add(tr, fmt.Sprint("small", i), uint64(i), 1000, byte(i))
		add(tr, fmt.Sprint("big", i), uint64(100+i), 100<<10, byte(i))
	}
	small := tr.Get(xxhash.Sum64String("small7"), 7, []byte("small7"))
	big := tr.Get(xxhash.Sum64String("big9"), 109, []byte("big9"))
	pending := tr.Prepare(xxhash.Sum64String("p"), []byte("p"), record.Header{}, "", make([]byte, 5000))
	if small == nil || big == nil || pending == nil {
		t.Fatal("entries missing before Close")
	}
	if m := tr.Mapped(); m < 50*100<<10 {
		t.Fatalf("%d bytes mapped before Close", m)
	}
	tr.Close()
	tr.Close() // twice is once
	if st := tr.Stats(); st.Items != 0 || st.Bytes != pending.Size() {
		t.Fatalf("after Close: %d items, %d bytes; want 0, the prepared entry's %d", st.Items, st.Bytes, pending.Size())
	}
	if tr.Get(big.Hash, 109, []byte("big9")) != nil || tr.Get(small.Hash, 7, []byte("small7")) != nil {
		t.Fatal("an entry is found after Close")
	}
	if small.Value[0] != 7 || big.Value[0] != 9 {
		t.Fatal("a held entry's bytes changed after Close")
	}
	tr.Publish(pending, 1) // discarded: the tier is closed
	if tr.Get(pending.Hash, 1, []byte("p")) != nil || tr.Stats().Bytes != 0 {
		t.Fatal("an entry published after Close entered")
	}
	// The big entry's buffer, and the slabs of the two small classes (unmapped with the last
	// small buffer).
	if m, want := tr.Mapped(), int64(classSize(classOf(100<<10)))+2*slabBytes; m != want {
		t.Fatalf("%d bytes mapped with two entries held, want %d", m, want)
	}
	tr.Release(big)
	tr.Release(small)
	if m := tr.Mapped(); m != 0 {
		t.Fatalf("%d bytes still mapped once no entry is held", m)
	}
	if add(tr, "late", 1, 100, 0) != nil || tr.Prepare(1, []byte("x"), record.Header{}, "", nil) != nil {
		t.Fatal("an entry entered a closed tier")
	}
}
