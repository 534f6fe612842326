package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/bench/procfs"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

const compressUsage = `blobcache-bench compress: what compression (Options.Compression) buys and costs.

	blobcache-bench compress -repeat 3 -dir /mnt/nvme/tmp -json compress.json
	blobcache-bench compress -max-size 256MiB -bytes 512MiB -cold -parts throughput

Every configuration is a kind of values (-values: text, slices of the Go source tree cut end to
end; random, incompressible bytes) and a compression (-compression: none, zstd, s2). Each of
-repeat rounds runs every configuration once, alternating (text none, zstd, s2, random none,
zstd, s2), so that each comparator shares the machine's state of the moment with the others;
the tables show the median round and the least and most (min-max).

  capacity: a new cache of -max-size (PolicyFIFO) is filled, by -goroutines callers, with
  distinct keys until it has stored -fill times its MaxSize (compressed bytes, as MaxSize
  counts them), then drained; held / MaxSize is the value bytes of the blobs still there
  (Stat of every key) over MaxSize. zstd fastest is zstd's fastest level on the same values,
  each compressed whole (klauspost/compress/zstd EncodeAll, SpeedFastest): their bytes over its
  output, on the values each cache held. "held vs none" is held / MaxSize over held / MaxSize
  without compression in the same round; "vs none / zstd fastest" is that over the zstd
  fastest ratio: the effective capacity against zstd's fastest level, the cache's own
  overheads (headers, eviction a segment at a time) cancelling out. "held / MaxSize / zstd
  fastest" counts them: it is against a store holding MaxSize of zstd's output.

  throughput: -bytes of values are Put by -goroutines callers into a new cache of 4x that
  MaxSize (nothing is evicted), then drained: wall time and the process's CPU time
  (getrusage, user+sys, background work included) give MB/s (10^6 bytes a second) of value
  bytes and CPU ns per value byte. Then every key is read whole with ReadAt, once unmeasured
  (it checks every byte and leaves the stored bytes in the page cache) and once measured:
  "get warm". With -cold (root only), the cache is then closed, dirty pages written back and
  the page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches), the cache reopened (not
  measured) and every key read once more: "get cold".
`

// compressReport is the JSON of a compress run.
type compressReport struct {
	Date       string           `json:"date"`
	Command    []string         `json:"command"`
	CPUs       int              `json:"cpus"`
	Kernel     string           `json:"kernel"`
	Go         string           `json:"go"`
	Corpus     corpusInfo       `json:"corpus"`
	ValueSize  int64            `json:"value_size"`
	Repeat     int              `json:"repeat"`
	Goroutines int              `json:"goroutines"`
	Cold       string           `json:"cold"` // "yes", "no" (not asked), or why it was skipped
	Capacity   []capacityCase   `json:"capacity,omitempty"`
	Throughput []throughputCase `json:"throughput,omitempty"`
}

type corpusInfo struct {
	Dir   string `json:"dir"`
	Files int    `json:"files"`
	Bytes int    `json:"bytes"`
}

// spread is a figure over the rounds: the median (the mean of the middle two for an even
// count), the least and the most, and each round's.
type spread struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"`
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[len(s)-1], Rounds: xs}
}

// capacityCase is one configuration of the capacity part over the rounds.
type capacityCase struct {
	Values      string `json:"values"`
	Compression string `json:"compression"`
	MaxSize     int64  `json:"max_size"`
	// Held is the value bytes the cache held at the end over MaxSize.
	Held spread `json:"held_per_max_size"`
	// Stored is what the library's compression made of the values it compressed: the bytes
	// given over the bytes stored (Stats.CompressedBytesIn / CompressedBytesOut); 1 when it
	// compressed nothing.
	Stored spread `json:"stored_ratio"`
	// ZstdFastest is zstd's fastest level on the values this cache held, each compressed whole.
	ZstdFastest spread `json:"zstd_fastest"`
	// HeldVsZstdFastest is Held over ZstdFastest: what the cache held against a store that
	// fills MaxSize with zstd's output of whole values, no header, no eviction granularity.
	HeldVsZstdFastest spread `json:"held_vs_zstd_fastest"`
	// VsNone is Held over Held without compression in the same round; VsZstdFastest is VsNone
	// over ZstdFastest. Absent when none is not among the compressions.
	VsNone        *spread        `json:"vs_none,omitempty"`
	VsZstdFastest *spread        `json:"vs_zstd_fastest,omitempty"`
	Runs          []capacityRun  `json:"runs"`
	runs          []*capacityRun // filled round by round
}

