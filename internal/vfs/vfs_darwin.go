package vfs

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func (f *osFile) readvAt(bufs [][]byte, off int64) (int, error) {
	return readvLoop(f.File, bufs, off)
}

func (f *osFile) writevAt(bufs [][]byte, off int64) (int, error) {
	return writevLoop(f.File, bufs, off)
}

// datasync uses F_FULLFSYNC: plain fsync on Darwin leaves the data in the
// drive's volatile cache. File systems that refuse F_FULLFSYNC get fsync.
func (f *osFile) datasync() error {
	var err error
	cerr := f.rc.Control(func(fd uintptr) {
		for {
			_, err = unix.FcntlInt(fd, unix.F_FULLFSYNC, 0)
			if err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return cerr
	}
	switch err {
	case nil:
		return nil
	case unix.ENOTSUP, unix.ENOTTY, unix.EINVAL:
		return f.File.Sync()
	}
	return &os.PathError{Op: "fcntl F_FULLFSYNC", Path: f.Name(), Err: err}
}

func (f *osFile) allocate(off, n int64) error {
	return errUnsupported("fallocate", f.Name())
}

func (f *osFile) punchHole(off, n int64) error {
	return errUnsupported("punch hole", f.Name())
}

func openDirect(name string, flag int, perm os.FileMode) (File, error) {
	return nil, errUnsupported("open O_DIRECT", name)
}

func lock(name string) (io.Closer, error) {
	return flock(name)
}

func lockShared(name string) (io.Closer, error) {
	return flockShared(name)
}

func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
