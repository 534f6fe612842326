//go:build linux

package netloop

import (
	"errors"
	"io"
	"math/bits"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seed57392e9e/blobcache/server/netlimit"
)

// Conn is a connection served by an event loop. Its methods are for its Protocol's Serve,
// on the loop's goroutine.
type Conn struct {
	l     *loop
	p     Protocol
	fd    int // -1 once closed or detached
	place *netlimit.Place

	local, remote net.Addr

	in   []byte // in[r:w] is read and not consumed
	r, w int
	own  []byte // the input buffer as made; in is a larger one from bigBuffers while Need wants it

	ph       phase
	since    time.Time // when ph began (for phaseIdle: the last read, or the end of output)
	consumed bool      // Serve consumed input: a request read in part is a new one

	out        [][]byte    // bytes to write, in order, when the socket takes them
	holds      []io.Closer // closed once out (and deferred) is written
	spill      []byte      // the copies in out and deferred of bytes not held
	iovecs     []unix.Iovec
	events     uint32 // what the socket is watched for
	closeAfter bool   // close once out is written

	// deferred is what Send was given during the loop's batch of events, written at its end
	// (flushDeferred) or once it passes deferMax bytes; while there is any, out is empty.
	// queued says the connection is in the loop's list of them.
	deferred      [][]byte
	deferredBytes int
	queued        bool

	// Park's state, guarded by the loop's mu: the connection is parked (a request runs
	// elsewhere), its Resume is queued for the loop, or it was closed while parked (Resume then
	// calls Closed, with parkWhy).
	park    parkState
	parkWhy Reason
	parking bool // Park was called and the loop has not taken the Resume: the loop's own copy
}

// parkState is where a parked connection is.
type parkState uint8

const (
	notParked   parkState = iota
	parked                // Park was called, Resume not yet
	resumed               // Resume was called; the loop has not served the connection since
	parkDropped           // closed while parked: Resume calls Closed
)

// phase is what a connection is doing, for its time limit.
type phase uint8

const (
	phaseIdle    phase = iota // waiting for a request
	phaseReading              // a request read in part
	phaseWriting              // output waiting
)

// spillKeep is the most of its spill buffer a connection keeps once its output is written: a
// larger one (a value of a megabyte copied) is given back to the collector.
const spillKeep = 256 << 10

// bigBuffers pools the input buffers Need makes larger than a connection's own, by size: class
// k holds buffers of 1<<k bytes, so that a connection that reads a large request takes one for as
// long as it holds the request, not one of its own for good, nor a new one each time.
var bigBuffers [31]sync.Pool

func getBig(n int) []byte {
	k := bits.Len(uint(n - 1))
	if k >= len(bigBuffers) {
		return make([]byte, n)
	}
	if b, ok := bigBuffers[k].Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 1<<k)
}

func putBig(b []byte) {
	k := bits.Len(uint(len(b) - 1))
	if k < len(bigBuffers) && len(b) == 1<<k {
		bigBuffers[k].Put(&b)
	}
}

// errClosed is what Send returns once the connection is closed.
var errClosed = errors.New("netloop: connection closed")

func newConn(nc net.Conn, bufSize int) (*Conn, error) {
	fd, err := dupSocket(nc)
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	c := &Conn{fd: fd, local: nc.LocalAddr(), remote: nc.RemoteAddr(), own: make([]byte, bufSize)}
	c.in = c.own
	inner, place := netlimit.Take(nc)
	inner.Close()
	c.place = place
	return c, nil
}

// dupSocket returns a duplicate of c's socket (close-on-exec, non-blocking as c's is).
func dupSocket(c net.Conn) (int, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1, errors.ErrUnsupported
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) {
		fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, os.NewSyscallError("fcntl", derr)
	}
	return fd, nil
}

// LocalAddr and RemoteAddr are the connection's, as its net.Conn had them.
func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// Input is the bytes read and not consumed. It is valid until Consume, Need or Serve's return.
func (c *Conn) Input() []byte { return c.in[c.r:c.w] }

// Consume marks the first n bytes of Input as used.
func (c *Conn) Consume(n int) {
	c.r += n
	c.consumed = true
}

// Need makes room for Input to reach n bytes, read by the loop before Serve is called again.
func (c *Conn) Need(n int) {
	switch {
	case n <= len(c.in)-c.r:
		return
	case n <= len(c.in):
		c.w = copy(c.in, c.in[c.r:c.w])
		c.r = 0
		return
	}
	in := getBig(n)
	c.w = copy(in, c.in[c.r:c.w])
	c.r = 0
	c.dropBig()
	c.in = in
}

