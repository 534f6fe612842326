package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/bench/replay"
	"github.com/seed57392e9e/blobcache/bench/trace"
	"github.com/seed57392e9e/blobcache/bench/workload"
	"github.com/seed57392e9e/blobcache/internal/corpus"
)

const traceUsage = `blobcache-bench trace: BlobCache's hit ratio on a trace, as a look-aside cache.

	blobcache-bench trace -oracle t.oracleGeneral.bin -cache 0.01,0.1
	blobcache-bench trace -csv keys.csv -cache 64MiB
	blobcache-bench trace -zipf 0.8 -objects 500000 -requests 2000000 -save z.bin -cache ''
	blobcache-bench trace -zipf 1.0 -size-min 1024 -size-max 1048576 -cache 0.01

Exactly one source: -oracle, -csv or -zipf. -save writes the trace as oracleGeneral (for
libCacheSim); with -cache '' nothing is replayed. -policy replays each cache size once per
policy: fifo, reinsert[=share], probation[=share], second[=ghost entries], parts joined by '+'
(e.g. -policy fifo,reinsert,probation,reinsert+second). -memory adds a memory tier
(Options.MemorySize) in front of the segments, a fraction of each cache size or bytes; with
-memory 0,0.1 each case is replayed without a tier and with one. The tier holds copies of values
the segments hold, so its hits are hits of the cache: the miss ratio counts both tiers, and the
table adds the share of hits served from memory and the tier's inserts and evictions.
-memory-admission write lets every value the replay puts enter the tier as it is written
(Options.MemoryAdmission, blobcache serve's default), not only on its second hit.
-compression replays each case once per compression (none, zstd, s2; Options.Compression):
MaxSize counts the bytes stored, so at the same MaxSize a cache that compresses holds more.
-values says what the values' bytes are: zeros (the default; only sizes matter without
compression, and zeros compress to nothing), random (incompressible) or text (slices of the Go
source tree, -corpus, which compress as text does).
`

// traceReport is the JSON of a trace run: what bench/scripts/libcachesim_compare.py reads.
type traceReport struct {
	Trace   string        `json:"trace"`
	Summary trace.Summary `json:"summary"`
	Runs    []traceRun    `json:"runs"`
}

type traceRun struct {
	Cache         string  `json:"cache"`    // as asked
	Fraction      float64 `json:"fraction"` // MaxSize over the trace's unique bytes
	MissRatio     float64 `json:"miss_ratio"`
	ByteMissRatio float64 `json:"byte_miss_ratio"`
	WriteAmp      float64 `json:"write_amp"`
	// MemoryHitShare is the share of hits served from the memory tier; with one only.
	MemoryHitShare *float64 `json:"memory_hit_share,omitempty"`
	Values         string   `json:"values"` // zeros, random or text (-values)
	replay.Result
}

