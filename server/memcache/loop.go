package memcache

import (
	"bytes"
	"errors"
	"io"

	"github.com/seed57392e9e/blobcache/server/netloop"
	"github.com/seed57392e9e/blobcache/server/store"
)

// Event loops (Config.Loops): a connection is served by a loop of the server's netloop.Group
// while its commands are ones a loop can run without waiting for the client: the loop runs a
// command once all of it is read (frame: its line, and a storage command's data block, for which
// the loop reserves the store's memory before it reads it), with the same code a goroutine runs,
// reading from the bytes read (inputReader) and writing its answer to the loop's connection
// (loopSink). The answers of the commands read together go out in one writev. A connection
// leaves its loop for a goroutine of its own, for good, when it sends a line longer than the
// read buffer, a data block over the value limit, or one the store's memory cannot take at once,
// and when an error closes it (the goroutine lingers for the client's last bytes).

// startLoops starts the event loops the configuration asks for; without them connections get
// goroutines.
func (s *Server) startLoops() {
	if s.cfg.Loops <= 0 || !netloop.Available {
		return
	}
	g, err := netloop.NewGroup(s.cfg.Loops, netloop.Limits{Idle: s.cfg.IdleTimeout, Read: s.cfg.ReadTimeout,
		Write: s.cfg.WriteTimeout}, s.log)
	if err != nil {
		s.log.Error("cannot start event loops; serving a goroutine per connection", "err", err)
		return
	}
	s.mu.Lock()
	s.loops = g
	s.mu.Unlock()
}

// EventLoops is the number of event loops serving connections: 0 before the first Serve, and
// where connections get goroutines.
func (s *Server) EventLoops() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loops.Len()
}

// newLoopConn is the protocol of lc, a connection an event loop took.
func (s *Server) newLoopConn(lc *netloop.Conn) *conn {
	c := s.makeConn()
	c.lc = lc
	c.r = &c.in
	c.w = newReplyBuffer(loopSink{lc}, &s.stats.bytesWritten)
	s.opened()
	return c
}

// Serve is netloop.Protocol's: it runs the whole commands read, and writes their answers.
func (c *conn) Serve(lc *netloop.Conn) {
	if c.parked.active {
		if !c.resume() {
			return
		}
	}
	if n := len(lc.Input()); n > c.counted {
		c.s.stats.bytesRead.Add(uint64(n - c.counted)) // bytes_read counts bytes as they arrive
		c.counted = n
	}
	for !lc.Waiting() {
		in := lc.Input()
		if len(in) == 0 {
			break
		}
		if lc.Closing() {
			lc.CloseAfter() // as a goroutine's connection, with commands read and not begun
			break
		}
		need, ok := c.frame(in)
		if ok && need > len(in) {
			ok = c.readAhead(need)
			if ok {
				break // the loop reads the rest
			}
		}
		if !ok {
			if c.w.Flush() == nil {
				c.detach(false)
			} else {
				lc.CloseAfter()
			}
			return
		}
		c.in.b, c.in.off = in, 0
		c.residentOnly = c.retrieval(in[:need])
		err := c.command()
		c.residentOnly = false
		if err == errNotResident {
			c.in.b = nil // nothing consumed; what was answered stays in c.w, before the rest
			c.park(in[:need])
			return
		}
		lc.Consume(c.in.off)
		c.counted -= c.in.off
		c.in.b = nil
		c.releaseReserved()
		if err != nil {
			c.closeOnError(err)
			return
		}
	}
	if c.w.Flush() != nil {
		lc.CloseAfter()
	}
}

// closeOnError ends the connection after a command's error: its answer (an error line) is
// written, and the connection closed (for errQuit), or moved to a goroutine that lingers for the
// client's last bytes before it closes (lingerClose).
func (c *conn) closeOnError(err error) {
	lc := c.lc
	if err != errQuit && !isNetErr(err) {
		c.s.log.Debug("memcache connection closed", "remote", lc.RemoteAddr(), "err", err)
	}
	if errors.Is(err, errShort) {
		c.s.log.Error("memcache: a command read past the bytes its loop framed", "err", err)
	}
	if c.w.Flush() == nil && err != errQuit {
		c.detach(true)
	} else {
		lc.CloseAfter()
	}
}

// Device reads (Park): a retrieval whose values are not all in memory may wait for the device,
// which would hold the loop's other connections: it runs on a goroutine of its own, its answer
// gathered (collectSink), while the loop serves the rest; once it is done the loop writes the
// answer and goes on with the connection's next command. Which retrievals wait is found by
// running them on the loop resident-only (conn.residentOnly): the lookup of a key
// (Store.SendResident) stops before anything of its value is written, and the command is parked
// then. A get of several keys answers on the loop the keys before that one (their VALUE blocks
// stay in the reply buffer, ahead of what the parked command adds) and resumes at it
// (conn.resumeAt): every key is looked up once, and none is read from the device on the loop.

