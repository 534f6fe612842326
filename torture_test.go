package blobcache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/torture"
)

// Crash torture: a writer process (this test binary, re-executed as TestTortureChild) runs Put,
// UnsafePut, PutFrom, Delete, Get, Drain, bloom rebuilds and (in some cycles) eviction and a CPU
// hog at once, logging every operation before and after it (internal/torture); the test kills it
// with SIGKILL at a random moment, reopens the directory and checks every key ever written
// against the log: every value byte for byte, everything acknowledged by a Drain that returned
// still there, no Delete that returned undone, nothing older or torn. The directory carries over
// from cycle to cycle, so recovery also recovers what earlier recoveries left. Values are mostly
// small, some around and above the write buffer, so that batches and streamed records mix.
//
// Hangs. Every goroutine of the writer ticks a watchdog of its own (watchdog_test.go). Before
// the kill the test asks the writer, on its stdin, to prove that every goroutine still makes
// progress; the writer answers on stdout once each has ticked again. A goroutine that is stuck
// never ticks: its watchdog prints every stack to the writer's stderr and exits with
// watchdogExit, and the test fails with that output instead of killing a hung writer and
// checking what it left as if nothing had happened. The test's own check of each cycle runs
// under a watchdog too.
//
//	go test -run 'TestTorture$' -v .                       # CI: 20 cycles
//	go test -run 'TestTorture$' -v -torture.cycles=500 .   # long run
//	go test -run 'TestTorture$' -v -torture.run=10s -watchdog.stall=5s .   # long writer runs

var (
	tortureCycles = flag.Int("torture.cycles", 20, "crash cycles of TestTorture and TestTorturePerBlob")
	tortureSeed   = flag.Uint64("torture.seed", 0, "seed of TestTorture (0: time based)")
	tortureRun    = flag.Duration("torture.run", 300*time.Millisecond, "longest a writer runs before it is killed")
)

// tortureEnv, when set, makes TestTortureChild the writer process; it holds the JSON of a
// tortureConfig.
const tortureEnv = "BLOBCACHE_TORTURE_WRITER"

// tortureConfig is what the parent tells a writer process.
type tortureConfig struct {
	Dir, Log     string
	Seed         uint64
	FirstVersion uint64 // versions (and drain numbers) of this run start here
	Keys         int
	MaxValue     int
	PerBlob      bool
	Fsync        bool
	Direct       bool
	DirectReads  bool
	Verify       bool
	SkipList     bool
	MemoryWrite  bool          // a memory tier that values enter as they are committed (MemoryOnWrite)
	Compress     Compression   // values compressed (half the harness's values compress)
	Evict        bool          // run with a MaxSize the data outgrows
	Probation    bool          // with Evict: four small segments, so two regions run (region.go)
	Hog          int           // goroutines of CPU hog beside the writers (startCPUHog)
	Stall        time.Duration // the writer's watchdogs fire after this long without progress
}

// diskBoundExit is the exit code of a writer whose disk went over MaxSize plus one segment.
const diskBoundExit = 98

// tortureWriteBuffer is the writer's WriteBufferSize.
const tortureWriteBuffer = 64 << 10

func (tc tortureConfig) options(writer bool) []Option {
	opts := []Option{
		WithWriteBufferSize(tortureWriteBuffer),
		WithSegmentSize(2 << 20),
		WithExpectedBlobs(256), // outgrown: the filter drifts, and rebuilds
		WithFsync(tc.Fsync),
		WithVerifyOnRead(tc.Verify),
		WithFlushInterval(5 * time.Millisecond),
		withPutChunk(8 << 10), // PutFrom streams values past 8 KiB, in 8 KiB chunks
	}
	if tc.PerBlob {
		opts = append(opts, WithPerBlobFiles(true))
	}
	if tc.Direct && !tc.PerBlob {
		opts = append(opts, WithBufferedWrites(false))
	}
	if tc.DirectReads && !tc.PerBlob {
		opts = append(opts, WithDirectIOReads(true))
	}
	if tc.SkipList {
		opts = append(opts, WithIndex(IndexSkipList))
	}
	if tc.MemoryWrite {
		opts = append(opts, WithMemorySize(1<<20), WithMemoryAdmission(MemoryOnWrite))
	}
	if tc.Compress != CompressionNone {
		opts = append(opts, WithCompression(tc.Compress))
	}
	if tc.Evict && writer {
		switch {
		case tc.PerBlob:
			opts = append(opts, WithMaxSize(2<<20))
		case tc.Probation:
			opts = append(opts, WithSegmentSize(probationTestSegment), WithMaxSize(4*probationTestSegment))
		default:
			opts = append(opts, WithMaxSize(8<<20))
		}
	}
	return opts
}

