package blobcache

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// Fault tests: faults injected through the file-system seam (internal/vfs/errorfs) and bytes
// damaged on disk. What every one of them checks is the promise of the cache: a Get returns the
// exact value last written for the key, or a miss, or an error; never another value. On top of
// that each checks that the fault reaches the caller as an error, is counted, and leaves the cache
// usable and the data it did not touch intact.

// outcome is what a read of one key gave.
type outcome int

const (
	hit outcome = iota
	miss
	readErr
)

func (o outcome) String() string { return [...]string{"hit", "miss", "error"}[o] }

// lookup reads key whole with Get and, when it hits, with ReadAt too, and returns what it got.
// A hit that returns bytes other than one of allowed fails the test.
func lookup(t testing.TB, c *Cache, key string, allowed ...[]byte) outcome {
	t.Helper()
	r, ok := c.Get([]byte(key))
	if !ok {
		return miss
	}
	got, err := io.ReadAll(r)
	if err != nil {
		return readErr
	}
	for _, a := range allowed {
		if a != nil && bytes.Equal(got, a) {
			p := make([]byte, len(a))
			n, err := c.ReadAt([]byte(key), p, 0)
			if err == nil && (n != len(a) || !bytes.Equal(p, a)) {
				t.Fatalf("ReadAt(%q): %d bytes that differ from the value Get returned", key, n)
			}
			return hit
		}
	}
	t.Fatalf("Get(%q): a lie: %d bytes that are none of the %d allowed values", key, len(got), len(allowed))
	return hit
}

// faultyFS returns an errorfs over the OS file system, and logs at the end of the test how many
// faults it injected (the figure docs/RELIABILITY.md adds up).
func faultyFS(t testing.TB) *errorfs.FS {
	fs := errorfs.New(vfs.Default, 1)
	t.Cleanup(func() { t.Logf("errorfs: %d faults injected in %d operations", fs.Injected(), fs.Ops()) })
	return fs
}

// putKeys puts n keys prefix0..prefix<n-1> at version ver and returns their values.
func putKeys(t testing.TB, c *Cache, prefix string, n, ver, size int) map[string][]byte {
	t.Helper()
	vals := make(map[string][]byte, n)
	for i := range n {
		k := fmt.Sprintf("%s%d", prefix, i)
		v := value(k, ver, size+i)
		if err := c.Put([]byte(k), v); err != nil {
			t.Fatalf("Put(%s): %v", k, err)
		}
		vals[k] = v
	}
	return vals
}

// expectAll checks that every key holds exactly its value.
func expectAll(t testing.TB, c *Cache, vals map[string][]byte) {
	t.Helper()
	for k, v := range vals {
		expect(t, c, k, v)
	}
}

// TestWriteFaults: a batch write that fails (ENOSPC, EIO, a short write) or a batch sync that
// fails (with Fsync) is reported to a caller as ErrWriteFailed wrapping the I/O error, is
// counted, forgets only the blobs of its batch, and leaves the cache usable; what was drained
// before is intact, before and after a reopen.
func TestWriteFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault errorfs.Fault
		opts  []Option
	}{
		{"enospc", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Err: syscall.ENOSPC, Times: 1}, nil},
		{"eio", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Times: 1}, nil},
		{"short write", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Action: errorfs.Short, Keep: -1, Times: 1}, nil},
		{"eio direct", errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Times: 1}, []Option{WithBufferedWrites(false)}},
		{"fsync eio", errorfs.Fault{Ops: errorfs.OpSync, Name: "*.seg", Times: 1}, []Option{WithFsync(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultyFS(t)
			dir := t.TempDir()
			opts := small(append([]Option{withFS(fs)}, tc.opts...)...)
			c := open(t, dir, opts...)
			base := putKeys(t, c, "base", 50, 0, 2000)
			c.Drain()
			fault := fs.Add(&tc.fault)
			lost := putKeys(t, c, "lost", 10, 0, 1500) // new keys: their batch fails
			c.Drain()
			if fault.Injected() != 1 {
				t.Fatalf("fault injected %d times", fault.Injected())
			}
			err := c.Put([]byte("next"), []byte("v"))
			if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, tc.fault.Err) && tc.fault.Err != nil {
				t.Fatalf("Put after a failed flush: %v", err)
			}
			if tc.fault.Err == nil && !errors.Is(err, syscall.EIO) {
				t.Fatalf("Put after a failed flush: %v, want EIO inside", err)
			}
			if st := c.Stats(); st.FlushErrors == 0 {
				t.Fatal("flush error not counted")
			}
			// The error is reported once; the cache goes on.
			more := putKeys(t, c, "more", 20, 0, 1800)
			c.Drain()
			expectAll(t, c, base)
			expectAll(t, c, more)
			for k, v := range lost {
				lookup(t, c, k, v)
			}
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			c = open(t, dir, opts...)
			defer c.Close()
			expectAll(t, c, base)
			expectAll(t, c, more)
			for k, v := range lost {
				lookup(t, c, k, v)
			}
		})
	}
}

