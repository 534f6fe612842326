// Package netloop serves connections from event loops, as memcached's worker threads and nginx's
// workers serve theirs, instead of by a goroutine each: the front ends (the HTTP fast path and
// the memcached protocol) run their protocol code on a loop's goroutine, per batch of bytes read.
//
// A Group is a set of loops for one front end. Add hands it an accepted connection: the loop
// serves a duplicate of the socket and closes the net.Conn, so that the runtime's poller no longer
// watches it, and the connection keeps its place in its listener's limit (netlimit.Take). Each
// loop is a goroutine that waits in epoll_wait for its sockets, reads what a readable socket has
// into the connection's input buffer, and calls its Protocol's Serve. The protocol answers the
// whole requests at the front of Input, one after the other, with Send. What Send is given
// during the loop's batch (the sockets one epoll_wait returned) is held back to the batch's end
// and written then, one writev of the non-blocking socket per connection, so that a client
// woken by its first answer finds the others of the batch ready too; once a connection holds
// more than deferMax bytes, they are written at once. What the socket does not take waits in
// the connection (bytes the protocol holds for the write by reference, others copied) while the
// loop serves its other connections; the connection then reads nothing until its output is
// written, and Serve is called again. A request the loop should not serve (one that would block, or that the
// protocol does not frame) leaves the loop with Detach: a net.Conn again, over the same socket,
// with the bytes read and not consumed in front.
//
// Time limits are kept by a sweep of each loop's connections, not a timer per request: Idle
// while a connection waits for a request, Read while a request is read partly, Write while
// output waits; each runs from the start of its phase and is kept to within the sweep's period
// (an eighth of the shortest limit, within [10ms, 1s]).
//
// A loop holds its P while it waits in epoll_wait, as any system call does: a process that runs
// loops should have that many Ps more than it would otherwise (runtime.GOMAXPROCS). A loop passes
// through the scheduler every 2 ms, since sysmon preempts a goroutine that does not within 10 ms
// and then polls every 20 µs for a while.
//
// Invariants:
//   - only the loop's goroutine touches its connections (Add passes new ones under a mutex);
//   - a connection with output waiting is watched for writability only, and reads nothing;
//   - what Send holds back for the batch's end comes before any output waiting, and is written
//     before the loop waits again (Waiting does not count it: it is no back-pressure);
//   - every hold given to Send is closed once: when all output before and with it is written,
//     or when the connection closes or is detached;
//   - Protocol.Closed is called once for a connection that closes, never for one detached.
//
// Event loops exist on Linux; elsewhere Available is false and NewGroup fails.
package netloop
