package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
)

func newTestStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	opts := []blobcache.Option{blobcache.WithWriteBufferSize(8 << 20), blobcache.WithSegmentSize(32 << 20),
		blobcache.WithExpectedBlobs(1000), blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true)}
	if cfg.Now != nil {
		opts = append(opts, blobcache.WithClock(cfg.Now)) // the store's clock is the cache's
	}
	c, err := blobcache.New(t.TempDir(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *Store, key string, payload []byte, m item.Meta) {
	t.Helper()
	v, err := s.Reserve(context.Background(), int64(len(payload)))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if _, err := s.Put([]byte(key), v, bytes.NewReader(payload), m, blobcache.Precondition{}); err != nil {
		t.Fatal(err)
	}
}

// read gets [off, off+n) of key's payload.
func read(t *testing.T, s *Store, key string, off, n int64) ([]byte, Info, bool) {
	t.Helper()
	var buf bytes.Buffer
	var info Info
	found, err := s.Get(context.Background(), []byte(key), func(i Info) (Plan, error) {
		info = i
		buf.Reset()
		return Plan{W: &buf, Off: off, N: n}, nil
	})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return buf.Bytes(), info, found
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestPutGet(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newTestStore(t, Config{Now: func() time.Time { return now }})
	magic := append([]byte(item.Magic), "looks like an envelope but is not"...)
	tests := []struct {
		name    string
		payload []byte
		meta    item.Meta
	}{
		{"plain", []byte("hello"), item.Meta{}},
		{"empty", nil, item.Meta{}},
		{"empty with flags", nil, item.Meta{Flags: 9}},
		{"short", []byte("x"), item.Meta{}},
		{"flags", []byte("with flags"), item.Meta{Flags: 0xdeadbeef}},
		{"expiry", []byte("expires later"), item.Meta{Expires: now.Unix() + 60}},
		{"magic prefix", magic, item.Meta{}},
		{"large", randomBytes(1, 3<<20+17), item.Meta{Flags: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			put(t, s, tt.name, tt.payload, tt.meta)
			for _, drained := range []bool{false, true} {
				if drained {
					s.Cache().Drain()
				}
				got, info, found := read(t, s, tt.name, 0, -1)
				if !found || !bytes.Equal(got, tt.payload) || info.Meta != tt.meta || info.Size != int64(len(tt.payload)) {
					t.Fatalf("drained=%v: found=%v got %d bytes, info %+v; want %d bytes, %+v",
						drained, found, len(got), info, len(tt.payload), tt.meta)
				}
				if !info.HasSum {
					t.Errorf("no checksum")
				}
			}
		})
	}
}

func TestExpired(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := newTestStore(t, Config{Now: func() time.Time { return now }})
	put(t, s, "k", []byte("v"), item.Meta{Expires: now.Unix() + 10})
	if _, _, found := read(t, s, "k", 0, -1); !found {
		t.Fatal("miss before expiry")
	}
	now = now.Add(10 * time.Second)
	if _, _, found := read(t, s, "k", 0, -1); found {
		t.Fatal("hit after expiry")
	}
	if existed, err := s.Remove([]byte("k")); existed || err != nil {
		t.Fatalf("Remove of an expired item = %v, %v", existed, err)
	}
}

func TestRanges(t *testing.T) {
	s := newTestStore(t, Config{})
	small := randomBytes(2, 100_000)
	large := randomBytes(3, 5<<20)
	put(t, s, "small", small, item.Meta{})
	put(t, s, "large", large, item.Meta{Flags: 3}) // behind a header: offsets shift by 20
	for _, drained := range []bool{false, true} {
		if drained {
			s.Cache().Drain()
		}
		for _, tc := range []struct {
			key     string
			v       []byte
			off, n  int64
			wantLen int64
		}{
			{"small", small, 0, 10, 10},
			{"small", small, 99_990, -1, 10},
			{"small", small, 50_000, 1000, 1000},
			{"small", small, 200_000, 5, 0},
			{"large", large, 0, 1, 1},
			{"large", large, 100, 300 << 10, 300 << 10},
			{"large", large, 4 << 20, 1 << 10, 1 << 10}, // switches to a ranged read
			{"large", large, 5<<20 - 5, -1, 5},
			{"large", large, 1 << 20, 0, 0},
		} {
			got, info, found := read(t, s, tc.key, tc.off, tc.n)
			if !found || int64(len(got)) != tc.wantLen {
				t.Fatalf("drained=%v %s [%d,+%d): found=%v len %d, want %d", drained, tc.key, tc.off, tc.n, found, len(got), tc.wantLen)
			}
			end := min(int64(len(tc.v)), tc.off+tc.wantLen)
			if tc.off < int64(len(tc.v)) && !bytes.Equal(got, tc.v[tc.off:end]) {
				t.Fatalf("drained=%v %s [%d,+%d): wrong bytes", drained, tc.key, tc.off, tc.n)
			}
			if info.Size != int64(len(tc.v)) {
				t.Fatalf("Size %d, want %d", info.Size, len(tc.v))
			}
		}
	}
}

func TestInfoOnly(t *testing.T) {
	s := newTestStore(t, Config{})
	put(t, s, "k", []byte("value"), item.Meta{Flags: 5})
	var info Info
	found, err := s.Get(context.Background(), []byte("k"), func(i Info) (Plan, error) { info = i; return Plan{}, nil })
	if !found || err != nil || info.Size != 5 || info.Flags != 5 {
		t.Fatalf("found=%v err=%v info=%+v", found, err, info)
	}
	if found, err := s.Get(context.Background(), []byte("missing"), func(Info) (Plan, error) { t.Fatal("begin on a miss"); return Plan{}, nil }); found || err != nil {
		t.Fatalf("miss: found=%v err=%v", found, err)
	}
	errBegin := errors.New("no thanks")
	if found, err := s.Get(context.Background(), []byte("k"), func(Info) (Plan, error) { return Plan{}, errBegin }); !found || err != errBegin {
		t.Fatalf("begin's error: found=%v err=%v", found, err)
	}
}

func TestRemove(t *testing.T) {
	s := newTestStore(t, Config{})
	put(t, s, "k", []byte("v"), item.Meta{})
	if existed, err := s.Remove([]byte("k")); !existed || err != nil {
		t.Fatalf("Remove = %v, %v", existed, err)
	}
	if existed, err := s.Remove([]byte("k")); existed || err != nil {
		t.Fatalf("second Remove = %v, %v", existed, err)
	}
}

func TestReserveLimits(t *testing.T) {
	s := newTestStore(t, Config{MaxValueSize: 100 << 10, MaxInflightBytes: 200 << 10, AdmitTimeout: 20 * time.Millisecond})
	if _, err := s.Reserve(context.Background(), 100<<10+1); !errors.Is(err, blobcache.ErrValueTooLarge) {
		t.Fatalf("too large: %v", err)
	}
	a, err := s.Reserve(context.Background(), 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(context.Background(), 100<<10); !errors.Is(err, ErrBusy) {
		t.Fatalf("over the budget: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Reserve(ctx, 100<<10); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	a.Release()
	a.Release() // harmless
	b, err := s.Reserve(context.Background(), 100<<10)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	b.Release()
}

func TestNewValidates(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), blobcache.WithWriteBufferSize(1<<20), blobcache.WithSegmentSize(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := New(c, Config{MaxValueSize: 4 << 20}); err == nil { // past a 4 MiB segment
		t.Error("a value limit past the cache's was accepted")
	}
	if _, err := New(c, Config{MaxValueSize: 512 << 10, MaxInflightBytes: 4096}); err == nil {
		t.Error("a memory budget below one value was accepted")
	}
	s, err := New(c, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if want := c.MaxValueSize(blobcache.MaxKeyLen) - item.HeaderSize; s.MaxValueSize() != want {
		t.Errorf("default MaxValueSize %d, want %d", s.MaxValueSize(), want)
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("client went away")
	}
	return len(p), nil
}

func TestWriterError(t *testing.T) {
	s := newTestStore(t, Config{})
	v := randomBytes(4, 2<<20)
	put(t, s, "k", v, item.Meta{})
	s.Cache().Drain()
	found, err := s.Get(context.Background(), []byte("k"), func(Info) (Plan, error) { return Plan{W: &failWriter{n: 1 << 20}, N: -1}, nil })
	if !found || err == nil {
		t.Fatalf("found=%v err=%v, want the writer's error", found, err)
	}
	// The store is still fine.
	if got, _, _ := read(t, s, "k", 0, -1); !bytes.Equal(got, v) {
		t.Fatal("wrong bytes after a failed read")
	}
}

// TestConcurrentGets reads many small verified blobs from disk at once: every reader must get
// its own blob's bytes. (The library's Reader.WriteTo returned a blob's pooled buffer before
// writing from it; under -race this test caught another Get's pread overwriting it.)
func TestConcurrentGets(t *testing.T) {
	s := newTestStore(t, Config{})
	const n = 64
	for i := range n {
		put(t, s, fmt.Sprint("k", i), bytes.Repeat([]byte{byte(i)}, 3000+i), item.Meta{})
	}
	s.Cache().Drain()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for j := range 400 {
				i := (g*31 + j) % n
				var buf bytes.Buffer
				found, err := s.Get(context.Background(), []byte(fmt.Sprint("k", i)), func(Info) (Plan, error) { return Plan{W: &buf, N: -1}, nil })
				if !found || err != nil || !bytes.Equal(buf.Bytes(), bytes.Repeat([]byte{byte(i)}, 3000+i)) {
					t.Errorf("k%d: found=%v err=%v, wrong bytes", i, found, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// capWriter records the largest capacity of the slices written to it: the buffer the store
// copies the payload out of.
type capWriter struct {
	bytes.Buffer
	maxCap int
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.maxCap = max(w.maxCap, cap(p))
	return w.Buffer.Write(p)
}

// TestMemoryIsLibrarys: the memory budget a Get holds while it writes to its client is its copy
// buffer (the buffer it writes from, as large as the library's pool makes it) plus, for a blob
// it streams to the client, what the library says its Reader holds (blobcache.Cache.ReadMemory);
// a write holds what the library says PutFrom holds (blobcache.Cache.PutFromMemory). Sizes sit
// around the pool's classes, the library's streaming threshold and the store's whole-blob limit.
func TestMemoryIsLibrarys(t *testing.T) {
	s := newTestStore(t, Config{})
	c := s.Cache()
	for _, key := range []string{"k", strings.Repeat("k", blobcache.MaxKeyLen)} {
		for _, attrs := range []string{"", "Content-Type: text/plain\n"} {
			over := 64 + len(key) + len(attrs) // a record's header, key and attributes: at least
			for _, size := range []int{0, 1, 4<<10 - 1, 4 << 10, 4<<10 + 1, 100 << 10, 128<<10 - over, 128 << 10,
				blobcache.StreamThreshold, blobcache.StreamThreshold + 1, 1<<20 - over, 1 << 20, 1<<20 + 1, 2 << 20} {
				name := fmt.Sprintf("key %d, attrs %d, payload %d", len(key), len(attrs), size)
				v, err := s.Reserve(context.Background(), int64(size))
				if err != nil {
					t.Fatal(err)
				}
				if got, want := s.Inflight(), c.PutFromMemory(int64(size)); got != want {
					t.Errorf("%s: a write holds %d bytes, the library says %d", name, got, want)
				}
				payload := randomBytes(uint64(size), size)
				if _, err := s.PutAttrs([]byte(key), v, bytes.NewReader(payload), item.Meta{}, attrs, blobcache.Precondition{}); err != nil {
					t.Fatal(err)
				}
				v.Release()
				c.Drain()

				var held int64
				w := &capWriter{}
				found, err := s.Get(context.Background(), []byte(key), func(Info) (Plan, error) {
					held = s.Inflight()
					return Plan{W: w, N: -1}, nil
				})
				if !found || err != nil || !bytes.Equal(w.Bytes(), payload) {
					t.Fatalf("%s: found=%v err=%v, %d bytes", name, found, err, w.Len())
				}
				if size == 0 {
					continue // nothing written, no buffer seen
				}
				// Up to wholeBlob, written from one buffer, the store's or the Reader's: the larger
				// counts. Past it, streamed through the store's chunk and the Reader's buffers.
				lib := c.ReadMemory(len(key), len(attrs), int64(size))
				want := max(int64(blobcache.BufferSize(size)), lib)
				if size > wholeBlob {
					want = int64(blobcache.BufferSize(copyChunk)) + lib
				}
				if held != want || int64(w.maxCap) > held {
					t.Errorf("%s: a Get holds %d bytes, written from a buffer of %d; the store's is %d, the library says %d", name, held, w.maxCap, blobcache.BufferSize(min(size, copyChunk)), lib)
				}
			}
		}
	}
}

// holdingWriter is a Holder that keeps the payloads it is handed by reference, as the memcached
// connection's reply buffer does, until flush checks and closes them.
type holdingWriter struct {
	bytes.Buffer
	held []heldPayload
}

type heldPayload struct {
	key string
	p   []byte
	c   interface{ Close() error }
}

func (w *holdingWriter) Hold(p []byte, c io.Closer) { w.held = append(w.held, heldPayload{p: p, c: c}) }

// TestConcurrentHeldGets: gets whose payloads lie in the memory tier are handed to a Holder by
// reference and stay held across later gets, on 8 goroutines at once, while other goroutines
// overwrite the keys. Every payload held is, until the holder closes it, a whole value of its
// key (of some version): the Readers the store reuses from Get to Get are never shared.
func TestConcurrentHeldGets(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), blobcache.WithMemorySize(64<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite),
		blobcache.WithWriteBufferSize(1<<20), blobcache.WithExpectedBlobs(1000))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := New(c, Config{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	payload := func(i, version int) []byte {
		b := bytes.Repeat([]byte{byte(i), byte(version)}, (holdMin+i*997)/2)
		return b
	}
	valid := func(i int, p []byte) bool {
		if len(p) != len(payload(i, 0)) || p[0] != byte(i) {
			return false
		}
		return bytes.Equal(p, payload(i, int(p[1])))
	}
	for i := range n {
		put(t, s, fmt.Sprint("k", i), payload(i, 0), item.Meta{})
	}
	c.Drain()
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	for g := range 2 {
		writers.Go(func() {
			for v := 1; ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				i := (g*7 + v) % n
				put(t, s, fmt.Sprint("k", i), payload(i, v%200), item.Meta{})
			}
		})
	}
	var heldTotal atomic.Int64
	for g := range 8 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			w := &holdingWriter{}
			flush := func() {
				for _, h := range w.held {
					var i int
					fmt.Sscan(strings.TrimPrefix(h.key, "k"), &i)
					if !valid(i, h.p) {
						t.Errorf("%s: a held payload of %d bytes is not a value of its key", h.key, len(h.p))
					}
					h.c.Close()
				}
				heldTotal.Add(int64(len(w.held)))
				w.held = w.held[:0]
			}
			for j := range 2000 {
				i := rng.IntN(n)
				key := fmt.Sprint("k", i)
				before := len(w.held)
				found, err := s.Get(context.Background(), []byte(key), func(Info) (Plan, error) { return Plan{W: w, N: -1}, nil })
				if !found || err != nil {
					t.Errorf("%s: found %v, %v", key, found, err)
					return
				}
				if len(w.held) > before {
					w.held[len(w.held)-1].key = key
				} else if !valid(i, w.Bytes()) {
					t.Errorf("%s: a copied payload of %d bytes is not a value of its key", key, w.Len())
				}
				w.Reset()
				if rng.IntN(4) == 0 || j == 1999 {
					flush()
				}
			}
		})
	}
	readers.Wait()
	close(stop)
	writers.Wait()
	if heldTotal.Load() == 0 {
		t.Fatal("no payload was held by reference: the test tests nothing")
	}
}
