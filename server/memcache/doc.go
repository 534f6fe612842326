// Package memcache serves BlobCache over the memcached text protocol, so that every memcached
// client and proxy (twemproxy, mcrouter) can use it.
//
// Commands: get, gets, gat, gats, set, add, replace, append, prepend, cas, delete, incr, decr,
// touch, flush_all, version, stats, verbosity, quit, and the meta commands mg, ms, md, ma, mn
// and me, answered as memcached 1.6 answers them. Values are binary-safe; keys are 1 to 250
// bytes without spaces or NUL (control bytes are taken, as memcached takes them), or any bytes
// with the meta commands' b flag (base64).
// Client flags, expiry and the cas value are the record's (its flags, expiry and version), so a
// get returns the flags that were set and an expired item is a miss.
//
// Conditional writes are atomic against every other writer, on any connection: add, replace
// and cas are the library's preconditions (IfAbsent, IfPresent, IfVersion), and append,
// prepend, incr, decr and ma are read-modify-writes that retry on a concurrent write
// (store.Update). The meta recache marks (W, Z, X) have no room in the record and are kept in
// memory by version (itemMarks); mg's h and l are refused (reads are not tracked). The binary
// protocol is answered with a CLIENT_ERROR line and the connection closed.
//
// Errors follow memcached: ERROR for an unknown command, CLIENT_ERROR for a malformed one,
// SERVER_ERROR when the server cannot do it. A command whose last token is noreply is not
// answered at all, its errors included. A request the server cannot resynchronise after (an
// unreadable data length, a data block not followed by \r\n, a line over MaxLineBytes that is
// not a retrieval) is answered and the connection closed; nothing of it is stored. A get,
// gets, gat or gats line may be of any length: it is read key by key, never held whole.
//
// oracle_test.go holds the server to a real memcached: the same scripts go to both, and the
// replies must match byte for byte but for the differences listed there (and in
// docs/SERVER.md).
//
// Pipelining: a connection's commands are answered in order, and answers are flushed when no
// more requests are buffered, so pipelined requests share writes.
//
// Connections: a command line and its data must arrive within ReadTimeout of the command's
// first byte, and a connection idle for IdleTimeout is closed (no slowloris). With a Token,
// a connection must first authenticate the way memcached 1.6 does in ASCII mode: a set whose
// data is "<user> <token>" (the user name is ignored).
//
// A Server is safe for concurrent use; Shutdown stops it gracefully.
package memcache
