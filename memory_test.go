package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// warm reads key until the memory tier serves it (its second hit from the segments puts it
// there), through Get, then ReadAt.
func warm(t *testing.T, c *Cache, key string, want []byte) {
	t.Helper()
	for i := 0; ; i++ {
		before := c.Stats().MemoryHits
		got, _, ok := readBlob(t, c, key)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("warming %s: hit %v, %d bytes", key, ok, len(got))
		}
		if c.Stats().MemoryHits > before {
			break
		}
		if i == 3 {
			t.Fatalf("%s is not served from the memory tier after %d reads: %+v", key, i+1, c.Stats())
		}
	}
	p := make([]byte, len(want))
	before := c.Stats().MemoryHits
	if n, err := c.ReadAt([]byte(key), p, 0); err != nil || n != len(want) || !bytes.Equal(p, want) {
		t.Fatalf("ReadAt %s: %d, %v", key, n, err)
	}
	if c.Stats().MemoryHits != before+1 {
		t.Fatalf("ReadAt of %s did not come from the memory tier", key)
	}
}

// TestMemoryTierServesHits: the second hit from the segments puts the value in the memory tier,
// and later hits (Get, GetRange, ReadAt at an offset, Stat) come from it, with the same bytes
// and metadata, reading nothing.
func TestMemoryTierServesHits(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(64<<20))...)
	defer c.Close()
	v := value("k", 1, 50<<10)
	if _, err := c.PutWith([]byte("k"), v, PutOptions{Flags: 7, Attrs: "type: x"}); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	warm(t, c, "k", v)
	st := c.Stats()
	got, info, ok := readBlob(t, c, "k")
	if !ok || !bytes.Equal(got, v) || info.Flags != 7 || info.Attrs != "type: x" || info.Size != int64(len(v)) {
		t.Fatalf("from memory: %v, %d bytes, %+v", ok, len(got), info)
	}
	r, ok := c.GetRange([]byte("k"), 100, 10)
	if !ok {
		t.Fatal("GetRange missed")
	}
	var part [10]byte
	if n, _ := r.Read(part[:]); n != 10 || !bytes.Equal(part[:], v[100:110]) {
		t.Fatalf("GetRange: %d bytes %x", n, part[:n])
	}
	r.Close()
	p := make([]byte, 20)
	if n, err := c.ReadAt([]byte("k"), p, int64(len(v)-10)); n != 10 || err == nil || !bytes.Equal(p[:10], v[len(v)-10:]) {
		t.Fatalf("ReadAt past the end: %d, %v", n, err)
	}
	if info, err := c.Stat([]byte("k")); err != nil || info.Flags != 7 || info.Size != int64(len(v)) {
		t.Fatalf("Stat: %+v, %v", info, err)
	}
	after := c.Stats()
	if after.MemoryHits-st.MemoryHits != 4 || after.ReadsPageCache+after.ReadsFilled+after.ReadsDirect != st.ReadsPageCache+st.ReadsFilled+st.ReadsDirect {
		t.Fatalf("memory hits %d (want 4), reads from segments before %+v after %+v", after.MemoryHits-st.MemoryHits, st, after)
	}
	if after.MemoryItems != 1 || after.MemoryBytes < int64(len(v)) || after.MemoryBytes > after.MemoryCapacity {
		t.Fatalf("tier holds %d values in %d bytes of %d", after.MemoryItems, after.MemoryBytes, after.MemoryCapacity)
	}
}

