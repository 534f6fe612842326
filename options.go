package blobcache

import (
	"fmt"
	"hash"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// MaxKeyLen is the longest key the cache accepts, in bytes.
const MaxKeyLen = record.MaxKeyLen

// IndexKind selects the in-memory index implementation.
type IndexKind int

const (
	// IndexHashTable is the default: a pointer-free sharded open-addressing table holding a
	// 64-bit key hash and a 12-byte location per blob (about 25 bytes per blob in RAM).
	IndexHashTable IndexKind = iota
	// IndexSkipList is a concurrent skip list with lock-free reads; it costs several times the
	// memory per blob of the hash table. Like the hash table it is rebuilt from the segment
	// footers on open.
	IndexSkipList
)

// Options configures a Cache. The zero value of every field means "use the default" stated on
// the field. Build one with the With* functions passed to New, or fill it and pass WithOptions.
type Options struct {
	// MaxSize bounds the disk space of the segments, in bytes. Before records are placed, the
	// oldest segments are evicted whole until the records held (Stats.DataBytes) with the new
	// ones fit in MaxSize; the files, which also hold at most one segment of preallocated space
	// (segments are preallocated half at a time), stay within MaxSize plus one segment at any
	// moment. A write that needs room while the oldest segment is still being sealed waits for
	// the seal (Stats.RoomWaits). 0 means unlimited; MaxSizeAuto, a share of the file system
	// chosen when the cache is made and kept (see MaxSizeAuto). If set it must be at least
	// 2*SegmentSize (except with PerBlobFiles, where blobs are evicted one by one in write order).
	//
	// Eviction frees a whole segment at a time, so the data held averages about MaxSize less half
	// a segment: with the derived SegmentSize, a segment is at most a thirty-second of MaxSize
	// and the cache holds about 98% of it or more; a SegmentSize set to a large share of MaxSize
	// costs half that share.
	MaxSize int64

	// SegmentSize is the size of each append-only segment file (below 4 GiB, at least
	// MinSegmentSize(WriteBufferSize)). Default 256 MiB, or with MaxSize set a thirty-second of
	// it (at least 4 MiB), whichever is smaller. Larger segments mean fewer files and coarser
	// eviction (see MaxSize); a record must fit in one, so small segments refuse large values
	// (ErrValueTooLarge).
	SegmentSize int64

	// PerBlobFiles stores every blob in a file of its own, named from a hash of its key (the
	// original design's strategy), instead of in segments: no hint footers, an open and close per
	// read, eviction blob by blob in write order. Reads always check the value's CRC. It applies
	// to a new directory: an existing cache keeps the mode it was created with. Default off.
	PerBlobFiles bool

	// Checksum stores a checksum of every blob (ChecksumHash of the value) in its record header.
	// Every record also always carries a CRC-32C of its value that recovery uses to tell whole
	// records from torn ones; this option adds the blob checksum the application sees (the ETag
	// of the server). Default off.
	Checksum bool

	// ChecksumHash is the hash used for blob checksums (Checksum, PutChecksummed). Default nil:
	// CRC-32C (Castagnoli), which costs nothing extra because it is the record's own value CRC.
	ChecksumHash func() hash.Hash32

	// VerifyOnRead makes every Get check the value against its stored checksums while it is read;
	// a mismatch is returned by the Read that reaches the end as an error wrapping
	// ErrChecksumMismatch. Headers and keys are always checked. Default off.
	VerifyOnRead bool

	// Fsync makes Drain, Delete and Close durable: every batch is fdatasync'ed (F_FULLFSYNC on
	// Darwin) before it is committed, and directory changes are synced. Default off: a crash may
	// forget recent writes, never return torn ones.
	Fsync bool

	// Writes. By default each batch picks its way (writeback.go; docs/DESIGN.md, "Which
	// batches go through the page cache"): while the cache's data fits in RAM and the bytes
	// written through the page cache and not yet synced stay under a tenth of the memory the
	// page cache could have, a batch is written through the page cache and the kernel writes
	// it back in its own time (the segment's seal waits for that before it syncs and writes the
	// footer), so that hits on new blobs are served from memory and the device sees the writes
	// later; otherwise it is written with O_DIRECT, which keeps up with the device where
	// buffered writes fall far behind it, at a fraction of the CPU (docs/BENCHMARKS.md, "Direct
	// writes by default"). Batches are padded to 4 KiB either way (batches, not blobs), and
	// UnsafePut copies like Put, since O_DIRECT needs aligned memory. Stats.WrittenBackBytes
	// counts the bytes written through the page cache. A file system that refuses O_DIRECT gets
	// buffered writes anyway (Stats.DirectIOOff).
	//
	// DirectWrites writes every batch with O_DIRECT, as the default did before write-back;
	// Fsync does too (each batch is synced, which direct writes do cheaper).
	DirectWrites bool
	// BufferedWrites writes every batch through the page cache, synced at its segment's seal
	// (and with Fsync, at once), with no padding.
	BufferedWrites bool

	// Reads. By default a hit picks its way per read (see docs/DESIGN.md, "Which hits go to the device"): a
	// record shorter than 256 KiB, and one the page cache holds whole, is read through the page
	// cache; a larger one it does not hold is read with O_DIRECT into the caller's memory, unless
	// it was hit before since it was written, the page cache has not dropped its pages under
	// memory pressure, and recent fills were followed by enough hits the page cache served: then
	// the read goes through the page cache and leaves the blob there for the next hit. So a blob
	// read once costs no page-cache fill (several times the CPU of the read itself), a hot blob
	// stays in RAM while the data fits there, and data larger than RAM does not churn the page
	// cache. Stats.ReadsPageCache, ReadsFilled and ReadsDirect count the routes taken.
	//
	// DirectIOReads reads every hit with O_DIRECT, BufferedReads every hit through the page
	// cache (the default before the per-read choice); setting both is refused. Neither is
	// needed to get the behaviour of one where it helps. DirectIOReads is not for PerBlobFiles,
	// which reads through the page cache.
	DirectIOReads bool
	BufferedReads bool

	// Index selects the index implementation. Default IndexHashTable.
	Index IndexKind

	// WriteBufferSize is the size of one write batch (default 16 MiB, or a quarter of a smaller
	// SegmentSize, at least 64 KiB). Puts fill a batch in
	// memory; a full batch is written to the active segment with one vectored write. Memory held
	// by unflushed writes is bounded by WriteBufferSize*(MaxInflightBatches+1); Put blocks when it
	// is reached. A record larger than a batch skips the buffer and is written before Put returns
	// (in the one-file-per-blob mode a record must fit in a batch).
	WriteBufferSize int64

	// MaxInflightBatches is the number of batches being written at once, each by its own flush
	// worker (default 4).
	MaxInflightBatches int

	// FlushInterval is how long a partly filled batch may wait before it is written anyway
	// (default 100ms). Drain writes it at once.
	FlushInterval time.Duration

	// ExpectedBlobs sizes the bloom filter and the index up front (default 1<<20). The filter is
	// rebuilt larger in the background when the cache outgrows it.
	ExpectedBlobs int64

	// BloomBitsPerKey is the bloom filter's size per expected blob (default 12: about 1.04%
	// false positives at the designed load, each key in one 64-bit word; see internal/bloom).
	BloomBitsPerKey int

	// BloomMaxFPR is the estimated false-positive rate past which the background worker rebuilds
	// the filter from the index (deletes and evictions leave bits set). Default 0.03.
	BloomMaxFPR float64

	// ReadOnly opens an existing cache for reading alone: New creates nothing (a missing or
	// empty directory is ErrNoCache), writes nothing, repairs nothing and removes nothing, so it
	// works on a read-only file system and on another user's files it may read. Damage that a
	// writable open would repair is read past (the same records are found); an unfinished tail
	// is ignored. Writes return ErrReadOnly. The directory's lock is taken shared: any number of
	// read-only opens at once, none while a writer has the directory open (New returns
	// ErrLocked) and no writer while one is open. Default off.
	ReadOnly bool

	// Policy is what eviction does with the records of the oldest segment (see Policy).
	// Default PolicyProbation: new blobs go to a probation region of a tenth of MaxSize and
	// only those hit there are kept; in the main region the records hit since they were written
	// are written again at the head, within ReinsertShare of the writes; the rest go with the
	// segment. PolicyReinsert does the latter with one region. PolicyFIFO
	// drops them all (every hit then costs nothing extra, but a popular blob is evicted as
	// soon as an unpopular one, and must be missed and written again). With PerBlobFiles
	// or without MaxSize there is nothing to reinsert and the policy is FIFO.
	Policy Policy

	// ReinsertShare bounds reinsertion: the bytes it rewrites are at most this share of all
	// the bytes the cache writes (more exactly, rewriting n bytes needs the credit that
	// n*(1-share)/share bytes of Puts and Deletes earned, and unspent credit is capped at one
	// segment). A hit record over the budget is dropped, never waited for: reinsertion never
	// slows a Put down. In (0, 1); default 0.8, at most four bytes rewritten per byte put (with
	// AdmitOnSecondPut few bytes are put, and a smaller share leaves hot blobs unreinserted;
	// without it, hits bound reinsertion long before the share does: see docs/BENCHMARKS.md).
	ReinsertShare float64

	// Admission decides which Puts are written (see Admission): a declined Put returns nil,
	// writes no value, and counts in Stats.Declined; if the key held a blob, a tombstone is
	// written instead, so that the older blob is never read back. Conditional writes (a
	// PutOptions.If) and Touch are always admitted. Default nil: every Put is admitted.
	Admission Admission

	// WriteBudget bounds the rate of device writes, in bytes per second (record bytes of
	// Puts, Deletes and reinsertions), for flash endurance: a Put that would take the rate over
	// it (allowing a burst of one second's budget) is declined, as by Admission, and a
	// reinsertion dropped. Tombstones are always written. Measured by Clock. Default 0: no
	// budget.
	WriteBudget int64

	// MemorySize is the capacity, in bytes, of the memory tier: record values held in process
	// memory in front of the segments (internal/memtier), so that a hit on a hot blob is a copy
	// from memory, with no system call and no checksum pass. A value enters as MemoryAdmission
	// says; the tier evicts as S3-FIFO does, and an entry is bound to its record, so an
	// overwrite, a Delete, an expiry, InvalidateAll or an eviction never leaves an older value
	// readable from it. It starts empty at every open. Default 0: no memory tier
	// (docs/BENCHMARKS.md, "The memory tier", has the measurements behind the default).
	MemorySize int64

	// MemoryAdmission says which values enter the memory tier. Default MemoryOnSecondHit.
	MemoryAdmission MemoryAdmission

	// Compression compresses values on their way to the segments: CompressionZstd (zstd at its
	// fastest level) or CompressionS2 (faster, compresses less). A value is compressed in
	// independent blocks of 256 KiB, so that a range reads only the blocks that cover it. A
	// value a sample of which does not shrink (media, encrypted or already compressed bytes) is
	// stored as given at the cost of the sample, and so is a value shorter than 1 KiB or one
	// written straight into its segment rather than through a write buffer (larger than
	// WriteBufferSize). MaxSize and eviction count the bytes stored; Stat, BlobInfo and readers
	// report the value's. Opening a directory with compression marks it format version 3, which
	// builds without compression refuse. Default CompressionNone: values are the caller's, often
	// compressed already (docs/BENCHMARKS.md, "Compression", has the measurements).
	Compression Compression

	// Clock is the time expiry (PutOptions.Expires), InvalidateAll and the creation time of
	// records are measured by (default time.Now). A server whose tests fix the time sets it.
	Clock func() time.Time

	// fs is the file-system seam; tests replace it with a faulty one.
	fs vfs.FS
	// versionLease is how many record versions one write of the state file leases
	// (defaultVersionLease); tests make it small.
	versionLease uint64
	// putChunk is PutFrom's chunk and streaming threshold (StreamThreshold unless a test
	// lowers it to stream small values; a multiple of 4 KiB).
	putChunk int
	// intentSlots, if set, is the intent log's ring size (intentSlots otherwise); tests make
	// it small to fill it.
	intentSlots int
}

// Defaults.
const (
	DefaultSegmentSize        = 256 << 20
	DefaultWriteBufferSize    = 16 << 20
	DefaultMaxInflightBatches = 4
	DefaultFlushInterval      = 100 * time.Millisecond
	DefaultExpectedBlobs      = 1 << 20
	DefaultBloomBitsPerKey    = 12
	DefaultBloomMaxFPR        = 0.03
	DefaultReinsertShare      = 0.8
	maxSegmentSize            = segment.MaxSize
	minDerivedSegmentSize     = 4 << 20 // the smallest segment a MaxSize alone picks
	derivedSegmentsPerCache   = 32      // a MaxSize alone picks segments of this share of it
)

// withDefaults returns a copy with every zero field set to its default. Defaults that depend on
// another option follow the value it was given: the segment size from MaxSize (a cache of at
// least 32 segments, so that evicting one frees at most a thirty-second of it and the data held
// averages 98% of MaxSize or more), the write buffer
// from the segment size (at most a quarter of it). Only what the caller set can contradict
// itself (Validate).
func (o Options) withDefaults() Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
		if o.MaxSize > 0 && !o.PerBlobFiles {
			o.SegmentSize = min(DefaultSegmentSize, max(o.MaxSize/derivedSegmentsPerCache, minDerivedSegmentSize)&^(1<<20-1))
		}
	}
	if o.WriteBufferSize == 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
		if !o.PerBlobFiles {
			most := o.SegmentSize - segment.HeaderSize - (1 << 20) // within what Validate allows (MinSegmentSize)
			o.WriteBufferSize = max(min(DefaultWriteBufferSize, o.SegmentSize/4, most)&^(64<<10-1), 64<<10)
		}
	}
	if o.MaxInflightBatches == 0 {
		o.MaxInflightBatches = DefaultMaxInflightBatches
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.ExpectedBlobs == 0 {
		o.ExpectedBlobs = DefaultExpectedBlobs
	}
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	if o.BloomMaxFPR == 0 {
		o.BloomMaxFPR = DefaultBloomMaxFPR
	}
	if o.ReinsertShare == 0 {
		o.ReinsertShare = DefaultReinsertShare
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.versionLease == 0 {
		o.versionLease = defaultVersionLease
	}
	if o.fs == nil {
		o.fs = vfs.Default
	}
	return o
}

// Validate reports whether the options (after defaults are applied) are usable. The error wraps
// ErrInvalidOptions and names the field.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.WriteBufferSize < 64<<10:
		return bad("WriteBufferSize %d is below 64 KiB", o.WriteBufferSize)
	case o.SegmentSize < 0 || o.SegmentSize > maxSegmentSize:
		return bad("SegmentSize %d is outside (0, 4 GiB)", o.SegmentSize)
	case o.SegmentSize < MinSegmentSize(o.WriteBufferSize):
		return bad("SegmentSize %d must be at least %d: a segment header, one WriteBufferSize (%d) of records and their footer", o.SegmentSize, MinSegmentSize(o.WriteBufferSize), o.WriteBufferSize)
	case o.MaxSize < 0 && o.MaxSize != MaxSizeAuto:
		return bad("MaxSize %d is negative (and not MaxSizeAuto)", o.MaxSize)
	case o.MaxSize > 0 && o.MaxSize < 2*o.SegmentSize && !o.PerBlobFiles:
		return bad("MaxSize %d must be 0 (unlimited) or at least 2*SegmentSize (%d)", o.MaxSize, 2*o.SegmentSize)
	case o.DirectIOReads && o.PerBlobFiles:
		return bad("DirectIOReads reads segments; PerBlobFiles has none")
	case o.DirectIOReads && o.BufferedReads:
		return bad("DirectIOReads and BufferedReads contradict each other: set one (or neither, to choose per read)")
	case o.DirectWrites && o.BufferedWrites:
		return bad("DirectWrites and BufferedWrites contradict each other: set one (or neither, to choose per batch)")
	case o.MaxInflightBatches < 1 || o.MaxInflightBatches > 64:
		return bad("MaxInflightBatches %d is outside [1, 64]", o.MaxInflightBatches)
	case o.FlushInterval < 0:
		return bad("FlushInterval %v is negative", o.FlushInterval)
	case o.ExpectedBlobs < 0:
		return bad("ExpectedBlobs %d is negative", o.ExpectedBlobs)
	case o.BloomBitsPerKey < 1 || o.BloomBitsPerKey > 64:
		return bad("BloomBitsPerKey %d is outside [1, 64]", o.BloomBitsPerKey)
	case o.BloomMaxFPR <= 0 || o.BloomMaxFPR >= 1:
		return bad("BloomMaxFPR %v is outside (0, 1)", o.BloomMaxFPR)
	case o.Index != IndexHashTable && o.Index != IndexSkipList:
		return bad("unknown Index %d", o.Index)
	case o.Policy != PolicyReinsert && o.Policy != PolicyFIFO && o.Policy != PolicyProbation:
		return bad("unknown Policy %d", o.Policy)
	case o.ReinsertShare <= 0 || o.ReinsertShare >= 1:
		return bad("ReinsertShare %v is outside (0, 1)", o.ReinsertShare)
	case o.MemorySize < 0:
		return bad("MemorySize %d is negative", o.MemorySize)
	case o.MemoryAdmission > MemoryOnWrite:
		return bad("unknown MemoryAdmission %d", o.MemoryAdmission)
	case o.WriteBudget < 0:
		return bad("WriteBudget %d is negative", o.WriteBudget)
	case o.Compression > CompressionS2:
		return bad("unknown Compression %d", o.Compression)
	}
	return nil
}

