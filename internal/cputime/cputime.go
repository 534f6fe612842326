package cputime

import "time"

// Process returns the user plus system CPU time the process has used so far, and false where
// the platform does not tell.
func Process() (time.Duration, bool) { return process() }

// Thread returns the CPU time the calling OS thread has used so far, and false where the
// platform does not tell (it tells on Linux). A goroutine can move to another thread between two
// calls: one that measures a span locks itself to its thread for it (runtime.LockOSThread).
func Thread() (used time.Duration, ok bool) { return thread() }
