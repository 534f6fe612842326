package replay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/bench/trace"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

// KeyLen is the length of the keys the replay writes: the object id, big-endian.
const KeyLen = 8

// recordRoom is what a segment needs beyond a value of the replay's to hold it: the segment's
// header (4 KiB), the record's header (64 bytes) and key, its footer entry (20 bytes) and the
// footer's trailer (32 bytes), rounded up to 4 KiB.
const recordRoom = 8192

// Config is one replay's cache.
type Config struct {
	Dir             string // parent of the cache's temporary directory ("": os.TempDir())
	MaxSize         int64  // blobcache.Options.MaxSize, bytes
	SegmentSize     int64  // from Geometry
	WriteBufferSize int64  // from Geometry
	ExpectedBlobs   int64  // sizes the bloom filter and index (0: the library's default)
	// Policy is what the cache keeps, as ParsePolicy reads it ("": the library's defaults).
	Policy string
	// MeanSize is the trace's mean object size, bytes: a ghost set of AdmitOnSecondPut
	// remembers as many keys as the cache holds objects of it, unless the policy says.
	MeanSize int64
	// MemorySize is blobcache.Options.MemorySize, the memory tier's capacity in bytes (0: none).
	// With a tier, a request is a whole Get (see Run).
	MemorySize int64
	// MemoryAdmission is blobcache.Options.MemoryAdmission: when a value enters the tier (the
	// library's default, its second hit from the segments; blobcache.MemoryOnWrite, also as
	// it is written, as blobcache serve does).
	MemoryAdmission blobcache.MemoryAdmission
	// Compression is blobcache.Options.Compression. MaxSize counts the bytes stored, so a
	// cache that compresses holds more objects than one that does not at the same MaxSize.
	Compression blobcache.Compression
	// Values is what value bytes are cut from: object id's value of n bytes is
	// Values.Value(id, n), the same bytes every time the object is put. nil: zeros, which is
	// all a cache that stores values as given needs (only sizes matter to it), and which any
	// compression shrinks to nothing.
	Values *workload.Payload
}

// ParsePolicy turns a policy spec into options: parts joined by '+', each one of
//
//	fifo                 blobcache.PolicyFIFO
//	reinsert[=share]     blobcache.PolicyReinsert, with ReinsertShare (default the library's)
//	probation[=share]    blobcache.PolicyProbation, with ReinsertShare
//	second[=n]           blobcache.AdmitOnSecondPut(n); n defaults to maxSize/meanSize
//	all                  blobcache.AdmitAll
//
// "" or "default" is the library's defaults.
func ParsePolicy(spec string, maxSize, meanSize int64) ([]blobcache.Option, error) {
	var opts []blobcache.Option
	if spec == "" || spec == "default" {
		return nil, nil
	}
	for _, part := range strings.Split(spec, "+") {
		name, arg, hasArg := strings.Cut(part, "=")
		switch name {
		case "fifo":
			opts = append(opts, blobcache.WithPolicy(blobcache.PolicyFIFO))
		case "reinsert", "probation":
			p := blobcache.PolicyReinsert
			if name == "probation" {
				p = blobcache.PolicyProbation
			}
			opts = append(opts, blobcache.WithPolicy(p))
			if hasArg {
				share, err := strconv.ParseFloat(arg, 64)
				if err != nil {
					return nil, fmt.Errorf("replay: policy %q: share %q: %w", spec, arg, err)
				}
				opts = append(opts, blobcache.WithReinsertShare(share))
			}
		case "second":
			n := maxSize / max(meanSize, 1)
			if hasArg {
				var err error
				if n, err = strconv.ParseInt(arg, 10, 64); err != nil {
					return nil, fmt.Errorf("replay: policy %q: ghost size %q: %w", spec, arg, err)
				}
			}
			opts = append(opts, blobcache.WithAdmission(blobcache.AdmitOnSecondPut(int(max(n, 1)))))
		case "all":
			opts = append(opts, blobcache.WithAdmission(blobcache.AdmitAll()))
		default:
			return nil, fmt.Errorf("replay: policy %q: unknown part %q", spec, part)
		}
	}
	return opts, nil
}

