package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/bench/trace"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

// A cache larger than the trace's unique bytes misses each object once: the miss ratio is
// objects over requests, and it writes each object once.
func TestRunColdMissesOnly(t *testing.T) {
	reqs, err := trace.Zipf{Alpha: 0.8, Objects: 500, Requests: 4000, Size: 1024, Seed: 1}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	reqs = append(reqs, trace.Request{ID: 1 << 50, Size: 0}) // skipped, as libCacheSim does
	sum := trace.Summarize(reqs)
	seg, wb, err := Geometry(8<<20, 4, 1024)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: 8 << 20, SegmentSize: seg, WriteBufferSize: wb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != int64(sum.Requests) || res.Skipped != 1 || res.Misses != int64(sum.Objects) || res.Evictions != 0 {
		t.Fatalf("%+v, want %d requests, 1 skipped, %d misses, no eviction", res, sum.Requests, sum.Objects)
	}
	if want := float64(sum.Objects) / float64(sum.Requests); res.MissRatio() != want {
		t.Errorf("miss ratio %v, want %v", res.MissRatio(), want)
	}
	// Every object written once, with its 64-byte header and 8-byte key.
	if want := uint64(sum.UniqueBytes) + uint64(sum.Objects)*(64+KeyLen); res.FlushedBytes != want {
		t.Errorf("flushed %d bytes, want %d", res.FlushedBytes, want)
	}
}

// A cache smaller than the unique bytes evicts, and FIFO by segment cannot do better than the
// cold misses.
func TestRunEvicts(t *testing.T) {
	reqs, err := trace.Zipf{Alpha: 0.6, Objects: 4000, Requests: 20000, Size: 4096, Seed: 2}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sum := trace.Summarize(reqs)
	seg, wb, err := Geometry(sum.UniqueBytes/4, 4, int64(sum.MaxSize))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: sum.UniqueBytes / 4, SegmentSize: seg, WriteBufferSize: wb})
	if err != nil {
		t.Fatal(err)
	}
	if res.Evictions == 0 || res.Misses <= int64(sum.Objects) || res.Misses >= res.Requests {
		t.Fatalf("%+v: want evictions and %d < misses < %d", res, sum.Objects, res.Requests)
	}
}

func TestGeometry(t *testing.T) {
	for _, tc := range []struct {
		max      int64
		segments int
		largest  int64
		seg, wb  int64
		bad      bool
	}{
		{max: 1 << 30, segments: 16, largest: 4096, seg: 64 << 20, wb: 4 << 20},
		{max: 160 << 20, segments: 16, largest: 4096, seg: 10 << 20, wb: 1280 << 10},
		{max: 20 << 20, segments: 16, largest: 1 << 20, seg: 1280 << 10, wb: 160 << 10},
		{max: 4 << 20, segments: 16, largest: 4096, seg: 256 << 10, wb: 64 << 10},
		{max: 1 << 20, segments: 16, largest: 4096, seg: 92 << 10, wb: 64 << 10},         // the library's floor
		{max: 4 << 20, segments: 16, largest: 1 << 20, seg: 1<<20 + 8<<10, wb: 64 << 10}, // the largest object
		{max: 150 << 10, segments: 16, largest: 4096, bad: true},
		{max: 1 << 30, segments: 1, largest: 4096, bad: true},
	} {
		seg, wb, err := Geometry(tc.max, tc.segments, tc.largest)
		if tc.bad {
			if err == nil {
				t.Errorf("Geometry(%d, %d, %d) = %d, %d; want an error", tc.max, tc.segments, tc.largest, seg, wb)
			}
			continue
		}
		if err != nil || seg != tc.seg || wb != tc.wb {
			t.Errorf("Geometry(%d, %d, %d) = %d, %d, %v; want %d, %d", tc.max, tc.segments, tc.largest, seg, wb, err, tc.seg, tc.wb)
		}
	}
}