// TestMemoryTierCoherence: once a key's value is in the memory tier, every change to the key is
// seen at once, through Get, ReadAt and Stat, while the change is in the write buffer and after
// it is in a segment: an overwrite, a Delete, a conditional write, a Touch, an expiry, an
// InvalidateAll, and eviction under MaxSize. Never the value from memory.
func TestMemoryTierCoherence(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, c *Cache, key string) (want []byte, present bool)
	}{
		{"overwrite", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			v := value(key, 2, 30<<10)
			if err := c.Put([]byte(key), v); err != nil {
				t.Fatal(err)
			}
			return v, true
		}},
		{"delete", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			if err := c.Delete([]byte(key)); err != nil {
				t.Fatal(err)
			}
			return nil, false
		}},
		{"conditional", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			info, err := c.Stat([]byte(key))
			if err != nil {
				t.Fatal(err)
			}
			v := value(key, 3, 20<<10)
			if _, err := c.PutWith([]byte(key), v, PutOptions{If: IfVersion(info.Version)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutWith([]byte(key), value(key, 4, 10), PutOptions{If: IfVersion(info.Version)}); !errors.Is(err, ErrExists) {
				t.Fatalf("a write conditional on the value in memory succeeded: %v", err)
			}
			return v, true
		}},
		{"delete-if", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			info, err := c.Stat([]byte(key))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.DeleteIf([]byte(key), IfVersion(info.Version)); err != nil {
				t.Fatal(err)
			}
			return nil, false
		}},
		{"touch-then-expire", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			if err := c.Touch([]byte(key), clock().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			now.Add(int64(2 * time.Minute))
			return nil, false
		}},
		{"expiry", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			now.Add(int64(2 * time.Hour)) // the value was put to expire in an hour
			return nil, false
		}},
		{"invalidate", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			if err := c.InvalidateAll(time.Time{}); err != nil {
				t.Fatal(err)
			}
			return nil, false
		}},
		{"evicted", func(t *testing.T, c *Cache, key string) ([]byte, bool) {
			// Fill the disk past MaxSize with other keys: the key's segment goes (FIFO).
			for i := range 200 {
				k := fmt.Sprintf("filler%03d", i)
				if err := c.Put([]byte(k), value(k, 0, 60<<10)); err != nil {
					t.Fatal(err)
				}
			}
			c.Drain()
			return nil, false
		}},
	} {
		for _, run := range []struct {
			drain     bool
			admission MemoryAdmission
		}{{false, MemoryOnSecondHit}, {true, MemoryOnSecondHit}, {false, MemoryOnWrite}, {true, MemoryOnWrite}} {
			drain := run.drain
			t.Run(fmt.Sprintf("%s/drained=%v/%v", tc.name, drain, run.admission), func(t *testing.T) {
				opts := small(WithClock(clock), WithMemorySize(64<<20), WithMemoryAdmission(run.admission))
				if tc.name == "evicted" {
					opts = small(WithClock(clock), WithMemorySize(64<<20), WithMemoryAdmission(run.admission), WithMaxSize(4<<20), WithPolicy(PolicyFIFO), WithSegmentSize(1<<20))
				}
				c := open(t, t.TempDir(), opts...)
				defer c.Close()
				key := "key"
				v := value(key, 1, 40<<10)
				if _, err := c.PutWith([]byte(key), v, PutOptions{Expires: clock().Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
				c.Drain()
				warm(t, c, key, v)
				want, present := tc.change(t, c, key)
				if drain {
					c.Drain()
				}
				for i := range 3 { // the change's record may itself be read twice and enter the tier
					got, _, ok := readBlob(t, c, key)
					if ok != present || present && !bytes.Equal(got, want) {
						t.Fatalf("read %d after the change: hit %v (want %v), %d bytes, the new value: %v",
							i, ok, present, len(got), bytes.Equal(got, want))
					}
					p := make([]byte, len(v)+10)
					n, err := c.ReadAt([]byte(key), p, 0)
					if present != (err == nil || n > 0) || present && !bytes.Equal(p[:n], want) {
						t.Fatalf("ReadAt %d after the change: %d, %v", i, n, err)
					}
					if _, err := c.Stat([]byte(key)); (err == nil) != present {
						t.Fatalf("Stat %d after the change: %v", i, err)
					}
				}
			})
		}
	}
}

// TestMemoryTierConcurrent: writers overwrite and delete keys with values that carry their
// sequence number while readers read them, through Get and ReadAt; a reader never sees a key go
// back to an older value than one it saw, nor a torn one, and the tier stays within its bound.
// Run with -race.
func TestMemoryTierConcurrent(t *testing.T) {
	for _, a := range []MemoryAdmission{MemoryOnSecondHit, MemoryOnWrite} {
		t.Run(a.String(), func(t *testing.T) { testMemoryTierConcurrent(t, a) })
	}
}

func testMemoryTierConcurrent(t *testing.T, admission MemoryAdmission) {
	const keys, size = 32, 2 << 10
	c := open(t, t.TempDir(), small(WithMemorySize(48<<10), WithMemoryAdmission(admission))...) // room for about half the keys
	defer c.Close()
	seq := func(v []byte) uint64 {
		var s uint64
		for i := range 8 {
			s |= uint64(v[i]) << (8 * i)
		}
		return s
	}
	mk := func(k int, s uint64) []byte {
		v := value(fmt.Sprint(k), int(s), size)
		for i := range 8 {
			v[i] = byte(s >> (8 * i))
		}
		return v
	}
	check := func(k int, v []byte) bool { return bytes.Equal(v, mk(k, seq(v))) }
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	var writes atomic.Uint64
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var s uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := w*keys/2 + rng.IntN(keys/2) // each key has one writer: its sequence grows
				s++
				if rng.IntN(10) == 0 {
					_ = c.Delete([]byte(fmt.Sprint(k)))
				} else if err := c.Put([]byte(fmt.Sprint(k)), mk(k, s)); err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(20) == 0 {
					c.Drain()
				}
				writes.Add(1)
			}
		}()
	}
	var over atomic.Int64
	for r := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 3))
			seen := make([]uint64, keys)
			p := make([]byte, size)
			for range 20000 {
				k := rng.IntN(keys)
				var v []byte
				if rng.IntN(2) == 0 {
					got, _, ok := readBlob(t, c, fmt.Sprint(k))
					if !ok {
						continue
					}
					v = got
				} else {
					n, err := c.ReadAt([]byte(fmt.Sprint(k)), p, 0)
					if err != nil {
						continue
					}
					v = p[:n]
				}
				if len(v) != size || !check(k, v) {
					t.Errorf("key %d: %d bytes, not a value written", k, len(v))
					return
				}
				if s := seq(v); s < seen[k] {
					t.Errorf("key %d: value %d after %d", k, s, seen[k])
					return
				} else {
					seen[k] = s
				}
				if st := c.Stats(); st.MemoryBytes > st.MemoryCapacity {
					over.Store(st.MemoryBytes)
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	writers.Wait()
	st := c.Stats()
	t.Logf("%d writes; memory tier: %d hits, %d inserts, %d evictions, %d declined", writes.Load(), st.MemoryHits, st.MemoryInserts, st.MemoryEvictions, st.MemoryDeclined)
	if b := over.Load(); b != 0 {
		t.Fatalf("the memory tier held %d bytes, over its capacity", b)
	}
	if st.MemoryHits == 0 {
		t.Fatal("no read came from the memory tier: the test did not exercise it")
	}
}

// TestMemoryTierChecksOnEntry: a value damaged on disk after its first hit does not enter the
// memory tier on its second: the check as it enters finds the damage, counts it, and the read is
// a miss (or, checking on read, an error); no read returns the damaged bytes from memory, with or
// without VerifyOnRead.
func TestMemoryTierChecksOnEntry(t *testing.T) {
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprintf("verify=%v", verify), func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, small(WithVerifyOnRead(verify), WithMemorySize(64<<20))...)
			defer c.Close()
			v := value("k", 0, 4<<10)
			if err := c.Put([]byte("k"), v); err != nil {
				t.Fatal(err)
			}
			c.Drain()
			if got, _, ok := readBlob(t, c, "k"); !ok || !bytes.Equal(got, v) {
				t.Fatal("first read")
			}
			flipValueBit(t, dir, "k", 100)
			for i := range 3 {
				r, ok := c.Get([]byte("k"))
				if !ok {
					continue
				}
				got, err := io.ReadAll(r)
				if err == nil && !bytes.Equal(got, v) {
					t.Fatalf("read %d after the damage returned damaged bytes without an error", i+2)
				}
			}
			st := c.Stats()
			if st.MemoryItems != 0 || st.MemoryHits != 0 || st.CorruptRecord == 0 {
				t.Fatalf("after damage: tier holds %d, served %d, damage counted %d", st.MemoryItems, st.MemoryHits, st.CorruptRecord)
			}
		})
	}
}

