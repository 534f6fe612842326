package memcache

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/server/metrics"
	"github.com/seed57392e9e/blobcache/server/netloop"
	"github.com/seed57392e9e/blobcache/server/store"
)

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("memcache: server closed")

// Config configures a Server. Zero fields take the defaults stated.
type Config struct {
	// MaxLineBytes bounds a command line, and is the size of each connection's read buffer
	// (default 16 KiB: a get of 60 keys of 250 bytes). A longer get, gets, gat or gats line is
	// read key by key, so a multi-get of any length works while the line is never held whole;
	// any other longer line is answered with CLIENT_ERROR and the connection closed.
	MaxLineBytes int
	// IdleTimeout closes a connection that sends no command for this long (default 5 min).
	IdleTimeout time.Duration
	// ReadTimeout bounds the time from a command's first byte to the end of its data block
	// (default 30s).
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of one command's answer (default 30s).
	WriteTimeout time.Duration
	// Token, if set, must be presented by every connection before anything else (see the
	// package comment).
	Token string
	// Version is what the version command reports.
	Version string
	// MaxConns is the limit on open connections the listener enforces (Reject answers those
	// past it), reported by stats; 0: not reported.
	MaxConns int
	// Settings are more lines for "stats settings" (values without spaces).
	Settings []Setting
	// Loops is the number of event loops (netloop) that serve connections; 0 serves each on a
	// goroutine of its own. Each loop holds a P while it waits for its sockets: give the process
	// that many Ps more. A connection leaves its loop for a goroutine of its own when it sends
	// what a loop does not serve (loop.go), and where loops cannot be set up connections get
	// goroutines.
	Loops int
	// Metrics records commands and connections; nil records nothing.
	Metrics *metrics.Metrics
	// Log receives errors; nil discards them.
	Log *slog.Logger
}

// Server serves the memcached protocol over a store.
type Server struct {
	st    *store.Store
	cfg   Config
	token [sha256.Size]byte
	log   *slog.Logger
	start time.Time

	// ctx is cancelled when a shutdown gives up waiting, to stop admission waits.
	ctx    context.Context
	cancel context.CancelFunc

	// Lock order: mu, then a conn's mu. A conn never takes mu while it holds its own, so
	// it reads closing without mu.
	mu struct {
		sync.Mutex
		listeners map[net.Listener]struct{}
		conns     map[*conn]struct{}
	}
	wg sync.WaitGroup // connection goroutines

	// closing is set once, under mu, by Shutdown; read by anyone without a lock.
	closing atomic.Bool

	sweepOnce sync.Once // starts the timeout sweep (timeouts.go) with the first Serve

	loopsOnce sync.Once      // starts the event loops with the first Serve
	loops     *netloop.Group // nil: a goroutine per connection

	// testHooks are set by tests before Serve.
	testHooks struct {
		command    func(name string) // a command line was read
		connClosed func()
	}

	// parks counts the commands loops ran on goroutines of their own (loop.go: a read that may
	// wait for the device); for tests.
	parks atomic.Uint64

	// verbosity is the level the last verbosity command set; it is only reported.
	verbosity atomic.Uint32

	// stats are the counters of the stats command (memcached's names); statsBase the cache's
	// counters at the last "stats reset" (stats.go).
	stats     counters
	statsBase atomic.Pointer[cacheCounters]

	// marks are the meta protocol's win and stale marks (see itemMarks).
	marks itemMarks
}

// New returns a Server over st.
func New(st *store.Store, cfg Config) *Server {
	if cfg.MaxLineBytes == 0 {
		cfg.MaxLineBytes = 16 << 10
	}
	cfg.MaxLineBytes = max(cfg.MaxLineBytes, 1024)
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "blobcache"
	}
	s := &Server{st: st, cfg: cfg, log: cfg.Log, start: time.Now()}
	s.statsBase.Store(&cacheCounters{})
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Token != "" {
		s.token = sha256.Sum256([]byte(cfg.Token))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*conn]struct{})
	return s
}

// Reject answers a connection refused by a connection limit, as memcached does, and counts it
// (rejected_connections).
func (s *Server) Reject(c net.Conn) {
	s.stats.rejectedConns.Add(1)
	io.WriteString(c, "SERVER_ERROR too many open connections\r\n")
}

