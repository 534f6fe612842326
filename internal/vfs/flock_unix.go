//go:build linux || darwin

package vfs

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// flock opens (creating) name and takes a non-blocking exclusive flock(2) on
// it. The lock lives as long as the returned file stays open.
func flock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var ferr error
	if cerr := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if ferr != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		ferr = cerr
	}
	if ferr != nil {
		f.Close()
		if ferr == unix.EWOULDBLOCK {
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, &os.PathError{Op: "flock", Path: name, Err: ferr}
	}
	return f, nil
}
