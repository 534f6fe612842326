package blobcache

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

var (
	modelSeed    = flag.Uint64("model.seed", 0, "seed of TestModel (0: time based)")
	modelSteps   = flag.Int("model.steps", 3000, "operations of TestModel")
	modelVariant = flag.Int("model.variant", -1, "options variant of TestModel (-1: chosen by the seed)")
)

// TestModel runs a seeded random sequence of Put, UnsafePut, PutFrom, Delete, Get, ReadAt, Drain,
// Close and reopen, and crash and reopen (after a Drain, so that nothing is lost), against a map,
// then reads every key. Values are mostly small, some around and above WriteBufferSize
// (modelSize). In the variants that evict, the disk must be within MaxSize plus one segment after
// every step. A watchdog fails a step that hangs. Replay a failure with -model.seed.
// TestMetamorphic applies one sequence to every variant at once.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -model.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	variants := optionVariants()
	v := rng.IntN(len(variants))
	if *modelVariant >= 0 {
		v = *modelVariant
	}
	// PutFrom streams values past 4 KiB, through 4 KiB chunks, so streams and batches mix.
	opts := append(variants[v].opts, withPutChunk(4096))
	t.Logf("variant %d (%s)", v, variants[v].name)
	r := newModelRun(t, variants[v].name, dir, opts)
	defer r.close()
	// With eviction the cache may forget: a Get may miss, but a hit must be the last value put
	// and a deleted key must stay deleted.
	evicts := variants[v].evicts
	if rng.IntN(2) == 0 {
		// A CPU hog beside the cache makes its seals, flushes and commits late, as on a busy
		// machine (the disk bound below once failed only so).
		t.Log("with a CPU hog")
		defer startCPUHog(1)()
	}
	keys := 200
	if evicts {
		keys = 2000 // more live data than MaxSize
	}
	steps := *modelSteps
	if testing.Short() {
		steps /= 5
	}
	ops := genModelOps(rng, steps, keys, r.c.opts.WriteBufferSize, r.c.MaxValueSize)
	var trace []string
	bound := r.c.opts.MaxSize + r.c.opts.SegmentSize
	checkDisk := func(step int) {
		t.Helper()
		c := r.c
		// The counter Stats().DiskBytes returns, read alone: Stats also measures the bloom
		// filter, which would cost more than the step.
		if d := c.diskBytes.Load(); d > bound {
			t.Fatalf("step %d: DiskBytes %d (%.2fx MaxSize), over MaxSize %d + SegmentSize %d",
				step, d, float64(d)/float64(c.opts.MaxSize), c.opts.MaxSize, c.opts.SegmentSize)
		}
		if c.opts.PerBlobFiles {
			return
		}
		d, err := segmentFilesAllocated(filepath.Join(dir, segDir))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if d > bound {
			t.Fatalf("step %d: the segment files take %d bytes (%.2fx MaxSize), over MaxSize %d + SegmentSize %d",
				step, d, float64(d)/float64(c.opts.MaxSize), c.opts.MaxSize, c.opts.SegmentSize)
		}
	}
	wd := startWatchdog(t, "steps", 0)
	defer wd.stop()
	defer func() {
		if t.Failed() {
			n := max(0, len(trace)-600)
			t.Logf("last operations:\n%s", strings.Join(trace[n:], "\n"))
		}
	}()
	model := newModelState()
	do := func(step int, op modelOp) {
		t.Helper()
		trace = append(trace, fmt.Sprintf("%d: %v (model has %d bytes)", step, op, len(model.values[op.key])))
		v := op.value()
		want := model.apply(op, v)
		got, err := r.do(op, v)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !modelAllows(want, got, evicts) {
			t.Fatalf("step %d: %v: %s, want %s", step, op, model.describe(op, got), model.describe(op, want))
		}
	}
	// A second writer, on keys of its own, puts values below, at and above the write buffer
	// (Put and PutFrom) while the sequence runs, so that the pipeline sees two goroutines'
	// batches and streams at once; a hit of its keys must be its last value. It stops while
	// the sequence closes, reopens or crashes the cache (gate).
	var gate sync.RWMutex
	pace := make(chan struct{}, 1) // one background operation per step at most
	defer startModelBackgroundWriter(t, rng.Uint64(), &gate, pace, r, evicts)()
	for step, op := range ops {
		wd.tick()
		if evicts {
			checkDisk(step)
		}
		select {
		case pace <- struct{}{}:
		default:
		}
		if op.kind == modelReopen || op.kind == modelCrash {
			func() {
				gate.Lock()
				defer gate.Unlock() // a t.Fatalf in do must not leave the writer blocked
				do(step, op)
			}()
			continue
		}
		do(step, op)
	}
	if evicts {
		checkDisk(steps)
	}
	// The end state: every key, held or not.
	for i := range keys {
		wd.tick()
		do(steps+i, modelOp{kind: modelGet, key: modelKey(i)})
	}
	if evicts && !variants[v].declines && steps >= 2000 && r.evictions() == 0 {
		t.Fatal("the eviction variant evicted nothing")
	}
	t.Logf("%d evictions, %d reinserted; last open: %d declined", r.evictions(), r.reinserted+r.c.Stats().Reinserted, r.c.Stats().Declined)
}

