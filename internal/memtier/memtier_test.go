package memtier

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func entry(key string, tag uint64, n int) *Entry {
	return &Entry{Hash: xxhash.Sum64String(key), Tag: tag, Key: []byte(key), Value: make([]byte, n)}
}

func TestGetIsBoundToTagAndKey(t *testing.T) {
	tr := New(1 << 20)
	e := entry("k", 7, 100)
	if !tr.Insert(e) {
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
	newer := entry("k", 9, 50)
	tr.Insert(newer)
	if tr.Get(e.Hash, 7, []byte("k")) != nil || tr.Get(e.Hash, 9, []byte("k")) != newer {
		t.Fatal("a newer entry of the key did not replace the older")
	}
	if st := tr.Stats(); st.Items != 1 || st.Bytes != newer.Size() {
		t.Fatalf("after a replacement: %d items, %d bytes; want 1, %d", st.Items, st.Bytes, newer.Size())
	}
	tr.Remove(e.Hash)
	if tr.Get(e.Hash, 9, []byte("k")) != nil || tr.Stats().Bytes != 0 || tr.Stats().Items != 0 {
		t.Fatal("removed entry still held")
	}
}

func TestRefusesLargeEntries(t *testing.T) {
	tr := New(1 << 20)
	if tr.Insert(entry("big", 1, 1<<20/16)) {
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
	hot := entry("hot", 1, size)
	tr.Insert(hot)
	tr.Get(hot.Hash, 1, hot.Key)
	for i := range 1000 {
		tr.Insert(entry(fmt.Sprintf("cold%04d", i), 1, size))
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
	c := entry(fmt.Sprintf("cold%04d", last), 2, size)
	tr.Insert(c)
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
	tr := New(256 << 10)
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 20000 {
				k := fmt.Sprintf("k%03d", rng.IntN(300))
				h := xxhash.Sum64String(k)
				tag := uint64(rng.IntN(3))
				switch rng.IntN(10) {
				case 0, 1:
					e := entry(k, tag, 1+rng.IntN(8<<10))
					e.Value[0] = byte(tag)
					tr.Insert(e)
				case 2:
					tr.Remove(h)
				default:
					if e := tr.Get(h, tag, []byte(k)); e != nil && (e.Tag != tag || string(e.Key) != k || len(e.Value) > 0 && e.Value[0] != byte(tag)) {
						t.Errorf("Get(%s, %d) found tag %d key %s", k, tag, e.Tag, e.Key)
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

// TestQueuesDropRemovedEntries: removed entries do not stay in the queues (where they would keep
// their values alive) beyond the compaction.
func TestQueuesDropRemovedEntries(t *testing.T) {
	tr := New(64 << 20)
	for i := range 10000 {
		e := entry(fmt.Sprintf("k%05d", i), 1, 10)
		tr.Insert(e)
		tr.Remove(e.Hash)
	}
	if n := tr.small.len() + tr.main.len(); n > 200 {
		t.Fatalf("%d queue slots for an empty tier", n)
	}
}

func BenchmarkGet(b *testing.B) {
	tr := New(64 << 20)
	e := entry("key", 1, 4096)
	tr.Insert(e)
	b.ReportAllocs()
	for b.Loop() {
		if tr.Get(e.Hash, 1, e.Key) == nil {
			b.Fatal("miss")
		}
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
