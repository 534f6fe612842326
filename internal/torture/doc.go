// Package torture holds the pieces of BlobCache's crash-torture harness that do not need the
// cache: the operation log a writer process keeps, the values it writes, and the checker that
// decides, after the writer was killed, whether what the reopened cache returns is allowed.
//
// The writer logs every operation twice: before it is called (Begin) and after it returned
// (OK, or Fail). A Drain is logged the same way. The log is append-only, one fixed-size
// checksummed entry per write(2), so a writer killed with SIGKILL leaves a log whose every
// entry is whole (the page cache keeps what write returned); a torn entry at the end (a power
// loss) is ignored.
//
// Values are derived from (key, version): a 16-byte stamp naming both, then bytes from a
// generator seeded by them. A reader can tell from any value which write it came from and check
// every byte of it.
//
// The checker's rules, per key. After a crash of the process (AllowedAfterCrash): let a be the
// last operation on the key that returned. The key must read as a or as an operation begun after
// it: a Put's exact value, or a miss for a Delete; or a miss, unless a is durable (acknowledged
// before a Drain that returned, or a Delete that is durable by itself) and nothing was begun
// after it. With nothing acknowledged, the key's state before the run, an operation begun, or a
// miss if one was. After a power loss (Allowed): let d be the last durable operation; the key
// must read as d or as an operation begun after d, or a miss if one acknowledged after d was a
// Put (lost, its intent may have made the older value forgotten). With no durable operation,
// the state before the run too. When the run may evict, a miss is always allowed, a hit never
// outside those sets. Nothing else is: not an older value, not a deleted one, not a torn one.
//
// Concurrency: a Log may be appended to from many goroutines. Checker is not safe for
// concurrent use.
package torture