func runTrace(args []string) error {
	fs := flag.NewFlagSet("blobcache-bench trace", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), traceUsage, "\nFlags:\n"); fs.PrintDefaults() }
	oracle := fs.String("oracle", "", "oracleGeneral trace file (libCacheSim's 24-byte records)")
	csvPath := fs.String("csv", "", "CSV trace file of key,size lines")
	alpha := fs.Float64("zipf", 0, "synthetic Zipf trace with this alpha (e.g. 0.8)")
	objects := fs.Int("objects", 500_000, "zipf: objects")
	requests := fs.Int("requests", 2_000_000, "zipf: requests")
	size := fs.Uint("size", 4096, "zipf: fixed object size, bytes (when -size-max is 0)")
	sizeMin := fs.Uint("size-min", 1024, "zipf: smallest lognormal object size, bytes")
	sizeMax := fs.Uint("size-max", 0, "zipf: largest lognormal object size, bytes (0: fixed -size)")
	seed := fs.Uint64("seed", 1, "zipf, and -values random: seed")
	save := fs.String("save", "", "write the trace to this file as oracleGeneral")
	name := fs.String("name", "", "the trace's name in the table (default: the file's or the zipf parameters)")
	caches := fs.String("cache", "0.01,0.1", "cache sizes, comma-separated: a fraction of the trace's unique bytes (0.01) or bytes (64MiB, 1GiB, 20000000); '' replays nothing")
	segments := fs.Int("segments", 32, "segments per cache: SegmentSize is MaxSize/segments (at least a write buffer plus 1 MiB); 32 is what the library derives from MaxSize alone")
	segSize := fs.Int64("segment-size", 0, "SegmentSize, bytes (0: from -segments)")
	wbSize := fs.Int64("write-buffer", 0, "WriteBufferSize, bytes (0: an eighth of a segment, 64 KiB to 4 MiB)")
	dir := fs.String("dir", "", "parent directory of the caches' temporary directories (default: the system's)")
	jsonOut := fs.String("json", "", "also write every figure to this file, as JSON")
	policies := fs.String("policy", "default", "policies, comma-separated (see above); 'default' is the library's")
	memories := fs.String("memory", "0", "memory tier sizes, comma-separated: a fraction of the cache size (0.1) or bytes (as -cache); 0: no tier")
	admission := fs.String("memory-admission", "second-hit", "when a value enters the memory tier: second-hit (the library's default) or write (also as it is written, as blobcache serve does)")
	compressions := fs.String("compression", "none", "compressions, comma-separated: none, zstd, s2 (Options.Compression); each case is replayed once per compression")
	valuesKind := fs.String("values", "zeros", "value bytes: zeros, random (incompressible) or text (slices of the -corpus Go source)")
	corpus := fs.String("corpus", "", "-values text: directory whose .go files, concatenated, values are cut from (default $(go env GOROOT)/src)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("trace: unexpected arguments %q", fs.Args())
	}

	admit, err := blobcache.ParseMemoryAdmission(*admission)
	if err != nil {
		return fmt.Errorf("trace: -memory-admission: %w", err)
	}

	var reqs []trace.Request
	label := *name
	switch sources := btoi(*oracle != "") + btoi(*csvPath != "") + btoi(*alpha > 0); {
	case sources != 1:
		return errors.New("trace: give exactly one of -oracle, -csv, -zipf")
	case *oracle != "":
		reqs, err = readFile(*oracle, trace.ReadOracle)
		label = cmp(label, filepath.Base(*oracle))
	case *csvPath != "":
		reqs, err = readFile(*csvPath, trace.ReadCSV)
		label = cmp(label, filepath.Base(*csvPath))
	default:
		z := trace.Zipf{Alpha: *alpha, Objects: *objects, Requests: *requests, Size: uint32(*size), Seed: *seed}
		sizes := fmt.Sprintf("%d B", *size)
		if *sizeMax > 0 {
			z.SizeMin, z.SizeMax = uint32(*sizeMin), uint32(*sizeMax)
			sizes = fmt.Sprintf("lognormal %d–%d B", *sizeMin, *sizeMax)
		}
		reqs, err = z.Generate()
		label = cmp(label, fmt.Sprintf("zipf %.2g, %d objects, %s, %d requests, seed %d", *alpha, *objects, sizes, *requests, *seed))
	}
	if err != nil {
		return err
	}
	if *save != "" {
		if err := writeFile(*save, reqs); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "trace: wrote %d requests to %s\n", len(reqs), *save)
	}
	sum := trace.Summarize(reqs)
	var comps []blobcache.Compression
	for _, name := range cmpList(split(*compressions), []string{"none"}) {
		c, err := blobcache.ParseCompression(name)
		if err != nil {
			return fmt.Errorf("trace: -compression: %w", err)
		}
		comps = append(comps, c)
	}
	values, err := traceValues(*valuesKind, *corpus, int(sum.MaxSize), *seed)
	if err != nil {
		return err
	}
	rep := traceReport{Trace: label, Summary: sum}
	for _, cs := range split(*caches) {
		maxSize, err := parseCacheSize(cs, sum.UniqueBytes)
		if err != nil {
			return err
		}
		seg, wb, err := replay.Geometry(maxSize, *segments, int64(sum.MaxSize))
		if err != nil {
			return err
		}
		if *segSize > 0 {
			seg = *segSize
		}
		if *wbSize > 0 {
			wb = *wbSize
		}
		for _, pol := range split(*policies) {
			for _, ms := range cmpList(split(*memories), []string{"0"}) {
				memSize, err := parseMemorySize(ms, maxSize)
				if err != nil {
					return err
				}
				for _, comp := range comps {
					res, err := replay.Run(reqs, replay.Config{
						Dir: *dir, MaxSize: maxSize, SegmentSize: seg, WriteBufferSize: wb, ExpectedBlobs: int64(sum.Objects),
						Policy: pol, MeanSize: sum.UniqueBytes / int64(max(sum.Objects, 1)), MemorySize: memSize, MemoryAdmission: admit,
						Compression: comp, Values: values,
					})
					if err != nil {
						return fmt.Errorf("trace %s, cache %s, policy %s, memory %s, compression %s: %w", label, cs, pol, ms, comp, err)
					}
					run := traceRun{
						Cache: cs, Fraction: float64(maxSize) / float64(max(sum.UniqueBytes, 1)),
						MissRatio: res.MissRatio(), ByteMissRatio: res.ByteMissRatio(), WriteAmp: res.WriteAmp(),
						Values: *valuesKind, Result: res,
					}
					if res.Memory != nil {
						share := res.Memory.HitShare()
						run.MemoryHitShare = &share
					}
					rep.Runs = append(rep.Runs, run)
				}
			}
		}
	}
	fmt.Print(traceMarkdown(rep))
	return writeJSON(*jsonOut, rep)
}

