package blobcache

import (
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/internal/bufmem"
)

// Stats is a snapshot of the cache's counters and sizes.
type Stats struct {
	Blobs int64 // blobs the cache holds: in the index, with the write buffer's news counted
	// (a Put of a key the index lacks adds one, a Delete of a key it holds takes one away)
	Segments  int   // live segment files
	DiskBytes int64 // disk space of the segments (allocated bytes; holes excluded)
	// DataBytes is DiskBytes without the part of the active segments not written yet (it is
	// preallocated, and cut off when the segment is sealed): what the cache holds. Eviction
	// keeps it within MaxSize; once the cache is full it stays above MaxSize less a segment
	// (less holes punched into dead records) and averages about MaxSize less half a segment.
	DataBytes    int64
	PendingBytes int64 // bytes of records in the write buffer, not yet in a segment
	// MaxSize is the bound on DataBytes in force (Options.MaxSize, or the bound recorded in the
	// directory for MaxSizeAuto), 0 for none; WriteBudget is Options.WriteBudget, in bytes per
	// second, 0 for none.
	MaxSize     int64
	WriteBudget int64
	BufferBytes int64 // memory the write buffers hold (let go after a while with nothing to write)
	// ReadBufferBytes is the memory of the read path's pooled buffers (Get's record buffers,
	// ReadAt's scratch, the bounce buffers of direct reads, and those GetBuffer hands out of
	// the same pools), from when each is made until the garbage collector frees it: pools keep
	// buffers across reads and drop them when idle for two collections. The pools are shared
	// by all caches of the process, and so is the figure.
	ReadBufferBytes int64

	Hits                uint64
	Misses              uint64
	BloomRejects        uint64 // misses answered by the bloom filter alone
	BloomFalsePositives uint64 // misses the filter let through to the index
	Puts                uint64
	Deletes             uint64
	PutWaits            uint64 // times a Put waited for a write buffer (backpressure)
	RoomWaits           uint64 // times a write waited for the oldest segment's seal to evict it under MaxSize
	StreamsOutrun       uint64 // PutFrom calls that failed with ErrOutrun
	BufferReleases      uint64 // times the writer, idle, let go of its write buffers
	Expired             uint64 // reads that found the key's blob expired (each a miss)
	Invalidated         uint64 // reads that found the key's blob invalidated by InvalidateAll (each a miss)
	Invalidations       uint64 // InvalidateAll calls
	PreconditionFailed  uint64 // conditional writes refused (ErrExists, ErrNotFound)
	Declined            uint64 // Puts not written, by Options.Admission or Options.WriteBudget (each returned nil)

	// Compression (Options.Compression): Puts whose value was stored compressed, with the
	// bytes given and the bytes stored; and Puts whose value was stored as given because it did
	// not shrink (values shorter than 1 KiB are not tried, and not counted).
	CompressedPuts     uint64
	CompressedBytesIn  uint64
	CompressedBytesOut uint64
	StoredAsGiven      uint64

	// Reinsertion (PolicyReinsert, and PolicyProbation's main region): records of the oldest
	// segment hit since they were written, written again before it was evicted, and their
	// bytes; and those that were not, because the budget (ReinsertShare, WriteBudget) was spent
	// or the policy passed them over (too large for their hits, or a share of those hit once;
	// see reinsert.go). Promotions are counted here too.
	Reinserted      uint64
	ReinsertedBytes uint64
	ReinsertDropped uint64

	// PolicyProbation with two regions (region.go): records hit in probation and copied into
	// main when their segment went (also counted in Reinserted); Puts sent straight to main
	// because the ghost set remembered their key; and the disk space of the probation region
	// (included in DiskBytes).
	Promoted       uint64
	GhostAdmits    uint64
	ProbationBytes int64

	// The routes of hits of 256 KiB or more read from segment files, when each picks its own
	// (see Options.BufferedReads): from the page cache, which held the bytes whole; through it,
	// filling it (a record hit before); and from the device with O_DIRECT.
	ReadsPageCache uint64
	ReadsFilled    uint64
	ReadsDirect    uint64
	// WrittenBackBytes are batch bytes written through the page cache for the kernel to write
	// back (Options.DirectWrites says when), not with O_DIRECT.
	WrittenBackBytes uint64
	// WriteBackCost is the CPU time a MiB of batch written through the page cache has cost
	// lately, averaged, when batches pick their route: past a ceiling they go direct
	// (writecost.go). Zero until measured.
	WriteBackCost time.Duration
	// SentBytes are value bytes the kernel sent from segment files to sockets without a copy
	// through user space (Open, Reader.WriteTo).
	SentBytes uint64

	// The memory tier (Options.MemorySize; zero without one): its capacity, the memory its values
	// take (keys, values, attributes and a fixed cost each; the pages a value's buffer has had
	// written, for a buffer of its own), the values it holds; the reads it
	// served (each also a hit), the lookups it did not hold (read from the segments), the values
	// that entered and that it evicted, and those it declined (a first hit, or too large).
	MemoryCapacity  int64
	MemoryBytes     int64
	MemoryItems     int64
	MemoryHits      uint64
	MemoryMisses    uint64
	MemoryInserts   uint64
	MemoryEvictions uint64
	MemoryDeclined  uint64

	Flushes      uint64        // batches written
	FlushedBytes uint64        // bytes of batches written
	FlushTime    time.Duration // total time flush workers spent writing
	FlushErrors  uint64
	ReadErrors   uint64
	Evictions    uint64 // segments evicted
	EvictedBytes uint64
	PunchedBytes uint64 // space returned by punching out overwritten and deleted records
	// EvictedBlobs are the blobs evictions took: records the index still pointed to when their
	// segment went (a record written again first, by reinsertion or a Put, is not one).
	// EvictedUnfetched are those of them no read had hit since they were written, and
	// ExpiredUnfetched the reads that found a blob expired that no read had hit before; both
	// count only while the cache counts hits (HitsCounted), and a hit is counted on a record in a
	// segment (one served from the write buffer is not). PunchedRecords are the overwritten,
	// deleted and expired records whose blocks were punched out before their segment's eviction
	// (a record within one block has none).
	EvictedBlobs     uint64
	EvictedUnfetched uint64
	ExpiredUnfetched uint64
	PunchedRecords   uint64
	// HitsCounted says whether the cache counts each record's hits (every policy but PolicyFIFO,
	// the read route, or a memory tier need them): without, EvictedUnfetched and
	// ExpiredUnfetched stay 0.
	HitsCounted   bool
	CorruptRecord uint64 // records that failed a check on read or recovery
	TornTails     uint64 // segments whose unfinished tail was cut back on open
	Orphans       uint64 // files of the cache's own that nothing used any more, removed
	// StrayFiles is the number of files in the cache's directories that the cache did not
	// write, left where they are (counted at open and by each hourly sweep of Start; see
	// docs/DESIGN.md, "Files").
	StrayFiles int64

	IndexBytes     int64   // memory of the index
	BloomBytes     int64   // memory of the bloom filter
	BloomFill      float64 // fraction of filter bits set
	BloomFPR       float64 // estimated false-positive rate of the filter
	BloomRebuilds  uint64
	LastCorruption string // the last corruption seen, with file and offset
	// DirectIOOff says why direct writes and direct reads were turned off when the cache
	// opened (the file system refused O_DIRECT; the cache then reads and writes through the
	// page cache), or is empty.
	DirectIOOff string
}