// optionVariant is one set of options that the model tests run the cache with.
type optionVariant struct {
	name   string
	opts   []Option
	evicts bool // MaxSize is set: the cache may forget a key, never return a wrong value
	// declines: Puts go through an admission policy that declines some, so a run may write
	// too little to evict.
	declines bool
}

// optionVariants are the option variants of TestModel (-model.variant is an index into them,
// those that evict come last) and TestMetamorphic.
func optionVariants() []optionVariant {
	return []optionVariant{
		{"default", small(), false, false},
		{"skiplist", small(WithIndex(IndexSkipList)), false, false},
		{"directwrites-verify", small(WithBufferedWrites(false), WithChecksum(true), WithVerifyOnRead(true)), false, false},
		{"perblob", small(WithPerBlobFiles(true)), false, false},
		{"direct-verify", small(WithBufferedWrites(false), WithDirectIOReads(true), WithChecksum(true), WithVerifyOnRead(true)), false, false},
		{"evict", small(WithMaxSize(4 << 20)), true, false},                               // a hit must still be right
		{"perblob-evict", small(WithPerBlobFiles(true), WithMaxSize(1<<20)), true, false}, // likewise, blob by blob
		{"directreads-evict", small(WithDirectIOReads(true), WithMaxSize(4<<20)), true, false},
		// Reinsertion is on in every variant with MaxSize (the default policy); these add
		// declined Puts (their tombstones) and a write budget that drops reinsertions too.
		{"evict-second-put", small(WithMaxSize(4<<20), WithAdmission(AdmitOnSecondPut(64))), true, true},
		{"evict-budget", small(WithMaxSize(4<<20), WithWriteBudget(8<<20)), true, true},
		// Two regions (PolicyProbation with eight segments or more): promotions, the ghost
		// set, and segments evicted out of id order.
		{"evict-probation", small(WithSegmentSize(probationTestSegment), WithMaxSize(4*probationTestSegment)), true, false},
		// The memory tier (off by default): one that holds everything these runs write, and
		// one small enough to evict.
		{"memory", small(WithMemorySize(64 << 20)), false, false},
		{"memory-small-evict", small(WithMaxSize(4<<20), WithMemorySize(512<<10)), true, false},
		// Compression (off by default): values compressed, read back whole and in ranges, from
		// the write buffer, the segments and the memory tier.
		{"compress-zstd", small(WithCompression(CompressionZstd), WithChecksum(true), WithVerifyOnRead(true)), false, false},
		{"compress-s2-memory-evict", small(WithCompression(CompressionS2), WithMaxSize(4<<20), WithMemorySize(512<<10), WithMemoryAdmission(MemoryOnWrite)), true, false},
	}
}

// probationTestSegment is a SegmentSize for tests that want two regions in a small cache: they
// give MaxSize four of them (minProbationSegments) or more. It holds the largest values the model
// writes (200 KiB) and is small enough that a few hundred steps evict.
const probationTestSegment = 512 << 10

// modelOpKind is what a step of a model sequence does.
type modelOpKind uint8

