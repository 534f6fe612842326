package blobcache

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// One file per blob (Options.PerBlobFiles), the original design's strategy, kept for callers that
// want the file system to manage space blob by blob. Each blob is a file holding one record
// (the same header, key and value as in a segment) at
//
//	<dir>/blobs/<hh>/<hash>-<seq>.blob
//
// where hash is the key's 64-bit hash in hex (never the raw key), hh its top byte, and seq a
// number that grows with every record written, so that names never repeat and FIFO order is seq
// order. The index keeps seq in place of the segment location: Loc{Segment: seq>>32, Offset:
// uint32(seq), Length}. Files are written by the flush workers under their final name with
// O_EXCL (a new seq cannot clash), and made visible by the in-order commit, which also removes
// the file of an overwritten or deleted blob. Opening lists the directories and reads no blob:
// a torn file (a crash without Fsync) is caught when read, because reads of blob files always
// check the value's CRC. Costs: an open and a close per read, a file per blob.

func seqLoc(seq uint64, length uint32) index.Loc {
	return index.Loc{Segment: uint32(seq >> 32), Offset: uint32(seq), Length: length}
}

func locSeq(loc index.Loc) uint64 { return uint64(loc.Segment)<<32 | uint64(loc.Offset) }

func (l *blobFiles) path(h, seq uint64) string {
	return filepath.Join(l.c.dir, blobDir, fmt.Sprintf("%02x", h>>56), fmt.Sprintf("%016x-%016x.blob", h, seq))
}

// parseBlobName parses "<hash>-<seq>.blob".
func parseBlobName(name string) (h, seq uint64, ok bool) {
	base, found := strings.CutSuffix(name, ".blob")
	hs, ss, found2 := strings.Cut(base, "-")
	if !found || !found2 || len(hs) != 16 || len(ss) != 16 {
		return 0, 0, false
	}
	h, err1 := strconv.ParseUint(hs, 16, 64)
	seq, err2 := strconv.ParseUint(ss, 16, 64)
	return h, seq, err1 == nil && err2 == nil && h != 0
}

// blobSize is the disk space a blob file of n bytes takes, in whole blocks.
func blobSize(n uint32) int64 { return alignUp(int64(n), vfs.DirectIOAlignment) }

// blobFiles keeps each blob in a file of its own: the layout of Options.PerBlobFiles.
type blobFiles struct {
	c   *Cache
	seq atomic.Uint64 // the last seq used

	// fifo is the blob files in write order, from fifoHead on, for eviction under MaxSize.
	// The commit goroutine owns them (and New, before it starts).
	fifo     []fifoEntry
	fifoHead int
}

func (l *blobFiles) recover() (bloom.Stamp, error) { return l.recoverFiles() }
func (l *blobFiles) evict(limit int64) error       { return l.evictTo(limit) }
func (l *blobFiles) streams() bool                 { return false }
func (l *blobFiles) checksValues() bool            { return true }

// maxValueSize: a record must fit in one write buffer.
func (l *blobFiles) maxValueSize(keyLen int) int64 {
	return min(l.c.opts.WriteBufferSize-record.HeaderSize-int64(keyLen), 1<<31)
}

// room: blob files are evicted as they are committed (commitBlobs), not before.
func (l *blobFiles) room(region, int64, int) (bool, error) { return true, nil }

// place numbers the batch's records: each gets the next seq, its file's name.
func (l *blobFiles) place(_ region, b *batch.Batch, _ [][]byte, n int64) (*flushJob, error) {
	count := uint64(b.Len())
	return &flushJob{b: b, length: n, seqBase: l.seq.Add(count) - count + 1}, nil
}

func (l *blobFiles) write(j *flushJob) error { return l.writeFiles(j) }

func (l *blobFiles) commit(j *flushJob) {
	l.commitFiles(j)
	l.c.stats.flushedBytes.Add(uint64(j.length))
}

// lose forgets the batch's keys and removes their older files, which makes the forgetting
// durable (no tombstones needed), and whatever files of the batch were written.
func (l *blobFiles) lose(j *flushJob) [][]byte {
	for _, e := range j.b.Entries() {
		if old, ok := l.c.idx.Delete(e.Hash); ok {
			// The batch's failure is reported; a file left behind is one more reason the
			// forgetting may not last a restart, which finding 10 allows.
			_ = l.removeBlob(e.Hash, old)
		}
	}
	l.forgetFiles(j)
	return nil
}

