package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Space returns the size of the file system that holds path and the bytes of it free to an
// unprivileged writer (without the blocks reserved for the superuser), both in bytes.
func Space(path string) (size, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	unit := st.Frsize // the unit of the block counts
	if unit == 0 {
		unit = st.Bsize
	}
	return int64(st.Blocks) * unit, int64(st.Bavail) * unit, nil
}
