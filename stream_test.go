package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// streamOpts are options under which PutFrom streams values of a few MiB: segments hold a
// handful of them, so streams cross rotations and seals.
func streamOpts(extra ...Option) []Option {
	return append([]Option{
		WithWriteBufferSize(4 << 20),
		WithSegmentSize(16 << 20),
		WithExpectedBlobs(1 << 12),
	}, extra...)
}

// gateReader serves v, stopping after `at` bytes until the gate is closed. It reports when it
// reached the stop on reached.
type gateReader struct {
	v       []byte
	off, at int
	gate    chan struct{}
	reached chan struct{}
	stopped bool  // owned by the reading goroutine
	err     error // returned with the last bytes, if set
}

func newGateReader(v []byte, at int) *gateReader {
	return &gateReader{v: v, at: at, gate: make(chan struct{}), reached: make(chan struct{})}
}

func (r *gateReader) Read(p []byte) (int, error) {
	if r.off == r.at && !r.stopped {
		r.stopped = true
		close(r.reached)
		<-r.gate
	}
	end := len(r.v)
	if r.off < r.at {
		end = r.at
	}
	n := copy(p, r.v[r.off:end])
	r.off += n
	if r.off == len(r.v) {
		if r.err != nil {
			return n, r.err
		}
		return n, io.EOF
	}
	return n, nil
}

// stallPutFrom starts PutFrom of a size-byte value of key (version ver) whose reader stops
// after `at` bytes, and returns once it has stopped there: the value, its reader (close g.gate
// to let it go on) and PutFrom's result to come.
func stallPutFrom(c *Cache, key string, ver, size, at int) ([]byte, *gateReader, <-chan error) {
	v := value(key, ver, size)
	g := newGateReader(v, at)
	done := make(chan error, 1)
	go func() { done <- c.PutFrom([]byte(key), g, int64(len(v))) }()
	<-g.reached
	return v, g, done
}

func TestPutFromRoundTrip(t *testing.T) {
	sizes := []int{0, 1, 4000, StreamThreshold, StreamThreshold + 1, 1<<20 + 17, 3<<20 + 4095, 4<<20 - 100}
	for _, mode := range []struct {
		name string
		opts []Option
	}{
		{"default", nil},
		{"direct", []Option{WithBufferedWrites(false)}},
		{"checksum-verify", []Option{WithChecksum(true), WithVerifyOnRead(true)}},
		{"fsync", []Option{WithFsync(true), WithBufferedWrites(false)}},
		{"perblob", []Option{WithPerBlobFiles(true)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := streamOpts(mode.opts...)
			c := open(t, dir, opts...)
			want := map[string][]byte{}
			for round := range 2 {
				for _, n := range sizes {
					k := fmt.Sprintf("k%d", n)
					v := value(k, round, n)
					if err := c.PutFrom([]byte(k), bytes.NewReader(v), int64(n)); err != nil {
						t.Fatalf("PutFrom(%s, %d bytes): %v", k, n, err)
					}
					expect(t, c, k, v) // read-your-writes as soon as PutFrom returns
					want[k] = v
					// Interleave small Puts, so batches and streams share segments.
					sk := fmt.Sprintf("s%d-%d", n, round)
					want[sk] = value(sk, 0, 3000)
					if err := c.Put([]byte(sk), want[sk]); err != nil {
						t.Fatal(err)
					}
				}
			}
			for k, v := range want {
				expect(t, c, k, v)
			}
			c = reopenClean(t, c, dir, opts...)
			for k, v := range want {
				expect(t, c, k, v)
			}
			verifyClean(t, dir)
			c.crash()
			c = open(t, dir, opts...)
			defer c.Close()
			for k, v := range want {
				expect(t, c, k, v)
			}
		})
	}
}

