// Package ghost is a bounded set of 64-bit key hashes remembered for a while: the "ghost" of
// keys a cache declined or dropped, so that it can tell a key seen recently from a new one.
//
// A Set holds about its capacity's worth of the most recently added hashes, as 32-bit
// fingerprints in buckets of seven; a bucket forgets its oldest fingerprint when an eighth
// arrives (FIFO per bucket, which approaches FIFO over the set as buckets fill evenly). Memory is
// fixed at New: 32 bytes per bucket, about 4.6 bytes per remembered hash. Two hashes with the same
// bucket and fingerprint are one member: a false positive costs a caller's policy one wrong
// decision, about 7 in 2^32 lookups.
//
// Concurrency: every method is lock-free (atomic loads, stores and compare-and-swaps on 32-bit
// words) and allocation-free, safe for concurrent use. An Add racing with another Add into the
// same bucket may overwrite it early; a Remove racing with an Add of the same hash may or may
// not see it. Both cost a decision, never memory or a panic.
package ghost
