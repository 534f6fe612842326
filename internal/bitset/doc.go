// Package bitset is a fixed-size, pre-allocated bitset whose words are
// atomics, so many goroutines can set and test bits without a lock. It is the
// storage of the bloom filter (internal/bloom).
//
// Invariants:
//   - The size is fixed by New, rounded up to whole 64-bit words; nothing
//     grows or allocates after New.
//   - The words start on a 64-byte boundary, so block b (words 8b..8b+7, see
//     Block) is exactly one cache line.
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
