package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/server/metrics"
	"github.com/seed57392e9e/blobcache/server/netlimit"
	"github.com/seed57392e9e/blobcache/server/netloop"
	"github.com/seed57392e9e/blobcache/server/store"
)

// The fast path serves the requests a cache gets most, a GET or HEAD of a blob, on the
// connection's own goroutine, without net/http: a hit's status line and headers go out with the
// value in one write (writev, the value by reference when it lies in the memory tier), and
// nothing is allocated per request but what the store's lookup needs. Every other request, and
// any request the parser is not sure of (request.go), goes to net/http with its connection,
// which serves it and the rest of the connection's requests: the fast path hands it over with
// the bytes it has read and not used, and net/http reads them as if from the socket. A response
// from the fast path is the one Handler.ServeHTTP would give, to the byte but for the Date
// header's value (TestFastPathMatchesNetHTTP).

// FastPath is a net.Listener for net/http's Server that serves the fast path's requests itself
// and returns the connections it hands over from Accept.
type FastPath struct {
	h   *Handler
	ln  net.Listener
	cfg FastConfig

	handoff chan net.Conn
	done    chan struct{} // closed by Close
	once    sync.Once     // Close
	start   sync.Once     // the accept loop, at the first Accept
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[*goConn]struct{} // open, not handed over

	acceptErr atomic.Pointer[error]

	loops *netloop.Group // with FastConfig.Loops, from the first Accept

	served, handed atomic.Uint64 // requests answered, connections handed over (tests)
	waited         atomic.Uint64 // responses an event loop kept until the socket took them (tests)
	parks          atomic.Uint64 // requests an event loop answered on a goroutine (tests)
}

// FastConfig has the limits net/http would apply, as http.Server's fields of the same names.
type FastConfig struct {
	IdleTimeout  time.Duration // the wait for a request; 0: none
	WriteTimeout time.Duration // from a request's read to its response's end; 0: none
	// SendFromFile says the cache does not check values on read (VerifyOnRead off): a whole
	// value left in its segment file then goes to the socket from the file (Store.Send), as
	// net/http's path sends it. Otherwise values are read with Store.Get, one read a hit.
	// It takes precedence over Loops: a send from a file blocks as an event loop must not.
	SendFromFile bool
	// Loops is the number of event loops (loop_linux.go) that serve the fast path's
	// connections; 0 serves each connection on a goroutine of its own. Each loop holds a P
	// while it waits for its sockets: give the process that many Ps more (EventLoops says how
	// many run). If the loops cannot be set up, connections get goroutines.
	Loops int
}

// EventLoops is the number of event loops a FastPath with c runs: Loops, or none with
// SendFromFile or where the platform has none (not Linux).
func (c FastConfig) EventLoops() int {
	if !netloop.Available || c.SendFromFile {
		return 0
	}
	return max(c.Loops, 0)
}

// NewFastPath serves the fast path's requests on the connections ln accepts; serve the rest with
// an http.Server (whose Handler is h) over the returned listener. Connections are accepted from
// the server's first Accept on, so nothing is served before the http.Server serves.
func (h *Handler) NewFastPath(ln net.Listener, cfg FastConfig) *FastPath {
	return &FastPath{h: h, ln: ln, cfg: cfg, handoff: make(chan net.Conn), done: make(chan struct{}),
		conns: make(map[*goConn]struct{})}
}

// acceptLoop accepts connections until ln fails for good or f is closed. A temporary failure
// (out of descriptors) is retried after a pause that doubles up to a second, as net/http does.
func (f *FastPath) acceptLoop() {
	var pause time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			var ne net.Error
			//lint:ignore SA1019 net/http's Serve retries the same errors
			if errors.As(err, &ne) && ne.Temporary() && !f.closed() {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				f.h.log.Error("accept failed; retrying", "err", err, "in", pause)
				select {
				case <-time.After(pause):
				case <-f.done:
				}
				continue
			}
			f.acceptErr.Store(&err)
			f.Close()
			return
		}
		pause = 0
		if f.loops != nil && f.serveFromLoop(c) {
			continue
		}
		fc := f.newConn(c)
		f.mu.Lock()
		select {
		case <-f.done:
			f.mu.Unlock()
			c.Close()
			continue
		default:
		}
		f.conns[fc] = struct{}{}
		f.mu.Unlock()
		f.h.m.ConnOpened("http")
		f.wg.Go(fc.serve)
	}
}

