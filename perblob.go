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

func (c *Cache) blobPath(h, seq uint64) string {
	return filepath.Join(c.dir, blobDir, fmt.Sprintf("%02x", h>>56), fmt.Sprintf("%016x-%016x.blob", h, seq))
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

// openBlobFile opens the file of the blob at loc as a one-reader handle, or nil if it is gone.
func (c *Cache) openBlobFile(h uint64, loc index.Loc) *segHandle {
	f, err := c.opts.fs.OpenFile(c.blobPath(h, locSeq(loc)), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	s := &segHandle{f: f, rd: f}
	s.refs.Store(1)
	return s
}

// writeBlobFiles writes each put of the batch to its own file. It runs on a flush worker.
func (c *Cache) writeBlobFiles(j *flushJob) error {
	fs := c.opts.fs
	dirs := map[string]struct{}{}
	for i, e := range j.b.Entries() {
		if e.Kind != record.KindPut {
			continue
		}
		path := c.blobPath(e.Hash, j.seqBase+uint64(i))
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
func (c *Cache) commitBlobs(j *flushJob) {
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
				c.fifo = append(c.fifo, fifoEntry{h: e.Hash, loc: loc})
			}
			c.diskBytes.Add(blobSize(e.Length))
		case record.KindDelete:
			old, had = c.idx.Delete(e.Hash)
		}
		if had {
			dirs[filepath.Dir(c.blobPath(e.Hash, locSeq(old)))] = struct{}{}
			if err := c.removeBlob(e.Hash, old); err != nil {
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
		if err := c.evictBlobs(c.opts.MaxSize); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		c.w.failed(errors.Join(errs...))
	}
}

// forgetBlobFiles removes what a failed batch may have written.
func (c *Cache) forgetBlobFiles(j *flushJob) {
	for i, e := range j.b.Entries() {
		if e.Kind == record.KindPut {
			_ = c.opts.fs.Remove(c.blobPath(e.Hash, j.seqBase+uint64(i)))
		}
	}
}

// removeBlob removes the file of the blob at loc; one already gone is not an error.
func (c *Cache) removeBlob(h uint64, loc index.Loc) error {
	err := c.opts.fs.Remove(c.blobPath(h, locSeq(loc)))
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
func (c *Cache) evictBlobs(limit int64) error {
	var errs []error
	for c.diskBytes.Load() > limit && c.fifoHead < len(c.fifo) {
		e := c.fifo[c.fifoHead]
		c.fifoHead++
		if cur, ok := c.idx.Get(e.h); ok && cur == e.loc {
			c.idx.Delete(e.h)
			if err := c.removeBlob(e.h, e.loc); err != nil {
				errs = append(errs, err)
				continue
			}
			c.stats.evictions.Add(1)
			c.stats.evictedBytes.Add(uint64(blobSize(e.loc.Length)))
		}
	}
	if c.fifoHead > 1024 && c.fifoHead > len(c.fifo)/2 {
		c.fifo = append(c.fifo[:0:0], c.fifo[c.fifoHead:]...)
		c.fifoHead = 0
	}
	return errors.Join(errs...)
}

// recoverBlobs rebuilds the index from the names of the blob files. Of several files of one
// key (a crash between writing a new one and removing the old), the newest wins.
func (c *Cache) recoverBlobs() (bloom.Stamp, error) {
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
				if winner < 0 && c.blobFileWhole(h, fs[i].seq) {
					winner = i
					continue
				}
				c.removeOrphan(c.blobPath(h, fs[i].seq))
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
			c.fifo = append(c.fifo, fifoEntry{h: f.h, loc: loc})
		}
		c.diskBytes.Add(blobSize(uint32(f.size)))
		maxSeq = max(maxSeq, f.seq)
	}
	c.blobSeq.Store(maxSeq)
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

// blobFileWhole reports whether the blob file of h and seq holds one whole record of a key with
// hash h (header, key and value checksums all check).
func (c *Cache) blobFileWhole(h, seq uint64) bool {
	b, err := cachedir.ReadFile(c.opts.fs, c.blobPath(h, seq))
	if err != nil {
		return false
	}
	hdr, key, err := record.Decode(b)
	return err == nil && hdr.Kind == record.KindPut && hdr.Len() == int64(len(b)) &&
		record.KeyHash(key) == h && record.CheckValue(hdr, b[hdr.ValueOffset():]) == nil &&
		record.CheckAttrs(hdr, b[hdr.AttrOffset():]) == nil
}