// TestReadFaults: an I/O error or a short read under a Get, a ReadAt or a stream is an error
// from the reader (counted), never bytes; a bit flipped on the way from the disk is a miss (in a
// header or key) or ErrChecksumMismatch (in a value, with VerifyOnRead). When the fault is
// gone the same keys read back exactly. It runs with reads through the page cache and with
// DirectIOReads.
func TestReadFaults(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testReadFaults(t, direct) })
	}
}

func testReadFaults(t *testing.T, direct bool) {
	fs := faultyFS(t)
	dir := t.TempDir()
	opts := []Option{withFS(fs), WithWriteBufferSize(4 << 20), WithSegmentSize(16 << 20), WithVerifyOnRead(true)}
	if direct {
		opts = append(opts, WithDirectIOReads(true))
	}
	c := open(t, dir, opts...)
	defer c.Close()
	vals := putKeys(t, c, "k", 20, 0, 3000)
	big := value("big", 0, 3<<20) // streamed: read in pieces after the first read
	if err := c.Put([]byte("big"), big); err != nil {
		t.Fatal(err)
	}
	c.Drain()

	for _, tc := range []struct {
		name  string
		fault errorfs.Fault
		want  outcome
	}{
		{"eio", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg"}, readErr},
		{"short", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Action: errorfs.Short, Keep: 10}, readErr},
		// The first record starts at 4096: flip its kind byte, a key byte, a value byte.
		{"flip kind", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Action: errorfs.Flip, Off: segment.HeaderSize + 2, Len: 1}, miss},
		{"flip key", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Action: errorfs.Flip, Off: segment.HeaderSize + record.HeaderSize, Len: 1}, miss},
		{"flip value", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Action: errorfs.Flip, Off: segment.HeaderSize + record.HeaderSize + 2 + 100, Len: 1, Mask: 0x10}, readErr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Stats()
			fault := fs.Add(&tc.fault)
			if got := lookup(t, c, "k0", vals["k0"]); got != tc.want {
				t.Fatalf("Get: %v, want %v", got, tc.want)
			}
			n, err := c.ReadAt([]byte("k0"), make([]byte, len(vals["k0"])), 0)
			switch tc.want {
			case miss:
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("ReadAt: %d, %v; want ErrNotFound", n, err)
				}
			case readErr:
				if err == nil || errors.Is(err, ErrNotFound) {
					t.Fatalf("ReadAt: %d, %v; want an error", n, err)
				}
			}
			fs.Drop(fault)
			if fault.Injected() == 0 {
				t.Fatal("no fault injected")
			}
			after := c.Stats()
			if after.ReadErrors+after.CorruptRecord == before.ReadErrors+before.CorruptRecord {
				t.Fatalf("fault not counted: %+v", after)
			}
			if tc.want == miss && after.LastCorruption == "" {
				t.Fatal("no LastCorruption")
			}
			expectAll(t, c, vals)
		})
	}

	t.Run("stream", func(t *testing.T) {
		// The first read of a big blob brings its first 256 KiB; fail a later one.
		fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Skip: 2})
		r, ok := c.Get([]byte("big"))
		if !ok {
			t.Fatal("miss")
		}
		got, err := io.ReadAll(r)
		fs.Drop(fault)
		if err == nil || !errors.Is(err, syscall.EIO) {
			t.Fatalf("stream under EIO: %d bytes, %v", len(got), err)
		}
		if !bytes.Equal(got, big[:len(got)]) {
			t.Fatal("the bytes delivered before the error are wrong")
		}
		expect(t, c, "big", big)
	})
}

