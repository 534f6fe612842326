// Package bitset is a fixed-size, pre-allocated bitset whose words are
// atomics, so many goroutines can set and test bits without a lock. It is the
// storage of the bloom filter (internal/bloom).
//
// Invariants:
//   - The size is fixed by New, WordsFor(nbits) words: nbits rounded up to
//     whole 64-bit words and, from HugeMinBytes (1 MiB) up, to whole 2 MiB
//     huge pages. The rule is the same on every OS. Nothing grows or
//     allocates after New.
//   - On Linux, a set of HugeMinBytes or more starts on a 2 MiB boundary, so
//     each of its huge pages is one page the kernel can back with a single
//     TLB entry, and is advised with MADV_HUGEPAGE before first touch
//     (package hugemem); its heap allocation is up to 2 MiB larger than the
//     set, for the alignment. Elsewhere it is allocated plainly.
//   - Bits are only ever set, one atomic OR per word (never a
//     compare-and-swap loop). Only StoreWord and Clear turn bits off.
//
// Concurrency: every method may be called from any goroutine at any time.
// Each word is read and written atomically, so Set, OrWord and Test never
// lose or tear an update. Operations on different words are not ordered
// with respect to each other, so Count, Clear and a sequence of StoreWord
// calls are not snapshots: run concurrently with Set they see (or clear)
// some of the new bits and not others. Callers that need a snapshot must
// stop the writers first. An index out of range is a programmer error and
// panics.
package bitset