const (
	modelPut modelOpKind = iota
	modelUnsafePut
	modelPutFrom
	modelDelete
	modelGet
	modelReadAt
	modelDrain
	modelReopen // Close and New
	modelCrash  // Drain, crash and New: after a Drain a crash loses nothing
)

// modelOp is one step of a model sequence. It says everything the step does, so that a sequence
// drawn once can be applied to several caches.
type modelOp struct {
	kind    modelOpKind
	key     string // "" for Drain, Close and crash
	version int    // puts: the value is modelValue(key, version, size)
	size    int    // puts: the value's size
	off, n  int    // ReadAt: the bytes [off, off+n) are asked for
}

func (op modelOp) String() string {
	switch op.kind {
	case modelPut, modelUnsafePut, modelPutFrom:
		name := [...]string{"Put", "UnsafePut", "PutFrom"}[op.kind]
		return fmt.Sprintf("%s %s v%d (%d bytes)", name, op.key, op.version, op.size)
	case modelDelete:
		return "Delete " + op.key
	case modelGet:
		return "Get " + op.key
	case modelReadAt:
		return fmt.Sprintf("ReadAt %s [%d, %d)", op.key, op.off, op.off+op.n)
	case modelDrain:
		return "Drain"
	case modelReopen:
		return "Close and reopen"
	case modelCrash:
		return "Drain, crash and reopen"
	}
	return fmt.Sprintf("op %d", op.kind)
}

// value is the value a put stores, nil for the other steps.
func (op modelOp) value() []byte {
	if op.kind > modelPutFrom {
		return nil
	}
	return modelValue(op.key, op.version, op.size)
}

func modelKey(i int) string { return fmt.Sprintf("key-%d", i) }

// genModelOps draws steps operations on keys keys: 35% puts (a third each Put, UnsafePut and
// PutFrom) of values of modelSize for a write buffer of wbs bytes and at most limit(len(key))
// bytes, 10% Delete, 40% Get, 5% ReadAt (the whole value, its tail, a range inside it, or one
// past its end), 5% Drain, 3% Close and reopen, 2% crash and reopen.
func genModelOps(rng *rand.Rand, steps, keys int, wbs int64, limit func(keyLen int) int64) []modelOp {
	ops := make([]modelOp, 0, steps)
	sizes := map[string]int{} // of the values held, for the ranges of ReadAt
	version := 0
	for range steps {
		k := modelKey(rng.IntN(keys))
		op := modelOp{key: k}
		switch p := rng.IntN(100); {
		case p < 35:
			version++
			op.version = version
			op.size = modelSize(rng, wbs, len(k), limit(len(k)))
			op.kind = [...]modelOpKind{modelPut, modelUnsafePut, modelPutFrom}[rng.IntN(3)]
			sizes[k] = op.size
		case p < 45:
			op.kind = modelDelete
			delete(sizes, k)
		case p < 85:
			op.kind = modelGet
		case p < 90:
			op.kind = modelReadAt
			size := sizes[k]
			switch rng.IntN(4) {
			case 0: // the whole value: the one range whose checksum is verified
				op.n = size
			case 1: // the tail
				op.off = rng.IntN(size + 1)
				op.n = size - op.off
			case 2: // inside
				op.off = rng.IntN(size + 1)
				op.n = rng.IntN(size - op.off + 1)
			default: // past the end, maybe from past the end: io.EOF with the bytes there are
				op.off = rng.IntN(size + 9)
				op.n = max(size-op.off, 0) + 1 + rng.IntN(64)
			}
		case p < 95:
			op = modelOp{kind: modelDrain}
		case p < 98:
			op = modelOp{kind: modelReopen}
		default:
			op = modelOp{kind: modelCrash}
		}
		ops = append(ops, op)
	}
	return ops
}

// modelOutcome is what a step saw: for a read, a miss or the bytes read (their number and
// CRC-32C); for any step, the error it returned.
type modelOutcome struct {
	hit    bool
	n      int
	sum    uint32
	err    string // "" or the sentinel the error wraps (modelErrClass), compared
	detail string // the error's text, not compared: it names files
}

// same reports whether o and p are the same outcome (their errors' texts aside).
func (o modelOutcome) same(p modelOutcome) bool {
	return o.hit == p.hit && o.n == p.n && o.sum == p.sum && o.err == p.err
}

