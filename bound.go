package blobcache

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// The bound file records the disk bound a cache chose for itself when it was made
// (Options.MaxSize MaxSizeAuto): a share of the file system's size, fixed from then on, so that
// it neither shrinks as the cache (or anything else) fills the file system nor changes across
// restarts.
//
//	0                   8            16           24         28         32         36
//	+-------------------+------------+------------+----------+----------+----------+
//	| magic "BCBOUND\0" | max size   | fs size    | per mille| reserved | crc32c   |
//	+-------------------+------------+------------+----------+----------+----------+
//
// max size is the bound in bytes; fs size the file system's size it was taken from, and per
// mille the share of it asked for (AutoMaxSizeShare), both kept to say how it was chosen.
var boundFormat = cachedir.Format{
	Name:     "bound file",
	Magic:    "BCBOUND\x00",
	Fields:   []int{8, 8, 4}, // max size, fs size, per mille
	Reserved: 4,
}

// MaxSizeAuto, as Options.MaxSize, bounds the cache to a share of its file system chosen when
// the cache is made and recorded in its directory (the file BOUND), which later opens with
// MaxSizeAuto keep: AutoMaxSizeShare of the file system's size, and at most what leaves
// AutoMaxSizeHeadroom of it free as the file system stood then (counting the cache's own files
// as free, for a cache made before the bound was recorded). A read-only open of a cache with no
// recorded bound has none (MaxSize 0).
const MaxSizeAuto = -1

const (
	// AutoMaxSizeShare is the share of its file system's size that MaxSizeAuto gives a cache.
	// memcached's extstore guide plans a device 80-90% full; the low end leaves room for the
	// preallocated tail of the active segments (a segment each) and for the file system's own
	// needs when the device is given to the cache alone.
	AutoMaxSizeShare = 0.80
	// AutoMaxSizeHeadroom is the share of the file system MaxSizeAuto leaves free for other
	// files, on a file system shared with them.
	AutoMaxSizeHeadroom = 0.05
	// minAutoMaxSize is the least bound MaxSizeAuto takes: below, the file system is too full
	// for a cache to choose one, and MaxSize must be set.
	minAutoMaxSize = 64 << 20
)

type bound struct {
	maxSize, fsSize int64
	perMille        uint32
}

func (b bound) encode() []byte {
	return boundFormat.Encode(uint64(b.maxSize), uint64(b.fsSize), uint64(b.perMille))
}

func decodeBound(b []byte) (bound, error) {
	f, err := boundFormat.Decode(b)
	if err != nil {
		return bound{}, err
	}
	return bound{maxSize: int64(f[0]), fsSize: int64(f[1]), perMille: uint32(f[2])}, nil
}

// chooseBound picks the bound for a cache on a file system of size bytes with avail free, own of
// them (counted as free) the cache's files already.
func chooseBound(size, avail, own int64) (int64, error) {
	b := min(int64(float64(size)*AutoMaxSizeShare), avail+own-int64(float64(size)*AutoMaxSizeHeadroom))
	if b < minAutoMaxSize {
		return 0, fmt.Errorf("%w: MaxSizeAuto: the file system of %d bytes has %d free (%d of them the cache's): too little to leave %.0f%% of it free and hold %d MiB; set MaxSize",
			ErrInvalidOptions, size, avail+own, own, AutoMaxSizeHeadroom*100, minAutoMaxSize>>20)
	}
	return b &^ (1<<20 - 1), nil
}

// adoptBound sets c.opts.MaxSize for MaxSizeAuto: the bound the directory records, or a new
// one, recorded. The caller holds the directory's lock.
func (c *Cache) adoptBound() error {
	fsys := c.opts.fs
	path := filepath.Join(c.dir, cachedir.BoundFile)
	b, err := cachedir.ReadFile(fsys, path)
	switch {
	case err == nil:
		bd, derr := decodeBound(b)
		if derr == nil {
			c.opts.MaxSize = bd.maxSize
			return nil
		}
		// Damaged: chosen again below (the file system has not changed size), and noted.
		c.noteCorruption(fmt.Errorf("blobcache: %s: %w", path, derr))
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("blobcache: read %s: %w", path, err)
	}
	if c.opts.ReadOnly {
		c.opts.MaxSize = 0 // none recorded, and a read-only open records nothing
		return nil
	}
	size, avail, err := vfs.Space(c.dir)
	if err != nil {
		return fmt.Errorf("blobcache: MaxSizeAuto: %w", err)
	}
	own, err := dirBytes(fsys, c.dir)
	if err != nil {
		return fmt.Errorf("blobcache: MaxSizeAuto: %w", err)
	}
	max, err := chooseBound(size, avail, own)
	if err != nil {
		return fmt.Errorf("blobcache: %s: %w", c.dir, err)
	}
	bd := bound{maxSize: max, fsSize: size, perMille: uint32(AutoMaxSizeShare * 1000)}
	if err := cachedir.Replace(fsys, path, bd.encode()); err != nil {
		return err
	}
	c.opts.MaxSize = max
	return nil
}

// dirBytes is the size of the files under dir.
func dirBytes(fsys vfs.FS, dir string) (int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			m, err := dirBytes(fsys, p)
			if err != nil {
				return 0, err
			}
			n += m
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}