// parkedCommand is a command running on a goroutine while its connection is parked.
type parkedCommand struct {
	active bool        // parked, or done and not yet taken up by Serve
	cmd    []byte      // the command's bytes, at the front of the loop's input
	used   int         // the bytes the command read
	err    error       // what the command returned
	out    collectSink // its answer
}

// errNotResident ends a command run with residentOnly whose value is not in memory: it consumed
// nothing and wrote nothing of that value, and runs again parked (a get of several keys from
// that key on).
var errNotResident = errors.New("memcache: value not in memory")

// retrieval reports whether the command in cmd is a retrieval (get, gets, gat, gats, mg) of a
// connection that may run one: the loop runs it resident-only.
func (c *conn) retrieval(cmd []byte) bool {
	if !c.authed {
		return false
	}
	for _, name := range [...]string{"get ", "gets ", "gat ", "gats ", "mg "} {
		if bytes.HasPrefix(cmd, []byte(name)) {
			return true
		}
	}
	return false
}

// park runs the command in cmd on a goroutine of its own, the connection parked meanwhile.
func (c *conn) park(cmd []byte) {
	c.s.parks.Add(1)
	p := &c.parked
	p.active, p.cmd = true, cmd
	c.w.out = &p.out
	c.lc.Park()
	go func() {
		c.in.b, c.in.off = p.cmd, 0
		p.err = c.command()
		p.used = c.in.off
		c.in.b = nil
		c.releaseReserved()
		if p.err == nil {
			p.err = c.w.Flush() // into out
		}
		c.lc.Resume()
	}()
}

// resume takes up a connection whose parked command is done: it consumes the command's bytes and
// writes its answer. false if the connection ends.
func (c *conn) resume() bool {
	p, lc := &c.parked, c.lc
	lc.Consume(p.used)
	c.counted -= p.used
	c.w.out = loopSink{lc}
	err := p.err
	if serr := lc.Send(p.out.iov, p.out.held, p.out.holds...); serr != nil && err == nil {
		err = serr
	}
	p.out.reset()
	p.active, p.cmd, p.err = false, nil, nil
	if err != nil {
		c.closeOnError(err)
		return false
	}
	return true
}

// collectSink is a replySink that gathers what is sent: held values by reference, the rest
// copied.
type collectSink struct {
	iov   [][]byte
	held  []bool
	holds []io.Closer
}

func (s *collectSink) send(iov [][]byte, held []bool, holds []io.Closer) (int64, error) {
	var n int64
	for i, p := range iov {
		h := held != nil && held[i]
		if !h {
			p = bytes.Clone(p)
		}
		s.iov, s.held = append(s.iov, p), append(s.held, h)
		n += int64(len(p))
	}
	s.holds = append(s.holds, holds...)
	return n, nil
}

func (s *collectSink) reset() {
	clear(s.iov)
	clear(s.holds)
	s.iov, s.held, s.holds = s.iov[:0], s.held[:0], s.holds[:0]
}

// Closed is netloop.Protocol's.
func (c *conn) Closed(why netloop.Reason) {
	if why == netloop.ReasonIdleTimeout {
		c.s.stats.idleKicks.Add(1)
	}
	for _, h := range c.parked.out.holds {
		h.Close() // a parked command's answer, never written
	}
	c.parked.out.reset()
	c.closed()
}

// frame returns how many bytes at the front of in the next command reads: its line, and after a
// storage command's line its data block and "\r\n". ok is false for a command a loop does not
// run: one whose line is longer than the read buffer (a multi-get read key by key), or whose
// data block is over the value limit (read past as it streams). A line not yet whole needs a byte
// more than in holds.
func (c *conn) frame(in []byte) (need int, ok bool) {
	if in[0] == binaryMagic {
		return 1, true // refused at once
	}
	max := c.s.cfg.MaxLineBytes
	i := bytes.IndexByte(in[:min(len(in), max)], '\n')
	if i < 0 {
		return len(in) + 1, len(in) < max
	}
	n := c.dataLength(trimEOL(in[:i+1]))
	if n < 0 {
		return i + 1, true
	}
	if n > c.s.st.MaxValueSize() {
		return 0, false
	}
	return i + 1 + int(n) + 2, true
}

