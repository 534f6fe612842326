// Package bloom is the cache's global bloom filter: it answers "is this key
// hash possibly in the cache?" so that a miss costs no I/O. It also encodes
// and decodes the filter's file, bloom.dat.
//
// The filter is blocked: an array of 512-bit blocks (one 64-byte cache line
// each) in a bitset.Set. The caller passes the key's 64-bit hash (xxHash64,
// never 0) and the filter does not hash again: the high 32 bits pick the
// block, and the whole hash, remixed by one multiplication, gives all k (at
// most 7) probe positions of 9 bits inside that block. So a Test touches one
// cache line and costs the same whether it answers yes or no.
//
// Invariants:
//   - No false negatives: once Add(h) has returned, every Test(h) that
//     happens after it (in the sense of the Go memory model) is true, for
//     the life of the filter.
//   - Bits are never cleared. Deleting a key does not touch the filter; the
//     cache rebuilds a fresh filter from its index and swaps it in when too
//     many stale keys have raised the false-positive rate.
//   - Size and k are fixed by New or Decode. Add and Test never allocate.
//
// Concurrency: Add and Test are lock-free and may run from any number of
// goroutines at once. Test does atomic loads only; Add does at most one
// atomic OR per touched word, and skips words whose bits are already set, so
// re-adding a present key writes nothing. FillRatio, EstimatedFPR, Keys and
// WriteTo read every word (O(size)); run alongside Add they see a mix of old
// and new bits, never a torn word.
package bloom