// directWrites reports whether segments are written with O_DIRECT, and so their batches
// aligned for it: every batch, or those that do not go through the page cache (writeback.go).
func (o *Options) directWrites() bool { return !o.BufferedWrites }

// Option sets a field of Options. Every With* function takes the field's value, booleans
// included (WithFsync(true)), so that a flag's value can be passed as it is.
type Option func(*Options)

// WithOptions replaces all options with o (fields left zero take their defaults).
func WithOptions(o Options) Option {
	return func(p *Options) { fs, lease := p.fs, p.versionLease; *p = o; p.fs, p.versionLease = fs, lease }
}

// WithMaxSize sets Options.MaxSize.
func WithMaxSize(n int64) Option { return func(o *Options) { o.MaxSize = n } }

// MinSegmentSize is the smallest SegmentSize Validate accepts with a write buffer of
// writeBufferSize bytes: room for the segment header, one full batch with its direct-I/O
// padding, the footer entries of the most records a batch can hold (records of a one-byte key
// and no value) and the trailer. Values larger than what such a segment holds beyond that are
// refused with ErrValueTooLarge.
func MinSegmentSize(writeBufferSize int64) int64 {
	records := writeBufferSize/(record.HeaderSize+1) + 1
	n := segment.HeaderSize + writeBufferSize + vfs.DirectIOAlignment + record.HeaderSize +
		records*segment.EntrySize + segment.TrailerSize
	return alignUp(n, vfs.DirectIOAlignment)
}

