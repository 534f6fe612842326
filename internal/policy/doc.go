// Package policy decides what the cache keeps: which log a write goes to, which segment eviction
// takes next, which records of it are written again, which Puts are written at all, and how many
// bytes each of those may cost. It decides from plain values the cache hands it (where a key's
// newest record is, the oldest segment of each log, a record's size and hit count, the bytes
// held) and holds no segment, file or index: the cache carries the decisions out (region.go,
// reinsert.go and space.go of the root package).
//
// What it holds:
//
//   - Rules, one implementation per eviction policy: FIFO (one log, nothing read back),
//     reinsertion (one log; records hit since written are copied to its head before their
//     segment goes) and probation (S3-FIFO on flash: a probation log for new keys, a main log
//     for keys that proved themselves, and a ghost of the keys recently dropped from probation);
//   - Credit, the bytes reinsertion may still write, earned by the cache's own writes;
//   - Budget, the write budget (a generic cell rate algorithm over device bytes);
//   - SecondPut, the admission that writes a key on its second Put within its memory.
//
// Invariants the cache relies on (the root's region.go says why they make eviction out of id
// order safe):
//
//   - Route sends a write of a key that has a record to that record's log, and a copy (ToMain)
//     to main; only a key with no record goes to a log afresh.
//   - Victim never takes a main segment while an older probation segment is live.
//   - Copy never copies a record larger than the largest write buffer (it would have to be
//     streamed), and a record it copies out of probation starts with no hits.
//
// Concurrency: Rules.Route, Admitted, Victim, Dropped and Ghost are safe for concurrent use (the
// ghost set is lock-free); Copy is called by one goroutine at a time (the cache's reinserter).
// Credit is not safe for concurrent use: its owner's lock guards it. Budget and SecondPut are
// lock-free.
package policy