// A memory tier in front of the segments serves some hits from memory and changes no hit into a
// miss or back: it holds only values the segments hold too (an entry is bound to its record's
// place), and a hit from memory counts in the index as one from disk, so the segments keep
// what they keep without it. Under PolicyFIFO, whose replays repeat exactly, the misses and the
// bytes written are the same to the request and the byte. Under the default policy a
// reinsertion goroutine decides what is copied while the replay runs, so replays of the same
// trace differ a little from run to run, with a tier or without one: they agree within that.
func TestRunMemoryTier(t *testing.T) {
	reqs, _, base := quarterCache(t, trace.Zipf{Alpha: 0.9, Objects: 4000, Requests: 40000, Size: 2048, Seed: 3})
	maxSize, seg, wb := base.MaxSize, base.SegmentSize, base.WriteBufferSize
	for _, tc := range []struct {
		policy string
		noise  float64 // largest difference of miss ratios allowed
	}{{"fifo", 0}, {"default", 0.03}} {
		cfg := Config{Dir: t.TempDir(), MaxSize: maxSize, SegmentSize: seg, WriteBufferSize: wb, Policy: tc.policy}
		without, err := Run(reqs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MemorySize = maxSize / 10
		with, err := Run(reqs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if without.Memory != nil {
			t.Errorf("%s: memory figures without a tier: %+v", tc.policy, *without.Memory)
		}
		m := with.Memory
		if m == nil {
			t.Fatalf("%s: no memory figures with a tier", tc.policy)
		}
		t.Logf("%s: miss ratio %.4f without the tier, %.4f with it; %d of %d hits from memory (%.3f), %d inserts, %d evictions, %d declined",
			tc.policy, without.MissRatio(), with.MissRatio(), m.MemoryHits, m.Hits, m.HitShare(), m.Inserts, m.Evictions, m.Declined)
		if m.Size != maxSize/10 || m.Hits != uint64(with.Requests-with.Misses) || m.HitShare() <= 0 || m.Inserts == 0 || m.Evictions == 0 {
			t.Errorf("%s: %+v: want every hit counted, some from memory, inserts and evictions", tc.policy, *m)
		}
		if d := with.MissRatio() - without.MissRatio(); d > tc.noise || -d > tc.noise {
			t.Errorf("%s: miss ratio %.4f with the tier, %.4f without: want them equal within %g", tc.policy, with.MissRatio(), without.MissRatio(), tc.noise)
		}
		if tc.noise == 0 && (with.Misses != without.Misses || with.FlushedBytes != without.FlushedBytes) {
			t.Errorf("%s: %d misses, %d bytes written with the tier; %d, %d without", tc.policy, with.Misses, with.FlushedBytes, without.Misses, without.FlushedBytes)
		}
	}
}

// MaxSize counts the bytes stored: at the same MaxSize, a cache that compresses values that
// compress holds more of them and misses less; values that do not compress are stored as
// given, and the cache misses as one that does not compress. Under PolicyFIFO the replays
// repeat exactly, so without compression text and random values miss alike to the request.
func TestRunCompression(t *testing.T) {
	reqs, sum, base := quarterCache(t, trace.Zipf{Alpha: 0.7, Objects: 2000, Requests: 20000, SizeMin: 4096, SizeMax: 32768, Seed: 4})
	maxSize, seg, wb := base.MaxSize, base.SegmentSize, base.WriteBufferSize
	// Text that compresses about fourfold, as source code does.
	var text []byte
	for i := 0; len(text) < 1<<20; i++ {
		text = fmt.Appendf(text, "func f%d(x int) int { return x*%d + len(%q) }\n", i, i%97, strings.Repeat("ab", i%13))
	}
	random := workload.NewPayload(int(sum.MaxSize), 5)
	run := func(c blobcache.Compression, values *workload.Payload) Result {
		t.Helper()
		res, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: maxSize, SegmentSize: seg, WriteBufferSize: wb, Policy: "fifo",
			Compression: c, Values: values})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, %d of %d values' bytes: miss ratio %.4f; %d bytes stored compressed in %d, %d stored as given",
			res.Compression, values.Len(), sum.MaxSize, res.MissRatio(), res.CompressedIn, res.CompressedOut, res.StoredAsGiven)
		return res
	}
	plainText := run(blobcache.CompressionNone, workload.PayloadOf(text))
	plainRandom := run(blobcache.CompressionNone, random)
	zstdText := run(blobcache.CompressionZstd, workload.PayloadOf(text))
	zstdRandom := run(blobcache.CompressionZstd, random)
	if plainText.Misses != plainRandom.Misses || plainText.Compression != "none" || plainText.CompressedIn != 0 {
		t.Errorf("without compression: %+v with text, %+v with random values: want the same misses and nothing compressed", plainText, plainRandom)
	}
	if zstdText.Compression != "zstd" || zstdText.CompressedOut == 0 || zstdText.CompressedIn < 2*zstdText.CompressedOut || zstdText.MissRatio() >= plainText.MissRatio()-0.05 {
		t.Errorf("zstd on text: %+v; want values shrunk and the miss ratio well below %.4f", zstdText, plainText.MissRatio())
	}
	if zstdRandom.CompressedIn != 0 || zstdRandom.StoredAsGiven == 0 || zstdRandom.Misses != plainRandom.Misses {
		t.Errorf("zstd on random values: %+v; want every value stored as given and %d misses", zstdRandom, plainRandom.Misses)
	}
	if _, err := Run(reqs, Config{Dir: t.TempDir(), MaxSize: maxSize, SegmentSize: seg, WriteBufferSize: wb, Values: workload.PayloadOf(text[:1000])}); err == nil {
		t.Error("values shorter than the largest object: no error")
	}
}

// quarterCache generates z's requests and the geometry of a cache of a quarter of their unique
// bytes, eight segments' worth.
func quarterCache(t *testing.T, z trace.Zipf) ([]trace.Request, trace.Summary, Config) {
	t.Helper()
	reqs, err := z.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sum := trace.Summarize(reqs)
	maxSize := sum.UniqueBytes / 4
	seg, wb, err := Geometry(maxSize, 8, int64(sum.MaxSize))
	if err != nil {
		t.Fatal(err)
	}
	return reqs, sum, Config{MaxSize: maxSize, SegmentSize: seg, WriteBufferSize: wb}
}