// WithSegmentSize sets Options.SegmentSize.
func WithSegmentSize(n int64) Option { return func(o *Options) { o.SegmentSize = n } }

// WithPerBlobFiles sets Options.PerBlobFiles.
func WithPerBlobFiles(v bool) Option { return func(o *Options) { o.PerBlobFiles = v } }

// WithChecksum sets Options.Checksum.
func WithChecksum(v bool) Option { return func(o *Options) { o.Checksum = v } }

// WithChecksumHash sets Options.ChecksumHash and turns Options.Checksum on.
func WithChecksumHash(h func() hash.Hash32) Option {
	return func(o *Options) { o.ChecksumHash = h; o.Checksum = true }
}

// WithVerifyOnRead sets Options.VerifyOnRead.
func WithVerifyOnRead(v bool) Option { return func(o *Options) { o.VerifyOnRead = v } }

// WithFsync sets Options.Fsync.
func WithFsync(v bool) Option { return func(o *Options) { o.Fsync = v } }

// WithDirectWrites sets Options.DirectWrites.
func WithDirectWrites(v bool) Option { return func(o *Options) { o.DirectWrites = v } }

// WithBufferedWrites sets Options.BufferedWrites.
func WithBufferedWrites(v bool) Option { return func(o *Options) { o.BufferedWrites = v } }