func tortureKey(k uint32) []byte { return fmt.Appendf(nil, "torture-%05d", k) }

// tortureValueSize is the size of the value of (key, version): torture.ValueSize's mostly small
// sizes up to maxValue, but one value in eight around or above the write buffer: the largest a
// batch takes, the smallest that is streamed (stream.go), exactly the buffer's size, and larger,
// up to 200 KiB. Capped at limit, the largest value the cache takes.
func tortureValueSize(k uint32, version uint64, maxValue int, limit int64) int {
	r := rand.New(rand.NewPCG(uint64(k)<<32^version, 0x6c61726765))
	if r.IntN(8) != 0 {
		return torture.ValueSize(k, version, maxValue)
	}
	return sizeAroundBuffer(r, tortureWriteBuffer, len(tortureKey(k)), limit)
}

// TestTortureChild is the writer process of TestTorture; run on its own it does nothing.
func TestTortureChild(t *testing.T) {
	raw := os.Getenv(tortureEnv)
	if raw == "" {
		return
	}
	var cfg tortureConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "torture writer:", err)
		os.Exit(2)
	}
	if err := tortureWriter(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "torture writer:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// tortureWriter runs until it is killed (or a minute passes beyond its watchdogs' stall).
func tortureWriter(cfg tortureConfig) error {
	l, err := torture.CreateLog(cfg.Log)
	if err != nil {
		return err
	}
	opening := newWatchdog("torture writer: open", cfg.Stall)
	c, err := New(cfg.Dir, cfg.options(true)...)
	if err != nil {
		return err
	}
	if _, err := c.Start(); err != nil {
		return err
	}
	opening.stop()
	if cfg.Hog > 0 {
		startCPUHog(cfg.Hog) // until the kill
	}
	if cfg.Evict && !cfg.PerBlob {
		// The disk bound, checked all along: over it, the writer ends with diskBoundExit.
		bound := startDiskBound(c)
		go func() {
			for range time.Tick(5 * time.Millisecond) {
				if bound.over.Load() > 0 {
					fmt.Fprintf(os.Stderr, "torture writer: disk over MaxSize + SegmentSize (%d): counted up to %d, files up to %d bytes\n",
						bound.limit, bound.maxCounted.Load(), bound.maxOnDisk.Load())
					os.Exit(diskBoundExit)
				}
			}
		}()
	}
	must := func(err error) {
		if err != nil {
			fmt.Fprintln(os.Stderr, "torture writer: log:", err)
			os.Exit(2)
		}
	}
	must(l.Append(torture.Entry{Kind: torture.Ready}))
	fmt.Println("ready")

	var version atomic.Uint64
	version.Store(cfg.FirstVersion)
	latest := make([]atomic.Uint64, cfg.Keys) // highest version begun per key
	mismatch := func(k uint32, got uint64, format string, args ...any) {
		fmt.Fprintf(os.Stderr, "torture writer: key %d: "+format+"\n", append([]any{k}, args...)...)
		must(l.Append(torture.Entry{Kind: torture.Mismatch, Key: k, Version: got}))
	}
	// read returns the state of key k as Get sees it, checking the value's bytes.
	read := func(k uint32) (torture.State, error) {
		r, ok := c.Get(tortureKey(k))
		if !ok {
			return torture.State{}, nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return torture.State{}, err
		}
		key, ver, err := torture.ParseValue(b)
		if err == nil && key != k {
			err = fmt.Errorf("the value of key %d", key)
		}
		return torture.State{Present: true, Version: ver}, err
	}

	const writers = 3
	// A watchdog per goroutine (lane): a writer stuck in Put while the reader goes on is a hang.
	var lanes []*watchdog
	lane := func(name string) *watchdog {
		wd := newWatchdog("torture writer: "+name, cfg.Stall)
		lanes = append(lanes, wd)
		return wd
	}
	for w := range writers {
		wd := lane(fmt.Sprintf("writer %d", w))
		go func() {
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(w)))
			own := map[uint32]torture.State{} // what this run made each key hold
			for ; ; wd.tick() {
				k := uint32(rng.IntN(cfg.Keys/writers)*writers + w)
				key := tortureKey(k)
				switch op := rng.IntN(100); {
				case op < 60:
					ver := version.Add(1)
					latest[k].Store(ver)
					v := torture.Value(k, ver, tortureValueSize(k, ver, cfg.MaxValue, c.MaxValueSize(len(key))))
					must(l.Append(torture.Entry{Kind: torture.PutBegin, Key: k, Version: ver}))
					var err error
					switch {
					case op < 35:
						err = c.Put(key, v)
					case op < 45:
						err = c.PutFrom(key, bytes.NewReader(v), int64(len(v)))
					default:
						err = c.UnsafePut(key, v) // v is never touched again
					}
					if err != nil {
						must(l.Append(torture.Entry{Kind: torture.PutFail, Key: k, Version: ver}))
						delete(own, k)
						continue
					}
					must(l.Append(torture.Entry{Kind: torture.PutOK, Key: k, Version: ver}))
					own[k] = torture.State{Present: true, Version: ver}
				case op < 75:
					ver := version.Add(1)
					must(l.Append(torture.Entry{Kind: torture.DelBegin, Key: k, Version: ver}))
					if err := c.Delete(key); err != nil {
						must(l.Append(torture.Entry{Kind: torture.DelFail, Key: k, Version: ver}))
						delete(own, k)
						continue
					}
					must(l.Append(torture.Entry{Kind: torture.DelOK, Key: k, Version: ver}))
					if cfg.Fsync {
						must(l.Sync())
					}
					own[k] = torture.State{}
				default:
					// Read your writes: the writer of a key knows what it must hold,
					// unless eviction may have taken it.
					want, known := own[k]
					got, err := read(k)
					switch {
					case err != nil:
						mismatch(k, got.Version, "read: %v", err)
					case known && got != want && !(cfg.Evict && !got.Present):
						mismatch(k, got.Version, "read %v, wrote %v", got, want)
					}
				}
			}
		}()
	}
	// A reader of every key: a value must be whole and one that was written.
	reader := lane("reader")
	go func() {
		rng := rand.New(rand.NewPCG(cfg.Seed, 100))
		for ; ; reader.tick() {
			k := uint32(rng.IntN(cfg.Keys))
			got, err := read(k)
			if err != nil {
				mismatch(k, got.Version, "reader: %v", err)
			} else if got.Present && got.Version >= cfg.FirstVersion && got.Version > latest[k].Load() {
				mismatch(k, got.Version, "reader: version %d was never written", got.Version)
			}
		}
	}()
	// Drains, and what they make durable.
	drainer := lane("drainer")
	go func() {
		rng := rand.New(rand.NewPCG(cfg.Seed, 200))
		for ; ; drainer.tick() {
			time.Sleep(time.Duration(rng.IntN(8000)) * time.Microsecond)
			n := version.Add(1)
			must(l.Append(torture.Entry{Kind: torture.DrainBegin, Version: n}))
			c.Drain()
			must(l.Append(torture.Entry{Kind: torture.DrainOK, Version: n}))
			must(l.Sync())
		}
	}()
	// Bloom rebuilds, more often than the background worker's once a second.
	rebuilder := lane("bloom rebuilds")
	go func() {
		for ; ; rebuilder.tick() {
			time.Sleep(10 * time.Millisecond)
			c.rebuildBloom()
		}
	}()
	// The parent's progress probe: answer once every lane has ticked since the question.
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() != tortureProbe {
				continue
			}
			seen := make([]uint64, len(lanes))
			for i, wd := range lanes {
				seen[i] = wd.ticks.Load()
			}
			for i, wd := range lanes {
				for wd.ticks.Load() == seen[i] {
					time.Sleep(time.Millisecond)
				}
			}
			fmt.Println(tortureAlive)
		}
	}()
	time.Sleep(cfg.Stall + time.Minute)
	return fmt.Errorf("not killed within %v", cfg.Stall+time.Minute)
}

