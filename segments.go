package blobcache

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// segHandle is one live segment file and the open descriptor readers pread from.
//
// refs counts the owner (the segment table, one reference while the segment is live) plus one
// per reader in progress. The descriptor is closed when refs reaches zero, which happens only
// after the segment was evicted (and its file removed), so an evicted segment's space is freed
// as soon as its last reader is done.
type segHandle struct {
	id uint32
	// region is the log the segment belongs to (region.go); mainRegion for every segment
	// unless PolicyProbation, and for every segment recovered on open.
	region region
	// open says new records are still placed in it: it is its region's active segment.
	open atomic.Bool
	// tail is the unwritten preallocated end of a segment whose seal is queued: counted in disk
	// (and segmentLayout.sealingTails) until the seal cuts it off.
	tail atomic.Int64
	f    vfs.File
	// rd is what reads go through unless a hit picks its route (see Cache.hitFile): f, or with
	// DirectIOReads direct. direct is an O_DIRECT reader of the same file, closed with f; nil
	// with BufferedReads.
	rd     blobFile
	direct *vfs.DirectReader
	refs   atomic.Int64

	// active is the writer of an unsealed segment; nil once sealed or for segments recovered on
	// open. Only the commit goroutine seals.
	active  *segment.Active
	sealed  atomic.Bool
	sealing atomic.Bool // the seal has started (sealed follows)
	// disk is the space this segment counts toward Stats.DiskBytes.
	disk atomic.Int64

	// logSpace is the disk space counted in disk for the entry log of an active segment (where
	// its footer entries wait for the seal; segment.LogSpace). Guarded by writer.mu.
	logSpace int64
	dataEnd  int64
	// gapAt is where the first batch of the segment that failed to write starts (0: none; no
	// batch starts at 0). No record behind it is committed (writer.commit). The commit
	// goroutine owns it.
	gapAt int64

	// streams counts the PutFrom records being written into this segment; while there are any,
	// its seal waits (sealDeferred, with the data end sealBase). Guarded by writer.mu.
	streams      int
	sealDeferred bool
	sealBase     int64

	// synced says every record of the segment is on stable storage (its seal synced it). A
	// range freed by one of its records is punched out only then: punched earlier, a power loss
	// could keep the punch and lose the newer record, and the older one would be read back
	// with its blocks zeroed.
	synced atomic.Bool
	// unsynced is how many bytes of the segment written through the page cache (writeback.go)
	// the kernel had not written back when last counted, until its seal syncs them; hurry,
	// closed once (hurryOnce), tells the seal to stop waiting for the kernel to write them back
	// (nil for a segment recovered on open).
	unsynced  atomic.Int64
	hurry     chan struct{}
	hurryOnce sync.Once
	// seesWriteBack says the kernel can tell what of the segment it has written back
	// (cachestat(2)): only then are its batches written back (writeback.go).
	seesWriteBack bool

	mu struct {
		sync.Mutex
		// punches are ranges freed by overwrites and deletes, punched out once no reader that
		// started before the free can still be reading them (refs drops to the owner's alone)
		// and the record that freed them is on disk.
		punches []freedRange
	}
}

// freedRange is a range of a segment freed by a newer record (or tombstone) of its key, which is
// in segment by.
type freedRange struct {
	off, n int64
	by     uint32
}

// openReads sets what s's blob reads go through: s.f, and unless BufferedReads an O_DIRECT
// descriptor of the same file.
func (c *Cache) openReads(s *segHandle) error {
	s.rd = s.f
	// Hits land anywhere: readahead would only bring in pages no hit asked for (an advice; a
	// file or platform that cannot take it reads as before).
	_ = vfs.AdviseRandomReads(s.f)
	if c.opts.BufferedReads {
		return nil
	}
	d, err := c.opts.fs.OpenDirect(s.f.Name(), os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("blobcache: open %s for direct reads: %w", s.f.Name(), err)
	}
	s.direct = vfs.NewDirectReader(d)
	if c.opts.DirectIOReads {
		s.rd = s.direct
	}
	return nil
}

// tryRef takes a reader reference; false if the segment is being closed.
func (s *segHandle) tryRef() bool {
	for {
		r := s.refs.Load()
		if r <= 0 {
			return false
		}
		if s.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// blobFile is the part of a file that blob reads use.
type blobFile interface {
	io.ReaderAt
	ReadvAt(bufs [][]byte, off int64) (int, error)
}

// unref drops a reference, closing the descriptors after the last one.
func (s *segHandle) unref() {
	if s.refs.Add(-1) == 0 {
		if s.direct != nil {
			_ = s.direct.Close()
		}
		if s.active != nil {
			_ = s.active.Close()
		} else {
			_ = s.f.Close()
		}
	}
}

// segTable is an immutable snapshot of the live segments: list[i] has id first+i (nil where a
// segment is missing). Segment ids only grow and eviction removes the oldest, so live ids are a
// dense range and lookup is an index.
type segTable struct {
	first uint32
	list  []*segHandle
}

func (t *segTable) get(id uint32) *segHandle {
	i := int64(id) - int64(t.first)
	if i < 0 || i >= int64(len(t.list)) {
		return nil
	}
	return t.list[i]
}

// segments is the set of live segments. Readers load the snapshot without locking; changes are
// serialized by mu and publish a new snapshot.
type segments struct {
	mu    sync.Mutex
	table atomic.Pointer[segTable]
}

// acquire returns segment id with a reader reference, or nil if it is not live.
func (ss *segments) acquire(id uint32) *segHandle {
	s := ss.table.Load().get(id)
	if s == nil || !s.tryRef() {
		return nil
	}
	return s
}

// add publishes a new segment with the next id. The caller holds ss.mu.
func (ss *segments) add(s *segHandle) {
	t := ss.table.Load()
	nt := &segTable{first: t.first, list: make([]*segHandle, 0, len(t.list)+1)}
	if len(t.list) == 0 {
		nt.first = s.id
	}
	nt.list = append(nt.list, t.list...)
	for uint32(len(nt.list))+nt.first < s.id {
		nt.list = append(nt.list, nil)
	}
	nt.list = append(nt.list, s)
	ss.table.Store(nt)
}

// remove unpublishes segment s. The caller holds ss.mu.
func (ss *segments) remove(s *segHandle) {
	t := ss.table.Load()
	nt := &segTable{first: t.first, list: append([]*segHandle(nil), t.list...)}
	if i := int64(s.id) - int64(t.first); i >= 0 && i < int64(len(nt.list)) {
		nt.list[i] = nil
	}
	for len(nt.list) > 0 && nt.list[0] == nil {
		nt.list = nt.list[1:]
		nt.first++
	}
	ss.table.Store(nt)
}

// all returns the live segments, oldest first.
func (ss *segments) all() []*segHandle {
	t := ss.table.Load()
	out := make([]*segHandle, 0, len(t.list))
	for _, s := range t.list {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}