// WithDirectIOReads sets Options.DirectIOReads.
func WithDirectIOReads(v bool) Option { return func(o *Options) { o.DirectIOReads = v } }

// WithBufferedReads sets Options.BufferedReads.
func WithBufferedReads(v bool) Option { return func(o *Options) { o.BufferedReads = v } }

// WithIndex sets Options.Index.
func WithIndex(k IndexKind) Option { return func(o *Options) { o.Index = k } }

// WithWriteBufferSize sets Options.WriteBufferSize.
func WithWriteBufferSize(n int64) Option { return func(o *Options) { o.WriteBufferSize = n } }

// WithMaxInflightBatches sets Options.MaxInflightBatches.
func WithMaxInflightBatches(n int) Option { return func(o *Options) { o.MaxInflightBatches = n } }

// WithFlushInterval sets Options.FlushInterval.
func WithFlushInterval(d time.Duration) Option { return func(o *Options) { o.FlushInterval = d } }

// WithExpectedBlobs sets Options.ExpectedBlobs.
func WithExpectedBlobs(n int64) Option { return func(o *Options) { o.ExpectedBlobs = n } }

// WithReadOnly sets Options.ReadOnly.
func WithReadOnly(v bool) Option { return func(o *Options) { o.ReadOnly = v } }

// WithPolicy sets Options.Policy.
func WithPolicy(p Policy) Option { return func(o *Options) { o.Policy = p } }