// TestPutFromAbandoned: a value whose reader ends early or fails is not stored, the key keeps
// its previous value, and the records written after the abandoned range survive a crash of an
// unsealed segment (the scan steps over the range's pad).
func TestPutFromAbandoned(t *testing.T) {
	for _, direct := range []bool{false, true} {
		for _, how := range []string{"short", "error-with-last-bytes"} {
			t.Run(fmt.Sprintf("direct=%v/%s", direct, how), func(t *testing.T) {
				dir := t.TempDir()
				opts := streamOpts(WithFsync(true))
				if direct {
					opts = append(opts, WithBufferedWrites(false))
				}
				c := open(t, dir, opts...)
				old := value("k", 0, 5000)
				if err := c.Put([]byte("k"), old); err != nil {
					t.Fatal(err)
				}
				v := value("k", 1, 2<<20)
				var r io.Reader
				var wantErr error
				switch how {
				case "short":
					r, wantErr = bytes.NewReader(v[:1<<20+5]), io.ErrUnexpectedEOF
				default:
					g := newGateReader(v, -1)
					g.err = errors.New("bad framing after the value")
					r, wantErr = g, g.err
				}
				err := c.PutFrom([]byte("k"), r, int64(len(v)))
				if !errors.Is(err, wantErr) {
					t.Fatalf("PutFrom: %v, want %v", err, wantErr)
				}
				expect(t, c, "k", old)
				after := putKeys(t, c, "after", 20, 0, 3000)
				big := value("big", 0, 1<<20)
				if err := c.PutFrom([]byte("big"), bytes.NewReader(big), int64(len(big))); err != nil {
					t.Fatal(err)
				}
				after["big"] = big
				after["k"] = old
				c.Drain()
				c.crash() // the segment is unsealed: recovery scans it
				c = open(t, dir, opts...)
				defer c.Close()
				expectAll(t, c, after)
				verifyClean(t, dir)
			})
		}
	}
}

// TestPutFromSuperseded: a Put or Delete of the key placed while its value streams is newer and
// wins, in memory and after a reopen.
func TestPutFromSuperseded(t *testing.T) {
	for _, op := range []string{"put", "delete", "putfrom"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, streamOpts()...)
			_, g, done := stallPutFrom(c, "k", 1, 2<<20, 1<<20)
			var want []byte
			switch op {
			case "put":
				want = value("k", 2, 7000)
				if err := c.Put([]byte("k"), want); err != nil {
					t.Fatal(err)
				}
			case "delete":
				if err := c.Put([]byte("k"), value("k", 0, 100)); err != nil {
					t.Fatal(err)
				}
				if err := c.Delete([]byte("k")); err != nil {
					t.Fatal(err)
				}
			case "putfrom":
				want = value("k", 2, 1<<20+3)
				if err := c.PutFrom([]byte("k"), bytes.NewReader(want), int64(len(want))); err != nil {
					t.Fatal(err)
				}
			}
			close(g.gate)
			if err := <-done; err != nil {
				t.Fatalf("superseded PutFrom: %v", err)
			}
			expect(t, c, "k", want)
			c.Drain()
			expect(t, c, "k", want)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = open(t, dir, streamOpts()...)
			defer c.Close()
			expect(t, c, "k", want)
		})
	}
}

