// Package cputime reads the CPU time the process has used, for benchmarks that report CPU per
// operation beside wall time (a direct read and a page-cache read can take the same wall time
// and very different CPU), and the time one thread has used, for the write route's measure of
// what a write through the page cache costs.
package cputime