// counterStripe holds hot per-operation counters; Get picks a stripe from the key hash, so
// concurrent readers mostly touch different cache lines.
type counterStripe struct {
	// A miss is counted once, by its kind: the total is the sum of the three.
	hits, misses, bloomRejects, falsePositives atomic.Uint64
	memHits, memMisses                         atomic.Uint64 // the memory tier's lookups
	_                                          [16]byte
}

const numStripes = 8

// countMemory counts a lookup in the memory tier: a hit if hit, else a miss.
func (st *counterStripe) countMemory(hit bool) {
	if hit {
		st.memHits.Add(1)
	} else {
		st.memMisses.Add(1)
	}
}

type counters struct {
	stripes [numStripes]counterStripe

	puts, deletes, putWaits               atomic.Uint64
	roomWaits, streamsOutrun              atomic.Uint64
	expired, invalidated                  atomic.Uint64
	invalidations, condFailed             atomic.Uint64
	declined                              atomic.Uint64
	reinserted, reinsertedBytes           atomic.Uint64
	reinsertDropped                       atomic.Uint64
	promoted, ghostAdmits                 atomic.Uint64
	readsPageCache, readsFilled           atomic.Uint64
	readsDirect, sentBytes                atomic.Uint64
	writtenBack                           atomic.Uint64
	flushes, flushedBytes, flushNanos     atomic.Uint64
	flushErrors, readErrors               atomic.Uint64
	evictions, evictedBytes, punchedBytes atomic.Uint64
	evictedBlobs, evictedUnfetched        atomic.Uint64
	expiredUnfetched, punchedRecords      atomic.Uint64
	bufferReleases                        atomic.Uint64
	corrupt, tornTails, orphans, rebuilds atomic.Uint64
	strays                                atomic.Int64
	compressedPuts, storedAsGiven         atomic.Uint64
	compressedIn, compressedOut           atomic.Uint64
}

func (c *counters) stripe(h uint64) *counterStripe { return &c.stripes[h&(numStripes-1)] }

