package vfs

import (
	"errors"
	"os"
)

// PageCacheStat is what the page cache holds of a range of a file, in pages (cachestat(2) on
// Linux).
type PageCacheStat struct {
	// Pages is the number of pages the range covers.
	Pages int64
	// Cached is how many of them the page cache holds now.
	Cached int64
	// Evicted is how many of them it held once and dropped under memory pressure (the kernel
	// remembers that for a while after the eviction). Pages it never held, and pages dropped by
	// a drop_caches or a direct write, do not count.
	Evicted int64
	// Dirty is how many of them are dirty or being written back: written through the page
	// cache and not on the device yet.
	Dirty int64
}

// pageCacheStater is implemented by files that can tell what the page cache holds of them.
type pageCacheStater interface {
	statPageCache(off, n int64) (PageCacheStat, error)
}

// StatPageCache reports what the page cache holds of the n bytes of f at off. It asks the
// kernel once and reads nothing. The error wraps errors.ErrUnsupported where f, the platform or
// the kernel (Linux before 6.5) cannot tell.
func StatPageCache(f File, off, n int64) (PageCacheStat, error) {
	s, ok := f.(pageCacheStater)
	if !ok {
		return PageCacheStat{}, &os.PathError{Op: "cachestat", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return s.statPageCache(off, n)
}