// Geometry returns the segment size and write buffer for a cache of maxSize bytes cut into
// about segments segments, for objects of up to largest bytes. Eviction drops a whole segment,
// so the cache holds between maxSize-SegmentSize and maxSize of records (the active segment is
// counted full from its creation, see blobcache.Options.MaxSize): with 32 segments it holds
// 97–100%, 98% on average, of what an object-granular cache of maxSize holds (a little less
// with two regions, see blobcache.PolicyProbation). The write buffer is an eighth of a segment
// (64 KiB to 4 MiB). A segment is at least the library's floor for that buffer
// (blobcache.MinSegmentSize, about 96 KiB for 64 KiB) and holds the largest object: small
// caches of large objects get fewer, larger segments than asked. Below two such segments
// BlobCache cannot be configured at all.
func Geometry(maxSize int64, segments int, largest int64) (segmentSize, writeBuffer int64, err error) {
	if segments < 2 {
		return 0, 0, fmt.Errorf("replay: %d segments: MaxSize must hold at least two", segments)
	}
	seg := maxSize / int64(segments) &^ 4095
	wb := min(max(seg/8&^4095, 64<<10), 4<<20)
	seg = max(seg, blobcache.MinSegmentSize(wb), (largest+recordRoom+4095)&^4095)
	if maxSize < 2*seg {
		return 0, 0, fmt.Errorf("replay: a cache of %d bytes is below two segments of %d bytes, BlobCache's least", maxSize, seg)
	}
	return seg, wb, nil
}

// Result is what one replay measured.
type Result struct {
	MaxSize         int64 `json:"max_size"`
	SegmentSize     int64 `json:"segment_size"`
	WriteBufferSize int64 `json:"write_buffer_size"`

	Requests     int64 `json:"requests"`      // counted requests (size > 0)
	Skipped      int64 `json:"skipped"`       // requests of size 0, not counted
	Misses       int64 `json:"misses"`        // counted requests that missed
	RequestBytes int64 `json:"request_bytes"` // bytes asked for
	MissBytes    int64 `json:"miss_bytes"`    // bytes asked for by requests that missed
	Rejected     int64 `json:"rejected"`      // misses whose Put the cache refused (value too large)

	// FlushedBytes is blobcache.Stats.FlushedBytes after a final Drain: the bytes of records
	// (64-byte header, key, value) the cache handed to the file system. Segment headers (4 KiB)
	// and footers (20 bytes a record) are not in it.
	FlushedBytes uint64 `json:"flushed_bytes"`
	Policy       string `json:"policy"`
	Declined     uint64 `json:"declined"`      // Puts the admission policy declined (each a later miss)
	Reinserted   uint64 `json:"reinserted"`    // records written again before their segment was evicted
	ReinsertDrop uint64 `json:"reinsert_drop"` // hit records not written again: over the share
	Evictions    uint64 `json:"evictions"`     // segments evicted
	// Compression is Config.Compression's name; CompressedIn and CompressedOut are the bytes
	// given to Puts stored compressed and what they were stored in, StoredAsGiven the Puts
	// whose value did not shrink (blobcache.Stats).
	Compression   string  `json:"compression"`
	CompressedIn  uint64  `json:"compressed_in"`
	CompressedOut uint64  `json:"compressed_out"`
	StoredAsGiven uint64  `json:"stored_as_given"`
	Segments      int     `json:"segments"` // live segments at the end
	Seconds       float64 `json:"seconds"`

	// What the cache held (blobcache.Stats.DataBytes) as a share of MaxSize, sampled every
	// heldEvery requests once the first segment was evicted: its mean, least and most.
	HeldMean float64 `json:"held_mean"`
	HeldMin  float64 `json:"held_min"`
	HeldMax  float64 `json:"held_max"`

	// Memory is the memory tier's figures; nil without one (Config.MemorySize 0).
	Memory *MemoryResult `json:"memory,omitempty"`
}

