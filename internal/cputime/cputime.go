package cputime

import "time"

// Process returns the user plus system CPU time the process has used so far, and false where
// the platform does not tell.
func Process() (time.Duration, bool) { return process() }

// Thread returns the CPU time the calling OS thread has used so far and the thread's id, and
// false where the platform does not tell (it tells on Linux). A goroutine can move to another
// thread between two calls: a span measured with two calls counts only if both name the same
// thread.
func Thread() (used time.Duration, tid int, ok bool) { return thread() }
