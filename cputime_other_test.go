//go:build !unix

package blobcache

import "testing"

// cpuNanos is the process's user plus system time so far, in nanoseconds (-1 where unknown).
func cpuNanos(*testing.B) int64 { return -1 }
