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
	return flockFile(f, name, unix.LOCK_EX)
}

// flockShared opens the existing file name for reading and takes a
// non-blocking shared flock(2) on it: it needs no write permission and works
// on a read-only file system.
func flockShared(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return flockFile(f, name, unix.LOCK_SH)
}

// flockFile takes a non-blocking flock(2) of kind how on f, closing f if it
// cannot.
func flockFile(f *os.File, name string, how int) (io.Closer, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var ferr error
	if cerr := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how|unix.LOCK_NB)
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
