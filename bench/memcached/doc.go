// Package memcached is a load generator for memcached-protocol servers, used to compare
// `blobcache serve` with memcached and its extstore on one machine (docs/BENCHMARKS.md, "Server
// vs memcached"). Command cmd/mcbench drives it: it starts both servers, runs each workload from
// a load-generator process of its own, and samples the servers' CPU time and RSS from /proc
// (package procfs).
//
// The client is a minimal text-protocol client (get and set over one connection per worker),
// so that the generator spends as little CPU as possible on a machine it shares with the
// server. Every hit's value is checked against the key it was read under. Each worker times its
// operations into histograms of its own (package hist), merged at the end of the run; the
// percentiles come from them, not from means.
package memcached
