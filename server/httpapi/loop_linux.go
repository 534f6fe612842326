//go:build linux

package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seed57392e9e/blobcache/server/netlimit"
)

// Event loops (FastConfig.Loops): the fast path's connections served as memcached's worker
// threads and nginx's workers serve theirs, instead of by a goroutine each. A loop is a goroutine
// that waits in epoll_wait for its connections' sockets (holding its P, as any system call does,
// unless sysmon hands the P to other work); it reads what a
// readable socket has, answers the whole requests in it one after the other (fastConn.respond,
// the same code as a goroutine's) and writes each response with one writev of a non-blocking
// socket. A response the socket cannot take at once waits in the connection (the value by
// reference when the store holds it for the write, else copied) while the loop serves its other
// connections, and the connection reads no request until it is written.
//
// The accept loop (fast.go) hands each connection to a loop in turn. The loop serves a duplicate
// of its socket and closes the net.Conn, so that the runtime's poller, which would wake for the
// same socket, no longer watches it; the connection keeps its place in the listener's limit
// (netlimit.Take). A request the fast path does not serve hands the connection to net/http as a
// goroutine's would (a net.Conn again, over the same socket, with the bytes read and not used).
//
// Invariants:
//   - only the loop's goroutine touches its connections (the accept loop passes new ones through
//     added, under mu);
//   - a connection with output waiting (out) is watched for writability only, and reads nothing;
//   - a hold is closed once, when all of out is written or the connection is dropped.

// eventLoop is one loop and the connections it serves.
type eventLoop struct {
	f     *FastPath
	ep    int // the epoll instance
	wakeF int // an eventfd: a connection added, or the fast path closing

	mu     sync.Mutex
	added  []*loopConn // accepted, for the loop to take
	exited bool        // the loop returned: added takes no more

	conns  map[int32]*loopConn
	period time.Duration // of the sweep: sweepPeriod of the fast path's limits
	swept  time.Time
}

// loopConn is a connection served by an eventLoop.
type loopConn struct {
	fastConn
	l     *eventLoop
	fd    int
	place *netlimit.Place

	buf  []byte // fastReadBuffer bytes; buf[r:w] is read and not yet answered
	r, w int

	active time.Time // the last read that brought bytes, the accept, or the end of a waiting response: the limits run from it

	out        [][]byte    // bytes to write, in order, when the socket takes them
	holds      []io.Closer // closed once out is written
	spill      []byte      // the copies in out of bytes not held
	iovecs     []unix.Iovec
	closeAfter bool // close once out is written
}

// haveLoops says the platform has event loops (FastConfig.EventLoops).
const haveLoops = true

// yieldEvery is how often a loop passes through the scheduler (run).
const yieldEvery = 2 * time.Millisecond

// spillKeep is the most of its spill buffer a connection keeps once its output is written: a
// larger one (a value of a megabyte copied) is given back to the collector.
const spillKeep = 256 << 10

// startLoops opens n loops; the accept loop then gives them its connections.
func (f *FastPath) startLoops(n int) error {
	var loops []*eventLoop
	for range n {
		l, err := newEventLoop(f)
		if err != nil {
			for _, l := range loops {
				l.closeFds()
			}
			return err
		}
		loops = append(loops, l)
	}
	f.loops = loops
	for _, l := range loops {
		f.wg.Go(l.run)
	}
	return nil
}

