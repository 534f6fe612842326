package blobcache

import (
	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/index"
)

// layout is where records live on disk: in append-only segment files (segmentLayout, the
// default; seglayout.go, space.go, segments.go, recover.go, stream.go) or one file per blob
// (blobFiles, Options.PerBlobFiles; perblob.go). Each holds its own state. The cache, the
// writer and the read path ask it what differs; none of them branches on the mode.
type layout interface {
	// recover rebuilds the index from the files when the cache opens.
	recover() (bloom.Stamp, error)
	// evict removes the oldest data until the disk holds at most limit bytes (at open).
	evict(limit int64) error
	// maxValueSize is the largest value a key of keyLen bytes may have.
	maxValueSize(keyLen int) int64
	// streams reports whether a value too large for a write buffer (or for PutFrom's chunk) is
	// written straight to disk as it is read (stream.go) rather than read whole first.
	streams() bool

	// room is called by cut, with writer.mu held, before it takes the open batch (n bytes once
	// sealed, entries records): false if it waited (releasing writer.mu), and cut must look
	// again.
	room(r region, n int64, entries int) (bool, error)
	// place gives the sealed batch b (bufs, n bytes) its place on disk and returns its flush
	// job. A batch that cannot be placed still gets a job, failed (its err set, and returned):
	// it goes through the pipeline so that forgetting its keys happens after the batches
	// before it are committed. writer.mu is held.
	place(r region, b *batch.Batch, bufs [][]byte, n int64) (*flushJob, error)
	// write writes a placed batch; a flush worker calls it.
	write(j *flushJob) error
	// commit applies a written batch to the index (and the footer to be); the commit goroutine
	// calls it, in order.
	commit(j *flushJob)
	// lose applies a batch that failed: every key it touched is forgotten in the index. It
	// returns the keys whose forgetting still needs a tombstone to last a restart.
	lose(j *flushJob) [][]byte

	// acquire returns the file holding the record at loc, with a reader reference, and the
	// record's offset in it; nil if the file is gone.
	acquire(h uint64, loc index.Loc) (*segHandle, int64)
	// checksValues reports whether a read of a whole value checks its CRC even without
	// VerifyOnRead (blob files are not scanned on open, so a torn one is found only so).
	checksValues() bool
	// forgetAtOpen forgets key's record at loc (hash h) while the cache opens: in the index at
	// once, and for good (unless the cache is read-only), so that it does not come back at
	// the next open either.
	forgetAtOpen(h uint64, loc index.Loc, key []byte)
}
