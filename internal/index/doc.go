// Package index is the cache's in-memory map from key hash to the location (segment, offset,
// length) of the newest record for that key.
//
// It keeps the top 40 bits of the 64-bit key hash (Canonical), never the key: a hit is only a
// candidate, and the cache reads the record's header and key from disk and compares the key, so
// two keys that agree on those bits cost a miss, never a wrong blob. A bloom filter in front of
// an index takes FilterHash, so that it agrees with the index on which keys are one. Two
// implementations share the Index interface:
//
//   - HashTable, the default: 256 pointer-free open-addressing shards, 16 bytes per slot and
//     18-23 bytes per entry from a few hundred thousand entries up (an empty one holds 72 KiB),
//     and the garbage collector never scans it.
//   - SkipList (WithIndex(IndexSkipList)): an ordered skip list with lock-free reads, about 64 bytes
//     per entry, all of it pointers the garbage collector walks.
//
// Invariants:
//   - Hash 0 is reserved; the key hasher maps 0 to 1, and the index panics on 0. A HashTable slot
//     with tag 0 is empty, and Canonical gives no hash tag 0.
//   - One entry per canonical hash; Put replaces. A Loc is read whole: a reader never sees the Segment of
//     one Put with the Offset of another.
//   - MemoryBytes counts capacity (what the process holds), not live entries.
//   - Every entry has a hit count of two bits: Touch counts a hit on the record at that location
//     (up to MaxHits), Hits and Lookup read it, SetHits sets it, and every Put of the hash
//     clears it (the new record is not hit yet). HashTable keeps the counts in a per-shard array
//     beside its slots (1/4 byte a slot, moved with the entries under the write lock, counted
//     with a compare-and-swap under the read lock); SkipList in a spare word of the node.
//
// Concurrency: every method is safe for concurrent use. HashTable locks one shard per call (a read
// lock for Get); SkipList readers take no lock and its writers take one mutex. Range never holds a
// lock across the whole walk, so it is weakly consistent: entries present from its start to its
// end are seen exactly once, others may or may not be. Range's fn must not call back into the
// index.
//
// Costs and memory per entry, measured with the package's benchmarks and TestMemoryPerEntry, are
// in docs/BENCHMARKS.md ("Index and bloom filter").
package index
