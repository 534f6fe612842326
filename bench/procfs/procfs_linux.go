package procfs

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DeviceOf returns the /proc/diskstats name of the block device holding dir (the partition,
// if it is on one).
func DeviceOf(dir string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", fmt.Errorf("procfs: stat %s: %w", dir, err)
	}
	path := fmt.Sprintf("/sys/dev/block/%d:%d/uevent", unix.Major(st.Dev), unix.Minor(st.Dev))
	return readFile(path, ParseUevent)
}

// DropCaches writes back dirty pages (sync) and asks the kernel to drop the page cache, dentries
// and inodes. It needs root; the error says why it could not.
func DropCaches() error {
	syscall.Sync()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString("3\n")
	return err
}

// ReadCPU returns the calling process's CPU time (getrusage RUSAGE_SELF).
func ReadCPU() CPU {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPU{}
	}
	return CPU{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}
