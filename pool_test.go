package blobcache

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/bufmem"
	"github.com/seed57392e9e/blobcache/internal/record"
)

func TestPoolBufferSize(t *testing.T) {
	tests := []struct{ n, size int }{
		{0, 4 << 10}, {1, 4 << 10}, {4 << 10, 4 << 10}, {4<<10 + 1, 5 << 10}, {5 << 10, 5 << 10},
		{5<<10 + 1, 6 << 10}, {8 << 10, 8 << 10}, {8<<10 + 1, 10 << 10}, {100 << 10, 112 << 10},
		{128 << 10, 128 << 10}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<18},
		{4 << 20, 4 << 20}, {4<<20 + 1, 4<<20 + 1}, {9 << 20, 9 << 20},
	}
	for _, tt := range tests {
		if got := BufferSize(tt.n); got != tt.size {
			t.Errorf("BufferSize(%d) = %d, want %d", tt.n, got, tt.size)
		}
		b := GetBuffer(tt.n)
		if len(*b) != tt.n || cap(*b) != tt.size {
			t.Errorf("GetBuffer(%d): len %d cap %d, want cap %d", tt.n, len(*b), cap(*b), tt.size)
		}
		PutBuffer(b)
	}
	// Classes grow with n, each has one size and its own pool, and a buffer past 4 KiB wastes
	// at most a fifth of its capacity.
	seen := map[int]int{}
	prev := 0
	for n := 1; n <= 1<<maxBufShift; n = n*17/16 + 1 {
		idx, size := bufClass(n)
		if idx < prev || idx >= len(bufPools) || size < n || (n > 4<<10 && 5*n < 4*size) {
			t.Fatalf("bufClass(%d) = %d, %d after index %d", n, idx, size, prev)
		}
		if s, ok := seen[idx]; ok && s != size {
			t.Fatalf("class %d has sizes %d and %d", idx, s, size)
		}
		seen[idx], prev = size, idx
	}
}

// TestPoolReadBuffers: the read path's buffers stay in power-of-two classes (ReadMemory and
// PutFromMemory count them so), in the pools GetBuffer uses for those sizes.
func TestPoolReadBuffers(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, 4<<10 + 1, 100 << 10, 128 << 10, 1<<20 + 1, 4 << 20, 4<<20 + 1} {
		want := 4 << 10
		for want < n {
			want *= 2
		}
		if n > 4<<20 {
			want = n
		}
		b := getBuf(n)
		if len(*b) != n || cap(*b) != want || bufSize(n) != want {
			t.Errorf("getBuf(%d): len %d cap %d, bufSize %d; want cap %d", n, len(*b), cap(*b), bufSize(n), want)
		}
		if idx, size := bufClass(want); n <= 4<<20 && (idx < 0 || size != want) {
			t.Errorf("a read buffer of %d bytes is not in a class of GetBuffer's: %d, %d", want, idx, size)
		}
		putBuf(b)
	}
}

// TestPoolGetBufferCounted: a buffer from GetBuffer is in Stats.ReadBufferBytes, as the read
// path's own are. A buffer past the largest class is made for each call, so it is counted anew.
func TestPoolGetBufferCounted(t *testing.T) {
	const n = 5 << 20
	// Buffers of earlier tests may be uncounted meanwhile (the collector's cleanups run on their
	// own goroutine, some time after a collection): collect, let the cleanups run, and try again
	// until one measurement saw nothing else move.
	var delta int64
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
		before := bufmem.Bytes()
		b := GetBuffer(n)
		delta = bufmem.Bytes() - before
		PutBuffer(b)
		if delta == n {
			return
		}
	}
	t.Fatalf("a buffer of %d bytes from GetBuffer counted %d bytes", n, delta)
}

