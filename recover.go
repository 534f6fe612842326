package blobcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// recover rebuilds the index from the segments on disk, oldest first, and returns the stamp
// that says which state of the data a saved bloom filter must describe to be trusted.
//
// A sealed segment contributes its footer (the Bitcask "hint"): no blob is read. A segment
// without a valid footer (the active one at a crash, or one whose footer is damaged) is scanned
// record by record; the scan stops at the first record that fails its checks, the file is cut
// back there and sealed with a new footer. Files in segments/ that are not segments are removed.
func (c *Cache) recover() (bloom.Stamp, error) {
	fs := c.opts.fs
	ents, err := fs.ReadDir(c.segDir)
	if err != nil {
		return bloom.Stamp{}, fmt.Errorf("blobcache: read %s: %w", c.segDir, err)
	}
	var ids []uint32
	for _, e := range ents {
		if id, ok := segment.ParseFileName(e.Name()); ok && !e.IsDir() {
			ids = append(ids, id)
			continue
		}
		c.removeOrphan(filepath.Join(c.segDir, e.Name()))
	}
	c.removeTemps()
	slices.Sort(ids)
	var last *segHandle
	var all [][]record.Entry
	var segIDs []uint32
	for _, id := range ids {
		s, entries, err := c.recoverSegment(id)
		if err != nil {
			return bloom.Stamp{}, err
		}
		if s == nil {
			continue
		}
		c.segs.mu.Lock()
		c.segs.add(s)
		c.segs.mu.Unlock()
		last = s
		all = append(all, entries)
		segIDs = append(segIDs, id)
	}
	c.loadIndex(all, segIDs)
	if len(ids) > 0 {
		c.nextSegmentID.Store(ids[len(ids)-1])
	}
	stamp := bloom.Stamp{identityVersion, uint64(c.idx.Len())}
	if last != nil {
		stamp[2] = uint64(last.id)
		stamp[3] = uint64(last.dataEnd)
	}
	return stamp, nil
}

// loadIndex applies the entries of the recovered segments, oldest first, to the index in one
// bulk Apply (each index lock taken once, the work spread over the processors).
func (c *Cache) loadIndex(all [][]record.Entry, ids []uint32) {
	n := 0
	for _, entries := range all {
		n += len(entries)
	}
	ops := make([]index.Op, 0, n)
	for i, entries := range all {
		for _, e := range entries {
			switch e.Kind {
			case record.KindPut:
				ops = append(ops, index.Op{Hash: e.Hash, Loc: index.Loc{Segment: ids[i], Offset: e.Offset, Length: e.Length}})
			case record.KindDelete:
				ops = append(ops, index.Op{Hash: e.Hash, Delete: true})
			}
		}
	}
	c.idx.Apply(ops)
}