// The progress probe of a writer process: the parent writes tortureProbe on its stdin, and the
// writer answers tortureAlive on its stdout once every one of its goroutines has made progress.
const (
	tortureProbe = "probe"
	tortureAlive = "alive"
)

// tortureFigures sums up a torture run.
type tortureFigures struct {
	cycles, killedEarly, keysChecked, hits, misses uint64
	puts, deletes, drains, failed, logEntries      uint64
	strict                                         uint64 // keys whose state the log fixed exactly
	tornTails, corrupt, evictCycles                uint64
	mismatches                                     []string
	corruptions                                    []string // what recovery reported as corrupt
}

// TestTorture tortures a segment cache; TestTorturePerBlob a cache of one file per blob.
func TestTorture(t *testing.T) { runTorture(t, false) }

func runTorture(t *testing.T, perBlob bool) {
	seed := *tortureSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -torture.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	work := t.TempDir()
	dir := filepath.Join(work, "cache")
	const keys = 600
	base := make([]torture.State, keys) // what each key held after the last check
	version := uint64(1)
	var fig tortureFigures
	start := time.Now()
	for cycle := range *tortureCycles {
		cfg := tortureConfig{
			Dir:          dir,
			Log:          filepath.Join(work, fmt.Sprintf("log-%d", cycle)),
			Seed:         rng.Uint64(),
			FirstVersion: version,
			Keys:         keys,
			MaxValue:     20 << 10, // some records large enough to be punched out when freed
			PerBlob:      perBlob,
			Fsync:        rng.IntN(2) == 0,
			Direct:       rng.IntN(4) == 0,
			DirectReads:  rng.IntN(4) == 0,
			Verify:       rng.IntN(2) == 0,
			SkipList:     rng.IntN(4) == 0,
			MemoryWrite:  rng.IntN(3) == 0,
			Compress:     Compression(rng.IntN(3)), // none, zstd or s2
			Evict:        cycle%3 == 2,
			Probation:    cycle%6 == 5,
			Stall:        *watchdogStall,
		}
		if rng.IntN(4) == 0 {
			cfg.Hog = runtime.GOMAXPROCS(0)
		}
		early := rng.IntN(8) == 0
		wait := time.Duration(rng.Int64N(int64(*tortureRun)))
		if early {
			wait = time.Duration(rng.Int64N(int64(40 * time.Millisecond)))
		}
		h, err := tortureCycle(cfg, early, wait)
		if err != nil {
			t.Fatalf("cycle %d (%+v): %v", cycle, cfg, err)
		}
		fig.cycles++
		if !h.Ready {
			fig.killedEarly++
		}
		if cfg.Evict {
			fig.evictCycles++
		}
		fig.logEntries += uint64(h.Entries)
		fig.puts += uint64(h.Puts)
		fig.deletes += uint64(h.Deletes)
		fig.drains += uint64(h.Drains)
		fig.failed += uint64(h.Failed)
		for _, m := range h.Mismatches {
			fig.mismatches = append(fig.mismatches, fmt.Sprintf("cycle %d, writer: %s", cycle, m))
		}
		version = max(version, h.MaxVersion+1)

		// Reopen without MaxSize (nothing evicted now) and check every key.
		wd := startWatchdog(t, fmt.Sprintf("check of cycle %d", cycle), 0)
		checkCfg := cfg
		checkCfg.Evict = false
		c, err := New(dir, checkCfg.options(false)...)
		if err != nil {
			t.Fatalf("cycle %d: reopen: %v", cycle, err)
		}
		for k := range uint32(keys) {
			wd.tick()
			got, err := tortureRead(c, k)
			fig.keysChecked++
			if err == nil {
				err = h.CheckAfterCrash(k, base[k], got, cfg.Evict)
			}
			if err != nil {
				fig.mismatches = append(fig.mismatches, fmt.Sprintf("cycle %d (fsync %v, evict %v): key %d: %v; its operations:%s",
					cycle, cfg.Fsync, cfg.Evict, k, err, h.Ops(k)))
			}
			if got.Present {
				fig.hits++
			} else {
				fig.misses++
			}
			if h.Durable(k) {
				fig.strict++
			}
			base[k] = got
		}
		st := c.Stats()
		fig.tornTails += st.TornTails
		fig.corrupt += st.CorruptRecord
		if st.CorruptRecord > 0 && len(fig.corruptions) < 10 {
			// A kill leaves torn tails, not damage: this is a torn tail classified as damage.
			// The data is still checked above; the count is a figure, not a failure.
			fig.corruptions = append(fig.corruptions, fmt.Sprintf("cycle %d: %s", cycle, st.LastCorruption))
		}
		if err := c.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", cycle, err)
		}
		wd.stop()
		os.Remove(cfg.Log)
		if len(fig.mismatches) > 20 {
			break
		}
		if (cycle+1)%50 == 0 {
			t.Logf("cycle %d: %v, %d keys checked, %d mismatches", cycle+1, time.Since(start).Round(time.Second), fig.keysChecked, len(fig.mismatches))
		}
	}
	t.Logf("%d cycles in %v (%d killed before the cache opened, %d with eviction): %d keys checked "+
		"(%d hits, %d misses, %d fixed by a durable operation), %d mismatches; the writers logged %d entries: "+
		"%d puts and %d deletes acknowledged, %d failed, %d drains; recovery cut %d torn tails, found %d corrupt records",
		fig.cycles, time.Since(start).Round(time.Millisecond), fig.killedEarly, fig.evictCycles, fig.keysChecked,
		fig.hits, fig.misses, fig.strict, len(fig.mismatches), fig.logEntries, fig.puts, fig.deletes, fig.failed,
		fig.drains, fig.tornTails, fig.corrupt)
	if len(fig.corruptions) > 0 {
		t.Logf("recovery reported corruption after a kill (first %d):\n%s", len(fig.corruptions), strings.Join(fig.corruptions, "\n"))
	}
	if len(fig.mismatches) > 0 {
		t.Fatalf("%d mismatches:\n%s", len(fig.mismatches), strings.Join(fig.mismatches, "\n"))
	}
}