// TestMemoryOnWrite: with MemoryOnWrite a value enters the memory tier as its batch is
// committed, so its first read comes from memory; a value streamed to its segment (larger than
// the write buffer) does not, and enters on its second hit; an unknown admission is refused.
func TestMemoryOnWrite(t *testing.T) {
	c2 := open(t, t.TempDir(), small(WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite), WithWriteBufferSize(1<<20))...)
	defer c2.Close()
	c := open(t, t.TempDir(), small(WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite))...)
	defer c.Close()
	small, large := value("s", 1, 5000), value("l", 1, 200<<10) // the write buffer is 64 KiB
	for k, v := range map[string][]byte{"s": small, "l": large} {
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	if st := c.Stats(); st.MemoryInserts != 1 || st.MemoryItems != 1 {
		t.Fatalf("after the commit: %d inserts, %d items; want the small value alone", st.MemoryInserts, st.MemoryItems)
	}
	before := c.Stats().MemoryHits
	if got, _, ok := readBlob(t, c, "s"); !ok || !bytes.Equal(got, small) {
		t.Fatalf("s: hit %v, %d bytes", ok, len(got))
	}
	if c.Stats().MemoryHits != before+1 {
		t.Fatal("the first read of a value written with MemoryOnWrite did not come from memory")
	}
	warm(t, c, "l", large)
	// Overwritten: the new record enters, the old entry is never served.
	v2 := value("s", 2, 6000)
	if err := c.Put([]byte("s"), v2); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	before = c.Stats().MemoryHits
	if got, _, ok := readBlob(t, c, "s"); !ok || !bytes.Equal(got, v2) || c.Stats().MemoryHits != before+1 {
		t.Fatalf("s after an overwrite: hit %v, the new value %v, from memory %v", ok, bytes.Equal(got, v2), c.Stats().MemoryHits == before+1)
	}
	// PutFrom of a value past StreamThreshold that a write buffer holds is read whole rather
	// than streamed, so it enters as it is written too.
	mid := value("m", 1, StreamThreshold+5000)
	if err := c2.PutFrom([]byte("m"), bytes.NewReader(mid), int64(len(mid))); err != nil {
		t.Fatal(err)
	}
	c2.Drain()
	if got, _, ok := readBlob(t, c2, "m"); !ok || !bytes.Equal(got, mid) || c2.Stats().MemoryHits != 1 {
		t.Fatalf("PutFrom past StreamThreshold: hit %v, right %v, %d hits from memory", ok, bytes.Equal(got, mid), c2.Stats().MemoryHits)
	}
	if _, err := New(t.TempDir(), WithMemoryAdmission(MemoryOnWrite+1)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("an unknown admission: %v", err)
	}
}