// TestOpenFaults: an I/O error while opening (identity file, directory listing, footer, bloom.dat)
// fails New with an error that says so, or (bloom.dat) is worked around; the directory is left
// as it was, and a later open without the fault finds every blob.
func TestOpenFaults(t *testing.T) {
	fs := faultyFS(t)
	dir := t.TempDir()
	opts := small(withFS(fs))
	c := open(t, dir, opts...)
	vals := putKeys(t, c, "k", 1500, 0, 4000) // several sealed segments
	c.Close()
	for _, tc := range []struct {
		name    string
		fault   errorfs.Fault
		newFail bool
	}{
		{"identity read", errorfs.Fault{Ops: errorfs.OpRead, Name: identityFile}, true},
		{"segments listing", errorfs.Fault{Ops: errorfs.OpReadDir, Name: segDir}, true},
		{"lock", errorfs.Fault{Ops: errorfs.OpLock}, true},
		{"segment open", errorfs.Fault{Ops: errorfs.OpOpen, Name: "*.seg", Skip: 1, Times: 1}, true},
		{"footer read", errorfs.Fault{Ops: errorfs.OpRead, Name: "*.seg", Skip: 3, Times: 1}, true},
		{"segment stat", errorfs.Fault{Ops: errorfs.OpStat, Name: "*.seg", Times: 1}, true},
		{"bloom read", errorfs.Fault{Ops: errorfs.OpRead, Name: bloomFile}, false},
		{"bloom flip", errorfs.Fault{Ops: errorfs.OpRead, Name: bloomFile, Action: errorfs.Flip, Off: 100, Len: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fault := fs.Add(&tc.fault)
			c, err := New(dir, opts...)
			fs.Drop(fault)
			if fault.Injected() == 0 {
				if err == nil {
					c.Close()
				}
				t.Fatal("no fault injected")
			}
			if tc.newFail {
				if err == nil {
					c.Close()
					t.Fatal("New succeeded")
				}
				if !errors.Is(err, syscall.EIO) {
					t.Fatalf("New: %v, want EIO inside", err)
				}
				c = open(t, dir, opts...)
			} else if err != nil {
				t.Fatalf("New: %v", err)
			}
			expectAll(t, c, vals)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCloseFaults: when saving bloom.dat fails, Close says so, and the next open rebuilds the
// filter; every blob is there.
func TestCloseFaults(t *testing.T) {
	fs := faultyFS(t)
	dir := t.TempDir()
	opts := small(withFS(fs))
	c := open(t, dir, opts...)
	vals := putKeys(t, c, "k", 100, 0, 1000)
	fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: bloomFile + ".tmp", Err: syscall.ENOSPC})
	if err := c.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Close: %v, want ENOSPC", err)
	}
	fs.Drop(fault)
	if _, err := os.Stat(filepath.Join(dir, bloomFile+".tmp")); err == nil {
		t.Fatal("bloom.dat.tmp left behind")
	}
	c = open(t, dir, opts...)
	defer c.Close()
	expectAll(t, c, vals)
}

// TestTornLastRecord writes a batch holding one record and tears the write at every byte offset
// of it, as a crash in the middle of the write would, then reopens: the records before it are
// all there, the torn one is a miss, the tail is counted as torn. Done for a put and for a
// delete (whose key must then hold its old value or be a miss).
func TestTornLastRecord(t *testing.T) {
	for _, kind := range []string{"put", "delete"} {
		t.Run(kind, func(t *testing.T) {
			tornLastRecord(t, kind)
		})
	}
}

func tornLastRecord(t *testing.T, kind string) {
	fs := faultyFS(t)
	// No syncs: crash leaves the page cache as it is, and the test opens a cache per offset.
	fs.Add(&errorfs.Fault{Ops: errorfs.OpSync | errorfs.OpSyncDir, Action: errorfs.Ignore})
	// The smallest segment: every open scans it whole.
	opts := small(withFS(fs), WithSegmentSize(64<<10+segment.HeaderSize+1<<20))
	lastVal := value("last", 1, 100)
	setup := func(dir string) (*Cache, map[string][]byte) {
		c := open(t, dir, opts...)
		vals := putKeys(t, c, "k", 12, 0, 200)
		if err := c.Put([]byte("last"), value("last", 0, 250)); err != nil {
			t.Fatal(err)
		}
		c.Drain()
		return c, vals
	}
	// Find where the last record goes and how long it is.
	c, _ := setup(t.TempDir())
	c.w.mu.Lock()
	recOff := c.segs.active[mainRegion].active.End()
	c.w.mu.Unlock()
	recLen := int64(record.HeaderSize + len("last") + len(lastVal))
	if kind == "delete" {
		recLen = record.HeaderSize + int64(len("last"))
	}
	c.Close()

	torn, corrupt, failed := 0, 0, 0
	step := int64(1)
	if raceEnabled {
		step = 5 // see raceEnabled
	}
	for cut := recOff; cut < recOff+recLen; cut += step {
		dir := t.TempDir()
		c, vals := setup(dir)
		// The process dies in the middle of the write: the bytes before the cut reach the
		// file, nothing written after it does.
		fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Action: errorfs.Tear, Off: cut, Times: 1})
		dead := fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite | errorfs.OpTruncate | errorfs.OpPunchHole, Name: "*.seg", Action: errorfs.Ignore})
		var err error
		if kind == "put" {
			err = c.Put([]byte("last"), lastVal)
		} else {
			err = c.Delete([]byte("last"))
		}
		if err != nil {
			t.Fatal(err)
		}
		// The torn write is a failed batch: Flush reports it, and the segment is sealed behind
		// it, so recovery finds a footer rather than a torn tail.
		reported := c.Flush() != nil
		if fault.Injected() != 1 {
			t.Fatalf("cut %d: the write was not torn", cut)
		}
		c.crash()
		fs.Drop(fault)
		fs.Drop(dead)
		c = open(t, dir, opts...)
		expectAll(t, c, vals)
		switch got := lookup(t, c, "last", value("last", 0, 250)); {
		case got == readErr:
			t.Fatalf("cut %d: Get(last): read error", cut)
		case kind == "put" && got != hit:
			t.Fatalf("cut %d: the old value of last is gone", cut)
		}
		// A tear that leaves a whole sector of zeros in the record is a torn tail; one that
		// leaves a few bytes of it in a sector with other data looks like damage. Either way
		// it is counted.
		if st := c.Stats(); st.TornTails > 0 {
			torn++
		} else if st.CorruptRecord > 0 {
			corrupt++
		} else if reported {
			failed++
		} else if cut > recOff {
			t.Fatalf("cut %d: torn record not counted: %+v", cut, st)
		}
		// Usable: a new write of the key lands and survives a reopen (checked for some
		// cuts: it costs more than the rest).
		if (cut-recOff)%(8*step) == 0 {
			if err := c.Put([]byte("last"), lastVal); err != nil {
				t.Fatal(err)
			}
			c.Close()
			c = open(t, dir, opts...)
			expect(t, c, "last", lastVal)
			expectAll(t, c, vals)
		}
		c.crash()
	}
	t.Logf("%s record of %d bytes at offset %d torn at every offset: %d counted as torn tails, %d as corruption, %d reported as failed writes",
		kind, recLen, recOff, torn, corrupt, failed)
}

