package netloop

import "time"

// Limits are a Group's time limits; 0 is no limit.
type Limits struct {
	Idle  time.Duration // the wait for a request
	Read  time.Duration // from a request's first byte read to its last (0: Idle applies)
	Write time.Duration // from output waiting to its last byte written
}

// Protocol serves one connection's bytes.
type Protocol interface {
	// Serve answers the requests in c.Input, consuming each (Consume) and writing its answer
	// (Send), and returns when the rest of Input is not a whole request (more must be read: Need
	// makes room for it), when output waits (Waiting), or after CloseAfter or Detach. It is
	// called after bytes were read, and when waiting output is written.
	Serve(c *Conn)
	// Closed is called once when the connection is closed, not after Detach.
	Closed(why Reason)
}

// Reason is why a connection closed.
type Reason uint8

const (
	ReasonPeer         Reason = iota // the client closed its side, or the socket failed
	ReasonFailed                     // a write or the loop's set-up failed
	ReasonClosed                     // the protocol asked (CloseAfter)
	ReasonIdleTimeout                // no request within Limits.Idle
	ReasonReadTimeout                // a request not read within Limits.Read
	ReasonWriteTimeout               // output not written within Limits.Write
	ReasonShutdown                   // the group closed
)
