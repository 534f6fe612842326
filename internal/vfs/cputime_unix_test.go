//go:build unix

package vfs

import (
	"syscall"
	"testing"
)

// cpuTime is the process's user plus system time so far, in nanoseconds (-1 where unknown).
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
