package blobcache

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestGetInto: one Reader the caller owns, reused for reads of every kind in random order (a
// value in the write buffer, small and large values from the memory tier, a value left in its
// segment file and streamed, a miss, Get, Open and OpenEncoded, read to the end, closed early,
// taken with Buffered, dropped by the next read; ranges with GetRangeInto), delivers what a Reader of Get delivers, and
// holds nothing once closed or reused: no tier entry, no segment reference.
func TestGetInto(t *testing.T) {
	c := open(t, t.TempDir(), small(WithMemorySize(16<<20), WithMemoryAdmission(MemoryOnWrite), WithWriteBufferSize(1<<20))...)
	defer c.Close()
	vals := map[string][]byte{
		"small": value("small", 1, 3000),
		"large": value("large", 1, 600<<10),
		"disk":  value("disk", 1, 1536<<10), // streamed to its segment: not in the tier
	}
	for k, v := range vals {
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	c.Drain()
	vals["pending"] = value("pending", 1, 5000)
	if err := c.Put([]byte("pending"), vals["pending"]); err != nil {
		t.Fatal(err)
	}
	keys := []string{"small", "large", "disk", "pending", "absent"}

	var r Reader
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		key := keys[rng.IntN(len(keys))]
		want, present := vals[key]
		var ok bool
		switch rng.IntN(4) {
		case 0:
			ok = c.GetInto(&r, []byte(key))
		case 1:
			ok = c.OpenInto(&r, []byte(key))
		case 2:
			ok = c.OpenEncodedInto(&r, []byte(key), CompressionZstd)
		default:
			off, n := 0, len(want)
			if present {
				off = rng.IntN(len(want))
				n = 100 + rng.IntN(len(want)-off)
				want = want[off:min(off+n, len(want))]
			}
			ok = c.GetRangeInto(&r, []byte(key), int64(off), int64(n))
		}
		if ok != present {
			t.Fatalf("read %d of %s: hit %v, want %v", i, key, ok, present)
		}
		if !ok {
			if _, err := r.Read(make([]byte, 1)); err != ErrClosed {
				t.Fatalf("read %d: a miss leaves the reader closed: Read = %v", i, err)
			}
			checkReleased(t, c, &r, i)
			continue
		}
		if r.Size() != int64(len(want)) || r.Info().Size != int64(len(vals[key])) {
			t.Fatalf("read %d of %s: Size %d, Info %+v", i, key, r.Size(), r.Info())
		}
		switch rng.IntN(4) {
		case 0: // read to the end
			got, err := io.ReadAll(&r)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %d of %s: %d bytes, %v", i, key, len(got), err)
			}
			checkReleased(t, c, &r, i)
		case 1: // taken in place, then closed
			if b, ok := r.Buffered(); ok {
				if !bytes.Equal(b, want) {
					t.Fatalf("read %d of %s: Buffered gives other bytes", i, key)
				}
			} else if key != "disk" {
				t.Fatalf("read %d of %s: not Buffered", i, key)
			}
			r.Close()
			checkReleased(t, c, &r, i)
		case 2: // part of it, then closed
			p := make([]byte, min(100, len(want)))
			if n, err := io.ReadFull(&r, p); n != len(p) || err != nil || !bytes.Equal(p, want[:len(p)]) {
				t.Fatalf("read %d of %s: first bytes %d, %v", i, key, n, err)
			}
			r.Close()
			checkReleased(t, c, &r, i)
		default: // dropped half read: the next GetInto closes it
			var p [100]byte
			io.ReadFull(&r, p[:])
		}
	}
	r.Close()
	checkReleased(t, c, &r, -1)
}

// checkReleased fails unless r holds nothing (a tier entry, a segment reference) and every
// segment is referenced by its owner alone.
func checkReleased(t *testing.T, c *Cache, r *Reader, i int) {
	t.Helper()
	if h := r.owned; h != nil && (!h.mem.released.Load() || !h.ref.released.Load() || h.mem.e != nil || h.ref.s != nil) {
		t.Fatalf("read %d: the reader still holds: tier entry %v, segment %v", i, !h.mem.released.Load(), !h.ref.released.Load())
	}
	for _, s := range c.segs.table.Load().list {
		if s != nil && s.refs.Load() != 1 {
			t.Fatalf("read %d: segment %d has %d references, want its owner's alone", i, s.id, s.refs.Load())
		}
	}
}

// TestGetIntoAllocates: reads into a Reader the caller owns allocate nothing once it has been
// used: from the write buffer, from the memory tier at any size, from the page cache, from a
// segment file, streamed, and a range.
func TestGetIntoAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled buffers at random")
	}
	mc := open(t, t.TempDir(), small(WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite), WithFlushInterval(time.Hour))...)
	defer mc.Close()
	dc := open(t, t.TempDir(), small(WithBufferedReads(true))...)
	defer dc.Close()
	for _, c := range []*Cache{mc, dc} {
		for i, size := range []int{4 << 10, 100 << 10} {
			k := []byte{byte('a' + i)}
			if err := c.Put(k, value(string(k), 1, size)); err != nil {
				t.Fatal(err)
			}
		}
		c.Drain()
	}
	if err := mc.Put([]byte("w"), value("w", 1, 40<<10)); err != nil { // left in the write buffer
		t.Fatal(err)
	}
	var r Reader
	for _, tc := range []struct {
		name string
		c    *Cache
		key  string
		open bool
	}{
		{"memory 4KiB", mc, "a", false},
		{"memory 100KiB", mc, "b", true},
		{"write buffer 40KiB", mc, "w", false},
		{"page cache 4KiB", dc, "a", false},
		{"page cache 100KiB, streamed", dc, "b", true},
		{"page cache 100KiB, a range", dc, "b", false},
	} {
		key := []byte(tc.key)
		read := func() {
			ok := false
			switch {
			case tc.open:
				ok = tc.c.OpenInto(&r, key)
			case strings.HasSuffix(tc.name, "a range"):
				ok = tc.c.GetRangeInto(&r, key, 50<<10, 20<<10)
			default:
				ok = tc.c.GetInto(&r, key)
			}
			if !ok {
				t.Fatalf("%s: miss", tc.name)
			}
			if _, err := r.WriteTo(io.Discard); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		read()
		if allocs := testing.AllocsPerRun(100, read); allocs != 0 {
			t.Errorf("%s: %v allocations a read, want 0", tc.name, allocs)
		}
	}
}

func BenchmarkGetIntoMemory4K(b *testing.B) {
	c := open(b, b.TempDir(), small(WithMemorySize(8<<20), WithMemoryAdmission(MemoryOnWrite))...)
	defer c.Close()
	c.Put([]byte("a"), value("a", 1, 4096))
	c.Drain()
	var r Reader
	key := []byte("a")
	b.ReportAllocs()
	for b.Loop() {
		c.GetInto(&r, key)
		r.WriteTo(io.Discard)
	}
}