// TestPutFromSlowDoesNotStallWriters: while one value streams from a stalled reader, other
// writers go on through several batches and segment rotations, Drain returns, and the stalled
// stream's segment is sealed once it ends.
func TestPutFromSlowDoesNotStallWriters(t *testing.T) {
	dir := t.TempDir()
	opts := streamOpts(WithMaxInflightBatches(2))
	c := open(t, dir, opts...)
	v, g, done := stallPutFrom(c, "slow", 0, 3<<20, 2<<20)
	vals := putKeys(t, c, "other", 400, 0, 100<<10) // 40 MiB: 10 batches, 3 segments
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	expectAll(t, c, vals)
	expect(t, c, "slow", nil)
	close(g.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	vals["slow"] = v
	expectAll(t, c, vals)
	c = reopenClean(t, c, dir, opts...)
	defer c.Close()
	expectAll(t, c, vals)
	verifyClean(t, dir)
}

// TestPutFromConcurrent: streams, Puts and Deletes from several goroutines, with rotation and
// eviction; every key read back is its last value.
func TestPutFromConcurrent(t *testing.T) {
	dir := t.TempDir()
	opts := streamOpts(WithMaxSize(64 << 20))
	c := open(t, dir, opts...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	last := map[string][]byte{}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				k := fmt.Sprintf("w%d-%d", w, i%7)
				var v []byte
				var err error
				switch i % 3 {
				case 0:
					v = value(k, i, 1<<20+i)
					err = c.PutFrom([]byte(k), bytes.NewReader(v), int64(len(v)))
				case 1:
					v = value(k, i, 2000+i)
					err = c.Put([]byte(k), v)
				default:
					err = c.Delete([]byte(k))
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last[k] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	check := func() {
		for k, v := range last {
			// Eviction may have forgotten a key; it must never return another value.
			if r, ok := c.Get([]byte(k)); ok {
				b, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(b, v) {
					t.Fatalf("Get(%s): %d bytes, err %v; want its last value of %d bytes", k, len(b), err, len(v))
				}
			}
		}
	}
	check()
	c = reopenClean(t, c, dir, opts...)
	defer c.Close()
	check()
}

// TestPutFromClose: Close waits for a stream in progress, which stops with ErrClosed; nothing
// of it is read back.
func TestPutFromClose(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, streamOpts()...)
	v, g, done := stallPutFrom(c, "k", 0, 2<<20, 1<<20)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned with a stream in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("PutFrom cut by Close: %v, want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := c.PutFrom([]byte("k"), bytes.NewReader(v), int64(len(v))); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutFrom after Close: %v", err)
	}
	c = open(t, dir, streamOpts()...)
	defer c.Close()
	expect(t, c, "k", nil)
}

func TestPutFromBadInput(t *testing.T) {
	c := open(t, t.TempDir(), streamOpts()...)
	defer c.Close()
	if err := c.PutFrom(nil, bytes.NewReader(nil), 0); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("empty key: %v", err)
	}
	max := c.MaxValueSize(1)
	if err := c.PutFrom([]byte("k"), bytes.NewReader(nil), max+1); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("value past the limit: %v", err)
	}
	if err := c.PutFrom([]byte("k"), bytes.NewReader(nil), -1); err == nil {
		t.Error("negative size accepted")
	}
}

// zeroReader yields n generated bytes without holding them.
type genReader struct{ left int64 }

func (r *genReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.left))
	for i := range p[:n] {
		p[i] = byte(r.left - int64(i))
	}
	r.left -= int64(n)
	return n, nil
}