// TestReaderBuffered: a Reader of a value in the memory tier hands its bytes over in place
// (Buffered), small or large; so does one that read a value whole from its file, after checking
// it, and one whose check fails hands nothing over and reports the mismatch from Read; one that
// still has bytes in its file is read as usual.
func TestReaderBuffered(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite), WithWriteBufferSize(1<<20))...)
	defer c.Close()
	vals := map[string][]byte{"small": value("small", 1, 3000), "large": value("large", 1, 600<<10)}
	for k, v := range vals {
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	for k, v := range vals {
		r, ok := c.Get([]byte(k))
		if !ok {
			t.Fatalf("%s: miss", k)
		}
		b, ok := r.Buffered()
		if !ok || !bytes.Equal(b, v) {
			t.Fatalf("%s from memory: Buffered %v, %d bytes, equal %v", k, ok, len(b), bytes.Equal(b, v))
		}
		r.Close()
	}
	// A value streamed to its segment (larger than the write buffer), opened: bytes left in the
	// file, not buffered, and read as usual.
	v := value("disk", 1, 1536<<10)
	if err := c.Put([]byte("disk"), v); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	r, ok := c.Open([]byte("disk"))
	if !ok {
		t.Fatal("disk: miss")
	}
	if _, ok := r.Buffered(); ok {
		t.Fatal("disk: Buffered with bytes left in the file")
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, v) {
		t.Fatalf("disk read as usual: %d bytes, %v", len(got), err)
	}
	r.Close()

	// A verifying reader of a value read whole from its file (Open reads it whole, since it
	// must check it): checked by Buffered, then handed over; damaged, never handed over.
	dir := t.TempDir()
	vc := open(t, dir, small(WithVerifyOnRead(true))...)
	defer vc.Close()
	for _, k := range []string{"k", "bad"} {
		if err := vc.Put([]byte(k), vals["small"]); err != nil {
			t.Fatal(err)
		}
	}
	vc.Drain()
	flipValueBit(t, dir, "bad", 100)
	r, ok = vc.Open([]byte("k"))
	if !ok || !r.Verifies() {
		t.Fatalf("k: hit %v, verifies %v", ok, ok && r.Verifies())
	}
	if b, ok := r.Buffered(); !ok || !bytes.Equal(b, vals["small"]) {
		t.Fatalf("k read whole: Buffered %v, %d bytes", ok, len(b))
	}
	r.Close()
	corrupt := vc.Stats().CorruptRecord
	r, ok = vc.Open([]byte("bad"))
	if !ok {
		t.Fatal("bad: miss")
	}
	if b, ok := r.Buffered(); ok {
		t.Fatalf("bad: Buffered handed over %d damaged bytes", len(b))
	}
	if got, err := io.ReadAll(r); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("bad read after Buffered refused it: %d bytes, %v", len(got), err)
	}
	r.Close()
	if n := vc.Stats().CorruptRecord; n != corrupt+1 {
		t.Fatalf("damage counted %d times", n-corrupt)
	}
}