// recoverSegment opens segment id and returns its handle and its entries, or nil if the file is
// not a usable segment (it is then removed).
func (c *Cache) recoverSegment(id uint32) (*segHandle, []record.Entry, error) {
	fs := c.opts.fs
	path := filepath.Join(c.segDir, segment.FileName(id))
	repaired := false
	f, size, err := segment.Open(fs, c.segDir, id)
	if err != nil {
		if !isCorrupt(err) {
			return nil, nil, fmt.Errorf("blobcache: open %s: %w", path, err)
		}
		// The header block is damaged (or was never written: a crash right after create). Its
		// records check themselves, and the deletes among them must not be lost, so recover
		// them and write a new header.
		if c.unwrittenHeader(path) {
			c.stats.tornTails.Add(1) // what a crash leaves, not damage
		} else {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err))
		}
		if f, size, err = c.repairHeader(path, id); err != nil {
			return nil, nil, err
		}
		repaired = true
	}
	entries, dataEnd, err := segment.ReadFooter(f, size)
	if err != nil {
		if !errors.Is(err, record.ErrNoFooter) && !isCorrupt(err) {
			f.Close()
			return nil, nil, fmt.Errorf("blobcache: read footer of %s: %w", path, err)
		}
		entries = entries[:0]
		res := segment.Scan(f, size, func(e record.Entry, _ record.Header, _ []byte) error {
			entries = append(entries, e)
			return nil
		})
		if res.Err != nil && !isCorrupt(res.Err) {
			// An I/O error, not damage: refuse to open rather than cut good records off.
			f.Close()
			return nil, nil, fmt.Errorf("blobcache: recover %s: %w", path, res.Err)
		}
		if res.Torn {
			c.stats.tornTails.Add(1)
		}
		if res.Err != nil {
			c.stats.corrupt.Add(uint64(max(1, res.Skipped)))
			c.noteCorruption(fmt.Errorf("%w: %w", ErrCorrupt, res.Err))
		}
		var lost [][]byte
		if res.Err != nil && !res.Torn && res.End < size {
			// The scan stopped at damage: the records after it are lost with it. Forget their
			// keys (below, and durably once the writer runs) so that none of them falls back
			// to an older record.
			lost, err = segment.LostKeys(f, res.End, size)
			if err != nil {
				f.Close()
				return nil, nil, fmt.Errorf("blobcache: recover %s: %w", path, err)
			}
		}
		if _, err := segment.WriteFooter(f, entries, res.End, c.opts.Fsync); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("blobcache: seal recovered segment %s: %w", path, err)
		}
		dataEnd = res.End
		for _, k := range lost {
			entries = append(entries, record.Entry{Hash: record.KeyHash(k), Kind: record.KindDelete})
		}
		c.lost = append(c.lost, lost...)
	}
	if repaired && len(entries) == 0 {
		// Nothing in it: a stray file with a segment's name.
		f.Close()
		c.removeOrphan(path)
		return nil, nil, nil
	}
	s := &segHandle{id: id, f: f, dataEnd: dataEnd}
	if err := c.openReads(s); err != nil {
		f.Close()
		return nil, nil, err
	}
	s.refs.Store(1)
	s.sealing.Store(true)
	s.sealed.Store(true)
	if fi, err := f.Stat(); err == nil {
		s.disk.Store(vfs.AllocatedBytes(fi))
	}
	c.diskBytes.Add(s.disk.Load())
	return s, entries, nil
}

// repairHeader rewrites the header block of segment id, whose own header failed its checks.
func (c *Cache) repairHeader(path string, id uint32) (vfs.File, int64, error) {
	f, err := c.opts.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("blobcache: open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < segment.HeaderSize {
		err = f.Truncate(segment.HeaderSize)
	}
	if err == nil {
		block := make([]byte, segment.HeaderSize)
		record.SegmentHeader{Version: record.Version, ID: id, Created: time.Now().UnixNano()}.Encode(block)
		_, err = f.WriteAt(block, 0)
	}
	if err == nil && c.opts.Fsync {
		err = f.Sync()
	}
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blobcache: repair header of %s: %w", path, err)
	}
	return f, fi.Size(), nil
}

// unwrittenHeader reports whether the segment file at path ends before its header or holds
// zeros where the header goes: a crash between creating the file and writing the header.
func (c *Cache) unwrittenHeader(path string) bool {
	f, err := c.opts.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, record.SegmentHeaderSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return record.IsZero(b[:n])
}

// isCorrupt tells damaged bytes (repaired or forgotten) from other failures (reported).
func isCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

// removeOrphan removes a stray file or directory from the cache's directories.
func (c *Cache) removeOrphan(path string) {
	if err := c.opts.fs.Remove(path); err == nil {
		c.stats.orphans.Add(1)
	}
}

// removeTemps removes temporary files left by an interrupted atomic replace.
func (c *Cache) removeTemps() {
	ents, err := c.opts.fs.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			c.removeOrphan(filepath.Join(c.dir, e.Name()))
		}
	}
}
