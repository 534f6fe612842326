package cputime

import "time"

// Process returns the user plus system CPU time the process has used so far, and false where
// the platform does not tell.
func Process() (time.Duration, bool) { return process() }