// TestFullDisk: with a disk smaller than what is put and no MaxSize to keep the cache under it,
// Put fails with an error wrapping ENOSPC instead of hanging; the cache keeps serving what it
// has; once space comes back, Puts succeed again.
func TestFullDisk(t *testing.T) {
	fs := faultyFS(t)
	fs.SetCapacity(7 << 20) // three 2 MiB segments and the small files
	dir := t.TempDir()
	opts := small(withFS(fs))
	c := open(t, dir, opts...)
	defer c.Close()
	// A full disk with sealed segments on it: creating a segment fails with ENOSPC, the oldest
	// segments are evicted to make room, and writing goes on.
	for i := range 3000 { // 24 MB through a 7 MiB disk
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 8000)); err != nil {
			t.Fatalf("Put %d with evictable segments on a full disk: %v (used %d, stats %+v)", i, err, fs.Used(), c.Stats())
		}
	}
	c.Drain()
	if st := c.Stats(); st.Evictions == 0 || fs.Injected() == 0 {
		t.Fatalf("evictions %d, ENOSPC injected %d: the disk never filled", st.Evictions, fs.Injected())
	}
	for i := 2990; i < 3000; i++ {
		k := fmt.Sprintf("k%d", i)
		lookup(t, c, k, value(k, 0, 8000))
	}
	// A disk too small for even one segment: nothing can be evicted to make room, and Put
	// fails with an error instead of hanging.
	fs.SetCapacity(1 << 20)
	var full error
	for i := 0; full == nil; i++ {
		if i > 2000 {
			t.Fatalf("no error after %d puts on a disk smaller than a segment", i)
		}
		k := fmt.Sprintf("x%d", i)
		full = c.Put([]byte(k), value(k, 0, 8000))
	}
	if !errors.Is(full, ErrWriteFailed) || !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk: %v", full)
	}
	// Space comes back: writes work again, once the batches still failing in flight are
	// accounted for (Flush reports them).
	if err := c.Flush(); err != nil {
		t.Logf("Flush while full: %v", err)
	}
	fs.SetCapacity(0)
	// A batch cut by the flush timer while the disk was still full may fail after the Flush
	// above; the next Flush reports it (and writes the tombstones of what it forgot).
	if err := c.Flush(); err != nil {
		t.Logf("Flush once space is back: %v", err)
	}
	after := putKeys(t, c, "after", 100, 0, 8000)
	c.Drain()
	expectAll(t, c, after)
}