// Serve accepts connections on l until Shutdown or an accept error. It always returns an
// error: ErrServerClosed after Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.mu.listeners[l] = struct{}{}
	s.mu.Unlock()
	s.sweepOnce.Do(func() { go s.sweep() })
	s.loopsOnce.Do(s.startLoops)
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, l)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of descriptors or the like: back off like net/http.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if s.loops != nil {
			err := s.loops.Add(nc, s.cfg.MaxLineBytes, func(lc *netloop.Conn) netloop.Protocol { return s.newLoopConn(lc) })
			if err == nil {
				continue
			}
			s.log.Error("cannot serve a connection from an event loop; serving it from a goroutine", "err", err)
		}
		c := s.newConn(nc)
		s.mu.Lock()
		if s.closing.Load() {
			s.mu.Unlock()
			nc.Close()
			return ErrServerClosed
		}
		s.mu.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, lets every connection finish the command it is running, closes
// idle ones at once, and waits for all to end. When ctx ends first it closes the rest and
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	for l := range s.mu.listeners {
		l.Close()
	}
	for c := range s.mu.conns {
		c.wakeIfIdle()
	}
	loops := s.loops
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var lerr error
	if loops != nil {
		// The loops' connections may leave for goroutines until the loops have exited (the
		// goroutines see closing, and end after their command).
		lerr = loops.Shutdown(ctx)
	}
	select {
	case <-done:
		s.cancel()
		return lerr
	case <-ctx.Done():
		s.cancel()
		s.mu.Lock()
		for c := range s.mu.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// conn is one client connection, served by one goroutine (nc) or by an event loop (lc).
type conn struct {
	s       *Server
	nc      net.Conn      // a goroutine's
	lc      *netloop.Conn // an event loop's
	r       cmdReader     // a bufio.Reader of nc, or &in
	in      inputReader   // the bytes an event loop read (loop.go)
	counted int
	parked  parkedCommand // a command run on a goroutine while the loop serves others (loop.go)           // of the loop\'s input, the bytes counted in bytes_read
	w       *replyBuffer
	// sock is nc for values sent from segment files (store.Send); nil if nc cannot take them.
	sock store.Socket

	// reserved is the store's memory a loop took for a data block it reads before the
	// command runs (readAhead), of reservedN bytes; the command takes it (reserve).
	reserved  *store.Value
	reservedN int64

	authed bool
	// residentOnly: the command runs on its loop, which must not wait for the device: a
	// retrieval of a value not in memory stops with errNotResident before it writes anything of
	// that value (loop.go).
	residentOnly bool
	// resumeAt is where a get of several keys that stopped so resumes, parked: its loop answered
	// the keys before it (resumeMiss: one of them missed). 0 otherwise.
	resumeAt   int
	resumeMiss bool
	toks       [][]byte  // reused token slice
	may        []bool    // reused by multi-gets (MayHold)
	quiet      bool      // the command asked for noreply: nothing of its answer is written
	carry      []byte    // a token cut by a read-buffer boundary (longLine), reused
	head       valueHead // a get's VALUE line, made once (getOne)
	metaHead   metaHead  // an mg's status line, made once (metaGet)
	// reqMetrics are the request series this connection has recorded, by operation and result,
	// resolved once each (metrics.RequestMetric).
	reqMetrics map[requestKind]metrics.RequestMetric

	// mu guards the connection's phase, which the timeout sweep (timeouts.go) reads: idle
	// (waiting for a command) or running one, since when, and which of the connection's
	// deadlines the sweep has moved into the past.
	mu struct {
		sync.Mutex
		idle  bool      // waiting for the next command: Shutdown may close it
		since time.Time // when the wait or the command began
		// readExpired and writeExpired: the sweep expired the deadline (the command ran past
		// ReadTimeout or WriteTimeout); kicked: it woke an idle wait past IdleTimeout.
		readExpired, writeExpired, kicked bool
	}
}

// cmdReader is what commands read a connection's bytes from: a bufio.Reader of its socket, or
// the bytes an event loop read (inputReader).
type cmdReader interface {
	Peek(n int) ([]byte, error)
	ReadSlice(delim byte) ([]byte, error)
	ReadByte() (byte, error)
	Read(p []byte) (int, error)
	Discard(n int) (int, error)
	Buffered() int
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := s.makeConn()
	c.useGoroutine(nc, countedReader{nc, &s.stats.bytesRead})
	return c
}

// makeConn returns a connection with its protocol state, and no transport yet.
func (s *Server) makeConn() *conn {
	c := &conn{
		s:      s,
		authed: s.cfg.Token == "",
		toks:   make([][]byte, 0, maxTokens),
	}
	c.head.c = c
	c.head.begin = c.head.write
	c.metaHead.c = c
	c.metaHead.begin = c.metaHead.write
	return c
}

// useGoroutine makes c a connection served by a goroutine of its own, reading commands from r
// (nc's bytes, counted) and writing to nc.
func (c *conn) useGoroutine(nc net.Conn, r io.Reader) {
	s := c.s
	c.nc, c.lc = nc, nil
	c.r = bufio.NewReaderSize(r, s.cfg.MaxLineBytes)
	if c.w == nil {
		c.w = newReplyBuffer(&connSink{conn: nc}, &s.stats.bytesWritten)
	} else {
		c.w.out = &connSink{conn: nc}
	}
	if sc, ok := nc.(syscall.Conn); ok {
		c.sock = connSocket{countedWriter{nc, &s.stats.bytesWritten}, sc}
	}
}

// opened counts a connection opened.
func (s *Server) opened() {
	s.stats.conns.Add(1)
	s.stats.totalConns.Add(1)
	s.cfg.Metrics.ConnOpened("memcache")
}

// closed counts c closed and lets go of what it holds; its socket is closed already.
func (c *conn) closed() {
	s := c.s
	c.w.close()
	c.releaseReserved()
	s.stats.conns.Add(-1)
	s.cfg.Metrics.ConnClosed("memcache")
	if h := s.testHooks.connClosed; h != nil {
		h()
	}
}

// localAddr is the connection's local address.
func (c *conn) localAddr() net.Addr {
	if c.lc != nil {
		return c.lc.LocalAddr()
	}
	return c.nc.LocalAddr()
}

// connSocket is a connection as a store.Socket: writes and sends both count in bytes_written.
type connSocket struct {
	countedWriter
	syscall.Conn
}

func (c connSocket) Sent(n int64) { c.n.Add(uint64(n)) }

// wakeIfIdle makes an idle connection's wait for a command return at once.
func (c *conn) wakeIfIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.idle {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
}

// errQuit ends a connection at the client's request.
var errQuit = errors.New("quit")

// serve serves a connection just accepted.
func (c *conn) serve() {
	c.s.opened()
	c.run()
}

// end closes a connection served by a goroutine, and forgets it.
func (c *conn) end() {
	s := c.s
	c.nc.Close()
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
	c.closed()
	s.wg.Done()
}

// run reads and answers commands until the connection ends, and closes it.
func (c *conn) run() {
	s := c.s
	defer c.end()
	for {
		if !c.waitCommand() {
			return
		}
		err := c.command()
		if err == nil && c.r.Buffered() == 0 {
			err = c.w.Flush()
		}
		if err != nil {
			if err != errQuit && !isNetErr(err) {
				s.log.Debug("memcache connection closed", "remote", c.nc.RemoteAddr(), "err", err)
			}
			c.w.Flush() // the error line, if any
			if err != errQuit {
				c.lingerClose()
			}
			return
		}
	}
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// waitCommand waits for the first byte of the next command, up to the idle timeout. It
// returns false when the connection should end.
// The connection's time limits (ReadTimeout and WriteTimeout from a command's start,
// IdleTimeout while waiting for one) are kept by the server's timeout sweep (timeouts.go), which
// moves a deadline into the past once its limit has passed, rather than by deadlines set at
// every command: a busy connection then arms no timer per request.
func (c *conn) waitCommand() bool {
	c.mu.Lock()
	if c.mu.readExpired {
		// The last command ran past ReadTimeout but finished (its answer was being written):
		// the next one, pipelined or waited for, gets a live read deadline again.
		c.nc.SetReadDeadline(time.Time{})
		c.mu.readExpired = false
	}
	if c.r.Buffered() > 0 {
		c.beginCommand(time.Now())
		c.mu.Unlock()
		return !c.s.closing.Load()
	}
	// Checked under c.mu: Shutdown sets closing before it wakes idle connections under
	// their mu, so either this sees closing or Shutdown sees idle.
	if c.s.closing.Load() {
		c.mu.Unlock()
		return false
	}
	c.mu.idle, c.mu.since = true, time.Now()
	c.mu.Unlock()
	_, err := c.r.Peek(1)
	c.mu.Lock()
	c.mu.idle = false
	kicked := c.mu.kicked
	c.beginCommand(time.Now())
	c.mu.Unlock()
	if err != nil && kicked && !c.s.closing.Load() {
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			c.s.stats.idleKicks.Add(1)
		}
	}
	return err == nil
}

// beginCommand notes that a command starts at now: the sweep measures ReadTimeout and
// WriteTimeout from it. The caller holds c.mu.
func (c *conn) beginCommand(now time.Time) { c.mu.since = now }

// readLine returns the next command line without its line ending ("\r\n", or "\n" alone as
// memcached allows). The slice is valid until the next read. A line longer than the read
// buffer is returned with long set: line is then the buffer's worth read so far, and the rest
// is still to be read (longLine).
func (c *conn) readLine() (line []byte, long bool, err error) {
	line, err = c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return line, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return trimEOL(line), false, nil
}

// trimEOL cuts the "\n" off the end of a line, and the "\r" before it if there is one.
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// reply writes one answer line, unless the command asked for noreply.
func (c *conn) reply(line string) {
	if c.quiet {
		return
	}
	c.w.WriteString(line)
	c.w.WriteString("\r\n")
}

func (c *conn) clientError(msg string) { c.reply("CLIENT_ERROR " + msg) }

func (c *conn) serverError(msg string) { c.reply("SERVER_ERROR " + msg) }

// noreply reports whether a command's last token is "noreply", and if so silences the
// command's answer, errors included: a client that sends noreply reads no answer, so any line
// would be taken for the answer to its next command. As in memcached, a line too malformed to
// be understood may still be answered (ERROR for a wrong number of tokens).
func (c *conn) noreply(toks [][]byte) bool {
	c.quiet = len(toks) > 1 && string(toks[len(toks)-1]) == "noreply"
	return c.quiet
}

// countedReader and countedWriter count a connection's bytes for stats (bytes_read,
// bytes_written).
type countedReader struct {
	r io.Reader
	n *atomic.Uint64
}

func (c countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(uint64(n))
	return n, err
}

type countedWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c countedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(uint64(n))
	return n, err
}