// dataLength is the length of the data block that follows a command line, as the command will
// read it, or -1 if it reads none.
func (c *conn) dataLength(line []byte) int64 {
	i := bytes.IndexByte(line, ' ')
	if i <= 0 {
		return -1
	}
	switch name := string(line[:i]); name {
	case "set", "add", "replace", "append", "prepend", "cas":
		toks := split(line, c.toks[:0])
		c.toks = toks[:0]
		if !c.authed {
			// authenticate's: a set of up to 1 KiB.
			if n, ok := blockLength(toks, 4); ok && name == "set" && n <= 1024 {
				return n
			}
			return -1
		}
		want := 5
		if name == "cas" {
			want = 6
		}
		if len(toks) == want || len(toks) == want+1 {
			if n, ok := blockLength(toks, 4); ok {
				return n
			}
		}
	case "ms":
		if c.authed {
			toks := split(line, c.toks[:0])
			c.toks = toks[:0]
			if n, ok := blockLength(toks, 2); ok {
				return n
			}
		}
	}
	return -1
}

// blockLength parses toks[i] as a data block's length.
func blockLength(toks [][]byte, i int) (int64, bool) {
	if len(toks) <= i {
		return 0, false
	}
	return parseLength(toks[i])
}

// readAhead makes room for a command of need bytes to be read. A data block that does not fit
// the read buffer is the store's memory for its write, taken now (the command then uses it:
// reserve) if the store can give it at once; false if it cannot.
func (c *conn) readAhead(need int) bool {
	if need > c.s.cfg.MaxLineBytes && c.reserved == nil {
		line := bytes.IndexByte(c.lc.Input(), '\n') + 1
		n := int64(need - line - 2)
		v, ok := c.s.st.TryReserve(n)
		if !ok {
			return false
		}
		c.reserved, c.reservedN = v, n
	}
	c.lc.Need(need)
	return true
}

// reserve is store.Reserve, or the memory a loop took before it read the data block.
func (c *conn) reserve(n int64) (*store.Value, error) {
	if v := c.reserved; v != nil && c.reservedN == n {
		c.reserved = nil
		return v, nil
	}
	return c.s.st.Reserve(c.s.ctx, n)
}

// releaseReserved gives back memory a loop took for a command that did not use it.
func (c *conn) releaseReserved() {
	if c.reserved != nil {
		c.reserved.Release()
		c.reserved = nil
	}
}

// detach moves the connection from its loop to a goroutine of its own, with the bytes read and
// not answered in front of the socket's. With linger, the goroutine closes it as a goroutine
// closes a connection on an error (lingerClose).
func (c *conn) detach(linger bool) {
	s := c.s
	c.releaseReserved()
	nc, unread, err := c.lc.Detach()
	if err != nil {
		s.log.Error("cannot move a connection from its event loop to a goroutine", "err", err)
		return // closed
	}
	r := io.Reader(countedReader{nc, &s.stats.bytesRead})
	if len(unread) > 0 {
		r = io.MultiReader(bytes.NewReader(bytes.Clone(unread)), r) // counted as they arrived
	}
	c.useGoroutine(nc, r)
	s.mu.Lock()
	if s.closing.Load() && !linger {
		s.mu.Unlock()
		nc.Close()
		c.closed()
		return
	}
	s.mu.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	if linger {
		go func() {
			c.lingerClose()
			c.end()
		}()
		return
	}
	go c.run()
}

// loopSink is a replySink to an event loop's connection: a send is one writev, and what the
// socket does not take waits in the connection.
type loopSink struct{ lc *netloop.Conn }

func (s loopSink) send(iov [][]byte, held []bool, holds []io.Closer) (int64, error) {
	var n int64
	for _, p := range iov {
		n += int64(len(p))
	}
	if err := s.lc.Send(iov, held, holds...); err != nil {
		return 0, err
	}
	return n, nil
}

// inputReader is a cmdReader of the bytes an event loop read. A loop runs a command only once
// all it reads is there (frame), so a read past them is a framing error: errShort.
type inputReader struct {
	b   []byte
	off int
}

// errShort is a command's read past the bytes framed for it.
var errShort = errors.New("memcache: read past the command's bytes")

func (r *inputReader) Buffered() int { return len(r.b) - r.off }

func (r *inputReader) Peek(n int) ([]byte, error) {
	if r.Buffered() < n {
		return r.b[r.off:], errShort
	}
	return r.b[r.off : r.off+n], nil
}

func (r *inputReader) ReadSlice(delim byte) ([]byte, error) {
	i := bytes.IndexByte(r.b[r.off:], delim)
	if i < 0 {
		r.off = len(r.b)
		return nil, errShort
	}
	p := r.b[r.off : r.off+i+1]
	r.off += i + 1
	return p, nil
}

func (r *inputReader) ReadByte() (byte, error) {
	if r.off == len(r.b) {
		return 0, errShort
	}
	r.off++
	return r.b[r.off-1], nil
}

func (r *inputReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.off == len(r.b) {
		return 0, errShort
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

func (r *inputReader) Discard(n int) (int, error) {
	k := min(n, r.Buffered())
	r.off += k
	if k < n {
		return k, errShort
	}
	return k, nil
}