// TestPutFromMemory: streaming a 48 MiB value allocates a small fraction of it: the value is
// never whole in memory.
func TestPutFromMemory(t *testing.T) {
	c := open(t, t.TempDir(), WithWriteBufferSize(64<<20), WithSegmentSize(256<<20), WithBufferedWrites(false))
	defer c.Close()
	const size = 48 << 20
	// Warm up: pools, the first segment.
	if err := c.PutFrom([]byte("warm"), &genReader{left: 1 << 20}, 1<<20); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := c.PutFrom([]byte("big"), &genReader{left: size}, size); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/16 {
		t.Fatalf("streaming %d MiB allocated %d bytes", size>>20, alloc)
	} else {
		t.Logf("streaming %d MiB allocated %d KiB", size>>20, alloc>>10)
	}
	r, ok := c.Get([]byte("big"))
	if !ok {
		t.Fatal("miss")
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil || n != size {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
}

// verifyClean runs Verify over dir and fails on any damaged record.
func verifyClean(t *testing.T, dir string) {
	t.Helper()
	res, err := Verify(dir, nil)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, c := range res.Corrupt {
		t.Errorf("Verify: %v", c)
	}
	if res.Records == 0 {
		t.Fatal("Verify checked no records")
	}
}

// noErrors fails if the cache counted a failed write or seal, a damaged record or a torn tail:
// streams must leave every segment sealable and every scan clean.
func noErrors(t *testing.T, c *Cache) {
	t.Helper()
	c.Drain()
	c.segs.sealers.Wait()
	if s := c.Stats(); s.FlushErrors != 0 || s.CorruptRecord != 0 || s.TornTails != 0 {
		t.Fatalf("flush errors %d, corrupt records %d, torn tails %d; last: %s",
			s.FlushErrors, s.CorruptRecord, s.TornTails, s.LastCorruption)
	}
}

// TestPutFromWriteFault: a chunk write that fails (EIO, or a short write) fails PutFrom with
// ErrWriteFailed; the key keeps its previous value, the cache goes on, and what was drained
// after the failure survives a crash (the failed range is never read as a record).
func TestPutFromWriteFault(t *testing.T) {
	for _, action := range []errorfs.Action{errorfs.Fail, errorfs.Short} {
		for _, chunk := range []string{"middle", "header"} {
			t.Run(fmt.Sprintf("%v/%s", action, chunk), func(t *testing.T) {
				fs := faultyFS(t)
				dir := t.TempDir()
				opts := streamOpts(withFS(fs), WithFsync(true))
				c := open(t, dir, opts...)
				old := value("k", 0, 4000)
				if err := c.Put([]byte("k"), old); err != nil {
					t.Fatal(err)
				}
				c.Drain()
				_, g, done := stallPutFrom(c, "k", 1, 2<<20, 1<<20)
				// The record is 2 MiB + 33 bytes: chunks 0-7 of 256 KiB and 33 bytes in chunk
				// 8. Chunks 1-3 are written by now; fail the next chunk write, or the last
				// write of the stream, chunk 0 with the header.
				f := &errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Action: action, Keep: -1, Times: 1}
				if chunk == "header" {
					f.Skip = 5 // chunks 4-8 go through
				}
				fs.Add(f)
				close(g.gate)
				if err := <-done; !errors.Is(err, ErrWriteFailed) {
					t.Fatalf("PutFrom over a failed write: %v, want ErrWriteFailed", err)
				}
				expect(t, c, "k", old)
				after := putKeys(t, c, "after", 30, 0, 3000)
				big := value("big", 0, 1<<20+5)
				if err := c.PutFrom([]byte("big"), bytes.NewReader(big), int64(len(big))); err != nil {
					t.Fatalf("PutFrom after the failure: %v", err)
				}
				after["big"], after["k"] = big, old
				if err := c.Flush(); err != nil {
					t.Fatalf("Flush: %v", err)
				}
				expectAll(t, c, after)
				c.crash()
				c = open(t, dir, opts...)
				defer c.Close()
				expectAll(t, c, after)
			})
		}
	}
}

// reopenClean checks c with noErrors, closes it, reopens dir and checks the reopened cache too.
func reopenClean(t *testing.T, c *Cache, dir string, opts ...Option) *Cache {
	t.Helper()
	noErrors(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, opts...)
	noErrors(t, c)
	return c
}

// TestPutLargerThanBuffer: a Put larger than a write buffer is written straight into its
// segment, with its checksums computed once, on the way; PutChecksummed with a wrong checksum
// stores nothing.
func TestPutLargerThanBuffer(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, streamOpts(WithChecksum(true), WithVerifyOnRead(true))...)
	v := value("big", 0, 5<<20) // the write buffer is 4 MiB
	if err := c.PutChecksummed([]byte("big"), v, record.CRC(v)+1); !errors.Is(err, ErrChecksumMismatch) {
		t.Fatalf("wrong checksum: %v", err)
	}
	expect(t, c, "big", nil)
	if err := c.PutChecksummed([]byte("big"), v, record.CRC(v)); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "big", v)
	if info, err := c.Stat([]byte("big")); err != nil || !info.HasChecksum || info.Checksum != record.CRC(v) {
		t.Fatalf("Stat: %+v, %v", info, err)
	}
	c = reopenClean(t, c, dir, streamOpts(WithChecksum(true), WithVerifyOnRead(true))...)
	defer c.Close()
	expect(t, c, "big", v)
}