// fastReadBuffer is the bytes a connection reads at once; a header block must fit in it to be
// served by the fast path.
const fastReadBuffer = 4 << 10

// Accept returns the next connection handed over to net/http. The first call starts accepting.
func (f *FastPath) Accept() (net.Conn, error) {
	f.start.Do(func() {
		f.mu.Lock() // Close closes done under mu: the loop starts before Shutdown waits, or not at all
		if !f.closed() {
			if n := f.cfg.EventLoops(); n > 0 {
				if err := f.startLoops(n); err != nil {
					f.h.log.Error("cannot start event loops; serving a goroutine per connection", "err", err)
				}
			}
			f.wg.Go(f.acceptLoop)
		}
		f.mu.Unlock()
	})
	select {
	case c := <-f.handoff:
		return c, nil
	case <-f.done:
		if err := f.acceptErr.Load(); err != nil && !errors.Is(*err, net.ErrClosed) {
			return nil, *err
		}
		return nil, net.ErrClosed
	}
}

// Loops is the number of event loops serving f's connections: 0 before the first Accept, and
// where connections get goroutines.
func (f *FastPath) Loops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loops.Len()
}

// Addr is the listener's.
func (f *FastPath) Addr() net.Addr { return f.ln.Addr() }

// Close stops accepting, closes the connections waiting for a request and makes the others
// close after their response. Shutdown waits for them.
func (f *FastPath) Close() error {
	var err error
	f.once.Do(func() {
		err = f.ln.Close()
		f.mu.Lock()
		close(f.done)
		for c := range f.conns {
			c.wake()
		}
		f.mu.Unlock()
		if f.loops != nil {
			f.loops.Close()
		}
	})
	return err
}

// Shutdown closes f and waits until its connections are closed or handed over, or ctx ends.
func (f *FastPath) Shutdown(ctx context.Context) error {
	f.Close()
	waited := make(chan struct{})
	go func() { f.wg.Wait(); close(waited) }()
	var lerr error
	if f.loops != nil {
		lerr = f.loops.Shutdown(ctx) // ctx's error once it dropped what was left
	}
	if lerr == nil {
		select {
		case <-waited:
			return nil
		case <-ctx.Done():
			lerr = ctx.Err()
		}
	}
	f.mu.Lock()
	for c := range f.conns {
		c.c.Close()
	}
	f.mu.Unlock()
	return lerr
}

// HandedOver reports whether c is a connection the fast path handed over to net/http (its
// opening is counted already).
func HandedOver(c net.Conn) bool {
	_, ok := c.(*handedConn)
	return ok
}

// handedConn is a connection handed over, with the bytes read from it and not used.
type handedConn struct {
	net.Conn
	r io.Reader
}