// dropBig gives a larger input buffer back to bigBuffers (the connection uses its own again).
func (c *Conn) dropBig() {
	if len(c.in) > len(c.own) {
		putBig(c.in)
	}
	c.in = c.own
}

// Park stops serving the connection until Resume: the loop reads nothing from it, does not call
// Serve and applies no time limit meanwhile (output that waits is still written). It is for a
// request that may wait (a read from the device): Serve parks the connection, runs the request
// on a goroutine of its own, and returns; the goroutine calls Resume when done, and the loop
// calls Serve again. Input is left as it is until then.
func (c *Conn) Park() {
	c.parking = true
	c.l.mu.Lock()
	c.park = parked
	c.l.mu.Unlock()
}

// Resume ends Park; any goroutine may call it, once per Park. If the connection was closed
// meanwhile (Shutdown gave up waiting), Resume calls the protocol's Closed instead, on its own
// goroutine.
func (c *Conn) Resume() {
	l := c.l
	l.mu.Lock()
	if c.park == parkDropped {
		c.park = notParked
		l.mu.Unlock()
		c.p.Closed(c.parkWhy)
		return
	}
	c.park = resumed
	l.resumed = append(l.resumed, c)
	l.mu.Unlock()
	l.wake()
}

// Waiting reports whether output waits for the socket: Serve should return, and is called
// again once it is written.
func (c *Conn) Waiting() bool { return len(c.out) > 0 }

// Closing reports whether the group is closing: Serve should answer no more requests.
func (c *Conn) Closing() bool { return c.l.g.closing.Load() }

// CloseAfter closes the connection once its output is written.
func (c *Conn) CloseAfter() { c.closeAfter = true }

// Send writes iov's bytes after those sent before, or keeps them to write later: held[i] (held
// may be nil) says iov[i] stays valid until holds are closed, others are copied if they must
// wait. holds are closed once written, or when the connection closes. Send may change iov's
// elements. A write error is returned (the protocol should close).
func (c *Conn) Send(iov [][]byte, held []bool, holds ...io.Closer) error {
	if c.fd < 0 {
		closeAll(holds)
		return errClosed
	}
	if len(c.out) == 0 && c.l.inBatch {
		// Held back to the batch's end, when the loop has answered every socket it was told
		// of: a client woken by the first answer then finds the others ready too.
		var n int
		c.deferred, n = c.keep(c.deferred, iov, held, holds)
		c.deferredBytes += n
		if c.deferredBytes > deferMax {
			return c.writeDeferred()
		}
		if !c.queued {
			c.queued = true
			c.l.deferred = append(c.l.deferred, c)
		}
		return nil
	}
	if len(c.out) == 0 {
		rest, err := c.writev(iov)
		if err != nil || len(rest) == 0 {
			closeAll(holds)
			return err
		}
		if held != nil {
			held = held[len(iov)-len(rest):]
		}
		iov = rest
	}
	c.out, _ = c.keep(c.out, iov, held, holds)
	return nil
}

// keep appends iov's pieces to dst to be written later, copying those not held (spillCopy), and
// takes holds; it returns dst and the bytes appended.
func (c *Conn) keep(dst, iov [][]byte, held []bool, holds []io.Closer) ([][]byte, int) {
	n := 0
	for i, p := range iov {
		if held == nil || !held[i] {
			p = c.spillCopy(p)
		}
		dst = append(dst, p)
		n += len(p)
	}
	c.holds = append(c.holds, holds...)
	return dst, n
}

func closeAll(holds []io.Closer) {
	for _, h := range holds {
		h.Close()
	}
}

// spillCopy copies p into the spill buffer, which stays valid until out is written.
func (c *Conn) spillCopy(p []byte) []byte {
	if cap(c.spill)-len(c.spill) < len(p) {
		// The pieces in out keep the old buffer alive.
		c.spill = make([]byte, 0, max(2*cap(c.spill), len(p), 4<<10))
	}
	start := len(c.spill)
	c.spill = append(c.spill, p...)
	return c.spill[start:len(c.spill):len(c.spill)]
}