// slowReader yields v, at most step bytes at a time, sleeping pause before each read until
// fast says otherwise: a client that uploads slowly.
type slowReader struct {
	v     []byte
	step  int
	pause time.Duration
	fast  func() bool
}

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.v) == 0 {
		return 0, io.EOF
	}
	if !r.fast() {
		time.Sleep(r.pause)
	}
	n := copy(p[:min(len(p), r.step)], r.v)
	r.v = r.v[n:]
	return n, nil
}

// TestSlowPutFromOutrunByEviction: a PutFrom whose reader is slow still writes into its segment
// when that segment becomes the oldest and must be evicted to stay under MaxSize. The rotation
// waits for it for streamGrace, then the stream gives up with ErrOutrun, reads the rest of its
// value and drops it; the writes behind it go on, and the disk never passes MaxSize plus one
// segment.
func TestSlowPutFromOutrunByEviction(t *testing.T) {
	const seg, maxSize = 2 << 20, 8 << 20
	c := open(t, t.TempDir(), small(WithMaxSize(maxSize), withPutChunk(8<<10))...)
	defer c.Close()
	slow := value("slow", 0, 1<<20)
	outrun := make(chan error, 1)
	go func() {
		// 4 KiB every 20 ms (1 MiB would take 5 s) until the stream is outrun; then the rest,
		// which the cache reads and drops, comes at once.
		r := &slowReader{v: slow, step: 4 << 10, pause: 20 * time.Millisecond, fast: func() bool { return c.stats.streamsOutrun.Load() > 0 }}
		outrun <- c.PutFrom([]byte("slow"), r, int64(len(slow)))
	}()
	reserved := func() bool {
		c.w.mu.Lock()
		defer c.w.mu.Unlock()
		return len(c.w.streams) > 0
	}
	for !reserved() { // until the stream has its range
		runtime.Gosched()
	}
	var most int64
	for i := range 600 { // 18 MB behind it: its segment becomes the oldest and must go
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 30000)); err != nil {
			t.Fatalf("Put %d behind a slow PutFrom: %v", i, err)
		}
		most = max(most, c.Stats().DiskBytes)
	}
	if err := <-outrun; !errors.Is(err, ErrOutrun) {
		t.Fatalf("the slow PutFrom: %v, want ErrOutrun", err)
	}
	expect(t, c, "slow", nil)
	st := c.Stats()
	if st.StreamsOutrun != 1 || st.RoomWaits == 0 {
		t.Fatalf("StreamsOutrun %d, RoomWaits %d", st.StreamsOutrun, st.RoomWaits)
	}
	if most > maxSize+seg {
		t.Fatalf("disk reached %.2fx MaxSize", float64(most)/maxSize)
	}
	// The cache goes on: a new value of the key is stored.
	if err := c.PutFrom([]byte("slow"), bytes.NewReader(slow), int64(len(slow))); err != nil {
		t.Fatal(err)
	}
	expect(t, c, "slow", slow)
}

// holder is a ValueHolder over b: Hold gives b's bytes when hold says so, fails with err, and
// counts its calls; Read reads what is left.
type holder struct {
	b     []byte
	hold  bool
	err   error
	holds int
}

func (h *holder) Read(p []byte) (int, error) {
	if len(h.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, h.b)
	h.b = h.b[n:]
	return n, nil
}

func (h *holder) Hold(n int) ([]byte, bool, error) {
	h.holds++
	if h.err != nil {
		return nil, false, h.err
	}
	if !h.hold || len(h.b) < n {
		return nil, false, nil
	}
	b := h.b[:n:n]
	h.b = h.b[n:]
	return b, true, nil
}

