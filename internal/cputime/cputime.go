// Package cputime reads the CPU time the process has used, for benchmarks that report CPU per
// operation beside wall time (a direct read and a page-cache read can take the same wall time
// and very different CPU).
package cputime

import "time"

// Process returns the user plus system CPU time the process has used so far, and false where
// the platform does not tell.
func Process() (time.Duration, bool) { return process() }