// Detach takes the connection out of its loop and returns it as a net.Conn (in the runtime's
// poller, holding the connection's place in its listener's limit) with the output that waited
// written, and the bytes of Input, which the caller reads before the connection's. On error the
// connection is closed (Closed is called).
func (c *Conn) Detach() (nc net.Conn, unread []byte, err error) {
	fd := c.fd
	out, holds := append(c.deferred, c.out...), c.holds
	c.out, c.holds, c.deferred, c.deferredBytes = nil, nil, nil, 0
	c.forget()
	file := os.NewFile(uintptr(fd), "netloop")
	nc, err = net.FileConn(file) // a duplicate, in the runtime's poller
	file.Close()
	if err == nil && len(out) > 0 {
		b := net.Buffers(out)
		_, err = netlimit.WriteBuffers(nc, &b)
	}
	closeAll(holds)
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		c.place.Release()
		c.p.Closed(ReasonFailed)
		return nil, nil, err
	}
	return netlimit.Hold(nc, c.place), c.in[c.r:c.w], nil
}

// ready serves the connection whose socket the loop was told of: it writes the output waiting,
// or reads and serves requests.
func (c *Conn) ready(now time.Time) {
	if len(c.out) > 0 {
		if c.flush() != nil {
			c.drop(ReasonPeer)
			return
		}
		if len(c.out) > 0 {
			return
		}
		if c.parking {
			c.watch(0) // nothing until Resume
			return
		}
		if c.closeAfter {
			c.drop(ReasonClosed)
			return
		}
		c.serve(now) // requests read with the last ones
		return
	}
	if c.parking {
		c.watch(0)
		return
	}
	if c.r == c.w {
		c.r, c.w = 0, 0
		c.dropBig()
	} else if c.r > 0 {
		c.w = copy(c.in, c.in[c.r:c.w])
		c.r = 0
	}
	if c.w == len(c.in) {
		// Full, and Serve neither consumed nor asked for more: the protocol cannot go on.
		c.drop(ReasonFailed)
		return
	}
	n, err := unix.Read(c.fd, c.in[c.w:])
	switch {
	case errors.Is(err, unix.EAGAIN):
		return
	case err != nil || n == 0: // an error, or the client closed its side
		c.drop(ReasonPeer)
		return
	}
	c.w += n
	c.serve(now)
}

// serve runs the protocol on what was read, then watches the socket for what comes next.
func (c *Conn) serve(now time.Time) {
	c.consumed = false
	c.p.Serve(c)
	if c.fd < 0 {
		return // detached or dropped
	}
	out := len(c.out) > 0
	if c.parking {
		ev := uint32(0)
		if out {
			ev = writeEvents
		}
		c.watch(ev)
		return
	}
	if !out && len(c.deferred) == 0 && c.closeAfter {
		c.drop(ReasonClosed)
		return
	}
	ev := uint32(readEvents)
	if out {
		ev = writeEvents
	}
	if !c.watch(ev) {
		return
	}
	ph := phaseIdle
	switch {
	case out:
		ph = phaseWriting
	case c.r < c.w:
		ph = phaseReading
	}
	switch {
	case ph == phaseIdle:
		c.ph, c.since = ph, now
	case ph != c.ph || c.consumed:
		// A request began, or output: from now, not from the read before Serve, which may
		// have run long.
		c.ph, c.since = ph, time.Now()
	}
}

// watch sets the events the socket is watched for; false if it cannot (the connection is then
// dropped).
func (c *Conn) watch(ev uint32) bool {
	if ev == c.events {
		return true
	}
	if err := unix.EpollCtl(c.l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: ev, Fd: int32(c.fd)}); err != nil {
		c.drop(ReasonFailed)
		return false
	}
	c.events = ev
	return true
}

// idle reports whether the connection waits for a request with nothing of one read.
func (c *Conn) idle() bool {
	return len(c.out) == 0 && len(c.deferred) == 0 && c.r == c.w && !c.parking
}

// limit is the time limit of the connection's phase, and the reason it closes past it.
func (c *Conn) limit() (time.Duration, Reason) {
	lim := c.l.g.lim
	if c.parking {
		return 0, 0 // a request runs elsewhere (Park): no limit
	}
	switch c.ph {
	case phaseWriting:
		return lim.Write, ReasonWriteTimeout
	case phaseReading:
		if lim.Read > 0 {
			return lim.Read, ReasonReadTimeout
		}
	}
	return lim.Idle, ReasonIdleTimeout
}

