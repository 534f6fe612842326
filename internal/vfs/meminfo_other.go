//go:build !linux

package vfs

import (
	"errors"
	"fmt"
)

// MemoryAvailable returns the memory the kernel could give the page cache: not on this
// platform.
func MemoryAvailable() (int64, error) {
	return 0, fmt.Errorf("memory available: %w", errors.ErrUnsupported)
}