type capacityRun struct {
	PutValues      int64   `json:"put_values"`
	PutBytes       int64   `json:"put_bytes"` // value bytes put
	HeldValues     int64   `json:"held_values"`
	HeldBytes      int64   `json:"held_bytes"` // value bytes of the blobs held (BlobInfo.Size)
	DataBytes      int64   `json:"data_bytes"` // Stats.DataBytes at the end
	Evictions      uint64  `json:"evictions"`
	CompressedPuts uint64  `json:"compressed_puts"`
	CompressedIn   uint64  `json:"compressed_in"`
	CompressedOut  uint64  `json:"compressed_out"`
	StoredAsGiven  uint64  `json:"stored_as_given"`
	ZstdFastest    float64 `json:"zstd_fastest"` // on the values held
	Seconds        float64 `json:"seconds"`
}

// throughputCase is one configuration of the throughput part over the rounds.
type throughputCase struct {
	Values      string        `json:"values"`
	Compression string        `json:"compression"`
	MaxSize     int64         `json:"max_size"`
	Bytes       int64         `json:"bytes"` // value bytes put and read, each pass
	Put         windowSpread  `json:"put"`
	GetWarm     windowSpread  `json:"get_warm"`
	GetCold     *windowSpread `json:"get_cold,omitempty"` // with -cold
	// The same figures of each round over those without compression in the same round (same
	// values): MB/s and CPU per byte ratios. nil for none, or without none among the
	// compressions.
	PutVsNone     *windowSpread    `json:"put_vs_none,omitempty"`
	GetWarmVsNone *windowSpread    `json:"get_warm_vs_none,omitempty"`
	GetColdVsNone *windowSpread    `json:"get_cold_vs_none,omitempty"`
	Runs          []throughputRun  `json:"runs"`
	runs          []*throughputRun // filled round by round
}

type windowSpread struct {
	MBps         spread `json:"mb_per_s"`
	CPUNsPerByte spread `json:"cpu_ns_per_byte"`
}

type throughputRun struct {
	Put           window  `json:"put"`
	GetWarm       window  `json:"get_warm"`
	GetCold       *window `json:"get_cold,omitempty"`
	OpenSeconds   float64 `json:"open_seconds,omitempty"` // the reopen before get cold
	Evictions     uint64  `json:"evictions"`
	DataBytes     int64   `json:"data_bytes"`
	CompressedIn  uint64  `json:"compressed_in"`
	CompressedOut uint64  `json:"compressed_out"`
	StoredAsGiven uint64  `json:"stored_as_given"`
}

// window is one measured pass.
type window struct {
	Bytes        int64   `json:"bytes"` // value bytes
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"` // process user+sys
	MBps         float64 `json:"mb_per_s"`
	CPUNsPerByte float64 `json:"cpu_ns_per_byte"`
}

// measure runs f and returns its window over n value bytes.
func measure(n int64, f func() error) (window, error) {
	runtime.GC() // the garbage of what ran before is not this window's
	cpu0, t0 := procfs.ReadCPU(), time.Now()
	err := f()
	secs, cpu := time.Since(t0).Seconds(), procfs.ReadCPU().Sub(cpu0).Seconds()
	return window{Bytes: n, Seconds: secs, CPUSeconds: cpu, MBps: float64(n) / secs / 1e6, CPUNsPerByte: cpu * 1e9 / float64(n)}, err
}

// compressConfig is what the flags ask.
type compressConfig struct {
	dir        string
	valueSize  int
	maxSize    int64
	fill       float64
	bytes      int64
	goroutines int
	cold       bool
}

// valueSet is one kind of values: value i is payload piece i, and zstd[p] is what zstd's
// fastest level makes of piece p compressed whole.
type valueSet struct {
	kind    string
	payload *workload.Payload
	zstd    []int
}

func (v *valueSet) value(i int64, n int) []byte { return v.payload.Piece(uint64(i), n) }

