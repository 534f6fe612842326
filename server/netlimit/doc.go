// Package netlimit bounds the number of connections a listener has open at once.
//
// Past the limit a new connection is not left waiting in the kernel's backlog (where a client
// cannot tell a busy server from a dead one): it is accepted, handed to a reject function that
// may write a protocol-specific refusal, and closed. A Listener is safe for concurrent use.
package netlimit
