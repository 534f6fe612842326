package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/segment"
)

// Background work, owned by Start: the bloom filter is rebuilt from the index when its
// estimated false-positive rate drifts past Options.BloomMaxFPR (deletes and evictions leave
// bits set, and the cache may outgrow ExpectedBlobs), and stray files are removed. Eviction
// needs no background worker: it runs whenever a new segment is created.

const (
	bloomCheckInterval  = time.Second
	orphanSweepInterval = time.Hour
)

// Start starts the background work. The returned closer stops it and closes the cache.
func (c *Cache) Start() (closer func() error, err error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	c.bg.Lock()
	defer c.bg.Unlock()
	if c.bg.started {
		return nil, errors.New("blobcache: already started")
	}
	c.bg.started = true
	c.bg.stop = make(chan struct{})
	c.bg.wg.Add(1)
	go c.backgroundLoop()
	return c.Close, nil
}

func (c *Cache) stopBackground() {
	c.bg.Lock()
	defer c.bg.Unlock()
	if c.bg.started {
		close(c.bg.stop)
		c.bg.wg.Wait()
		c.bg.started = false
	}
}

func (c *Cache) backgroundLoop() {
	defer c.bg.wg.Done()
	bloomTick := time.NewTicker(bloomCheckInterval)
	defer bloomTick.Stop()
	orphanTick := time.NewTicker(orphanSweepInterval)
	defer orphanTick.Stop()
	if c.opts.ReadOnly {
		orphanTick.Stop()
	} else {
		c.sweepOrphans()
	}
	for {
		select {
		case <-c.bg.stop:
			return
		case <-bloomTick.C:
			c.maybeRebuildBloom()
		case <-orphanTick.C:
			c.sweepOrphans()
		}
	}
}

// maybeRebuildBloom rebuilds the filter if its estimated false-positive rate is past the bound.
func (c *Cache) maybeRebuildBloom() bool {
	if c.bloom.Load().EstimatedFPR() <= c.opts.BloomMaxFPR {
		return false
	}
	c.rebuildBloom()
	return true
}

// rebuildBloom builds a new filter from the index and the write buffer and swaps it in.
//
// Why no key is lost: next is published before the write buffer and the index are read. A Put
// inserts into the write buffer, then loads next, then adds to the current filter and to next.
// If its load of next saw nil, either it ran before next was published (so the key was in the
// write buffer, or already committed to the index, when they were read) or after the swap (so it
// added to the new filter itself).
func (c *Cache) rebuildBloom() {
	c.rebuildMu.Lock()
	defer c.rebuildMu.Unlock()
	n := max(uint64(c.opts.ExpectedBlobs), 2*uint64(c.idx.Len()))
	f := bloom.New(n, c.opts.BloomBitsPerKey)
	c.bloomNext.Store(f)
	if c.w != nil {
		c.unflushed.forEachHash(func(h uint64) { f.Add(bloomHash(h)) })
	}
	c.idx.Range(func(h uint64, _ index.Loc) bool {
		f.Add(bloomHash(h))
		return true
	})
	c.bloom.Store(f)
	c.bloomNext.Store(nil)
	c.stats.rebuilds.Add(1)
}

// sweepOrphans removes the segment files that are neither live nor being created (what a failed
// removal left), and counts the strays again (see recover). It leaves the directory's temporary
// files to the next open (see sweepDir).
func (c *Cache) sweepOrphans() {
	ents, err := c.opts.fs.ReadDir(c.segs.dir)
	if err != nil {
		return
	}
	t := c.segs.table.Load()
	next := c.segs.lastID.Load()
	strays := int64(0)
	for _, e := range ents {
		if id, ok := segment.ParseEntryLogName(e.Name()); ok && !e.IsDir() {
			// An active segment's, or one being sealed, is in use; any other was left behind
			// (a removal that failed).
			if s := t.get(id); id < next && (s == nil || s.sealed.Load()) {
				_ = c.opts.fs.Remove(filepath.Join(c.segs.dir, e.Name()))
			}
			continue
		}
		id, ok := segment.ParseFileName(e.Name())
		switch {
		case !ok || e.IsDir():
			strays++
		case t.get(id) != nil || id >= next:
			// live, or being created right now
		default:
			c.removeOrphan(filepath.Join(c.segs.dir, e.Name()))
		}
	}
	c.stats.strays.Store(strays)
	c.sweepDir(false)
}

// loadBloom installs the saved filter if its stamp matches the recovered data, else rebuilds it
// from the index.
func (c *Cache) loadBloom(stamp bloom.Stamp) {
	path := filepath.Join(c.dir, bloomFile)
	if b, err := cachedir.ReadFile(c.opts.fs, path); err == nil {
		f, saved, err := bloom.Decode(bytes.NewReader(b))
		if err == nil && saved == stamp && f.EstimatedFPR() <= c.opts.BloomMaxFPR {
			c.bloom.Store(f)
			return
		}
		if err != nil {
			c.stats.corrupt.Add(1)
			c.noteCorruption(fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		c.noteCorruption(fmt.Errorf("blobcache: read %s: %w", path, err))
	}
	n := max(uint64(c.opts.ExpectedBlobs), 2*uint64(c.idx.Len()))
	f := bloom.New(n, c.opts.BloomBitsPerKey)
	c.idx.Range(func(h uint64, _ index.Loc) bool {
		f.Add(bloomHash(h))
		return true
	})
	c.bloom.Store(f)
}

// saveBloom writes the filter with the stamp of the data it describes. Called by Close after the
// last segment is sealed.
func (c *Cache) saveBloom() error {
	stamp := bloom.Stamp{bloomFormat, uint64(c.idx.Len())}
	if all := c.segs.all(); len(all) > 0 {
		last := all[len(all)-1]
		stamp[2] = uint64(last.id)
		stamp[3] = uint64(last.dataEnd)
	}
	var buf bytes.Buffer
	if _, err := c.bloom.Load().WriteTo(&buf, stamp); err != nil {
		return err
	}
	return cachedir.Replace(c.opts.fs, filepath.Join(c.dir, bloomFile), buf.Bytes())
}