func newEventLoop(f *FastPath) (*eventLoop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wf, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &eventLoop{f: f, ep: ep, wakeF: wf, conns: make(map[int32]*loopConn),
		period: sweepPeriod(f.cfg.IdleTimeout, f.cfg.WriteTimeout)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wf, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wf)}); err != nil {
		l.closeFds()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

func (l *eventLoop) closeFds() {
	unix.Close(l.ep)
	unix.Close(l.wakeF)
}

// wake makes the loop return from its wait.
func (l *eventLoop) wake() {
	one := uint64(1)
	unix.Write(l.wakeF, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// add gives the loop c, a connection just accepted (and counted open).
func (l *eventLoop) add(c net.Conn) {
	inner, place := netlimit.Take(c)
	fd, err := dupSocket(inner)
	inner.Close()
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		place.Release()
		l.f.h.m.ConnClosed("http")
		l.f.h.log.Error("cannot serve a connection from an event loop", "err", err)
		return
	}
	lc := &loopConn{l: l, fd: fd, place: place, buf: make([]byte, fastReadBuffer)}
	lc.init(l.f, lc)
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		lc.discard() // never the loop's: its conns are not this goroutine's to touch
		return
	}
	l.added = append(l.added, lc)
	l.mu.Unlock()
	l.wake()
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

// run is the loop: it serves its connections until the fast path closes and they are done, or
// Shutdown gives up on them.
func (l *eventLoop) run() {
	defer l.exit()
	events := make([]unix.EpollEvent, 128)
	var yielded time.Time
	for {
		n, err := unix.EpollWait(l.ep, events, l.waitMillis())
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.f.h.log.Error("event loop failed", "err", os.NewSyscallError("epoll_wait", err))
			return
		}
		now := time.Now()
		for _, ev := range events[:max(n, 0)] {
			if int(ev.Fd) == l.wakeF {
				var b [8]byte
				unix.Read(l.wakeF, b[:])
				l.takeAdded(now)
				continue
			}
			if c := l.conns[ev.Fd]; c != nil {
				c.ready(now)
			}
		}
		// A goroutine that does not pass through the scheduler for 10ms is preempted by sysmon,
		// which then polls every 20µs for a while: a loop yields before that.
		if now.Sub(yielded) > yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		if l.f.forced.Load() {
			return
		}
		if l.f.closed() {
			for _, c := range l.conns {
				if len(c.out) == 0 {
					c.drop()
				} else {
					c.closeAfter = true
				}
			}
			if len(l.conns) == 0 {
				return
			}
		}
		l.sweep(now)
	}
}

// exit drops every connection left, and what is added after.
func (l *eventLoop) exit() {
	l.mu.Lock()
	l.exited = true
	added := l.added
	l.added = nil
	l.mu.Unlock()
	for _, c := range added {
		c.drop()
	}
	for _, c := range l.conns {
		c.drop()
	}
	l.closeFds()
}

func (l *eventLoop) takeAdded(now time.Time) {
	l.mu.Lock()
	added := l.added
	l.added = nil
	l.mu.Unlock()
	for _, c := range added {
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: readEvents, Fd: int32(c.fd)}); err != nil {
			l.f.h.log.Error("cannot serve a connection from an event loop", "err", os.NewSyscallError("epoll_ctl", err))
			c.drop()
			continue
		}
		c.active = now
		l.conns[int32(c.fd)] = c
	}
}

const (
	readEvents  = unix.EPOLLIN | unix.EPOLLRDHUP
	writeEvents = unix.EPOLLOUT
)

// sweepPeriod is how often a loop looks for connections past their limits: an eighth of the
// shorter limit (as slackDeadline keeps a goroutine's), within [10ms, 1s]; 0 with no limit.
func sweepPeriod(idle, write time.Duration) time.Duration {
	d := idle
	if write > 0 && (d <= 0 || write < d) {
		d = write
	}
	if d <= 0 {
		return 0
	}
	return min(max(d/8, 10*time.Millisecond), time.Second)
}

// waitMillis is epoll_wait's timeout: until the next sweep, or none.
func (l *eventLoop) waitMillis() int {
	if l.period == 0 || len(l.conns) == 0 {
		return -1
	}
	return int(l.period / time.Millisecond)
}

// sweep drops the connections past their limits: idle past IdleTimeout, or with output
// unwritten WriteTimeout after the read that asked for it.
func (l *eventLoop) sweep(now time.Time) {
	if l.period == 0 || now.Sub(l.swept) < l.period {
		return
	}
	l.swept = now
	for _, c := range l.conns {
		lim := l.f.cfg.IdleTimeout
		if len(c.out) > 0 {
			lim = l.f.cfg.WriteTimeout
		}
		if lim > 0 && now.Sub(c.active) > lim {
			c.drop()
		}
	}
}

// ready serves the connection whose socket the loop was told of: it writes the output waiting,
// or reads and answers requests.
func (c *loopConn) ready(now time.Time) {
	if len(c.out) > 0 {
		if !c.flush() {
			c.drop()
			return
		}
		if len(c.out) > 0 {
			return
		}
		if c.closeAfter || c.l.f.closed() {
			c.drop()
			return
		}
		c.active = now // the wait for the next request starts
		if err := c.watch(readEvents); err != nil {
			c.drop()
			return
		}
		c.serveBuffered() // requests read with the last ones
		return
	}
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	n, err := unix.Read(c.fd, c.buf[c.w:])
	switch {
	case errors.Is(err, unix.EAGAIN):
		return
	case err != nil || n == 0: // an error, or the client closed its side
		c.drop()
		return
	}
	c.w += n
	c.active = now
	c.serveBuffered()
}

