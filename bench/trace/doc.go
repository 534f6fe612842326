// Package trace reads, writes and generates the request traces of the hit-ratio benchmark
// (blobcache-bench trace): libCacheSim's oracleGeneral binary format, a CSV of key,size, and
// synthetic Zipf traces drawn from a seed.
//
// A trace is a slice of Request in request order, held in memory whole (16 bytes a request).
// Requests of size 0 are kept as they are read; Summary counts them and the replay skips them,
// as libCacheSim's readers do by default (ignore_size_zero_req). Nothing here is safe for
// concurrent mutation; a generated trace is a pure function of its Zipf parameters.
package trace