// zstdFastest is zstd's ratio over the values whose indexes held says (value bytes over
// compressed bytes); 0 for none.
func (v *valueSet) zstdFastest(held []int64, n int) float64 {
	var out int64
	for _, i := range held {
		out += int64(v.zstd[i%int64(len(v.zstd))])
	}
	if out == 0 {
		return 0
	}
	return float64(int64(len(held))*int64(n)) / float64(out)
}

func newValueSet(kind string, payload *workload.Payload, n int) (*valueSet, error) {
	if payload.Len() < n {
		return nil, fmt.Errorf("compress: %s values: %d bytes to cut values of %d from", kind, payload.Len(), n)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	v := &valueSet{kind: kind, payload: payload, zstd: make([]int, payload.Pieces(n))}
	var buf []byte
	for p := range v.zstd {
		buf = enc.EncodeAll(v.value(int64(p), n), buf[:0])
		v.zstd[p] = len(buf)
	}
	return v, nil
}

// randomBytes is how much random bytes random values are cut from: many distinct values.
const randomBytes = 64 << 20

func runCompress(args []string) error {
	fs := flag.NewFlagSet("blobcache-bench compress", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), compressUsage, "\nFlags:\n"); fs.PrintDefaults() }
	dir := fs.String("dir", "", "parent directory of the caches' directories, on the disk under test (default: the system's temporary directory)")
	jsonOut := fs.String("json", "", "also write every figure to this file, as JSON")
	repeat := fs.Int("repeat", 3, "rounds: each runs every configuration once")
	parts := fs.String("parts", "capacity,throughput", "parts to run, comma-separated: capacity, throughput")
	valuesList := fs.String("values", "text,random", "kinds of values, comma-separated: text, random")
	compList := fs.String("compression", "none,zstd,s2", "compressions, comma-separated: none, zstd, s2")
	valueSize := fs.String("value-size", "400KiB", "bytes per value (seed 000's log events are about 400 KB)")
	maxSize := fs.String("max-size", "1GiB", "capacity: the cache's MaxSize")
	fill := fs.Float64("fill", 3, "capacity: fill until the cache has stored this many times its MaxSize")
	total := fs.String("bytes", "1GiB", "throughput: value bytes put, then read, per configuration (MaxSize is 4x)")
	goroutines := fs.Int("goroutines", runtime.GOMAXPROCS(0), "concurrent callers")
	cold := fs.Bool("cold", false, "throughput: also read every key after Close, sync, drop_caches and reopen (root only; skipped otherwise)")
	corpus := fs.String("corpus", "", "text values: directory whose .go files, concatenated, values are cut from (default $(go env GOROOT)/src)")
	seed := fs.Uint64("seed", 1, "random values: seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("compress: unexpected arguments %q", fs.Args())
	}
	cfg := compressConfig{dir: *dir, fill: *fill, goroutines: *goroutines, cold: *cold}
	for _, f := range []struct {
		name, s string
		to      *int64
	}{{"-max-size", *maxSize, &cfg.maxSize}, {"-bytes", *total, &cfg.bytes}} {
		n, err := parseBytes(f.s)
		if err != nil {
			return fmt.Errorf("compress: %s: %w", f.name, err)
		}
		*f.to = n
	}
	vs, err := parseBytes(*valueSize)
	if err != nil {
		return fmt.Errorf("compress: -value-size: %w", err)
	}
	cfg.valueSize = int(vs)
	switch {
	case *repeat < 1 || cfg.goroutines < 1:
		return errors.New("compress: -repeat and -goroutines must be at least 1")
	case cfg.fill <= 0:
		return errors.New("compress: -fill must be positive")
	case cfg.bytes < vs:
		return errors.New("compress: -bytes must hold at least one value")
	}
	var comps []blobcache.Compression
	for _, name := range split(*compList) {
		c, err := blobcache.ParseCompression(name)
		if err != nil {
			return fmt.Errorf("compress: -compression: %w", err)
		}
		comps = append(comps, c)
	}
	doCapacity, doThroughput := false, false
	for _, p := range split(*parts) {
		switch p {
		case "capacity":
			doCapacity = true
		case "throughput":
			doThroughput = true
		default:
			return fmt.Errorf("compress: -parts: unknown part %q (capacity, throughput)", p)
		}
	}
	if len(comps) == 0 || !doCapacity && !doThroughput {
		return errors.New("compress: nothing to run")
	}

	rep := compressReport{
		Date: time.Now().UTC().Format(time.RFC3339), Command: append([]string{"blobcache-bench", "compress"}, args...),
		CPUs: runtime.NumCPU(), Go: runtime.Version(), ValueSize: vs, Repeat: *repeat, Goroutines: cfg.goroutines, Cold: "no",
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		rep.Kernel = strings.TrimSpace(string(b))
	}
	if doThroughput && cfg.cold {
		rep.Cold = "yes"
		if os.Geteuid() != 0 {
			rep.Cold, cfg.cold = "skipped: not root, the page cache cannot be dropped", false
			fmt.Fprintln(os.Stderr, "compress: -cold", rep.Cold)
		}
	}
	var sets []*valueSet
	for _, kind := range split(*valuesList) {
		var p *workload.Payload
		switch kind {
		case "text":
			text, dir, files, err := readCorpus(*corpus)
			if err != nil {
				return err
			}
			rep.Corpus = corpusInfo{Dir: dir, Files: files, Bytes: len(text)}
			p = workload.PayloadOf(text)
		case "random":
			p = workload.NewPayload(max(randomBytes, cfg.valueSize), *seed)
		default:
			return fmt.Errorf("compress: -values: unknown kind %q (text, random)", kind)
		}
		v, err := newValueSet(kind, p, cfg.valueSize)
		if err != nil {
			return err
		}
		sets = append(sets, v)
	}

	// Each case is a value set and a compression, in this order; every round runs them all,
	// alternating, once per part.
	type valueCase struct {
		v *valueSet
		c blobcache.Compression
	}
	var cases []valueCase
	var capCases []*capacityCase
	var tpCases []*throughputCase
	for _, v := range sets {
		for _, c := range comps {
			cases = append(cases, valueCase{v, c})
			capCases = append(capCases, &capacityCase{Values: v.kind, Compression: c.String(), MaxSize: cfg.maxSize})
			tpCases = append(tpCases, &throughputCase{Values: v.kind, Compression: c.String(), MaxSize: throughputMaxSize(cfg.bytes), Bytes: cfg.bytes})
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "compress: "+format+"\n", a...) }
	for round := 1; round <= *repeat; round++ {
		for k, vc := range cases {
			if !doCapacity {
				break
			}
			r, err := runCapacity(cfg, vc.v, vc.c)
			if err != nil {
				return fmt.Errorf("compress: capacity, %s values, %s: %w", vc.v.kind, vc.c, err)
			}
			capCases[k].runs = append(capCases[k].runs, &r)
			logf("round %d capacity %s %s: held %.3f of MaxSize (%d of %d values), %.1f s",
				round, vc.v.kind, vc.c, float64(r.HeldBytes)/float64(cfg.maxSize), r.HeldValues, r.PutValues, r.Seconds)
		}
		for k, vc := range cases {
			if !doThroughput {
				break
			}
			r, err := runThroughput(cfg, vc.v, vc.c)
			if err != nil {
				return fmt.Errorf("compress: throughput, %s values, %s: %w", vc.v.kind, vc.c, err)
			}
			tpCases[k].runs = append(tpCases[k].runs, &r)
			logf("round %d throughput %s %s: put %.0f MB/s %.2f ns/B, get warm %.0f MB/s %.2f ns/B",
				round, vc.v.kind, vc.c, r.Put.MBps, r.Put.CPUNsPerByte, r.GetWarm.MBps, r.GetWarm.CPUNsPerByte)
		}
	}
	if doCapacity {
		rep.Capacity = summarizeCapacity(capCases)
	}
	if doThroughput {
		rep.Throughput = summarizeThroughput(tpCases)
	}
	fmt.Print(compressMarkdown(rep, cfg))
	return writeJSON(*jsonOut, rep)
}

