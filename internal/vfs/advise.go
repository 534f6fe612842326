package vfs

import (
	"errors"
	"os"
)

// randomReader is implemented by files whose reads can be advised to be random.
type randomReader interface {
	adviseRandom() error
}

// AdviseRandomReads tells the kernel that f is read at random places (POSIX_FADV_RANDOM on
// Linux): a read through the page cache then brings in the pages it asks for and no readahead
// past them. A cache's hits land anywhere in its segments, and under memory pressure readahead
// fills the page cache with pages nobody asks for, which push out the ones read. The error wraps
// errors.ErrUnsupported where f or the platform cannot take the advice.
func AdviseRandomReads(f File) error {
	r, ok := f.(randomReader)
	if !ok {
		return &os.PathError{Op: "fadvise", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return r.adviseRandom()
}
