//go:build !unix

package vfs

import "testing"

// cpuTime is the process's user plus system time so far, in nanoseconds (-1 where unknown).
func cpuTime(*testing.B) int64 { return -1 }
