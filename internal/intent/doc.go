// Package intent is the intent log: the key hashes and versions of the writes a cache has
// acknowledged and not yet handed to the kernel, kept in a file mapping shared with the kernel so
// that they outlive a crash of the process (SIGKILL, panic, OOM kill) without a system call per
// write. A write that a crash lost while it waited in a write buffer would otherwise let the
// key's older record, on disk, be served again after the restart; recovery reads the log's
// pending intents and forgets such older records.
//
// The file (INTENTS in the cache directory; internal/cachedir names it) is a header block and a ring of slots:
//
//	0         8          12         16                 24                 32         4096
//	+---------+----------+----------+------------------+------------------+----...---+
//	| magic   | version  | slots    | first (uint64)   | next (uint64)    | zero     |
//	+---------+----------+----------+------------------+------------------+----...---+
//	then slots x 16 bytes: key hash (uint64), record version (uint64)
//
// Positions grow without end; position p is slot p mod slots. The intents in [first, next) are
// pending: their records may not have reached the kernel. A writer stores an intent's slot before
// it advances next, so a crash between the two loses an intent whose write had not returned, and
// advances first only past intents whose records are committed. There are never more than slots
// pending intents (Append reports a full ring; the writer waits).
//
// Invariants: the log never makes a write forgotten that is on disk with its version or a newer
// one (recovery compares versions, which a cache hands out in increasing order); a header whose
// magic, version or slot count is wrong, or whose positions are out of order or further apart
// than the ring, is damage (Open reports it, and a cache then trusts nothing of the log and
// starts a new one: what a crash would have kept is then, at worst, an older value, as before the
// log existed). The log is not synced: a power loss may lose it (with Fsync every acknowledged
// write is on disk already).
package intent