// serveBuffered answers the whole requests in buf[r:w] until one's response has to wait.
func (c *loopConn) serveBuffered() {
	for c.r < c.w {
		var n int
		var res parseResult
		c.req, n, res = parseRequest(c.buf[c.r:c.w], c.f.h.maxKeyLen)
		if res == incomplete && c.r > 0 {
			// The rest of a request pipelined behind those answered: the next read brings it
			// (or, still incomplete then, the connection goes to net/http).
			return
		}
		if res != parsed || !c.f.h.authorizedValue(c.req.auth) {
			c.req = fastRequest{}
			c.handOver()
			return
		}
		ok, closeAfter := c.respond(), c.req.close
		c.req = fastRequest{} // no reference into the buffer outlives the request
		c.r += n
		switch {
		case !ok:
			c.drop()
			return
		case len(c.out) > 0:
			c.f.waited.Add(1)
			c.closeAfter = closeAfter
			if err := c.watch(writeEvents); err != nil {
				c.drop()
			}
			return
		case closeAfter:
			c.drop()
			return
		}
	}
}

// watch sets the events the loop waits for on the connection.
func (c *loopConn) watch(events uint32) error {
	err := unix.EpollCtl(c.l.ep, unix.EPOLL_CTL_MOD, c.fd, &unix.EpollEvent{Events: events, Fd: int32(c.fd)})
	return os.NewSyscallError("epoll_ctl", err)
}

// started is transport's: a loop bounds a response's write by sweep.
func (c *loopConn) started(time.Time) {}

// send is transport's: it writes what the socket takes at once and keeps the rest in out.
func (c *loopConn) send(iov [][]byte, hold io.Closer) error {
	if len(c.out) == 0 {
		rest, err := c.writev(iov)
		if err != nil || len(rest) == 0 {
			if hold != nil {
				hold.Close()
			}
			return err
		}
		iov = rest
	}
	for i, p := range iov {
		if hold == nil || i < len(iov)-1 {
			p = c.spillCopy(p)
		}
		c.out = append(c.out, p)
	}
	if hold != nil {
		c.holds = append(c.holds, hold)
	}
	return nil
}

// spillCopy copies p into the spill buffer, which stays valid until out is written.
func (c *loopConn) spillCopy(p []byte) []byte {
	if cap(c.spill)-len(c.spill) < len(p) {
		// The pieces in out keep the old buffer alive.
		c.spill = make([]byte, 0, max(2*cap(c.spill), len(p), 4<<10))
	}
	start := len(c.spill)
	c.spill = append(c.spill, p...)
	return c.spill[start:len(c.spill):len(c.spill)]
}

// flush writes what of out the socket takes; false on a write error.
func (c *loopConn) flush() bool {
	rest, err := c.writev(c.out)
	if err != nil {
		return false
	}
	if len(rest) > 0 {
		c.out = rest
		return true
	}
	clear(c.out[:cap(c.out)])
	c.out = c.out[:0]
	c.closeHolds()
	if cap(c.spill) > spillKeep {
		c.spill = nil
	}
	c.spill = c.spill[:0]
	return true
}

func (c *loopConn) closeHolds() {
	for i, h := range c.holds {
		h.Close()
		c.holds[i] = nil
	}
	c.holds = c.holds[:0]
}

// writev writes iov with one writev and returns what the socket did not take (a suffix of iov,
// its first element cut); EAGAIN is not an error.
func (c *loopConn) writev(iov [][]byte) ([][]byte, error) {
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
func (c *loopConn) drop() {
	c.forget()
	c.discard()
}

// discard closes a connection the loop does not hold (forget has taken it out, or it was never
// in).
func (c *loopConn) discard() {
	unix.Close(c.fd)
	c.place.Release()
	c.f.h.m.ConnClosed("http")
}

// forget takes the connection out of its loop, and gives up its output.
func (c *loopConn) forget() {
	if c.l.conns[int32(c.fd)] == c {
		delete(c.l.conns, int32(c.fd))
		unix.EpollCtl(c.l.ep, unix.EPOLL_CTL_DEL, c.fd, nil)
	}
	clear(c.out)
	c.out = nil
	c.closeHolds()
}

// handOver gives the connection, with the bytes read and not answered, to net/http.
func (c *loopConn) handOver() {
	c.forget()
	file := os.NewFile(uintptr(c.fd), "http")
	nc, err := net.FileConn(file) // a duplicate, in the runtime's poller
	file.Close()
	if err != nil {
		c.place.Release()
		c.f.h.m.ConnClosed("http")
		c.f.h.log.Error("cannot hand a connection to net/http", "err", err)
		return
	}
	hc := &handedConn{Conn: netlimit.Hold(nc, c.place)}
	hc.r = hc.Conn
	if c.r < c.w {
		hc.r = io.MultiReader(bytes.NewReader(c.buf[c.r:c.w]), hc.Conn)
	}
	if !c.f.handOver(hc) {
		hc.Close()
	}
}