// WithReinsertShare sets Options.ReinsertShare.
func WithReinsertShare(share float64) Option { return func(o *Options) { o.ReinsertShare = share } }

// WithAdmission sets Options.Admission.
func WithAdmission(a Admission) Option { return func(o *Options) { o.Admission = a } }

// WithMemorySize sets Options.MemorySize, the memory tier's capacity in bytes (0: none).
func WithMemorySize(n int64) Option { return func(o *Options) { o.MemorySize = n } }

// WithMemoryAdmission sets Options.MemoryAdmission.
func WithMemoryAdmission(a MemoryAdmission) Option { return func(o *Options) { o.MemoryAdmission = a } }

// MemoryAdmission is which values enter the memory tier (Options.MemoryAdmission).
type MemoryAdmission uint8

const (
	// MemoryOnSecondHit: a value enters on its second hit from the segments, read whole and
	// checked against its CRC-32C as it enters, while entering pays (values that enter must be
	// hit from memory about as often as they enter; otherwise one in eight still does).
	MemoryOnSecondHit MemoryAdmission = iota
	// MemoryOnWrite: a value also enters as its record is committed to a segment, copied as it
	// is written (no read, and no check: the bytes are the ones just written), as memcached
	// keeps what it is given; the tier's eviction then decides what stays. PutFrom then reads a
	// value a write buffer holds whole rather than stream it, so that it enters too. Values
	// larger than a write buffer, streamed straight to their segment, and blobs of
	// PerBlobFiles still enter on their second hit.
	MemoryOnWrite
)

