//go:build !linux

package netloop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
)

// Available says the platform has event loops: not this one.
const Available = false

// Group is loop_linux.go's; elsewhere NewGroup fails and front ends serve goroutines.
type Group struct{}

// NewGroup fails: the platform has no event loops.
func NewGroup(int, Limits, *slog.Logger) (*Group, error) { return nil, errors.ErrUnsupported }

func (*Group) Len() int                                      { return 0 }
func (*Group) Add(net.Conn, int, func(*Conn) Protocol) error { return errors.ErrUnsupported }
func (*Group) Close()                                        {}
func (*Group) Shutdown(context.Context) error                { return nil }

// Conn is loop_linux.go's.
type Conn struct{}

func (*Conn) LocalAddr() net.Addr                       { return nil }
func (*Conn) RemoteAddr() net.Addr                      { return nil }
func (*Conn) Input() []byte                             { return nil }
func (*Conn) Consume(int)                               {}
func (*Conn) Need(int)                                  {}
func (*Conn) Waiting() bool                             { return false }
func (*Conn) Closing() bool                             { return true }
func (*Conn) CloseAfter()                               {}
func (*Conn) Send([][]byte, []bool, ...io.Closer) error { return errors.ErrUnsupported }
func (*Conn) Detach() (net.Conn, []byte, error)         { return nil, nil, errors.ErrUnsupported }
func (*Conn) Park()                                     {}
func (*Conn) Resume()                                   {}
