package blobcache

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"

	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/cachedir"
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
// back there and sealed with a new footer. A read-only cache (Options.ReadOnly) finds the same
// records and changes nothing (segment.Inspect).
//
// Which files are the cache's: in segments/, the files named like segments (NNNNNNNNNN.seg) and
// their entry logs (NNNNNNNNNN.seg.entries, removed: see segment.EntryLogName);
// in the directory, those cachedir.Classify says are its own or its temporaries (LOCK,
// BLOBCACHE, STATE, bloom.dat, segments/, blobs/, and NAME.tmp of the files it replaces).
// Any other file is a stray: it is left where it is and counted (Stats.StrayFiles). A file
// with a segment's name whose header is damaged and that holds no record is moved aside (to
// NAME.stray), not removed: it may be somebody's.
func (c *Cache) recover() (bloom.Stamp, error) {
	fs := c.opts.fs
	ents, err := fs.ReadDir(c.segs.dir)
	if err != nil && !(c.opts.ReadOnly && errors.Is(err, iofs.ErrNotExist)) {
		return bloom.Stamp{}, fmt.Errorf("blobcache: read %s: %w", c.segs.dir, err)
	}
	var ids []uint32
	strays := int64(0)
	for _, e := range ents {
		if id, ok := segment.ParseFileName(e.Name()); ok && !e.IsDir() {
			ids = append(ids, id)
			continue
		}
		if _, ok := segment.ParseEntryLogName(e.Name()); ok && !e.IsDir() {
			// The entry log of a segment a crash left active: scratch (its segment is
			// scanned), removed now and, if that fails, by the next sweep.
			if !c.opts.ReadOnly {
				_ = fs.Remove(filepath.Join(c.segs.dir, e.Name()))
			}
			continue
		}
		strays++
	}
	c.stats.strays.Store(strays)
	c.sweepDir(true)
	slices.Sort(ids)
	var last *segHandle
	for _, id := range ids {
		s, rec, err := c.recoverSegment(id)
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
		if err := c.loadIndex(rec, id); err != nil {
			return bloom.Stamp{}, fmt.Errorf("blobcache: recover %s: %w", filepath.Join(c.segs.dir, segment.FileName(id)), err)
		}
	}
	if len(ids) > 0 {
		c.segs.lastID.Store(ids[len(ids)-1])
	}
	stamp := bloom.Stamp{bloomFormat, uint64(c.idx.Len())}
	if last != nil {
		stamp[2] = uint64(last.id)
		stamp[3] = uint64(last.dataEnd)
	}
	return stamp, nil
}

// loadIndex applies the entries of recovered segment id to the index in bulk Apply calls of
// loadBatch entries (each index lock taken once a call, the work spread over the processors).
// Segments are applied one at a time, oldest first, as they are read, and a footer is read a
// chunk at a time (segment.Recovered.Each), so that what recovery holds besides the index is a
// batch of entries, not a segment's, let alone every segment's. An error is a footer that could
// not be read back: some of its entries may be applied, and New fails.
func (c *Cache) loadIndex(rec *segment.Recovered, id uint32) error {
	ops := make([]index.Op, 0, min(rec.Count(), loadBatch))
	err := rec.Each(func(e segment.Entry) error {
		switch e.Kind {
		case record.KindPut:
			ops = append(ops, index.Op{Hash: e.Hash, Loc: index.Loc{Segment: id, Offset: e.Offset, Length: e.Length}})
		case record.KindDelete:
			ops = append(ops, index.Op{Hash: e.Hash, Delete: true})
		}
		if len(ops) == loadBatch {
			c.idx.Apply(ops)
			ops = ops[:0]
		}
		return nil
	})
	c.idx.Apply(ops)
	return err
}

// loadBatch is how many entries recovery applies to the index at a time.
const loadBatch = 1 << 16

// recoverSegment recovers segment id (segment.Recover), counts and notes what recovery met, and
// returns the segment's handle and what recovery found, or nil if the file is not a usable
// segment (it is then removed).
func (c *Cache) recoverSegment(id uint32) (*segHandle, *segment.Recovered, error) {
	path := filepath.Join(c.segs.dir, segment.FileName(id))
	var rec *segment.Recovered
	var err error
	if c.opts.ReadOnly {
		rec, err = segment.Inspect(c.opts.fs, c.segs.dir, id)
	} else {
		rec, err = segment.Recover(c.opts.fs, c.segs.dir, id, c.opts.Fsync)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("blobcache: recover %s: %w", path, err)
	}
	if rec.Foreign {
		c.stats.strays.Add(1)
		c.noteCorruption(fmt.Errorf("%w: %s is not a segment (%w); left as %s", ErrCorrupt, path, rec.HeaderDamage, c.moveAside(path)))
		return nil, nil, nil
	}
	if rec.HeaderUnwritten || rec.TornTail {
		// What a crash leaves, not damage: a header never written, an unfinished tail (once
		// per segment: a file of zeros is both).
		c.stats.tornTails.Add(1)
	}
	if rec.HeaderDamage != nil {
		c.stats.corrupt.Add(1)
		c.noteCorruption(fmt.Errorf("%w: %s: %w", ErrCorrupt, path, rec.HeaderDamage))
	}
	if rec.Damage != nil {
		c.stats.corrupt.Add(uint64(max(1, rec.Skipped)))
		c.noteCorruption(fmt.Errorf("%w: %w", ErrCorrupt, rec.Damage))
	}
	// Keys lost with damage are forgotten now (their delete entries) and durably once the
	// writer runs (New writes their tombstones), so that none falls back to an older record.
	c.lost = append(c.lost, rec.Lost...)
	f := rec.File
	if rec.HeaderUnwritten && rec.Count() == 0 {
		// A segment a crash left before anything was written to it.
		f.Close()
		c.removeOrphan(path)
		return nil, nil, nil
	}
	s := &segHandle{id: id, f: f, dataEnd: rec.DataEnd}
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
	c.segs.addDisk(s, s.disk.Load())
	return s, rec, nil
}

// removeOrphan removes a file of the cache's own that nothing uses any more (the remains of a
// segment a crash or a failed removal left, a temporary copy). A read-only cache removes
// nothing.
func (c *Cache) removeOrphan(path string) {
	if c.opts.ReadOnly {
		return
	}
	if err := c.opts.fs.Remove(path); err == nil {
		c.stats.orphans.Add(1)
	}
}

// moveAside renames path to path.stray, so that it is no longer taken for a segment, and
// returns the name it is left under (path itself for a read-only cache, or if the rename
// failed).
func (c *Cache) moveAside(path string) string {
	if c.opts.ReadOnly {
		return path
	}
	if err := c.opts.fs.Rename(path, path+".stray"); err != nil {
		return path
	}
	return path + ".stray"
}

// sweepDir counts the directory's strays (cachedir.Stray) and, at open (atOpen), removes its
// temporary files (cachedir.Temp: what a replace a crash cut short left). Beside a running
// cache a temporary file may be a replace under way (of the state file, at a lease or an
// InvalidateAll), so the background sweep leaves them alone: one that a failed replace could
// not remove waits for the next open.
func (c *Cache) sweepDir(atOpen bool) {
	ents, err := c.opts.fs.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		switch cachedir.Classify(e.Name()) {
		case cachedir.Temp:
			if atOpen {
				c.removeOrphan(filepath.Join(c.dir, e.Name()))
			}
		case cachedir.Stray:
			c.stats.strays.Add(1)
		}
	}
}
