//go:build linux

package netloop

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Available says the platform has event loops.
const Available = true

// yieldEvery is how often a loop passes through the scheduler (run).
const yieldEvery = 2 * time.Millisecond

// Group is a set of event loops serving one front end's connections.
type Group struct {
	loops  []*loop
	lim    Limits
	period time.Duration // of each loop's sweep
	log    *slog.Logger
	next   atomic.Uint32

	closing atomic.Bool // Close was called: loops drop idle connections and exit when empty
	forced  atomic.Bool // Shutdown gave up waiting: loops drop every connection
	wg      sync.WaitGroup
}

// loop is one event loop and the connections it serves.
type loop struct {
	g     *Group
	ep    int // the epoll instance
	wakeF int // an eventfd: a connection added, or the group closing

	mu      sync.Mutex
	added   []*Conn // accepted, for the loop to take
	resumed []*Conn // parked connections whose request is done (Conn.Resume)
	exited  bool    // the loop returned: added takes no more

	conns map[int32]*Conn
	swept time.Time

	// inBatch is set while the loop serves the sockets one epoll_wait returned; deferred are
	// the connections that were sent something meanwhile (Conn.Send), written at its end.
	inBatch  bool
	deferred []*Conn
	writevs  atomic.Int64 // writev calls, for the tests
}

// NewGroup starts n loops (n >= 1) with limits lim; log receives errors (nil discards them).
func NewGroup(n int, lim Limits, log *slog.Logger) (*Group, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Group{lim: lim, period: sweepPeriod(lim), log: log}
	for range max(n, 1) {
		l, err := newLoop(g)
		if err != nil {
			for _, l := range g.loops {
				l.closeFds()
			}
			return nil, err
		}
		g.loops = append(g.loops, l)
	}
	for _, l := range g.loops {
		g.wg.Go(l.run)
	}
	return g, nil
}

// Len is the number of loops; 0 for a nil Group (a front end without loops).
func (g *Group) Len() int {
	if g == nil {
		return 0
	}
	return len(g.loops)
}

// Add serves nc, a connection just accepted, from one of the loops in turn, with an input
// buffer of bufSize bytes and the Protocol proto makes for it. On success nc is closed (the
// loop serves a duplicate of its socket); on error nc is left as it was, for the caller to serve
// otherwise. Once the group is closing the connection is closed at once (Closed with
// ReasonShutdown).
func (g *Group) Add(nc net.Conn, bufSize int, proto func(*Conn) Protocol) error {
	c, err := newConn(nc, bufSize)
	if err != nil {
		return err
	}
	c.p = proto(c)
	l := g.loops[int(g.next.Add(1))%len(g.loops)]
	c.l = l
	l.mu.Lock()
	if l.exited {
		l.mu.Unlock()
		c.close(ReasonShutdown) // never the loop's: its conns are not this goroutine's to touch
		return nil
	}
	l.added = append(l.added, c)
	l.mu.Unlock()
	l.wake()
	return nil
}

// Close makes the loops close their idle connections, finish the requests they are reading
// and the output waiting, close each connection then, and exit once they have none.
func (g *Group) Close() {
	if g.closing.Swap(true) {
		return
	}
	for _, l := range g.loops {
		l.wake()
	}
}

// Shutdown closes g and waits for its loops to exit; when ctx ends first, the loops drop every
// connection, and Shutdown returns ctx's error once they have.
func (g *Group) Shutdown(ctx context.Context) error {
	g.Close()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		g.forced.Store(true)
		for _, l := range g.loops {
			l.wake()
		}
		<-done
		return ctx.Err()
	}
}

func newLoop(g *Group) (*loop, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wf, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(ep)
		return nil, os.NewSyscallError("eventfd", err)
	}
	l := &loop{g: g, ep: ep, wakeF: wf, conns: make(map[int32]*Conn)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wf, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wf)}); err != nil {
		l.closeFds()
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	return l, nil
}

func (l *loop) closeFds() {
	unix.Close(l.ep)
	unix.Close(l.wakeF)
}