// Stats returns a snapshot of the cache's counters.
func (c *Cache) Stats() Stats {
	s := Stats{
		Blobs:              int64(c.idx.Len()),
		DiskBytes:          c.diskBytes.Load(),
		MaxSize:            c.opts.MaxSize,
		WriteBudget:        c.opts.WriteBudget,
		Puts:               c.stats.puts.Load(),
		Deletes:            c.stats.deletes.Load(),
		PutWaits:           c.stats.putWaits.Load(),
		RoomWaits:          c.stats.roomWaits.Load(),
		StreamsOutrun:      c.stats.streamsOutrun.Load(),
		BufferReleases:     c.stats.bufferReleases.Load(),
		Expired:            c.stats.expired.Load(),
		Invalidated:        c.stats.invalidated.Load(),
		Invalidations:      c.stats.invalidations.Load(),
		PreconditionFailed: c.stats.condFailed.Load(),
		Declined:           c.stats.declined.Load(),
		CompressedPuts:     c.stats.compressedPuts.Load(),
		CompressedBytesIn:  c.stats.compressedIn.Load(),
		CompressedBytesOut: c.stats.compressedOut.Load(),
		StoredAsGiven:      c.stats.storedAsGiven.Load(),
		Reinserted:         c.stats.reinserted.Load(),
		ReinsertedBytes:    c.stats.reinsertedBytes.Load(),
		ReinsertDropped:    c.stats.reinsertDropped.Load(),
		Promoted:           c.stats.promoted.Load(),
		GhostAdmits:        c.stats.ghostAdmits.Load(),
		ProbationBytes:     c.segs.regionBytes(probationRegion),
		ReadsPageCache:     c.stats.readsPageCache.Load(),
		ReadsFilled:        c.stats.readsFilled.Load(),
		WrittenBackBytes:   c.stats.writtenBack.Load(),
		WriteBackCost:      c.segs.costs.perMiB(),
		ReadsDirect:        c.stats.readsDirect.Load(),
		SentBytes:          c.stats.sentBytes.Load(),
		Flushes:            c.stats.flushes.Load(),
		FlushedBytes:       c.stats.flushedBytes.Load(),
		FlushTime:          time.Duration(c.stats.flushNanos.Load()),
		FlushErrors:        c.stats.flushErrors.Load(),
		ReadErrors:         c.stats.readErrors.Load(),
		Evictions:          c.stats.evictions.Load(),
		EvictedBytes:       c.stats.evictedBytes.Load(),
		PunchedBytes:       c.stats.punchedBytes.Load(),
		EvictedBlobs:       c.stats.evictedBlobs.Load(),
		EvictedUnfetched:   c.stats.evictedUnfetched.Load(),
		ExpiredUnfetched:   c.stats.expiredUnfetched.Load(),
		PunchedRecords:     c.stats.punchedRecords.Load(),
		HitsCounted:        c.countsAccess(),
		CorruptRecord:      c.stats.corrupt.Load(),
		TornTails:          c.stats.tornTails.Load(),
		Orphans:            c.stats.orphans.Load(),
		StrayFiles:         c.stats.strays.Load(),
		IndexBytes:         c.idx.MemoryBytes(),
		ReadBufferBytes:    bufmem.Bytes(),
		BloomRebuilds:      c.stats.rebuilds.Load(),
	}
	for i := range c.stats.stripes {
		st := &c.stats.stripes[i]
		s.Hits += st.hits.Load()
		s.Misses += st.misses.Load() + st.bloomRejects.Load() + st.falsePositives.Load()
		s.BloomRejects += st.bloomRejects.Load()
		s.BloomFalsePositives += st.falsePositives.Load()
		s.MemoryHits += st.memHits.Load()
		s.MemoryMisses += st.memMisses.Load()
	}
	if c.mem != nil {
		m := c.mem.Stats()
		s.MemoryCapacity, s.MemoryBytes, s.MemoryItems = m.Capacity, m.Bytes, m.Items
		s.MemoryInserts = m.Inserts
		s.MemoryEvictions, s.MemoryDeclined = m.Evictions, m.Declined
	}
	s.Segments = len(c.segs.all())
	s.DataBytes = c.dataBytes()
	if c.w != nil {
		s.PendingBytes = c.unflushed.bytes()
		s.Blobs += c.w.pendingBlobs()
		s.BufferBytes = c.w.bufferBytes()
	}
	f := c.bloom.Load()
	s.BloomBytes = f.Bytes()
	s.BloomFill = f.FillRatio()
	s.BloomFPR = f.EstimatedFPR()
	s.DirectIOOff = c.directOff
	if e := c.lastCorruption.Load(); e != nil {
		s.LastCorruption = *e
	}
	return s
}