// writeJSON writes v, indented, to the file path; with path "" it writes nothing.
func writeJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// traceMarkdown is the table of a trace run.
func traceMarkdown(rep traceReport) string {
	var b strings.Builder
	s := rep.Summary
	fmt.Fprintf(&b, "### Hit ratio: %s\n\n", rep.Trace)
	fmt.Fprintf(&b, "%d requests (%d of size 0 skipped), %d objects, %d unique bytes (%.2f GiB)\n\n",
		s.Requests, s.ZeroSize, s.Objects, s.UniqueBytes, float64(s.UniqueBytes)/(1<<30))
	if len(rep.Runs) == 0 {
		return b.String()
	}
	tiered, compressed := false, false
	for _, r := range rep.Runs {
		tiered = tiered || r.Memory != nil
		compressed = compressed || r.Compression != "none" || r.Values != "zeros"
	}
	b.WriteString("| cache | policy |")
	if compressed {
		b.WriteString(" compression | values | stored / given | given compressed / missed bytes |")
	}
	b.WriteString(" MaxSize, bytes | segments x SegmentSize | WriteBufferSize | miss ratio | byte miss ratio | written / requested | held / MaxSize: mean (min-max) | evictions | reinserted | declined | seconds |")
	if tiered {
		b.WriteString(" memory, bytes | memory hits / hits | memory inserts | memory evictions |")
	}
	b.WriteString("\n|---|---|")
	if compressed {
		b.WriteString("---|---|--:|--:|")
	}
	b.WriteString("--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	if tiered {
		b.WriteString("--:|--:|--:|--:|")
	}
	b.WriteString("\n")
	for _, r := range rep.Runs {
		fmt.Fprintf(&b, "| %.3g | %s |", r.Fraction, r.Policy)
		if compressed {
			stored := "-"
			if r.CompressedIn > 0 {
				stored = fmt.Sprintf("%.3f", float64(r.CompressedOut)/float64(r.CompressedIn))
			}
			fmt.Fprintf(&b, " %s | %s | %s | %.3f |", r.Compression, r.Values, stored, float64(r.CompressedIn)/float64(max(r.MissBytes, 1)))
		}
		fmt.Fprintf(&b, " %d | %d x %.2f MiB | %d KiB | %.4f | %.4f | %.3f | %.3f (%.3f-%.3f) | %d | %d | %d | %.1f |",
			r.MaxSize, r.MaxSize/r.SegmentSize, float64(r.SegmentSize)/(1<<20), r.WriteBufferSize>>10,
			r.MissRatio, r.ByteMissRatio, r.WriteAmp, r.HeldMean, r.HeldMin, r.HeldMax, r.Evictions, r.Reinserted, r.Declined, r.Seconds)
		switch m := r.Memory; {
		case m != nil:
			fmt.Fprintf(&b, " %d | %.4f | %d | %d |", m.Size, m.HitShare(), m.Inserts, m.Evictions)
		case tiered:
			b.WriteString(" 0 | - | - | - |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String()
}

// traceValues returns what the replay cuts values of up to largest bytes from: nil for zeros,
// random bytes (from seed), or the Go source under corpus ("": $(go env GOROOT)/src).
func traceValues(kind, corpus string, largest int, seed uint64) (*workload.Payload, error) {
	switch kind {
	case "zeros":
		return nil, nil
	case "random":
		return workload.NewPayload(largest, seed), nil
	case "text":
		text, _, _, err := readCorpus(corpus)
		if err != nil {
			return nil, err
		}
		if len(text) < largest {
			return nil, fmt.Errorf("trace: -values text: the corpus has %d bytes, less than the largest object's %d", len(text), largest)
		}
		return workload.PayloadOf(text), nil
	}
	return nil, fmt.Errorf("trace: -values %q: zeros, random or text", kind)
}

// readCorpus returns the .go files under dir concatenated ("": $(go env GOROOT)/src), with the
// directory read and the number of files.
func readCorpus(dir string) (text []byte, read string, files int, err error) {
	if dir == "" {
		root, err := corpus.GoRoot()
		if err != nil {
			return nil, "", 0, err
		}
		dir = filepath.Join(root, "src")
	}
	text, files, err = corpus.Dir(dir, 0)
	return text, dir, files, err
}

// parseCacheSize reads a cache size: a fraction of unique (a number with a dot, at most 1) or
// bytes, with an optional KiB/MiB/GiB (or K/M/G, also powers of 2) suffix.
func parseCacheSize(s string, unique int64) (int64, error) {
	if strings.Contains(s, ".") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1 {
			return 0, fmt.Errorf("trace: cache size %q: a fraction must be in (0, 1]", s)
		}
		return int64(f * float64(unique)), nil
	}
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("trace: cache size %q is neither a fraction nor a byte count", s)
	}
	return n * mult, nil
}

// parseMemorySize reads a memory tier size: 0 (none), a fraction of the cache's maxSize, or
// bytes, as parseCacheSize reads them.
func parseMemorySize(s string, maxSize int64) (int64, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == 0 {
		return 0, nil
	}
	n, err := parseCacheSize(s, maxSize)
	if err != nil {
		return 0, fmt.Errorf("trace: memory size %q is neither 0, a fraction of the cache size in (0, 1], nor a byte count", s)
	}
	return n, nil
}

func readFile(path string, read func(io.Reader) ([]trace.Request, error)) ([]trace.Request, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	reqs, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return reqs, nil
}

func writeFile(path string, reqs []trace.Request) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := trace.WriteOracle(f, reqs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cmpList returns a if it is not empty, else b.
func cmpList(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// cmp returns a if it is set, else b.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