// TestEvictionBeforeFullDisk: with MaxSize under the disk's capacity, eviction makes room before
// the disk fills: no Put fails.
func TestEvictionBeforeFullDisk(t *testing.T) {
	fs := faultyFS(t)
	fs.SetCapacity(12 << 20)
	c := open(t, t.TempDir(), small(withFS(fs), WithMaxSize(8<<20))...)
	defer c.Close()
	for i := range 3000 { // 24 MiB
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 8000)); err != nil {
			t.Fatalf("Put %d: %v (%d bytes used)", i, err, fs.Used())
		}
	}
	c.Drain()
	if st := c.Stats(); st.Evictions == 0 {
		t.Fatal("nothing evicted")
	}
	k := "k2999"
	expect(t, c, k, value(k, 0, 8000))
}

var (
	faultSeed  = flag.Uint64("faults.seed", 0, "seed of the randomized fault tests (0: time based)")
	faultSteps = flag.Int("faults.steps", 1000, "operations of each randomized fault test")
)

// TestModelUnderReadFaults runs a seeded random sequence of Put, UnsafePut, Delete, Get, Drain,
// Close and reopen while reads fail (EIO, short reads) or return flipped bits at random. A Get
// must be the last value put or a miss or an error, never anything else. Replay a failure with
// -faults.seed.
func TestModelUnderReadFaults(t *testing.T) {
	faultModel(t, []*errorfs.Fault{
		{Ops: errorfs.OpRead, Name: "*.seg", Prob: 0.03},
		{Ops: errorfs.OpRead, Name: "*.seg", Prob: 0.02, Action: errorfs.Short, Keep: -1},
		{Ops: errorfs.OpRead, Name: "*.seg", Prob: 0.05, Action: errorfs.Flip, Off: segment.HeaderSize, Mask: 0x04},
	})
}

// faultModel runs the model test with faults, which are on except while the cache opens.
func faultModel(t *testing.T, faults []*errorfs.Fault) {
	seed := *faultSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -faults.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	fs := errorfs.New(vfs.Default, seed)
	dir := t.TempDir()
	variants := [][]Option{
		small(),
		small(WithVerifyOnRead(true)),
		small(WithFsync(true), WithVerifyOnRead(true)),
		small(WithBufferedWrites(false), WithIndex(IndexSkipList)),
	}
	v := rng.IntN(len(variants))
	t.Logf("variant %d", v)
	opts := append(variants[v], withFS(fs))
	on := func() {
		for _, f := range faults {
			g := *f
			fs.Add(&g)
		}
	}
	c := open(t, dir, opts...)
	defer func() { fs.Clear(); c.Close() }()
	on()
	// model holds the values each key may hold: the last Put that returned nil, or after an
	// error every value since (a failed Put may or may not have replaced the one before). A
	// miss is always allowed.
	model := map[string][][]byte{}
	outcomes := map[outcome]int{}
	var putErrs, delErrs int
	var trace []string
	defer func() {
		if t.Failed() {
			t.Logf("last operations:\n%s", strings.Join(trace[max(0, len(trace)-300):], "\n"))
		}
	}()
	steps := *faultSteps
	for step := range steps {
		k := fmt.Sprintf("key-%d", rng.IntN(150))
		op := rng.IntN(100)
		trace = append(trace, fmt.Sprintf("%d: op %d %s (model: %d values, %d faults so far)", step, op, k, len(model[k]), fs.Injected()))
		switch {
		case op < 35:
			val := value(k, step, rng.IntN(9000))
			var err error
			if op < 20 {
				err = c.Put([]byte(k), val)
			} else {
				err = c.UnsafePut([]byte(k), val)
			}
			if err != nil {
				// The write may or may not have happened; the cache may forget the key.
				putErrs++
				trace = append(trace, fmt.Sprintf("    Put: %v", err))
				model[k] = append(model[k], val)
			} else {
				model[k] = [][]byte{val}
			}
		case op < 45:
			if err := c.Delete([]byte(k)); err != nil {
				delErrs++
				// Not done: the old value may stay, or go.
				outcomes[lookup(t, c, k, model[k]...)]++
				continue
			}
			delete(model, k)
		case op < 93:
			outcomes[lookup(t, c, k, model[k]...)]++
		case op < 98:
			c.Drain()
		default:
			fs.Clear()
			c.Close()
			c = open(t, dir, opts...)
			on()
		}
	}
	fs.Clear()
	for k := range model {
		outcomes[lookup(t, c, k, model[k]...)]++
	}
	t.Logf("%d steps, %d faults injected: reads %v; %d Put and %d Delete errors",
		steps, fs.Injected(), outcomes, putErrs, delErrs)
	if fs.Injected() == 0 {
		t.Fatal("no fault injected")
	}
}

