// Package harness runs the benchmark: the driver starts one child process per engine and phase
// (the same binary, re-executed with -child), so CPU time, peak RSS and I/O counters belong to
// one engine alone; the child opens the engine, runs the phase's measured windows and writes a
// PhaseResult as JSON.
//
// A window is one measured stretch of a phase (a load, a batch of Gets): its operations are
// timed one by one into histograms, and the CPU time (getrusage), the process's I/O counters
// (/proc/self/io) and the data device's counters (/proc/diskstats) are read at its start and
// end. The device counters see every process on the machine, so they are noisy on a shared one;
// the process counters are exact but cannot tell a device read from a page-cache hit except by
// bytes (read_bytes).
package harness
