// Package cputime reads the CPU time the process has used, for benchmarks that report CPU per
// operation beside wall time (a direct read and a page-cache read can take the same wall time
// and very different CPU).
package cputime