// MemoryResult is what the memory tier did in one replay, from blobcache.Stats after the final
// Drain. The tier holds only values the segments hold too, so its hits are among the cache's:
// Hits counts both tiers' hits, MemoryHits those served from memory.
type MemoryResult struct {
	Size       int64  `json:"size"`        // Options.MemorySize
	Admission  string `json:"admission"`   // Options.MemoryAdmission: second-hit or write
	Hits       uint64 `json:"hits"`        // Stats.Hits: every hit, from either tier
	MemoryHits uint64 `json:"memory_hits"` // Stats.MemoryHits: hits served from memory
	Inserts    uint64 `json:"inserts"`     // values that entered the tier
	Evictions  uint64 `json:"evictions"`   // values the tier evicted
	Declined   uint64 `json:"declined"`    // values not let in: a first hit, too large, or the gate closed
	Items      int64  `json:"items"`       // values held at the end
	Bytes      int64  `json:"bytes"`       // what they take, overhead included
}

// HitShare is the share of the cache's hits served from memory.
func (m MemoryResult) HitShare() float64 { return ratio(float64(m.MemoryHits), float64(m.Hits)) }

// heldEvery is how many requests apart Run samples what the cache holds.
const heldEvery = 1024

// MissRatio is the fraction of requests that missed.
func (r Result) MissRatio() float64 { return ratio(float64(r.Misses), float64(r.Requests)) }

// ByteMissRatio is the fraction of requested bytes that missed.
func (r Result) ByteMissRatio() float64 {
	return ratio(float64(r.MissBytes), float64(r.RequestBytes))
}

