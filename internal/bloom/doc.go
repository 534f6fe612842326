// Package bloom is the cache's global bloom filter: it answers "is this key
// hash possibly in the cache?" so that a miss costs no I/O. It also encodes
// and decodes the filter's file, bloom.dat.
//
// The filter is register-blocked (Putze et al., "Cache-, hash- and
// space-efficient bloom filters"): an array of 64-bit words in a bitset.Set,
// and each key lives in one word. The caller passes the key's 64-bit hash
// (xxHash64, never 0) and the filter does not hash again: the high 32 bits
// pick the word (multiply-shift, no modulo), and bits 0-29, six at a time,
// are the K = 5 bits the key sets in it; bits 30-31 are unused. So a Test is
// one aligned 8-byte load, never split across cache lines, and a handful of
// register instructions, the same for a hit and a miss. At the default 12
// bits per key about 1.04% of absent keys test positive. A classic bloom
// filter of the same size would give 0.31% with eight probes in eight cache
// lines, and about 1% already at 10 bits per key: the word-per-key layout
// trades about 2 bits per key for one memory access per Test.
//
// Invariants:
//   - No false negatives: once Add(h) has returned, every Test(h) that
//     happens after it (in the sense of the Go memory model) is true, for
//     the life of the filter.
//   - Bits are never cleared. Deleting a key does not touch the filter; the
//     cache rebuilds a fresh filter from its index and swaps it in when too
//     many stale keys have raised the false-positive rate.
//   - The size is fixed by New or Decode, and is always a size
//     bitset.WordsFor returns: whole words, and whole 2 MiB huge pages from
//     bitset.HugeMinBytes (1 MiB) up. The filter uses every word it holds,
//     so rounding up to a huge page lowers the false-positive rate rather
//     than wasting memory. Add and Test never allocate.
//
// Concurrency: Add and Test are lock-free and may run from any number of
// goroutines at once. Test does one atomic load; Add does one atomic load
// and, only if some of the key's bits are clear, one atomic OR of them (no
// compare-and-swap loop), so re-adding a present key writes nothing.
// FillRatio, EstimatedFPR, Keys and WriteTo read every word (O(size)); run
// alongside Add they see a mix of old and new bits, never a torn word.
package bloom