// dataBlock returns a reader of the next data block of n bytes. The Read that returns the
// block's last bytes also reads the "\r\n" after it and fails if it is not there, so that a
// reader of exactly n bytes (blobcache.PutFrom) sees a malformed block as an error.
func (c *conn) dataBlock(n int64) io.Reader { return &blockReader{c: c, left: n} }

type blockReader struct {
	c     *conn
	left  int64
	ended bool // the "\r\n" was read
}

func (b *blockReader) Read(p []byte) (int, error) {
	if b.left == 0 {
		if err := b.end(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	k, err := b.c.r.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(k)
	if err == io.EOF && b.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && b.left == 0 {
		err = b.end()
	}
	return k, err
}

// Hold gives the whole block, if the connection's buffer holds it and the "\r\n" after it, and
// consumes both (blobcache.ValueHolder: the block is stored from the buffer, not copied out of
// it first); n must be what is left of the block. It declines (ok false) any other n, a block
// not all buffered, and one not followed by "\r\n", which Read then reads and reports as it
// always does.
func (b *blockReader) Hold(n int) ([]byte, bool, error) {
	r := b.c.r
	if b.ended || b.left != int64(n) || r.Buffered() < n+2 {
		return nil, false, nil
	}
	p, err := r.Peek(n + 2)
	if err != nil || p[n] != '\r' || p[n+1] != '\n' {
		return nil, false, nil
	}
	if _, err := r.Discard(n + 2); err != nil {
		return nil, false, err
	}
	b.left, b.ended = 0, true
	return p[:n:n], true, nil
}

// end reads the "\r\n" that ends the block, once. A connection that ends before it is
// io.ErrUnexpectedEOF, not io.EOF: the block is incomplete.
func (b *blockReader) end() error {
	if b.ended {
		return nil
	}
	b.ended = true
	err := b.c.readCRLF()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (c *conn) readCRLF() error {
	b1, err := c.r.ReadByte()
	if err != nil {
		return err
	}
	b2, err := c.r.ReadByte()
	if err != nil {
		return err
	}
	if b1 != '\r' || b2 != '\n' {
		c.clientError("bad data chunk")
		return errors.New("memcache: data block not followed by \\r\\n")
	}
	return nil
}

// swallow discards a data block of n bytes and its "\r\n".
func (c *conn) swallow(n int64) error {
	if _, err := c.r.Discard(int(min(n, 1<<62))); err != nil {
		return err
	}
	return c.readCRLF()
}

// lingerClose half-closes a connection the server gives up on and reads what the client still
// sends for a moment, so that closing with unread bytes does not reset the connection and
// destroy the error line in flight (net/http does the same).
func (c *conn) lingerClose() {
	tc, ok := c.nc.(interface{ CloseWrite() error })
	if !ok {
		return
	}
	tc.CloseWrite()
	c.nc.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
	io.CopyN(io.Discard, c.nc, 1<<20)
}

// requestKind is a request's operation and result, the labels of its series.
type requestKind struct{ op, result string }

// requestMetric returns the series of requests of op with result, resolved the first time this
// connection records one.
func (c *conn) requestMetric(op, result string) metrics.RequestMetric {
	k := requestKind{op, result}
	m, ok := c.reqMetrics[k]
	if !ok {
		if c.reqMetrics == nil {
			c.reqMetrics = make(map[requestKind]metrics.RequestMetric)
		}
		m = c.s.cfg.Metrics.RequestMetric("memcache", op, result)
		c.reqMetrics[k] = m
	}
	return m
}