// TestFullDiskEvictsToMakeRoom: when the disk fills before MaxSize is reached (the disk is
// shared, or MaxSize was set too high), the cache must evict to make room, so Puts fail only for
// a while rather than until something outside frees space.
func TestFullDiskEvictsToMakeRoom(t *testing.T) {
	fs := faultyFS(t)
	fs.SetCapacity(8 << 20)
	c := open(t, t.TempDir(), small(withFS(fs), WithMaxSize(64<<20))...)
	defer c.Close()
	failures, lastErr := 0, error(nil)
	for i := range 3000 { // 24 MiB
		k := fmt.Sprintf("k%d", i)
		if err := c.Put([]byte(k), value(k, 0, 8000)); err != nil {
			failures++
			lastErr = err
		}
	}
	c.Drain()
	k := "k2999"
	if got := lookup(t, c, k, value(k, 0, 8000)); got != hit || failures > 10 {
		t.Fatalf("%d of 3000 Puts failed (last: %v), the last blob is a %v; evictions %d",
			failures, lastErr, got, c.Stats().Evictions)
	}
}

// TestModelUnderWriteFaults is TestModelUnderReadFaults with writes, syncs and segment creations
// failing at random too. (It found a Get returning a key's older value after the batch with its
// newer one failed, and a Delete undone by a dropped batch.)
func TestModelUnderWriteFaults(t *testing.T) {
	faultModel(t, []*errorfs.Fault{
		{Ops: errorfs.OpWrite, Name: "*.seg", Prob: 0.02},
		{Ops: errorfs.OpWrite, Name: "*.seg", Prob: 0.01, Action: errorfs.Short, Keep: -1},
		{Ops: errorfs.OpSync, Name: "*.seg", Prob: 0.02},
		{Ops: errorfs.OpCreate, Name: "*.seg", Prob: 0.1, Err: syscall.ENOSPC},
		{Ops: errorfs.OpRead, Name: "*.seg", Prob: 0.02},
	})
}

