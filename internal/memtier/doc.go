// Package memtier is the memory tier: record values held in process memory in front of the
// segments, so that a hit on a hot blob costs no system call, no copy through the kernel and no
// checksum pass.
//
// An Entry is bound to one record: the key hash, a tag naming the record's place on disk (unique
// among the records of a process: the cache gives it from the index's location), the key, the
// record's header and attributes, and the value, checked against the record's CRC-32C by the
// cache before it entered. A lookup names the tag the index holds now, so an entry of a record
// that was overwritten, deleted or evicted is never found: coherence needs no invalidation. Such
// an entry is never hit, and eviction takes it; a newer entry of its key replaces it at once.
//
// An entry can be made in two steps: Prepare copies the value into the tier's memory and counts
// it, and Publish gives it its tag and makes it found. A cache prepares a written value while its
// bytes are at hand and publishes it once the record has its place on disk, or gives it up
// (Discard) if the record never gets one. Add is the two at once.
//
// Eviction is S3-FIFO: a new entry goes to a small FIFO queue (SmallShare of the capacity); one
// hit while there moves it to the main queue when it reaches the head, and one that was not hit
// leaves its key hash in a ghost, so that the key's next entry goes straight to main; main is a
// FIFO whose entries hit since they were last at the head go round again (a two-bit count,
// CLOCK). Entries larger than MaxEntryShare of the capacity, or than MaxEntry, are refused.
//
// Invariants:
//
//   - Bytes never exceeds the capacity: Prepare evicts first, under the tier's lock, and
//     removals only lower it. Bytes counts prepared entries, which no eviction takes.
//   - Get returns an entry only for the tag asked for, and only one whose key is the key asked
//     for (two keys of one hash are told apart).
//   - After Close nothing enters, and the tier's memory is unmapped as soon as no reader holds
//     the entry it lies in (Mapped counts what is left).
//   - An Entry's fields never change once it is in the tier: a reader may use its Value after
//     the entry was evicted (the garbage collector keeps it while it is used).
//
// Concurrency: Get takes a read lock of one shard of the map (of 64, by hash) and counts the hit
// with an atomic add; Insert and Remove take the shard's lock, and Insert the tier's lock for the
// queues. Every method is safe for concurrent use.
package memtier