// throughputHead writes the head of a Put and Get table, whose CPU columns are per byte in unit
// ("ns/B", or "/B" for ratios), with the cold columns when cold.
func throughputHead(b *strings.Builder, unit string, cold bool) {
	cpu := "CPU " + unit
	if unit == "/B" {
		cpu = "CPU/B"
	}
	fmt.Fprintf(b, "| values | compression | Put MB/s | Put %s | Get warm MB/s | Get warm %s |", cpu, cpu)
	if cold {
		fmt.Fprintf(b, " Get cold MB/s | Get cold %s |", cpu)
	}
	b.WriteString("\n|---|---|--:|--:|--:|--:|")
	if cold {
		b.WriteString("--:|--:|")
	}
	b.WriteString("\n")
}

// throughputMaxSize is the MaxSize of the throughput part: room for four times what it puts,
// so that nothing is evicted, and at least 64 MiB.
func throughputMaxSize(bytes int64) int64 { return max(4*bytes, 64<<20) }

// parallel calls f(w, i) for i = 0, 1, ... up to n-1 from g goroutines (w is the goroutine's
// number), until f returns an error: then the goroutines stop taking indexes. It returns how
// many indexes were taken, each of them given to f (indexes [0, taken)), and the errors other
// than errEnough, which stops the calls and is no failure.
func parallel(n int64, g int, f func(w int, i int64) error) (taken int64, err error) {
	var next atomic.Int64
	var stopped atomic.Bool
	errs := make([]error, g)
	var wg sync.WaitGroup
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped.Load() {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if err := f(w, i); err != nil {
					if !errors.Is(err, errEnough) {
						errs[w] = err
					}
					stopped.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return min(next.Load(), n), errors.Join(errs...)
}

// errEnough is what f returns to parallel to end the calls.
var errEnough = errors.New("enough")

func key(buf []byte, i int64) []byte { return workload.Key(buf, workload.Present, uint64(i)) }

// openCache makes a cache in a new directory under cfg.dir; done stops it and removes the
// directory.
func openCache(cfg compressConfig, opts ...blobcache.Option) (c *blobcache.Cache, dir string, done func() error, err error) {
	dir, err = os.MkdirTemp(cfg.dir, "blobcache-compress-")
	if err != nil {
		return nil, "", nil, err
	}
	c, stop, err := startCache(dir, opts...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	return c, dir, func() error { return errors.Join(stop(), os.RemoveAll(dir)) }, nil
}

func startCache(dir string, opts ...blobcache.Option) (*blobcache.Cache, func() error, error) {
	c, err := blobcache.New(dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	stop, err := c.Start()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, stop, nil
}

// checkTried fails when a compressing cache did not try to compress every value: a value
// larger than the write buffer is stored as given untried (see Options.Compression), and the
// figures would not be compression's.
func checkTried(c blobcache.Compression, s blobcache.Stats, puts int64, valueSize int) error {
	if c == blobcache.CompressionNone || valueSize < 1<<10 {
		return nil
	}
	if tried := int64(s.CompressedPuts + s.StoredAsGiven); tried != puts {
		return fmt.Errorf("%d of %d values tried for compression: values of %d bytes are larger than the write buffer", tried, puts, valueSize)
	}
	return nil
}

// runCapacity fills a new cache of cfg.maxSize with v's values compressed by comp until it has
// stored cfg.fill times its MaxSize, and counts the value bytes it holds.
func runCapacity(cfg compressConfig, v *valueSet, comp blobcache.Compression) (capacityRun, error) {
	var r capacityRun
	c, _, done, err := openCache(cfg, blobcache.WithMaxSize(cfg.maxSize), blobcache.WithCompression(comp), blobcache.WithPolicy(blobcache.PolicyFIFO))
	if err != nil {
		return r, err
	}
	defer func() {
		if done != nil {
			done()
		}
	}()
	n := cfg.valueSize
	target := int64(cfg.fill * float64(cfg.maxSize))
	start := time.Now()
	// What the cache has stored, as MaxSize counts it (records' headers and keys aside): the
	// bytes compressed values became, and every other value whole. Stopping on it rather than on
	// a count of values gives every compression the same number of turns of the cache.
	// Every index taken is put, so the keys put are those of [0, PutValues).
	var puts atomic.Int64
	keys := make([][workload.KeyLen]byte, cfg.goroutines)
	r.PutValues, err = parallel(1<<62, cfg.goroutines, func(w int, i int64) error {
		if err := c.Put(key(keys[w][:], i), v.value(i, n)); err != nil {
			return err
		}
		done := puts.Add(1)
		s := c.Stats()
		if int64(s.CompressedBytesOut)+(done-int64(s.CompressedPuts))*int64(n) >= target {
			return errEnough
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	c.Drain()
	r.PutBytes = r.PutValues * int64(n)
	var held []int64
	var kb [workload.KeyLen]byte
	for i := range r.PutValues {
		info, err := c.Stat(key(kb[:], i))
		switch {
		case errors.Is(err, blobcache.ErrNotFound):
			continue
		case err != nil:
			return r, err
		case info.Size != int64(n):
			return r, fmt.Errorf("value %d: Stat says %d bytes, put %d", i, info.Size, n)
		}
		held = append(held, i)
		r.HeldBytes += info.Size
	}
	r.HeldValues = int64(len(held))
	r.Seconds = time.Since(start).Seconds()
	s := c.Stats()
	r.DataBytes, r.Evictions = s.DataBytes, s.Evictions
	r.CompressedPuts, r.CompressedIn, r.CompressedOut, r.StoredAsGiven = s.CompressedPuts, s.CompressedBytesIn, s.CompressedBytesOut, s.StoredAsGiven
	if err := checkTried(comp, s, r.PutValues, n); err != nil {
		return r, err
	}
	if r.Evictions == 0 {
		return r, fmt.Errorf("nothing evicted after %d bytes put: -fill too small", r.PutBytes)
	}
	r.ZstdFastest = v.zstdFastest(held, n)
	err, done = done(), nil
	return r, err
}

// runThroughput puts cfg.bytes of v's values compressed by comp into a new cache that evicts
// nothing, then reads them back, warm and (cfg.cold) cold.
func runThroughput(cfg compressConfig, v *valueSet, comp blobcache.Compression) (throughputRun, error) {
	var r throughputRun
	opts := []blobcache.Option{blobcache.WithMaxSize(throughputMaxSize(cfg.bytes)), blobcache.WithCompression(comp)}
	c, dir, done, err := openCache(cfg, opts...)
	if err != nil {
		return r, err
	}
	defer func() {
		if done != nil {
			done()
		}
	}()
	n := cfg.valueSize
	count := cfg.bytes / int64(n)
	total := count * int64(n)
	keys := make([][workload.KeyLen]byte, cfg.goroutines)
	r.Put, err = measure(total, func() error {
		_, err := parallel(count, cfg.goroutines, func(w int, i int64) error { return c.Put(key(keys[w][:], i), v.value(i, n)) })
		c.Drain()
		return err
	})
	if err != nil {
		return r, err
	}
	s := c.Stats()
	r.Evictions, r.DataBytes = s.Evictions, s.DataBytes
	r.CompressedIn, r.CompressedOut, r.StoredAsGiven = s.CompressedBytesIn, s.CompressedBytesOut, s.StoredAsGiven
	if r.Evictions > 0 {
		return r, fmt.Errorf("%d segments evicted", r.Evictions)
	}
	if err := checkTried(comp, s, count, n); err != nil {
		return r, err
	}
	bufs := make([][]byte, cfg.goroutines)
	for w := range bufs {
		bufs[w] = make([]byte, n)
	}
	read := func(check bool) error {
		_, err := parallel(count, cfg.goroutines, func(w int, i int64) error {
			got, err := c.ReadAt(key(keys[w][:], i), bufs[w], 0)
			if err != nil || got != n {
				return fmt.Errorf("ReadAt of value %d: %d bytes, %v", i, got, err)
			}
			if check && !bytes.Equal(bufs[w], v.value(i, n)) {
				return fmt.Errorf("value %d read back wrong", i)
			}
			return nil
		})
		return err
	}
	if err := read(true); err != nil {
		return r, err
	}
	if r.GetWarm, err = measure(total, func() error { return read(false) }); err != nil {
		return r, err
	}
	if cfg.cold {
		if err := c.Close(); err != nil {
			return r, err
		}
		if err := procfs.DropCaches(); err != nil {
			return r, fmt.Errorf("drop the page cache: %w", err)
		}
		t0 := time.Now()
		var stop func() error
		if c, stop, err = startCache(dir, opts...); err != nil {
			return r, err
		}
		r.OpenSeconds = time.Since(t0).Seconds()
		cold, err := measure(total, func() error { return read(false) })
		if err != nil {
			stop()
			return r, err
		}
		r.GetCold = &cold
		if err := stop(); err != nil {
			return r, err
		}
	}
	err, done = done(), nil
	return r, err
}

// summarizeCapacity turns the rounds of every case into spreads and ratios to none.
func summarizeCapacity(cases []*capacityCase) []capacityCase {
	none := map[string]*capacityCase{}
	for _, c := range cases {
		if c.Compression == blobcache.CompressionNone.String() {
			none[c.Values] = c
		}
	}
	out := make([]capacityCase, 0, len(cases))
	for _, c := range cases {
		var held, stored, zf, heldZf, vsNone, vsZstd []float64
		for i, r := range c.runs {
			c.Runs = append(c.Runs, *r)
			h := float64(r.HeldBytes) / float64(c.MaxSize)
			held = append(held, h)
			stored = append(stored, ratioOr1(r.CompressedIn, r.CompressedOut))
			zf = append(zf, r.ZstdFastest)
			heldZf = append(heldZf, h/r.ZstdFastest)
			if n := none[c.Values]; n != nil {
				vs := float64(r.HeldBytes) / float64(n.runs[i].HeldBytes)
				vsNone = append(vsNone, vs)
				vsZstd = append(vsZstd, vs/r.ZstdFastest)
			}
		}
		c.Held, c.Stored, c.ZstdFastest, c.HeldVsZstdFastest = spreadOf(held), spreadOf(stored), spreadOf(zf), spreadOf(heldZf)
		if vsNone != nil {
			a, b := spreadOf(vsNone), spreadOf(vsZstd)
			c.VsNone, c.VsZstdFastest = &a, &b
		}
		out = append(out, *c)
	}
	return out
}

func ratioOr1(in, out uint64) float64 {
	if out == 0 {
		return 1
	}
	return float64(in) / float64(out)
}

// summarizeThroughput turns the rounds of every case into spreads and ratios to none.
func summarizeThroughput(cases []*throughputCase) []throughputCase {
	none := map[string]*throughputCase{}
	for _, c := range cases {
		if c.Compression == blobcache.CompressionNone.String() {
			none[c.Values] = c
		}
	}
	windows := func(runs []*throughputRun, pick func(*throughputRun) *window) (mbps, cpu []float64) {
		for _, r := range runs {
			if w := pick(r); w != nil {
				mbps, cpu = append(mbps, w.MBps), append(cpu, w.CPUNsPerByte)
			}
		}
		return mbps, cpu
	}
	ratios := func(runs, base []*throughputRun, pick func(*throughputRun) *window) *windowSpread {
		var mbps, cpu []float64
		for i, r := range runs {
			if w, b := pick(r), pick(base[i]); w != nil && b != nil {
				mbps, cpu = append(mbps, w.MBps/b.MBps), append(cpu, w.CPUNsPerByte/b.CPUNsPerByte)
			}
		}
		if mbps == nil {
			return nil
		}
		return &windowSpread{MBps: spreadOf(mbps), CPUNsPerByte: spreadOf(cpu)}
	}
	picks := []func(*throughputRun) *window{
		func(r *throughputRun) *window { return &r.Put },
		func(r *throughputRun) *window { return &r.GetWarm },
		func(r *throughputRun) *window { return r.GetCold },
	}
	out := make([]throughputCase, 0, len(cases))
	for _, c := range cases {
		for _, r := range c.runs {
			c.Runs = append(c.Runs, *r)
		}
		c.GetCold = &windowSpread{}
		spreads := []*windowSpread{&c.Put, &c.GetWarm, c.GetCold}
		vs := []**windowSpread{&c.PutVsNone, &c.GetWarmVsNone, &c.GetColdVsNone}
		for j, pick := range picks {
			mbps, cpu := windows(c.runs, pick)
			*spreads[j] = windowSpread{MBps: spreadOf(mbps), CPUNsPerByte: spreadOf(cpu)}
			if n := none[c.Values]; n != nil && n != c {
				*vs[j] = ratios(c.runs, n.runs, pick)
			}
		}
		if c.GetCold.MBps.Rounds == nil {
			c.GetCold = nil
		}
		out = append(out, *c)
	}
	return out
}

// compressMarkdown is the tables of a compress run.
func compressMarkdown(rep compressReport, cfg compressConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Compression (%s, %d CPUs, Linux %s, %s)\n\n", rep.Date, rep.CPUs, rep.Kernel, rep.Go)
	fmt.Fprintf(&b, "Values of %d bytes", rep.ValueSize)
	if rep.Corpus.Files > 0 {
		fmt.Fprintf(&b, "; text ones cut end to end from %d .go files under %s (%d bytes)", rep.Corpus.Files, rep.Corpus.Dir, rep.Corpus.Bytes)
	}
	fmt.Fprintf(&b, ". %d rounds, %d callers; medians (min-max).\n\n", rep.Repeat, rep.Goroutines)
	if len(rep.Capacity) > 0 {
		fmt.Fprintf(&b, "#### Effective capacity: MaxSize %s, filled until %.3g x MaxSize stored (PolicyFIFO)\n\n", human(cfg.maxSize), cfg.fill)
		b.WriteString("| values | compression | values put | held / MaxSize | stored ratio | zstd fastest, whole values | held / MaxSize / zstd fastest | held vs none | vs none / zstd fastest |\n")
		b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range rep.Capacity {
			put := make([]float64, len(c.Runs))
			for i, r := range c.Runs {
				put[i] = float64(r.PutValues)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n", c.Values, c.Compression, spreadOf(put).Median,
				fmtSpread(c.Held, 3), fmtSpread(c.Stored, 3), fmtSpread(c.ZstdFastest, 3), fmtSpread(c.HeldVsZstdFastest, 3),
				fmtSpreadPtr(c.VsNone, 3), fmtSpreadPtr(c.VsZstdFastest, 3))
		}
		b.WriteString("\n")
	}
	if len(rep.Throughput) > 0 {
		fmt.Fprintf(&b, "#### Put and Get: %s of values per configuration, MaxSize %s (nothing evicted); cold: %s\n\n",
			human(cfg.bytes), human(throughputMaxSize(cfg.bytes)), rep.Cold)
		cold := rep.Throughput[0].GetCold != nil
		throughputHead(&b, "ns/B", cold)
		for _, c := range rep.Throughput {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", c.Values, c.Compression,
				fmtSpread(c.Put.MBps, 0), fmtSpread(c.Put.CPUNsPerByte, 3), fmtSpread(c.GetWarm.MBps, 0), fmtSpread(c.GetWarm.CPUNsPerByte, 3))
			if cold {
				fmt.Fprintf(&b, " %s | %s |", fmtSpread(c.GetCold.MBps, 0), fmtSpread(c.GetCold.CPUNsPerByte, 3))
			}
			b.WriteString("\n")
		}
		b.WriteString("\nThe same, each round over none's in the same round (same values): MB/s ratio, CPU per byte ratio.\n\n")
		throughputHead(&b, "/B", cold)
		for _, c := range rep.Throughput {
			if c.PutVsNone == nil {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |", c.Values, c.Compression,
				fmtSpread(c.PutVsNone.MBps, 3), fmtSpread(c.PutVsNone.CPUNsPerByte, 3), fmtSpread(c.GetWarmVsNone.MBps, 3), fmtSpread(c.GetWarmVsNone.CPUNsPerByte, 3))
			if cold && c.GetColdVsNone != nil {
				fmt.Fprintf(&b, " %s | %s |", fmtSpread(c.GetColdVsNone.MBps, 3), fmtSpread(c.GetColdVsNone.CPUNsPerByte, 3))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtSpread(s spread, prec int) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	return fmt.Sprintf("%s (%s-%s)", f(s.Median), f(s.Min), f(s.Max))
}

func fmtSpreadPtr(s *spread, prec int) string {
	if s == nil {
		return "-"
	}
	return fmtSpread(*s, prec)
}

// human is n bytes in the largest binary unit that divides it, or bytes.
func human(n int64) string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// parseBytes reads a byte count as -cache does (64MiB, 1GiB, 20000000), without fractions.
func parseBytes(s string) (int64, error) {
	if strings.Contains(s, ".") {
		return 0, fmt.Errorf("%q: a byte count, not a fraction", s)
	}
	return parseCacheSize(s, 0)
}
