// Package index is the cache's in-memory map from key hash to the location (segment, offset,
// length) of the newest record for that key.
//
// It stores the 64-bit key hash, never the key: a hit is only a candidate, and the cache reads the
// record's header and key from disk and compares the key, so two keys with one hash cost a miss,
// never a wrong blob. Two implementations share the Index interface:
//
//   - HashTable, the default: 256 pointer-free open-addressing shards, 20 bytes per slot and
//     23-29 bytes per entry from a few hundred thousand entries up (an empty one holds 72 KiB),
//     and the garbage collector never scans it.
//   - SkipList (WithIndex(IndexSkipList)): an ordered skip list with lock-free reads, about 64 bytes
//     per entry, all of it pointers the garbage collector walks.
//
// Invariants:
//   - Hash 0 is reserved for "empty slot"; the key hasher maps 0 to 1, and the index panics on 0.
//   - One entry per hash; Put replaces. A Loc is read whole: a reader never sees the Segment of
//     one Put with the Offset of another.
//   - MemoryBytes counts capacity (what the process holds), not live entries.
//   - Every entry has one access bit: Touch sets it (a hit on the record at that location),
//     Accessed reads it, and every Put of the hash clears it (the new record is not accessed
//     yet). HashTable keeps the bits in a per-shard array beside its slots (1/8 byte a slot,
//     moved with the entries under the write lock, set with an atomic OR under the read lock);
//     SkipList in a spare word of the node.
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