// TestCloseFreesMemoryTier: Close gives the memory tier's memory back (it lies outside the Go
// heap, where nothing else would), except a value a Reader still holds, which reads whole after
// Close and goes back when the Reader is closed.
func TestCloseFreesMemoryTier(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(16<<20), WithMemoryAdmission(MemoryOnWrite), WithWriteBufferSize(1<<20))...)
	vals := putKeys(t, c, "k", 40, 0, 100<<10)
	c.Drain()
	if st := c.Stats(); st.MemoryItems != 40 {
		t.Fatalf("%d values in memory, want 40", st.MemoryItems)
	}
	hits := c.Stats().MemoryHits
	r, ok := c.Get([]byte("k3"))
	if !ok || c.Stats().MemoryHits != hits+1 {
		t.Fatal("k3 not read from memory")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m := c.mem.Mapped(); m == 0 || m > 2*int64(len(vals["k3"])) {
		t.Fatalf("%d bytes mapped after Close with one value held", m)
	}
	got, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(got, vals["k3"]) {
		t.Fatalf("the value held across Close: %d bytes, %v", len(got), err)
	}
	r.Close()
	if m := c.mem.Mapped(); m != 0 {
		t.Fatalf("%d bytes of the memory tier still mapped after Close and the last Reader", m)
	}
}

// TestMemoryOnWriteLostBatch: a value enters the memory tier as it is written (its copy made then,
// counted at once) but is found there only once its batch is committed; a batch whose write fails
// gives its copies up, so the tier's bytes come back to what the committed values take, and none
// of the lost values is served from memory, nor anything else for their keys.
func TestMemoryOnWriteLostBatch(t *testing.T) {
	fs := faultyFS(t)
	c := open(t, t.TempDir(), small(withFS(fs), WithMemorySize(16<<20), WithMemoryAdmission(MemoryOnWrite), WithFlushInterval(time.Hour))...)
	defer c.Close()
	base := putKeys(t, c, "base", 20, 0, 3000)
	c.Drain()
	st0 := c.Stats()
	if st0.MemoryItems != 20 {
		t.Fatalf("%d values in memory after the first commit, want 20", st0.MemoryItems)
	}
	fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Times: 1})
	lost := putKeys(t, c, "lost", 5, 0, 3000)
	if st := c.Stats(); st.MemoryBytes <= st0.MemoryBytes || st.MemoryItems != 20 {
		t.Fatalf("before the commit: %d bytes (%d before), %d items; want more bytes, no more items", st.MemoryBytes, st0.MemoryBytes, st.MemoryItems)
	}
	c.Drain()
	if st := c.Stats(); st.FlushErrors == 0 || st.MemoryBytes != st0.MemoryBytes || st.MemoryItems != 20 {
		t.Fatalf("after the lost batch: %d flush errors, %d bytes in memory (%d before), %d items", st.FlushErrors, st.MemoryBytes, st0.MemoryBytes, st.MemoryItems)
	}
	hits := c.Stats().MemoryHits
	for k, v := range lost {
		if lookup(t, c, k, v) == hit {
			t.Fatalf("%s: a value of a lost batch is served", k)
		}
	}
	if c.Stats().MemoryHits != hits {
		t.Fatal("a lost key was looked up in memory and hit")
	}
	expectAll(t, c, base)
}

// TestMemoryOnWriteDamageAfter: a value that entered the memory tier as it was written is served
// from memory with the bytes written, whatever happens to its record on disk afterwards: a
// flipped byte there is never returned while the tier holds the value, and once the tier lets it
// go, the disk's copy is checked as any other (a miss with VerifyOnRead, never wrong bytes).
func TestMemoryOnWriteDamageAfter(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small(WithVerifyOnRead(true), WithMemorySize(64<<20), WithMemoryAdmission(MemoryOnWrite))...)
	defer c.Close()
	v := value("k", 0, 4<<10)
	if err := c.Put([]byte("k"), v); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	flipValueBit(t, dir, "k", 100)
	for range 3 {
		before := c.Stats().MemoryHits
		got, _, ok := readBlob(t, c, "k")
		if !ok || !bytes.Equal(got, v) || c.Stats().MemoryHits != before+1 {
			t.Fatalf("from memory after the disk's copy was damaged: hit %v, the bytes written %v", ok, bytes.Equal(got, v))
		}
	}
	// The tier lets it go (a new cache: the tier starts empty): the disk's copy is checked.
	c.Close()
	c = open(t, dir, small(WithVerifyOnRead(true), WithMemorySize(64<<20), WithMemoryAdmission(MemoryOnWrite))...)
	r, ok := c.Get([]byte("k"))
	if ok {
		got, err := io.ReadAll(r)
		r.Close()
		if err == nil || bytes.Equal(got, v) && err == nil {
			t.Fatalf("the damaged record read back without an error: %d bytes, %v", len(got), err)
		}
	}
}

