//go:build !linux && !darwin

package vfs

import (
	"errors"
	"fmt"
)

// Space returns the size of the file system that holds path and the bytes of it free: not on
// this platform.
func Space(path string) (size, avail int64, err error) {
	return 0, 0, fmt.Errorf("statfs %s: %w", path, errors.ErrUnsupported)
}