// TestPerBlobTornNewerFileKeepsOlder: a crash while the file of a key's new value is being
// written leaves that file empty or short. Opening must not let it replace (and remove) the
// key's older, durable file: the older value (or the new one, whole) must survive.
func TestPerBlobTornNewerFileKeepsOlder(t *testing.T) {
	dir := t.TempDir()
	opts := small(WithPerBlobFiles(true), WithFsync(true))
	c := open(t, dir, opts...)
	v1 := value("k", 1, 5000)
	if err := c.Put([]byte("k"), v1); err != nil {
		t.Fatal(err)
	}
	c.Close()
	h := record.KeyHash([]byte("k"))
	sub := filepath.Dir(c.layout.(*blobFiles).path(h, 1))
	ents, err := os.ReadDir(sub)
	if err != nil || len(ents) != 1 {
		t.Fatalf("blob files: %v, %v", ents, err)
	}
	_, seq, ok := parseBlobName(ents[0].Name())
	if !ok {
		t.Fatal(ents[0].Name())
	}
	// The next value's file, as a crash right after creating it leaves it.
	for _, size := range []int{0, 40} {
		if err := os.WriteFile(c.layout.(*blobFiles).path(h, seq+1), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
		c = open(t, dir, opts...)
		r, ok := c.Get([]byte("k"))
		if !ok {
			c.Close()
			t.Fatalf("a torn %d-byte newer file made the durable value a miss", size)
		}
		got, err := io.ReadAll(r)
		c.Close()
		if err != nil || string(got) != string(v1) {
			t.Fatalf("Get: %d bytes, %v", len(got), err)
		}
	}
}

// TestSyncDirFaults: every directory sync on a durable path reports its failure. A directory
// sync makes a creation, rename or removal survive a crash; one that fails silently lets a
// promise made with Fsync (or a new cache's identity, or the saved filter) be undone by a crash
// with nobody told. Each case fails the sync once (EIO) on one path and checks the error reaches
// the caller, wrapping EIO. The eviction's sync has its own test
// (TestEvictionSyncDirFailureBreaksWriter), as does a per-blob Delete's
// (TestPerBlobDeleteSyncDirFailure).
func TestSyncDirFaults(t *testing.T) {
	syncFault := func(name string) *errorfs.Fault {
		return &errorfs.Fault{Ops: errorfs.OpSyncDir, Name: name, Err: syscall.EIO, Times: 1}
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, fs *errorfs.FS, dir string) error
	}{
		{"identity of a new cache", func(t *testing.T, fs *errorfs.FS, dir string) error {
			fs.Add(syncFault(filepath.Base(dir)))
			c, err := New(dir, small(withFS(fs))...)
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"segment creation with Fsync", func(t *testing.T, fs *errorfs.FS, dir string) error {
			c := open(t, dir, small(withFS(fs), WithFsync(true))...)
			defer c.Close()
			fs.Add(syncFault(segDir))
			if err := c.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			return c.Flush()
		}},
		{"blob file with Fsync", func(t *testing.T, fs *errorfs.FS, dir string) error {
			c := open(t, dir, small(withFS(fs), WithFsync(true), WithPerBlobFiles(true))...)
			defer c.Close()
			fs.Add(syncFault("??")) // the blob's directory, blobs/<hh>
			if err := c.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			return c.Flush()
		}},
		{"segments directory at Close with Fsync", func(t *testing.T, fs *errorfs.FS, dir string) error {
			c := open(t, dir, small(withFS(fs), WithFsync(true))...)
			if err := c.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			if err := c.Flush(); err != nil {
				return err
			}
			fs.Add(syncFault(segDir))
			return c.Close()
		}},
		{"saved filter at Close", func(t *testing.T, fs *errorfs.FS, dir string) error {
			c := open(t, dir, small(withFS(fs))...)
			if err := c.Put([]byte("k"), []byte("v")); err != nil {
				return err
			}
			fs.Add(syncFault(filepath.Base(dir))) // bloom.dat's rename
			return c.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := faultyFS(t)
			err := tc.run(t, fs, t.TempDir())
			if fs.Injected() != 1 {
				t.Fatalf("%d faults injected, want 1", fs.Injected())
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("a failed directory sync: %v, want an error wrapping EIO", err)
			}
		})
	}
}

// TestCloseReportsEarlierFailure: a batch that failed after the last Put, with no Flush since,
// has been reported to nobody; Close reports it (it reported only failures during its own
// drain, so the failure reached no caller at all).
func TestCloseReportsEarlierFailure(t *testing.T) {
	fs := faultyFS(t)
	c := open(t, t.TempDir(), small(withFS(fs))...)
	if err := c.Put([]byte("k"), value("k", 1, 3000)); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	fault := fs.Add(&errorfs.Fault{Ops: errorfs.OpWrite, Name: "*.seg", Times: 1})
	if err := c.Put([]byte("k"), value("k", 2, 3000)); err != nil {
		t.Fatal(err)
	}
	c.Drain() // the batch fails here; Drain reports nothing
	if fault.Injected() != 1 || c.Stats().FlushErrors != 1 {
		t.Fatalf("fault injected %d times, FlushErrors %d", fault.Injected(), c.Stats().FlushErrors)
	}
	if err := c.Close(); !errors.Is(err, ErrWriteFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Close after an unreported failed batch: %v, want ErrWriteFailed wrapping EIO", err)
	}
}