// WriteAmp is the bytes written (FlushedBytes) per byte requested.
func (r Result) WriteAmp() float64 { return ratio(float64(r.FlushedBytes), float64(r.RequestBytes)) }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Run replays reqs against a new cache configured by cfg, in a temporary directory it removes
// afterwards. Requests of size 0 are skipped, as libCacheSim skips them. A hit is decided by a
// one-byte GetRange: the same lookup as Get (bloom filter, write buffer, index, then the record's
// header and key read and checked), without copying a value nobody looks at. With a memory tier
// a request is a Get of the whole value instead, since only a whole read lets a value into the
// tier (see blobcache.Options.MemorySize); the Reader is closed unread, the value having been
// read when it was opened. Both count a hit in the index alike, so what the segments keep does
// not depend on which is used.
func Run(reqs []trace.Request, cfg Config) (Result, error) {
	res := Result{MaxSize: cfg.MaxSize, SegmentSize: cfg.SegmentSize, WriteBufferSize: cfg.WriteBufferSize, Policy: cfg.Policy,
		Compression: cfg.Compression.String()}
	policy, err := ParsePolicy(cfg.Policy, cfg.MaxSize, cfg.MeanSize)
	if err != nil {
		return res, err
	}
	var largest uint32
	for _, r := range reqs {
		largest = max(largest, r.Size)
	}
	if cfg.Values != nil && cfg.Values.Len() < int(largest) {
		return res, fmt.Errorf("replay: values are cut from %d bytes, less than the largest object's %d", cfg.Values.Len(), largest)
	}
	dir, err := os.MkdirTemp(cfg.Dir, "blobcache-trace-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	opts := []blobcache.Option{
		blobcache.WithMaxSize(cfg.MaxSize),
		blobcache.WithSegmentSize(cfg.SegmentSize),
		blobcache.WithWriteBufferSize(cfg.WriteBufferSize),
		// Buffered writes: what is measured is which blobs stay, not the device; the page cache
		// absorbs segments that are evicted before they are written back.
		blobcache.WithBufferedWrites(true),
		blobcache.WithFlushInterval(time.Hour),
	}
	if cfg.ExpectedBlobs > 0 {
		opts = append(opts, blobcache.WithExpectedBlobs(cfg.ExpectedBlobs))
	}
	if cfg.MemorySize > 0 {
		opts = append(opts, blobcache.WithMemorySize(cfg.MemorySize))
		if cfg.MemoryAdmission != blobcache.MemoryOnSecondHit {
			opts = append(opts, blobcache.WithMemoryAdmission(cfg.MemoryAdmission))
		}
	}
	if cfg.Compression != blobcache.CompressionNone {
		opts = append(opts, blobcache.WithCompression(cfg.Compression))
	}
	opts = append(opts, policy...)
	c, err := blobcache.New(dir, opts...)
	if err != nil {
		return res, err
	}
	stop, err := c.Start()
	if err != nil {
		c.Close()
		return res, err
	}
	// Without Config.Values, values are zeros: sizes are what matter. No value is ever
	// written to, so UnsafePut may keep it until its batch is flushed.
	value := func(r trace.Request) []byte { return cfg.Values.Value(r.ID, int(r.Size)) }
	if cfg.Values == nil {
		zeros := make([]byte, largest)
		value = func(r trace.Request) []byte { return zeros[:r.Size] }
	}
	var key [KeyLen]byte
	get := func(k []byte) (*blobcache.Reader, bool) { return c.GetRange(k, 0, 1) }
	if cfg.MemorySize > 0 {
		get = c.Get
	}
	var heldSum float64
	var heldN int
	start := time.Now()
	for _, r := range reqs {
		if r.Size == 0 {
			res.Skipped++
			continue
		}
		res.Requests++
		if res.Requests%heldEvery == 0 {
			if s := c.Stats(); s.Evictions > 0 {
				h := float64(s.DataBytes) / float64(cfg.MaxSize)
				if heldN == 0 || h < res.HeldMin {
					res.HeldMin = h
				}
				res.HeldMax = max(res.HeldMax, h)
				heldSum += h
				heldN++
			}
		}
		res.RequestBytes += int64(r.Size)
		binary.BigEndian.PutUint64(key[:], r.ID)
		if rd, ok := get(key[:]); ok {
			rd.Close()
			continue
		}
		res.Misses++
		res.MissBytes += int64(r.Size)
		err := c.UnsafePut(key[:], value(r))
		switch {
		case errors.Is(err, blobcache.ErrValueTooLarge):
			res.Rejected++
		case err != nil:
			stop()
			c.Close()
			return res, fmt.Errorf("replay: put of object %d (%d bytes): %w", r.ID, r.Size, err)
		}
	}
	c.Drain()
	res.Seconds = time.Since(start).Seconds()
	if heldN > 0 {
		res.HeldMean = heldSum / float64(heldN)
	}
	s := c.Stats()
	res.FlushedBytes, res.Evictions, res.Segments = s.FlushedBytes, s.Evictions, s.Segments
	res.Declined, res.Reinserted, res.ReinsertDrop = s.Declined, s.Reinserted, s.ReinsertDropped
	res.CompressedIn, res.CompressedOut, res.StoredAsGiven = s.CompressedBytesIn, s.CompressedBytesOut, s.StoredAsGiven
	if cfg.MemorySize > 0 {
		res.Memory = &MemoryResult{Size: cfg.MemorySize, Admission: cfg.MemoryAdmission.String(), Hits: s.Hits, MemoryHits: s.MemoryHits,
			Inserts: s.MemoryInserts, Evictions: s.MemoryEvictions, Declined: s.MemoryDeclined,
			Items: s.MemoryItems, Bytes: s.MemoryBytes}
	}
	if err := errors.Join(stop(), c.Close()); err != nil {
		return res, err
	}
	return res, nil
}