// TestPoolReadMemory checks ReadMemory against the buffers Readers hold, for sizes around the
// size classes and the largest record read whole, through Get (exactly, with reads through the
// page cache), and through Open and GetRange read a little at a time (at most).
func TestPoolReadMemory(t *testing.T) {
	type reads struct {
		name string
		opts []Option
		// exact: Get's buffer is what ReadMemory says (no alignment room to allow for).
		exact bool
	}
	for _, rd := range []reads{
		{"buffered", []Option{WithBufferedReads(true)}, true},
		{"routed", nil, false},
		{"direct", []Option{WithDirectIOReads(true)}, false},
		// A record that may enter the memory tier is read whole on its second hit (Open's,
		// here), and served from memory, with no buffer, after.
		{"memory tier", []Option{WithMemorySize(64 << 20)}, false},
		// Values that compress, decompressed into a buffer of the Reader's.
		{"compressed", []Option{WithCompression(CompressionZstd)}, false},
	} {
		t.Run(rd.name, func(t *testing.T) {
			opts := append([]Option{WithWriteBufferSize(1 << 20), WithSegmentSize(16 << 20), WithExpectedBlobs(1000)}, rd.opts...)
			c := open(t, t.TempDir(), opts...)
			defer c.Close()
			for _, kl := range []int{3, MaxKeyLen} {
				key := []byte(strings.Repeat("k", kl))
				for _, al := range []int{0, 100} {
					attrs := strings.Repeat("a", al)
					over := record.HeaderSize + kl + al // the record beyond its value
					whole := smallRecord - int64(over)  // the largest value read whole
					sizes := []int64{0, 1, 4<<10 - int64(over), 4<<10 - int64(over) + 1, 100 << 10,
						128<<10 - int64(over), 128 << 10, routedReadMin - int64(over), routedReadMin,
						1 << 20, whole, whole + 1, 2 << 20}
					for _, size := range sizes {
						if size < 0 {
							continue
						}
						checkReadMemory(t, c, key, attrs, size, rd.exact)
					}
				}
			}
		})
	}
}

func checkReadMemory(t *testing.T, c *Cache, key []byte, attrs string, size int64, exact bool) {
	t.Helper()
	v := value(string(key), int(size), int(size))
	if c.comp != nil {
		v = modelValue(string(key), 2, int(size)) // compresses
	}
	if _, err := c.PutWith(key, v, PutOptions{Attrs: attrs}); err != nil {
		t.Fatal(err)
	}
	c.Drain() // read from a segment, not the write buffer
	want := c.ReadMemory(len(key), len(attrs), size)
	name := fmt.Sprintf("key %d, attrs %d, value %d", len(key), len(attrs), size)

	r, ok := c.Get(key)
	if !ok {
		t.Fatalf("%s: Get missed", name)
	}
	if r.buf != nil { // an empty value's Reader is done at once
		if got := int64(cap(*r.buf)); got > want || (exact && got != want) {
			t.Errorf("%s: Get holds %d bytes, ReadMemory says %d", name, got, want)
		}
	}
	r.Close()

	// Open, and a range past the first chunk, read a little at a time: the Reader may change
	// buffers as it goes.
	open, _ := c.Open(key)
	ranged, _ := c.GetRange(key, size/2+1, -1)
	for _, r := range []*Reader{open, ranged} {
		var got bytes.Buffer
		p := make([]byte, 4<<10)
		for {
			if r.buf != nil && int64(cap(*r.buf)) > want {
				t.Errorf("%s: a Reader holds %d bytes, ReadMemory says %d", name, cap(*r.buf), want)
			}
			n, err := r.Read(p)
			got.Write(p[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if r == open && !bytes.Equal(got.Bytes(), v) || r == ranged && !bytes.Equal(got.Bytes(), v[min(size, size/2+1):]) {
			t.Fatalf("%s: wrong bytes", name)
		}
	}
}

// TestPoolPutFromMemory checks PutFromMemory against the buffer PutFrom reads a value into.
func TestPoolPutFromMemory(t *testing.T) {
	for _, perBlob := range []bool{false, true} {
		t.Run(fmt.Sprintf("perblob=%v", perBlob), func(t *testing.T) {
			c := open(t, t.TempDir(), WithWriteBufferSize(1<<20), WithSegmentSize(16<<20), WithExpectedBlobs(1000), WithPerBlobFiles(perBlob))
			defer c.Close()
			for _, size := range []int64{0, 1, 4 << 10, 100 << 10, StreamThreshold, StreamThreshold + 1, 600 << 10} {
				r := &capReader{r: bytes.NewReader(value("k", 0, int(size)))}
				if err := c.PutFrom([]byte("k"), r, size); err != nil {
					t.Fatal(err)
				}
				want := c.PutFromMemory(size)
				streams := size > StreamThreshold && !perBlob
				switch {
				case streams && (want != 2*StreamThreshold || r.maxCap > StreamThreshold):
					t.Errorf("value %d: PutFromMemory %d, read into a chunk of %d", size, want, r.maxCap)
				case !streams && size > 0 && int64(r.maxCap) != want:
					t.Errorf("value %d: PutFromMemory %d, read into a buffer of %d", size, want, r.maxCap)
				case !streams && want != int64(bufSize(int(size))):
					t.Errorf("value %d: PutFromMemory %d, want a read buffer's %d", size, want, bufSize(int(size)))
				}
			}
		})
	}
}

// capReader records the largest capacity of the slices it is asked to fill.
type capReader struct {
	r      io.Reader
	maxCap int
}

func (c *capReader) Read(p []byte) (int, error) {
	c.maxCap = max(c.maxCap, cap(p))
	return c.r.Read(p)
}
