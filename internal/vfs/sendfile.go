package vfs

import (
	"errors"
	"os"
	"syscall"
)

// fileSender is implemented by files whose bytes the kernel can copy to a socket itself.
type fileSender interface {
	sendTo(dst syscall.RawConn, off, n int64) (int64, error)
}

// SendFile has the kernel copy the n bytes of f at off to the socket dst (sendfile(2) on Linux)
// from the page cache, with no copy through user space; f's offset is not used or moved, so
// sends and reads of one file may run at once. It waits for dst to take the bytes as a write to
// it would. It returns how many bytes were sent: fewer than n with an error. The error wraps
// errors.ErrUnsupported, and nothing was sent, where f, dst or the platform cannot do it.
func SendFile(dst syscall.Conn, f File, off, n int64) (int64, error) {
	s, ok := f.(fileSender)
	if !ok {
		return 0, &os.PathError{Op: "sendfile", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	rc, err := dst.SyscallConn()
	if err != nil {
		return 0, &os.PathError{Op: "sendfile", Path: f.Name(), Err: errors.Join(errors.ErrUnsupported, err)}
	}
	return s.sendTo(rc, off, n)
}