// modelAllows reports whether a cache may see got where the map model sees want: the same, or,
// in a cache that evicts, a miss for a key the map holds.
func modelAllows(want, got modelOutcome, evicts bool) bool {
	return got.same(want) || evicts && want.hit && !got.hit && got.err == ""
}

var modelCRC = crc32.MakeTable(crc32.Castagnoli)

// modelRead is the outcome of a read that found the key and read b, then err.
func modelRead(b []byte, err error) modelOutcome {
	o := modelOutcome{hit: true, n: len(b), sum: crc32.Checksum(b, modelCRC)}
	o.err, o.detail = modelErrClass(err)
	return o
}

// modelResult is the outcome of a step that is not a read.
func modelResult(err error) modelOutcome {
	var o modelOutcome
	o.err, o.detail = modelErrClass(err)
	return o
}

// modelErrClass names the sentinel that err wraps, and returns its text.
func modelErrClass(err error) (class, text string) {
	if err == nil {
		return "", ""
	}
	for _, s := range []struct {
		name string
		err  error
	}{
		{"ErrNotFound", ErrNotFound},
		{"ErrClosed", ErrClosed},
		{"ErrChecksumMismatch", ErrChecksumMismatch},
		{"ErrCorrupt", ErrCorrupt},
		{"ErrValueTooLarge", ErrValueTooLarge},
		{"ErrWriteFailed", ErrWriteFailed},
		{"ErrOutrun", ErrOutrun},
		{"ErrInvalidKey", ErrInvalidKey},
		{"io.EOF", io.EOF},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF},
	} {
		if errors.Is(err, s.err) {
			return s.name, err.Error()
		}
	}
	return "other error", err.Error()
}

// modelState is what a cache that forgets nothing holds after a sequence of model ops: a plain
// map of every live key's value.
type modelState struct {
	values map[string][]byte
	// names names every value put by its size and CRC-32C, so that a report can say which one a
	// read returned.
	names map[modelOutcome]string
}

func newModelState() *modelState {
	return &modelState{values: map[string][]byte{}, names: map[modelOutcome]string{}}
}

// apply applies op, whose value (for a put) is v, and returns what op sees in a cache that
// forgets nothing.
func (m *modelState) apply(op modelOp, v []byte) modelOutcome {
	switch op.kind {
	case modelPut, modelUnsafePut, modelPutFrom:
		m.values[op.key] = v
		m.names[modelRead(v, nil)] = fmt.Sprintf("%s v%d", op.key, op.version)
	case modelDelete:
		delete(m.values, op.key)
	case modelGet:
		if v, ok := m.values[op.key]; ok {
			return modelRead(v, nil)
		}
	case modelReadAt:
		if v, ok := m.values[op.key]; ok {
			b := v[min(op.off, len(v)):min(op.off+op.n, len(v))]
			if len(b) < op.n {
				return modelRead(b, io.EOF)
			}
			return modelRead(b, nil)
		}
	}
	return modelOutcome{}
}

// describe says what op saw in o, naming the value a read returned if it is one that was put.
func (m *modelState) describe(op modelOp, o modelOutcome) string {
	var s string
	switch {
	case op.kind != modelGet && op.kind != modelReadAt:
		s = "ok"
		if o.err != "" {
			s = "failed"
		}
	case !o.hit:
		s = "miss"
	default:
		s = fmt.Sprintf("hit: %d bytes, crc32c %#08x", o.n, o.sum)
		if name, ok := m.names[modelOutcome{hit: true, n: o.n, sum: o.sum}]; ok {
			s += " (" + name + ")"
		}
	}
	if o.err != "" {
		s += fmt.Sprintf(", %s (%s)", o.err, o.detail)
	}
	return s
}

// modelRun is a cache that model ops are applied to.
type modelRun struct {
	name       string
	dir        string
	opts       []Option
	c          *Cache
	evicted    uint64 // by the caches closed before c
	reinserted uint64 // likewise
	buf        []byte // ReadAt's
}

func newModelRun(t testing.TB, name, dir string, opts []Option) *modelRun {
	t.Helper()
	return &modelRun{name: name, dir: dir, opts: opts, c: open(t, dir, opts...)}
}

