//go:build !linux

package httpapi

import (
	"errors"
	"net"
)

// haveLoops says the platform has event loops (FastConfig.EventLoops).
const haveLoops = false

// eventLoop is loop_linux.go's; elsewhere there are none, and connections get goroutines.
type eventLoop struct{}

func (f *FastPath) startLoops(int) error { return errors.ErrUnsupported }

func (*eventLoop) add(net.Conn) {}

func (*eventLoop) wake() {}