// deferMax is the most bytes a connection holds back for the end of its loop's batch: past it,
// what it holds is written at once, and what the socket does not take waits (Waiting), as
// without the batch. A value sent by reference counts its bytes too, so a large one goes at once.
const deferMax = 64 << 10

// writeDeferred writes what Send held back, as output that waits (out is empty while there is
// any): what the socket does not take stays in out.
func (c *Conn) writeDeferred() error {
	c.out = append(c.out, c.deferred...)
	clear(c.deferred)
	c.deferred, c.deferredBytes = c.deferred[:0], 0
	return c.flush()
}

// flushDeferred writes, at the end of the loop's batch, what Send held back during it, and
// watches the socket for writing if it did not take it all.
func (c *Conn) flushDeferred() {
	c.queued = false
	if c.fd < 0 {
		c.deferred, c.deferredBytes = nil, 0 // closed or detached: its holds are closed
		return
	}
	if len(c.deferred) == 0 {
		return
	}
	if err := c.writeDeferred(); err != nil {
		c.drop(ReasonPeer)
		return
	}
	if len(c.out) > 0 {
		if c.watch(writeEvents) {
			c.ph, c.since = phaseWriting, time.Now()
		}
		return
	}
	if c.closeAfter {
		c.drop(ReasonClosed)
	}
}

// flush writes what of out the socket takes; what it does not take stays in out.
func (c *Conn) flush() error {
	rest, err := c.writev(c.out)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		c.out = rest
		return nil
	}
	clear(c.out[:cap(c.out)])
	c.out = c.out[:0]
	c.closeHolds()
	if cap(c.spill) > spillKeep {
		c.spill = nil
	}
	c.spill = c.spill[:0]
	return nil
}

func (c *Conn) closeHolds() {
	for i, h := range c.holds {
		h.Close()
		c.holds[i] = nil
	}
	c.holds = c.holds[:0]
}

// writev writes iov with one writev and returns what the socket did not take (a suffix of iov,
// its first element cut); EAGAIN is not an error.
func (c *Conn) writev(iov [][]byte) ([][]byte, error) {
	for len(iov) > 0 {
		for len(iov) > 0 && len(iov[0]) == 0 {
			iov = iov[1:]
		}
		c.iovecs = c.iovecs[:0]
		for _, p := range iov[:min(len(iov), 1024)] { // IOV_MAX
			if len(p) > 0 {
				v := unix.Iovec{Base: &p[0]}
				v.SetLen(len(p))
				c.iovecs = append(c.iovecs, v)
			}
		}
		if len(c.iovecs) == 0 {
			return nil, nil // nothing but empty pieces
		}
		c.l.writevs.Add(1)
		r, _, errno := unix.Syscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&c.iovecs[0])), uintptr(len(c.iovecs)))
		clear(c.iovecs) // no reference to a value outlives its send
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return iov, nil
		case errno != 0:
			return iov, os.NewSyscallError("writev", errno)
		}
		n := int(r)
		for n > 0 && len(iov) > 0 {
			if n < len(iov[0]) {
				iov[0] = iov[0][n:]
				return iov, nil // the socket took what it could
			}
			n -= len(iov[0])
			iov = iov[1:]
		}
	}
	return nil, nil
}

// drop closes the connection and forgets it. Only the loop's goroutine calls it.
func (c *Conn) drop(why Reason) {
	if c.fd < 0 {
		return
	}
	fd := c.fd
	c.forget()
	unix.Close(fd)
	c.place.Release()
	c.l.mu.Lock()
	if c.park == parked {
		// The request running elsewhere still uses the connection's protocol (and its input):
		// Resume calls Closed.
		c.park, c.parkWhy = parkDropped, why
		c.l.mu.Unlock()
		return
	}
	c.park = notParked
	c.l.mu.Unlock()
	c.r, c.w = 0, 0
	c.dropBig()
	c.p.Closed(why)
}

// close closes a connection its loop does not hold (never taken in, or the loop has exited).
func (c *Conn) close(why Reason) {
	unix.Close(c.fd)
	c.fd = -1
	c.place.Release()
	c.p.Closed(why)
}

// forget takes the connection out of its loop, and gives up its output.
func (c *Conn) forget() {
	if c.l.conns[int32(c.fd)] == c {
		delete(c.l.conns, int32(c.fd))
		unix.EpollCtl(c.l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	c.fd = -1
	clear(c.out)
	c.out = nil
	clear(c.deferred)
	c.deferred, c.deferredBytes = nil, 0
	c.closeHolds()
}
