//go:build unix

package memcache

import (
	"syscall"
	"time"
)

// rusage returns the user and system CPU time the process has used, for stats.
func rusage() (user, system time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