// forgetAtOpen removes the record's file: blob files need no tombstone.
func (l *blobFiles) forgetAtOpen(h uint64, loc index.Loc, _ []byte) {
	l.c.idx.Delete(h)
	if !l.c.opts.ReadOnly {
		_ = l.removeBlob(h, loc) // one left behind comes back at the next open, as finding 10 allows
	}
}

func (l *blobFiles) acquire(h uint64, loc index.Loc) (*segHandle, int64) {
	return l.openFile(h, loc), 0
}

// openBlobFile opens the file of the blob at loc as a one-reader handle, or nil if it is gone.
func (l *blobFiles) openFile(h uint64, loc index.Loc) *segHandle {
	c := l.c
	f, err := c.opts.fs.OpenFile(l.path(h, locSeq(loc)), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	s := &segHandle{f: f, rd: f}
	s.refs.Store(1)
	return s
}

// writeBlobFiles writes each put of the batch to its own file. It runs on a flush worker.
func (l *blobFiles) writeFiles(j *flushJob) error {
	c := l.c
	fs := c.opts.fs
	dirs := map[string]struct{}{}
	for i, e := range j.b.Entries() {
		if e.Kind != record.KindPut {
			continue
		}
		path := l.path(e.Hash, j.seqBase+uint64(i))
		f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WritevAt(j.b.Record(i), 0)
		if err == nil && c.opts.Fsync {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		dirs[filepath.Dir(path)] = struct{}{}
	}
	if c.opts.Fsync {
		for d := range dirs {
			if err := fs.SyncDir(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// commitBlobs applies a written batch in per-blob mode. It runs on the commit goroutine. A file
// of an overwritten or deleted blob that cannot be removed (or, with Fsync, whose removal cannot
// be made durable) would bring the blob back on the next open: that is reported like a failed
// batch, to the next caller (with Fsync, to the Delete itself, which drains).
func (l *blobFiles) commitFiles(j *flushJob) {
	c := l.c
	dirs := map[string]struct{}{}
	var errs []error
	for i, e := range j.b.Entries() {
		var old index.Loc
		var had bool
		switch e.Kind {
		case record.KindPut:
			seq := j.seqBase + uint64(i)
			loc := seqLoc(seq, e.Length)
			old, had = c.idx.Put(e.Hash, loc)
			if c.opts.MaxSize > 0 {
				l.fifo = append(l.fifo, fifoEntry{h: e.Hash, loc: loc})
			}
			c.diskBytes.Add(blobSize(e.Length))
		case record.KindDelete:
			old, had = c.idx.Delete(e.Hash)
		}
		if had {
			dirs[filepath.Dir(l.path(e.Hash, locSeq(old)))] = struct{}{}
			if err := l.removeBlob(e.Hash, old); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.opts.Fsync {
		// A Delete that returned must not come back after a crash.
		for d := range dirs {
			if err := c.opts.fs.SyncDir(d); err != nil {
				errs = append(errs, fmt.Errorf("blobcache: sync %s: %w", d, err))
			}
		}
	}
	c.stats.flushes.Add(1)
	if c.opts.MaxSize > 0 {
		if err := l.evictTo(c.opts.MaxSize); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		c.w.failed(errors.Join(errs...))
	}
}

// forgetBlobFiles removes what a failed batch may have written.
func (l *blobFiles) forgetFiles(j *flushJob) {
	c := l.c
	for i, e := range j.b.Entries() {
		if e.Kind == record.KindPut {
			_ = c.opts.fs.Remove(l.path(e.Hash, j.seqBase+uint64(i)))
		}
	}
}

// removeBlob removes the file of the blob at loc; one already gone is not an error.
func (l *blobFiles) removeBlob(h uint64, loc index.Loc) error {
	c := l.c
	err := c.opts.fs.Remove(l.path(h, locSeq(loc)))
	if err == nil || errors.Is(err, os.ErrNotExist) {
		c.diskBytes.Add(-blobSize(loc.Length))
		return nil
	}
	return fmt.Errorf("blobcache: remove blob file: %w", err)
}

// fifoEntry is a blob file in write order, for eviction.
type fifoEntry struct {
	h   uint64
	loc index.Loc
}

// evictBlobs removes the oldest blob files until the disk space is at most limit. Entries of
// blobs overwritten or deleted since are skipped (their files are gone already). A file that
// cannot be removed stays counted; the error is returned.
func (l *blobFiles) evictTo(limit int64) error {
	c := l.c
	var errs []error
	for c.diskBytes.Load() > limit && l.fifoHead < len(l.fifo) {
		e := l.fifo[l.fifoHead]
		l.fifoHead++
		if cur, ok := c.idx.Get(e.h); ok && cur == e.loc {
			c.idx.Delete(e.h)
			if err := l.removeBlob(e.h, e.loc); err != nil {
				errs = append(errs, err)
				continue
			}
			c.stats.evictions.Add(1)
			c.stats.evictedBytes.Add(uint64(blobSize(e.loc.Length)))
		}
	}
	if l.fifoHead > 1024 && l.fifoHead > len(l.fifo)/2 {
		l.fifo = append(l.fifo[:0:0], l.fifo[l.fifoHead:]...)
		l.fifoHead = 0
	}
	return errors.Join(errs...)
}

// recoverBlobs rebuilds the index from the names of the blob files. Of several files of one
// key (a crash between writing a new one and removing the old), the newest wins.
func (l *blobFiles) recoverFiles() (bloom.Stamp, error) {
	c := l.c
	fs := c.opts.fs
	root := filepath.Join(c.dir, blobDir)
	type file struct {
		h, seq uint64
		size   int64
	}
	var files []file
	c.stats.strays.Store(0)
	c.sweepDir(true)
	for d := range 256 {
		dir := filepath.Join(root, fmt.Sprintf("%02x", d))
		if !c.opts.ReadOnly {
			if err := fs.MkdirAll(dir, 0o755); err != nil {
				return bloom.Stamp{}, fmt.Errorf("blobcache: create %s: %w", dir, err)
			}
		}
		ents, err := fs.ReadDir(dir)
		if err != nil && !(c.opts.ReadOnly && errors.Is(err, iofs.ErrNotExist)) {
			return bloom.Stamp{}, fmt.Errorf("blobcache: read %s: %w", dir, err)
		}
		for _, e := range ents {
			h, seq, ok := parseBlobName(e.Name())
			if !ok || e.IsDir() {
				c.stats.strays.Add(1) // not a name the cache gives: left alone
				continue
			}
			fi, err := e.Info()
			if err != nil || fi.Size() > 1<<32-1 || int(h>>56) != d {
				c.removeOrphan(filepath.Join(dir, e.Name()))
				continue
			}
			files = append(files, file{h, seq, fi.Size()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return cmpSeq(a.seq, b.seq) })
	// Of several files of one key, the newest whole one wins: a crash may leave the newest torn
	// (created, never written); older ones are what a finished overwrite would have removed.
	newest := map[uint64]uint64{}
	dups := map[uint64]bool{}
	for _, f := range files {
		if _, ok := newest[f.h]; ok {
			dups[f.h] = true
		}
		newest[f.h] = max(newest[f.h], f.seq)
	}
	if len(dups) > 0 {
		kept := files[:0]
		byHash := map[uint64][]file{}
		for _, f := range files {
			if dups[f.h] {
				byHash[f.h] = append(byHash[f.h], f)
			} else {
				kept = append(kept, f)
			}
		}
		for h, fs := range byHash {
			winner := -1
			for i := len(fs) - 1; i >= 0; i-- { // newest first (files are sorted by seq)
				if winner < 0 && l.fileWhole(h, fs[i].seq) {
					winner = i
					continue
				}
				c.removeOrphan(l.path(h, fs[i].seq))
			}
			if winner >= 0 {
				kept = append(kept, fs[winner])
			}
		}
		files = kept
		slices.SortFunc(files, func(a, b file) int { return cmpSeq(a.seq, b.seq) })
	}
	var maxSeq uint64
	for _, f := range files {
		loc := seqLoc(f.seq, uint32(f.size))
		c.idx.Put(f.h, loc)
		if c.opts.MaxSize > 0 {
			l.fifo = append(l.fifo, fifoEntry{h: f.h, loc: loc})
		}
		c.diskBytes.Add(blobSize(uint32(f.size)))
		maxSeq = max(maxSeq, f.seq)
	}
	l.seq.Store(maxSeq)
	return bloom.Stamp{bloomFormat, uint64(c.idx.Len()), maxSeq, 1}, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// fileWhole reports whether the blob file of h and seq holds one whole record of a key with
// hash h (header, key and value checksums all check).
func (l *blobFiles) fileWhole(h, seq uint64) bool {
	b, err := cachedir.ReadFile(l.c.opts.fs, l.path(h, seq))
	if err != nil {
		return false
	}
	hdr, key, err := record.Decode(b)
	return err == nil && hdr.Kind == record.KindPut && hdr.Len() == int64(len(b)) &&
		record.KeyHash(key) == h && record.CheckValue(hdr, b[hdr.ValueOffset():]) == nil &&
		record.CheckAttrs(hdr, b[hdr.AttrOffset():]) == nil
}