// wake makes the loop return from its wait.
func (l *loop) wake() {
	one := uint64(1)
	unix.Write(l.wakeF, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// run is the loop: it serves its connections until the group closes and they are done, or
// Shutdown gives up on them.
func (l *loop) run() {
	defer l.exit()
	events := make([]unix.EpollEvent, 128)
	var yielded time.Time
	for {
		n, err := unix.EpollWait(l.ep, events, l.waitMillis())
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.g.log.Error("event loop failed", "err", os.NewSyscallError("epoll_wait", err))
			return
		}
		now := time.Now()
		l.inBatch = true
		for _, ev := range events[:max(n, 0)] {
			if int(ev.Fd) == l.wakeF {
				var b [8]byte
				unix.Read(l.wakeF, b[:])
				l.takeAdded(now)
				l.takeResumed(now)
				continue
			}
			if c := l.conns[ev.Fd]; c != nil {
				c.ready(now)
			}
		}
		l.inBatch = false
		for _, c := range l.deferred {
			c.flushDeferred()
		}
		clear(l.deferred)
		l.deferred = l.deferred[:0]
		// A goroutine that does not pass through the scheduler for 10ms is preempted by sysmon,
		// which then polls every 20µs for a while: a loop yields before that.
		if now.Sub(yielded) > yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		if l.g.forced.Load() {
			return
		}
		if l.g.closing.Load() {
			for _, c := range l.conns {
				if c.idle() {
					c.drop(ReasonShutdown)
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
func (l *loop) exit() {
	l.mu.Lock()
	l.exited = true
	added := l.added
	l.added = nil
	resumed := l.resumed
	l.resumed = nil
	for _, c := range resumed {
		c.park = notParked // done elsewhere: dropped below as any other
	}
	l.mu.Unlock()
	for _, c := range added {
		c.close(ReasonShutdown)
	}
	for _, c := range l.conns {
		c.drop(ReasonShutdown)
	}
	l.closeFds()
}

// takeResumed serves again the connections whose parked request is done.
func (l *loop) takeResumed(now time.Time) {
	l.mu.Lock()
	resumed := l.resumed
	l.resumed = nil
	for _, c := range resumed {
		c.park = notParked
	}
	l.mu.Unlock()
	for i, c := range resumed {
		resumed[i] = nil
		c.parking = false
		if c.fd >= 0 {
			c.serve(now)
		}
	}
}

func (l *loop) takeAdded(now time.Time) {
	l.mu.Lock()
	added := l.added
	l.added = nil
	l.mu.Unlock()
	for _, c := range added {
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, c.fd, &unix.EpollEvent{Events: readEvents, Fd: int32(c.fd)}); err != nil {
			l.g.log.Error("cannot serve a connection from an event loop", "err", os.NewSyscallError("epoll_ctl", err))
			c.close(ReasonFailed)
			continue
		}
		c.since, c.events = now, readEvents
		l.conns[int32(c.fd)] = c
	}
}

const (
	readEvents  = unix.EPOLLIN | unix.EPOLLRDHUP
	writeEvents = unix.EPOLLOUT
)

// sweepPeriod is how often a loop looks for connections past their limits: an eighth of the
// shortest limit, within [10ms, 1s]; 0 with no limit.
func sweepPeriod(lim Limits) time.Duration {
	d := time.Duration(0)
	for _, x := range []time.Duration{lim.Idle, lim.Read, lim.Write} {
		if x > 0 && (d == 0 || x < d) {
			d = x
		}
	}
	if d == 0 {
		return 0
	}
	return min(max(d/8, 10*time.Millisecond), time.Second)
}

// waitMillis is epoll_wait's timeout: until the next sweep, or none.
func (l *loop) waitMillis() int {
	if l.g.period == 0 || len(l.conns) == 0 {
		return -1
	}
	return int(l.g.period / time.Millisecond)
}

// sweep drops the connections past their phase's limit.
func (l *loop) sweep(now time.Time) {
	if l.g.period == 0 || now.Sub(l.swept) < l.g.period {
		return
	}
	l.swept = now
	for _, c := range l.conns {
		lim, why := c.limit()
		if lim > 0 && now.Sub(c.since) > lim {
			c.drop(why)
		}
	}
}