// ParseMemoryAdmission is the MemoryAdmission whose String is s.
func ParseMemoryAdmission(s string) (MemoryAdmission, error) {
	for _, a := range []MemoryAdmission{MemoryOnSecondHit, MemoryOnWrite} {
		if s == a.String() {
			return a, nil
		}
	}
	return 0, fmt.Errorf("blobcache: unknown memory admission %q (second-hit or write)", s)
}

func (a MemoryAdmission) String() string {
	switch a {
	case MemoryOnSecondHit:
		return "second-hit"
	case MemoryOnWrite:
		return "write"
	}
	return fmt.Sprintf("MemoryAdmission(%d)", uint8(a))
}

// WithWriteBudget sets Options.WriteBudget, in bytes per second.
func WithWriteBudget(bytesPerSecond int64) Option {
	return func(o *Options) { o.WriteBudget = bytesPerSecond }
}

// WithCompression sets Options.Compression.
func WithCompression(c Compression) Option { return func(o *Options) { o.Compression = c } }

// WithClock sets Options.Clock.
func WithClock(now func() time.Time) Option { return func(o *Options) { o.Clock = now } }

// withFS replaces the file system (tests inject faults through it).
func withFS(fs vfs.FS) Option { return func(o *Options) { o.fs = fs } }

// withPutChunk sets PutFrom's chunk size and streaming threshold (tests stream small values
// through many chunks with it). n must be a positive multiple of 4 KiB.
func withPutChunk(n int) Option { return func(o *Options) { o.putChunk = n } }