func (c *handedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ReadFrom and SyscallConn are the connection's (netlimit's), so that net/http can still have a
// body sent from a file.
func (c *handedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

func (c *handedConn) SyscallConn() (syscall.RawConn, error) { return fastSocket{c.Conn}.SyscallConn() }

// fastConn is the protocol side of a connection served by the fast path: it answers one parsed
// request at a time (respond) and hands its response to tx, the connection's way to its socket.
type fastConn struct {
	f  *FastPath
	tx transport

	hdr  []byte      // the response's status line and headers
	iov  net.Buffers // the pieces of a send
	date dateCache

	// Per request, kept here so that a request allocates nothing of its own.
	req    fastRequest
	status string // the status code of a hit's response, for the request metrics
	w      fastWriter
	begin  func(store.Info) (store.Plan, error) // c.plan
	sock   store.Socket                         // with FastConfig.SendFromFile
	// The request metrics' series of the common answers, resolved once.
	getHit, getMiss, headHit, headMiss metrics.RequestMetric
}

// transport is how a fast-path connection's responses reach its socket: the blocking writes of
// a goroutine per connection (goConn), or an event loop's (loop_linux.go).
type transport interface {
	// started is called as a request's response begins, at now.
	started(now time.Time)
	// send writes iov's bytes after those sent before, or takes them to write later; it may
	// change iov's elements. hold, if not nil, keeps the bytes of iov's last element valid until
	// send closes it, once they are written or never will be.
	send(iov [][]byte, hold io.Closer) error
}

func (c *fastConn) init(f *FastPath, tx transport) {
	c.f, c.tx = f, tx
	c.w.c = c
	c.begin = c.plan
	m := f.h.m
	c.getHit, c.getMiss = m.RequestMetric("http", "get", "200"), m.RequestMetric("http", "get", "404")
	c.headHit, c.headMiss = m.RequestMetric("http", "head", "200"), m.RequestMetric("http", "head", "404")
}

// goConn is a connection served by a goroutine of its own, with blocking reads and writes.
type goConn struct {
	fastConn
	c  net.Conn
	br *bufio.Reader

	idle atomic.Bool // waiting for a request: Close may cut the wait
	// The connection's read and write deadlines, kept with one timer change every eighth of
	// their limit rather than one a request (slackDeadline).
	readBy, writeBy slackDeadline
	pieces          net.Buffers // what of a send is still to write
}

func (f *FastPath) newConn(c net.Conn) *goConn {
	gc := &goConn{c: c, br: bufio.NewReaderSize(c, fastReadBuffer)}
	gc.init(f, gc)
	if f.cfg.SendFromFile {
		gc.sock = fastSocket{c}
	}
	return gc
}

func (c *goConn) started(now time.Time) {
	c.writeBy.extend(now, c.f.cfg.WriteTimeout, c.c.SetWriteDeadline)
}

func (c *goConn) send(iov [][]byte, hold io.Closer) error {
	c.pieces = iov // WriteTo consumes its receiver
	_, err := netlimit.WriteBuffers(c.c, &c.pieces)
	if hold != nil {
		hold.Close()
	}
	return err
}

// wake makes a connection waiting for a request stop waiting. Called with f.mu held.
func (c *goConn) wake() {
	if c.idle.Load() {
		c.c.SetReadDeadline(time.Unix(1, 0))
	}
}

// closed reports whether Close was called.
func (f *FastPath) closed() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

func (c *goConn) serve() {
	handed := false
	defer func() {
		c.f.mu.Lock()
		delete(c.f.conns, c)
		c.f.mu.Unlock()
		if !handed {
			c.c.Close()
			c.f.h.m.ConnClosed("http")
		}
	}()
	for {
		c.idle.Store(true)
		c.readBy.extend(time.Now(), c.f.cfg.IdleTimeout, c.c.SetReadDeadline)
		// After the deadline: Close sets one in the past once it has closed done, so either
		// this sees done closed or the wait is cut.
		if c.f.closed() {
			return
		}
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		c.idle.Store(false)
		buf, _ := c.br.Peek(c.br.Buffered())
		var n int
		var res parseResult
		c.req, n, res = parseRequest(buf, c.f.h.maxKeyLen)
		if res != parsed || !c.f.h.authorizedValue(c.req.auth) {
			handed = c.handOver()
			return
		}
		if !c.respond() || c.req.close {
			return
		}
		c.req = fastRequest{} // no reference into the buffer outlives the request
		c.br.Discard(n)
	}
}

// handOver gives the connection, and what it buffered, to net/http; false if the fast path is
// closing (the connection is then closed).
func (c *goConn) handOver() bool {
	c.c.SetReadDeadline(time.Time{})
	hc := &handedConn{Conn: c.c, r: c.br}
	if c.br.Buffered() == 0 {
		hc.r = c.c
	}
	return c.f.handOver(hc)
}

// handOver gives hc to net/http's Accept; false if the fast path is closing.
func (f *FastPath) handOver(hc *handedConn) bool {
	f.handed.Add(1)
	select {
	case f.handoff <- hc:
		return true
	case <-f.done:
		return false
	}
}

// respond answers c.req; false if the connection cannot go on (an error, or a response cut
// short).
func (c *fastConn) respond() bool {
	ok, _ := c.answer(false)
	return ok
}

// answer is respond; with residentOnly (an event loop's request) a blob that lies in a segment
// file and not in memory is not read: answer then returns resident false, having written,
// counted and recorded nothing, and the request is to be answered where a read may wait.
func (c *fastConn) answer(residentOnly bool) (ok, resident bool) {
	h, req := c.f.h, &c.req
	// Before the response, which a test may have read before answer returns (a held value may
	// go out within the lookup); taken back when a resident-only lookup stops.
	c.f.served.Add(1)
	start := time.Now()
	c.tx.started(start)
	c.w.committed, c.w.err = false, nil
	c.status = ""
	var found bool
	var err error
	switch {
	case residentOnly:
		found, err = h.st.SendResident(context.Background(), req.key, c.begin)
		if err == store.ErrNotResident {
			c.f.served.Add(^uint64(0))
			return false, false
		}
	case c.sock != nil:
		found, err = h.st.Send(context.Background(), req.key, c.begin)
	default:
		found, err = h.st.Get(context.Background(), req.key, c.begin)
	}
	ok, code := true, c.status
	switch {
	case err == nil:
		if !found {
			code = "404"
			c.notFound()
		}
		ok = c.w.commit() == nil
	case errors.Is(err, store.ErrBusy) && !c.w.committed:
		h.m.Busy("http")
		code = "503"
		c.plainError(http.StatusServiceUnavailable, err.Error(), "Retry-After: 1\r\n")
		ok = c.w.commit() == nil
	case !c.w.committed:
		h.log.Error("read failed", "key", string(req.key), "err", err)
		code = "500"
		c.plainError(http.StatusInternalServerError, "cannot read the blob", "")
		ok = c.w.commit() == nil
	default:
		// Part of the body is out: the client sees a body shorter than its Content-Length.
		if !isClientGone(err) {
			h.log.Error("read failed after the response started", "key", string(req.key), "err", err)
		}
		code, ok = "0", false
	}
	d := time.Since(start)
	switch {
	case code == "200" && req.head:
		c.headHit.Observe(d)
	case code == "200":
		c.getHit.Observe(d)
	case code == "404" && req.head:
		c.headMiss.Observe(d)
	case code == "404":
		c.getMiss.Observe(d)
	default:
		op := "get"
		if req.head {
			op = "head"
		}
		h.m.Request("http", op, code, d)
	}
	return ok, true
}

// plan is the store's begin for c.req: the headers of the hit, then the bytes asked for, if any,
// to c.w. A Range is answered as Handler.get answers it: one satisfiable range is a 206 of its
// bytes, an unsatisfiable one a 416, and a header asking for several ranges, or one that cannot
// be read, is ignored (the whole blob, 200).
func (c *fastConn) plan(info store.Info) (store.Plan, error) {
	off, n, res := int64(0), info.Size, rangeIgnored
	if c.req.ranges != nil {
		off, n, res = parseRange(string(c.req.ranges), info.Size)
		if res != rangeOK {
			off, n = 0, info.Size
		}
	}
	c.header(info, res, off, n)
	if c.req.head || n == 0 || res == rangeUnsatisfiable {
		return store.Plan{}, nil
	}
	// A whole value may go from its file; a range is copied, as net/http's path copies it.
	sock := c.sock
	if res == rangeOK {
		sock = nil
	}
	return store.Plan{W: &c.w, Off: off, N: n, Sock: sock}, nil
}

// header puts the status line and headers of a hit in c.hdr, as Handler.get and net/http write
// them: the handler's headers sorted by name, then Date and Connection. res is what became of a
// Range; with rangeOK the response is a 206 of the n bytes at off.
func (c *fastConn) header(info store.Info, res rangeResult, off, n int64) {
	b := c.hdr[:0]
	switch res {
	case rangeOK:
		b, c.status = append(b, "HTTP/1.1 206 Partial Content\r\n"...), "206"
	case rangeUnsatisfiable:
		b, c.status = append(b, "HTTP/1.1 416 Requested Range Not Satisfiable\r\n"...), "416"
		n = 0
	default:
		b, c.status = append(b, "HTTP/1.1 200 OK\r\n"...), "200"
	}
	b = append(b, "Accept-Ranges: bytes\r\n"...)
	if info.Flags != 0 {
		b = append(b, hdrFlags+": "...)
		b = strconv.AppendUint(b, uint64(info.Flags), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, "\r\n"...)
	switch res {
	case rangeOK:
		b = append(b, "Content-Range: bytes "...)
		b = strconv.AppendInt(b, off, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, off+n-1, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, info.Size, 10)
		b = append(b, "\r\n"...)
	case rangeUnsatisfiable:
		b = append(b, "Content-Range: bytes */"...)
		b = strconv.AppendInt(b, info.Size, 10)
		b = append(b, "\r\n"...)
	}
	if res != rangeUnsatisfiable {
		b = append(b, "Content-Type: "...)
		b = append(b, contentType(info.Attrs)...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Etag: \""...)
	b = strconv.AppendUint(b, info.Version, 16)
	b = append(b, "\"\r\n"...)
	if info.Expires != 0 {
		b = append(b, "Expires: "...)
		b = time.Unix(info.Expires, 0).UTC().AppendFormat(b, http.TimeFormat)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Last-Modified: "...)
	b = info.Created.UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\nVary: Accept-Encoding\r\nDate: "...)
	b = append(b, c.date.now()...)
	b = append(b, "\r\n"...)
	if c.req.close {
		b = append(b, "Connection: close\r\n"...)
	}
	c.hdr = append(b, "\r\n"...)
}

// notFound puts http.Error's 404 for c.req in c.hdr.
func (c *fastConn) notFound() {
	c.plainError(http.StatusNotFound, "not found", "")
	if c.req.head {
		c.hdr = c.hdr[:len(c.hdr)-len("not found\n")]
	}
}

// plainError puts what http.Error writes in c.hdr: msg as a text/plain body, with extra
// header lines (sorted before Content-Type's).
func (c *fastConn) plainError(code int, msg, extra string) {
	b := append(c.hdr[:0], "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(code)...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\n"...)
	b = append(b, extra...)
	b = append(b, "X-Content-Type-Options: nosniff\r\nDate: "...)
	b = append(b, c.date.now()...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(msg)+1), 10)
	b = append(b, "\r\n"...)
	if c.req.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, msg...)
	c.hdr = append(b, '\n')
}

// fastWriter is a Plan's writer: the first write sends the headers with the bytes it is given,
// and a value held by reference (store.Holder) goes with them in one writev.
type fastWriter struct {
	c         *fastConn
	committed bool
	err       error // the first write error
}

func (w *fastWriter) Write(p []byte) (int, error) {
	if err := w.send(p, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

// send sends p, after the headers if they are not out yet; hold as transport.send's.
func (w *fastWriter) send(p []byte, hold io.Closer) error {
	if w.err != nil {
		if hold != nil {
			hold.Close()
		}
		return w.err
	}
	c := w.c
	c.iov = c.iov[:0]
	if !w.committed {
		w.committed = true
		c.iov = append(c.iov, c.hdr)
	}
	c.iov = append(c.iov, p)
	w.err = c.tx.send(c.iov, hold)
	clear(c.iov) // no reference to the value outlives its holder
	return w.err
}

// Hold sends p, a whole value, with the headers, and closes cl once p is sent (store.Holder).
func (w *fastWriter) Hold(p []byte, cl io.Closer) { w.send(p, cl) }

// Flush sends the headers, before a value goes from its file (Plan.Sock).
func (w *fastWriter) Flush() error { return w.commit() }

// fastSocket is a connection a value can be sent to from a file (store.Socket).
type fastSocket struct{ net.Conn }

func (s fastSocket) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := s.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (fastSocket) Sent(int64) {}

// commit sends the headers if nothing did (a HEAD, an empty value, an error), and returns the
// first write error.
func (w *fastWriter) commit() error {
	if !w.committed && w.err == nil {
		c := w.c
		w.committed = true
		c.iov = append(c.iov[:0], c.hdr)
		w.err = c.tx.send(c.iov, nil)
		clear(c.iov)
	}
	return w.err
}

// slackDeadline is a connection deadline kept at least limit d from now, as a deadline set at
// each request would be, but moved only when it would fall short of that, and then to d and an
// eighth after now: a busy connection changes its timer once every d/8, not once a request, and
// a limit is kept to within an eighth over (the memcached server's sweep keeps its limits to
// within an eighth too). d <= 0 sets no deadline.
type slackDeadline struct{ at time.Time }

func (s *slackDeadline) extend(now time.Time, d time.Duration, set func(time.Time) error) {
	if d <= 0 || s.at.Sub(now) >= d {
		return
	}
	s.at = now.Add(d + d/8)
	set(s.at)
}

// dateCache is the Date header's value, formatted once a second.
type dateCache struct {
	sec int64
	b   []byte
}

func (d *dateCache) now() []byte {
	t := time.Now()
	if s := t.Unix(); s != d.sec || d.b == nil {
		d.sec = s
		d.b = t.UTC().AppendFormat(d.b[:0], http.TimeFormat)
	}
	return d.b
}