// errLie marks a read that returned bytes the key never held (the other errors of tortureRead
// are errors the cache reported, which its promise allows).
var errLie = errors.New("a lie")

// tortureRead returns what key k holds, checking every byte of its value.
func tortureRead(c *Cache, k uint32) (torture.State, error) {
	r, ok := c.Get(tortureKey(k))
	if !ok {
		return torture.State{}, nil
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return torture.State{}, fmt.Errorf("read: %w", err)
	}
	key, ver, err := torture.ParseValue(b)
	if err != nil {
		return torture.State{}, fmt.Errorf("%w: %w", errLie, err)
	}
	if key != k {
		return torture.State{}, fmt.Errorf("%w: holds the value of key %d", errLie, key)
	}
	p := make([]byte, len(b))
	n, err := c.ReadAt(tortureKey(k), p, 0)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return torture.State{}, fmt.Errorf("ReadAt: %w", err)
	}
	if err == nil && (n != len(b) || string(p) != string(b)) {
		return torture.State{}, fmt.Errorf("%w: ReadAt read %d bytes, not what Get read", errLie, n)
	}
	return torture.State{Present: true, Version: ver}, nil
}

// tortureCycle runs one writer process and kills it: wait after it starts (early) or after it
// opened the cache. A writer that opened the cache is first probed for progress (see the top of
// this file). It returns the run's history from its log.
func tortureCycle(cfg tortureConfig, early bool, wait time.Duration) (*torture.History, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTortureChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), tortureEnv+"="+string(raw))
	var stderr strings.Builder // read after Wait, which waits for the copy into it
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	alive := make(chan struct{}, 1)
	gone := make(chan struct{}) // stdout closed: the writer exited
	var once sync.Once
	go func() {
		defer close(gone)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			switch sc.Text() {
			case "ready":
				once.Do(func() { close(ready) })
			case tortureAlive:
				alive <- struct{}{}
			}
		}
	}()
	if !early {
		select {
		case <-ready:
		case <-gone:
		case <-time.After(cfg.Stall + 10*time.Second):
			// The writer's "open" watchdog fires first, unless the writer is wholly stuck.
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("the writer did not open the cache in %v: %s", cfg.Stall+10*time.Second, stderr.String())
		}
	}
	time.Sleep(wait)
	select {
	case <-ready:
		// The probe: a stuck goroutine's watchdog ends the writer before it can answer.
		fmt.Fprintln(in, tortureProbe)
		select {
		case <-alive:
		case <-gone:
		case <-time.After(cfg.Stall + 10*time.Second):
		}
	default:
	}
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return nil, err
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee) && ee.ExitCode() == diskBoundExit:
		return nil, fmt.Errorf("the writer's disk went over its bound: %s", stderr.String())
	case errors.As(werr, &ee) && ee.ExitCode() == watchdogExit:
		return nil, fmt.Errorf("the writer's watchdog fired (exit %d): a goroutine made no progress for %v:\n%s",
			watchdogExit, cfg.Stall, stderr.String())
	case !errors.As(werr, &ee) || ee.ExitCode() != -1:
		return nil, fmt.Errorf("the writer was not killed (%v): %s", werr, stderr.String())
	}
	entries, err := torture.ReadLog(cfg.Log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return torture.NewHistory(entries, cfg.Fsync)
}

// TestTorturePerBlob is TestTorture on a cache of one file per blob. It found that a crash while
// a key's new blob file was being written lost the key's previous, durable value (see
// TestPerBlobTornNewerFileKeepsOlder).
func TestTorturePerBlob(t *testing.T) { runTorture(t, true) }