// TestPutFromValueHolderRoutes: a held value is stored as a copy on every route PutFrom takes (the
// write buffer, compression, the memory tier on write, one file per blob), at the write buffer's
// size (read whole) and one byte past it (streamed: Hold is not asked; with a file per blob,
// refused as too large, the reader untouched), so that the reader's buffer, scribbled over as
// soon as PutFrom returns, changes nothing read back, before and after the write buffer is
// flushed.
func TestPutFromValueHolderRoutes(t *testing.T) {
	const wbs = 1 << 20
	routes := []struct {
		name string
		opts []Option
	}{
		{"write buffer", nil},
		{"memory tier on write", []Option{WithMemorySize(32 << 20), WithMemoryAdmission(MemoryOnWrite)}},
		{"compressed", []Option{WithCompression(CompressionZstd)}},
		{"per-blob files", []Option{WithPerBlobFiles(true)}},
	}
	for _, route := range routes {
		t.Run(route.name, func(t *testing.T) {
			c := open(t, t.TempDir(), append([]Option{WithWriteBufferSize(wbs)}, route.opts...)...)
			defer c.Close()
			for _, size := range []int{1, 4 << 10, 200 << 10, wbs, wbs + 1} {
				key := fmt.Appendf(nil, "k%d", size)
				want := bytes.Repeat(fmt.Appendf(nil, "%s blobcache ", key), size/10+1)[:size] // compressible
				src := bytes.Clone(want)
				h := &holder{b: src, hold: true}
				_, err := c.PutFromWith(key, h, int64(size), PutOptions{})
				if errors.Is(err, ErrValueTooLarge) && c.opts.PerBlobFiles {
					// A file per blob holds what one batch holds: refused before the reader is
					// asked for anything.
					if h.holds != 0 || len(h.b) != size {
						t.Fatalf("size %d, refused: Hold asked %d times, %d bytes read", size, h.holds, size-len(h.b))
					}
					continue
				}
				if err != nil {
					t.Fatalf("size %d: %v", size, err)
				}
				if whole := c.readsWhole(int64(size)); len(h.b) != 0 || (h.holds == 1) != whole {
					t.Fatalf("size %d: Hold asked %d times (read whole: %v), %d bytes left unread", size, h.holds, whole, len(h.b))
				}
				for i := range src {
					src[i] ^= 0xff // the reader's buffer, reused
				}
				for _, drain := range []bool{false, true} {
					if drain {
						c.Drain()
					}
					got, ok := getBytes(t, c, string(key))
					if !ok || !bytes.Equal(got, want) {
						t.Fatalf("size %d, drained %v: read back %d bytes (%v), not the value put", size, drain, len(got), ok)
					}
				}
			}
		})
	}
}

// TestPutFromValueHolder: a value PutFrom reads whole is taken from its reader's Hold when the
// reader holds it, and stored as a copy (the reader's bytes change after, the stored ones do
// not); a reader that declines is read; an error of Hold stores nothing.
func TestPutFromValueHolder(t *testing.T) {
	c := open(t, t.TempDir(), WithMemorySize(16<<20), WithMemoryAdmission(MemoryOnWrite))
	defer c.Close()
	for _, size := range []int{100, 4 << 10, 200 << 10} {
		for _, hold := range []bool{true, false} {
			key := []byte(fmt.Sprintf("k%d-%v", size, hold))
			src := bytes.Repeat([]byte{'a'}, size)
			h := &holder{b: src, hold: hold}
			if _, err := c.PutFromWith(key, h, int64(size), PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if h.holds != 1 || len(h.b) != 0 {
				t.Fatalf("size %d, hold %v: Hold called %d times, %d bytes left unread", size, hold, h.holds, len(h.b))
			}
			for i := range src {
				src[i] = 'b' // the reader's buffer, reused
			}
			for _, drain := range []bool{false, true} {
				if drain {
					c.Drain()
				}
				got, ok := getBytes(t, c, string(key))
				if !ok || !bytes.Equal(got, bytes.Repeat([]byte{'a'}, size)) {
					t.Fatalf("size %d, hold %v, drained %v: read back %d bytes (%v), not the value put", size, hold, drain, len(got), ok)
				}
			}
		}
	}
	bad := errors.New("connection reset")
	h := &holder{b: []byte("xxxx"), err: bad}
	if _, err := c.PutFromWith([]byte("failed"), h, 4, PutOptions{}); !errors.Is(err, bad) {
		t.Fatalf("PutFromWith with a failing Hold: %v", err)
	}
	if _, ok := getBytes(t, c, "failed"); ok {
		t.Fatal("a value whose Hold failed was stored")
	}
}