// do applies op, whose value (for a put) is v, and returns what it saw; an error if the cache
// does not open again after a Close or crash, and then r can do no more.
func (r *modelRun) do(op modelOp, v []byte) (modelOutcome, error) {
	c, k := r.c, []byte(op.key)
	switch op.kind {
	case modelPut:
		return modelResult(c.Put(k, v)), nil
	case modelUnsafePut:
		return modelResult(c.UnsafePut(k, v)), nil
	case modelPutFrom:
		return modelResult(c.PutFrom(k, bytes.NewReader(v), int64(len(v)))), nil
	case modelDelete:
		return modelResult(c.Delete(k)), nil
	case modelGet:
		rd, ok := c.Get(k)
		if !ok {
			return modelOutcome{}, nil
		}
		return modelRead(io.ReadAll(rd)), nil
	case modelReadAt:
		if cap(r.buf) < op.n {
			r.buf = make([]byte, op.n)
		}
		p := r.buf[:op.n]
		n, err := c.ReadAt(k, p, int64(op.off))
		if errors.Is(err, ErrNotFound) {
			return modelOutcome{}, nil
		}
		return modelRead(p[:n], err), nil
	case modelDrain:
		c.Drain()
	case modelReopen, modelCrash:
		var closeErr error
		if op.kind == modelReopen {
			r.evicted += c.Stats().Evictions
			r.reinserted += c.Stats().Reinserted
			closeErr = c.Close()
		} else {
			c.Drain()
			r.evicted += c.Stats().Evictions
			r.reinserted += c.Stats().Reinserted
			c.crash()
		}
		nc, err := New(r.dir, r.opts...)
		if err != nil {
			r.c = nil
			return modelOutcome{}, fmt.Errorf("%s: %v: New: %w", r.name, op, err)
		}
		r.c = nc
		return modelResult(closeErr), nil
	}
	return modelOutcome{}, nil
}

// close closes the cache, if it is open.
func (r *modelRun) close() {
	if r.c != nil {
		r.c.Close()
	}
}

// evictions is the number of segments (or blob files) the cache evicted, before reopens too.
func (r *modelRun) evictions() uint64 { return r.evicted + r.c.Stats().Evictions }

// modelSize returns the size of a value for a key of keyLen bytes, with a write buffer of wbs
// bytes: mostly below 12000 bytes, one in ten around or above the write buffer (the largest
// value a batch takes, the smallest that is streamed, exactly wbs, up to 200 KiB), capped at
// limit, the largest value the cache takes (in the one-file-per-blob mode, the largest that a
// batch takes).
func modelSize(rng *rand.Rand, wbs int64, keyLen int, limit int64) int {
	if rng.IntN(10) != 0 {
		return rng.IntN(12000)
	}
	return sizeAroundBuffer(rng, wbs, keyLen, limit)
}

// modelValue is value(key, version, size), except that values past the write buffer are
// mixedValue's, copied rather than drawn a byte at a time: making them would otherwise take
// longer than putting them, under -race.
//
// Every other version compresses well (its first 64 bytes repeated, varied every 4 KiB), so that
// the variants with Options.Compression store some values compressed and some as given.
func modelValue(key string, version, size int) []byte {
	var v []byte
	if size <= 12000 {
		v = value(key, version, size)
	} else {
		v = mixedValue([]byte(key), version, size)
	}
	if version%2 == 0 {
		for i := 64; i < len(v); i++ {
			v[i] = v[i%64] ^ byte(i>>12)
		}
	}
	return v
}

// gatedFS holds back every vectored write (a batch flush) while the gate is closed.
type gatedFS struct {
	vfs.FS
	mu     sync.Mutex
	closed bool
	cond   *sync.Cond
}

func newGatedFS() *gatedFS {
	g := &gatedFS{FS: vfs.Default}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gatedFS) set(closed bool) {
	g.mu.Lock()
	g.closed = closed
	g.cond.Broadcast()
	g.mu.Unlock()
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g}, nil
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f *gatedFile) WritevAt(bufs [][]byte, off int64) (int, error) {
	f.g.mu.Lock()
	for f.g.closed {
		f.g.cond.Wait()
	}
	f.g.mu.Unlock()
	return f.File.WritevAt(bufs, off)
}

