package httpapi

import (
	"bytes"
	"io"
	"net"
	"time"

	"github.com/seed57392e9e/blobcache/server/netloop"
)

// Event loops (FastConfig.Loops): the fast path's connections served by a netloop.Group instead
// of a goroutine each. A loop reads what a readable socket has and calls Serve, which answers the
// whole requests in it one after the other (fastConn.respond, the same code as a goroutine's);
// each response is one writev, and one the socket cannot take at once waits in the connection
// (the value by reference when the store holds it for the write, else copied) while the loop
// serves its other connections. A request the fast path does not serve hands the connection to
// net/http as a goroutine's would (a net.Conn again, over the same socket, with the bytes read
// and not used). TLS and FastConfig.SendFromFile keep goroutines.

// loopConn is a fast-path connection served by an event loop.
type loopConn struct {
	fastConn
	lc *netloop.Conn

	left     int  // the bytes of Input the last Serve left: more arrived if Input is longer
	answered bool // a request was answered since the last read
	held     []bool

	// A request answered on a goroutine while the connection is parked (a read that may wait
	// for the device, as in the memcached front end's loop.go): its response is gathered here.
	parked struct {
		active, ok, closeAfter bool
		n                      int // the request's bytes
		iov                    [][]byte
		held                   []bool
		holds                  []io.Closer
	}
	collecting bool // send gathers into parked
}

// startLoops starts n loops; the accept loop then gives them its connections.
func (f *FastPath) startLoops(n int) error {
	g, err := netloop.NewGroup(n, netloop.Limits{Idle: f.cfg.IdleTimeout, Write: f.cfg.WriteTimeout}, f.h.log)
	if err != nil {
		return err
	}
	f.loops = g
	return nil
}

// serveFromLoop gives c, a connection just accepted, to a loop; false if it cannot (c is then
// as it was).
func (f *FastPath) serveFromLoop(nc net.Conn) bool {
	err := f.loops.Add(nc, fastReadBuffer, func(lc *netloop.Conn) netloop.Protocol {
		f.h.m.ConnOpened("http")
		c := &loopConn{lc: lc}
		c.init(f, c)
		return c
	})
	if err != nil {
		f.h.log.Error("cannot serve a connection from an event loop; serving it from a goroutine", "err", err)
		return false
	}
	return true
}

// started is transport's: a loop bounds a response's write by its Limits.
func (c *loopConn) started(time.Time) {}

// send is transport's: the loop's connection writes what the socket takes at once and keeps the
// rest, the last piece by reference when it is held.
func (c *loopConn) send(iov [][]byte, hold io.Closer) error {
	if c.collecting {
		p := &c.parked
		for i, b := range iov {
			h := hold != nil && i == len(iov)-1
			if !h {
				b = bytes.Clone(b)
			}
			p.iov, p.held = append(p.iov, b), append(p.held, h)
		}
		if hold != nil {
			p.holds = append(p.holds, hold)
		}
		return nil
	}
	if hold == nil {
		return c.lc.Send(iov, nil)
	}
	c.held = append(c.held[:0], make([]bool, len(iov))...)
	c.held[len(iov)-1] = true
	return c.lc.Send(iov, c.held, hold)
}

// Serve is netloop.Protocol's: it answers the whole requests read until one's response has to
// wait.
func (c *loopConn) Serve(lc *netloop.Conn) {
	if c.parked.active && !c.resume() {
		return
	}
	if len(lc.Input()) > c.left {
		c.answered = false // a read brought more
	}
	defer func() { c.left = len(lc.Input()) }()
	for !lc.Waiting() {
		in := lc.Input()
		if len(in) == 0 {
			return
		}
		var n int
		var res parseResult
		c.req, n, res = parseRequest(in, c.f.h.maxKeyLen)
		if res == incomplete && c.answered {
			// The rest of a request pipelined behind those answered: the next read brings it
			// (or, still incomplete then, the connection goes to net/http).
			c.req = fastRequest{}
			return
		}
		if res != parsed || !c.f.h.authorizedValue(c.req.auth) {
			c.req = fastRequest{}
			c.handOver()
			return
		}
		ok, resident := c.answer(true)
		if !resident {
			c.park(n)
			return
		}
		closeAfter := c.req.close
		c.req = fastRequest{} // no reference into the buffer outlives the request
		lc.Consume(n)
		c.answered = true
		if lc.Waiting() {
			c.f.waited.Add(1)
		}
		if !ok || closeAfter {
			lc.CloseAfter()
			return
		}
	}
}

// park answers the request (of n bytes) on a goroutine of its own, the connection parked
// meanwhile: its blob is not in memory, and reading it may wait for the device, which would hold
// the loop's other connections.
func (c *loopConn) park(n int) {
	c.f.parks.Add(1)
	c.parked.active, c.parked.n = true, n
	c.collecting = true
	c.lc.Park()
	go func() {
		c.parked.ok, c.parked.closeAfter = c.respond(), c.req.close
		c.req = fastRequest{}
		c.lc.Resume()
	}()
}

// resume takes up a connection whose parked request is answered: the response goes out (or
// waits) as any other. false if the connection is to close.
func (c *loopConn) resume() bool {
	p, lc := &c.parked, c.lc
	c.collecting = false
	lc.Consume(p.n)
	c.answered = true
	err := lc.Send(p.iov, p.held, p.holds...)
	clear(p.iov)
	clear(p.holds)
	p.iov, p.held, p.holds = p.iov[:0], p.held[:0], p.holds[:0]
	p.active = false
	if lc.Waiting() {
		c.f.waited.Add(1)
	}
	if err != nil || !p.ok || p.closeAfter {
		lc.CloseAfter()
		return false
	}
	return true
}

// Closed is netloop.Protocol's.
func (c *loopConn) Closed(netloop.Reason) {
	for _, h := range c.parked.holds {
		h.Close() // a parked response, never written
	}
	c.parked.holds = nil
	c.f.h.m.ConnClosed("http")
}

// handOver gives the connection, with the bytes read and not answered, to net/http.
func (c *loopConn) handOver() {
	nc, unread, err := c.lc.Detach()
	if err != nil {
		c.f.h.log.Error("cannot hand a connection to net/http", "err", err)
		return
	}
	hc := &handedConn{Conn: nc, r: nc}
	if len(unread) > 0 {
		hc.r = io.MultiReader(bytes.NewReader(bytes.Clone(unread)), nc)
	}
	if !c.f.handOver(hc) {
		hc.Close()
	}
}
