//go:build unix

package intent

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the first n bytes of f, shared: stores into the mapping are the file's, in the
// page cache, and outlive the process.
func mapFile(f *os.File, n int64) ([]byte, func() error, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