// flipValueBit flips a bit of byte at of key's value in the first segment of the cache in dir.
func flipValueBit(t *testing.T, dir, key string, at int64) {
	t.Helper()
	seg, b, off, h := segmentRecord(t, dir, key)
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at += off + h.ValueOffset()
	if _, err := f.WriteAt([]byte{b[at] ^ 0x08}, at); err != nil {
		t.Fatal(err)
	}
}

// TestOpenResidentInto: OpenResidentInto answers as OpenInto wherever Resident says a read would
// open no file, and elsewhere stops having read and counted nothing, its reader closed.
func TestOpenResidentInto(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(64<<20))...)
	defer c.Close()
	k := []byte("k")
	v := value("k", 1, 50<<10)
	var r Reader
	check := func(state string, wantFound, wantResident bool) {
		t.Helper()
		if got := c.Resident(k); got != wantResident {
			t.Fatalf("%s: Resident %v, want %v", state, got, wantResident)
		}
		before := c.Stats()
		found, resident := c.OpenResidentInto(&r, k)
		after := c.Stats()
		if found != wantFound || resident != wantResident {
			t.Fatalf("%s: found %v resident %v, want %v %v", state, found, resident, wantFound, wantResident)
		}
		if !resident {
			if after.Hits != before.Hits || after.Misses != before.Misses || after.MemoryHits != before.MemoryHits ||
				after.MemoryMisses != before.MemoryMisses || after.MemoryBytes != before.MemoryBytes {
				t.Fatalf("%s: a read that stopped counted: %+v, then %+v", state, before, after)
			}
		}
		if !found {
			if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("%s: the reader of a read that found nothing gave %d bytes, %v", state, n, err)
			}
			return
		}
		if after.Hits != before.Hits+1 {
			t.Fatalf("%s: a hit counted %d hits", state, after.Hits-before.Hits)
		}
		got, err := io.ReadAll(&r)
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: read %d bytes, %v", state, len(got), err)
		}
		r.Close()
	}
	check("absent", false, true)
	if err := c.Put(k, v); err != nil {
		t.Fatal(err)
	}
	check("in the write buffer", true, true)
	c.Drain()
	check("only in its segment", false, false)
	check("only in its segment, asked again", false, false) // the stop admitted nothing
	warm(t, c, "k", v)
	check("in the memory tier", true, true)
	if err := c.Delete(k); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	check("deleted", false, true)
}

// TestResident: Resident says a Get would read no file exactly when the key is absent, in the
// write buffer, or held by the memory tier; it counts nothing.
func TestResident(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(64<<20))...)
	defer c.Close()
	v := value("k", 1, 50<<10)
	if !c.Resident([]byte("k")) {
		t.Fatal("an absent key is not resident (a miss reads nothing)")
	}
	if err := c.Put([]byte("k"), v); err != nil {
		t.Fatal(err)
	}
	if !c.Resident([]byte("k")) {
		t.Fatal("a key in the write buffer is not resident")
	}
	c.Drain()
	before := c.Stats()
	if c.Resident([]byte("k")) {
		t.Fatal("a key only in its segment (never read, so not in the memory tier) is resident")
	}
	if after := c.Stats(); after.Hits != before.Hits || after.Misses != before.Misses || after.MemoryHits != before.MemoryHits {
		t.Fatalf("Resident counted: %+v, then %+v", before, after)
	}
	warm(t, c, "k", v)
	if !c.Resident([]byte("k")) {
		t.Fatal("a key the memory tier holds is not resident")
	}
	if err := c.Delete([]byte("k")); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if !c.Resident([]byte("k")) {
		t.Fatal("a deleted key is not resident (a miss reads nothing)")
	}
}
