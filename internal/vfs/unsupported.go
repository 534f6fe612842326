//go:build !linux

package vfs

import (
	"errors"
	"os"
)

// errUnsupported reports that op cannot be done on this platform; the error
// wraps errors.ErrUnsupported.
func errUnsupported(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: errors.ErrUnsupported}
}