// TestBackpressure: with flushes held back, Put blocks once WriteBufferSize*(MaxInflight+1)
// bytes are buffered, and resumes when they are written.
func TestBackpressure(t *testing.T) {
	g := newGatedFS()
	const wbs, inflight = 64 << 10, 2
	c := open(t, t.TempDir(), small(withFS(g), WithMaxInflightBatches(inflight))...)
	defer c.Close()
	// Create the first segment with the gate open, then close it.
	c.Put([]byte("warm"), []byte("x"))
	c.Drain()
	g.set(true)
	var puts sync.WaitGroup
	done := make(chan int, 1)
	puts.Add(1)
	go func() {
		defer puts.Done()
		i := 0
		for ; i < 100; i++ {
			k := fmt.Sprintf("k%d", i)
			if err := c.Put([]byte(k), value(k, 0, 8<<10)); err != nil {
				t.Error(err)
				return
			}
		}
		done <- i
	}()
	// Wait until the writer is stuck waiting for a buffer.
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().PutWaits == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Put never waited for a buffer")
		}
		time.Sleep(time.Millisecond)
	}
	if p := c.Stats().PendingBytes; p > wbs*(inflight+1) {
		t.Fatalf("pending %d bytes, bound %d", p, wbs*(inflight+1))
	}
	select {
	case <-done:
		t.Fatal("all Puts returned while no flush could finish")
	default:
	}
	g.set(false)
	puts.Wait()
	if n := <-done; n != 100 {
		t.Fatalf("%d puts", n)
	}
	c.Drain()
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		expect(t, c, k, value(k, 0, 8<<10))
	}
}

// startModelBackgroundWriter runs a writer beside TestModel's sequence: Put or PutFrom of keys
// "bg-0".."bg-49" with sizes from sizeAroundBuffer and below, each followed by a Get of the key
// that must be the value just put (or, in an evicting variant, a miss). It takes gate shared
// around each operation, so that it never meets a cache being closed or reopened, and waits for
// a token on pace before each (the sequence gives one a step). The returned stop ends it and
// reports its failures through t.
func startModelBackgroundWriter(t *testing.T, seed uint64, gate *sync.RWMutex, pace <-chan struct{}, r *modelRun, evicts bool) (stop func()) {
	rng := rand.New(rand.NewPCG(seed, 7))
	quit, done := make(chan struct{}), make(chan error, 1)
	wd := startWatchdog(t, "background writer", 0)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-quit:
				t.Logf("background writer: %d puts", i)
				done <- nil
				return
			case <-pace:
			case <-time.After(time.Second):
				wd.tick() // idle, waiting for the sequence: not a hang of the cache
				i--
				continue
			}
			wd.tick()
			k := fmt.Sprintf("bg-%d", rng.IntN(50))
			gate.RLock()
			c := r.c
			n := rng.IntN(8000)
			if rng.IntN(4) == 0 {
				n = sizeAroundBuffer(rng, c.opts.WriteBufferSize, len(k), c.MaxValueSize(len(k)))
			}
			v := mixedValue([]byte(k), i, n)
			var err error
			if rng.IntN(2) == 0 {
				err = c.Put([]byte(k), v)
			} else {
				err = c.PutFrom([]byte(k), bytes.NewReader(v), int64(len(v)))
			}
			if err == nil {
				if rd, ok := c.Get([]byte(k)); ok {
					b, rerr := io.ReadAll(rd)
					if rerr != nil || !bytes.Equal(b, v) {
						err = fmt.Errorf("Get(%s) after its Put: %d bytes, err %v, want the %d put", k, len(b), rerr, len(v))
					}
				} else if !evicts {
					err = fmt.Errorf("Get(%s) after its Put: miss", k)
				}
			}
			gate.RUnlock()
			if err != nil {
				done <- fmt.Errorf("background writer, put %d: %w", i, err)
				return
			}
		}
	}()
	return func() {
		close(quit)
		if err := <-done; err != nil {
			t.Error(err)
		}
		wd.stop()
	}
}
