package netlimit

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// rejectTimeout bounds the refusal write, so a client that does not read cannot hold the
// accept loop.
const rejectTimeout = 100 * time.Millisecond

// Listener is a net.Listener with a connection limit.
type Listener struct {
	net.Listener
	max    int64
	reject func(net.Conn)
	open   atomic.Int64
}

// New wraps l so that at most max connections are open at once (max <= 0: no limit). reject,
// if not nil, is called with each connection refused, before it is closed; it should write at
// most a short message.
func New(l net.Listener, max int, reject func(net.Conn)) *Listener {
	return &Listener{Listener: l, max: int64(max), reject: reject}
}

// Open is the number of connections accepted and not yet closed.
func (l *Listener) Open() int { return int(l.open.Load()) }

// Accept returns the next connection within the limit.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			if l.reject != nil {
				c.SetWriteDeadline(time.Now().Add(rejectTimeout))
				l.reject(c)
			}
			c.Close()
			continue
		}
		return &conn{Conn: c, p: &Place{l: l}}, nil
	}
}

// Place is one accepted connection's place in its Listener's limit, held until Release.
type Place struct {
	l    *Listener
	once sync.Once
}

// Release gives the place back; calls after the first do nothing.
func (p *Place) Release() {
	if p != nil {
		p.once.Do(func() { p.l.open.Add(-1) })
	}
}

// Take is for a caller that serves a connection of Accept's by other means than the net.Conn
// (its own poller, on a duplicate of the socket): it returns the connection the Listener
// wrapped, whose Close no longer gives its place back, and the place, which the caller releases
// when it is done with the connection. For a connection of no Listener's, Take returns c and a
// nil place (whose Release does nothing).
func Take(c net.Conn) (net.Conn, *Place) {
	if lc, ok := c.(*conn); ok {
		return lc.Conn, lc.p
	}
	return c, nil
}

// Hold returns c as a connection of this package's holding place p: closing it releases p, and
// it sends as Accept's connections do (ReadFrom, WriteBuffers). It gives a connection served by
// other means (Take) back to a net.Conn's user.
func Hold(c net.Conn, p *Place) net.Conn { return &conn{Conn: c, p: p} }

type conn struct {
	net.Conn
	p *Place
}

// SyscallConn is the connection's own, so that bytes can be sent to it from a file (sendfile);
// it fails with errors.ErrUnsupported if the connection has none.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// ReadFrom hands r to the connection: a reader that can write itself to a socket (an
// io.WriterTo: a blobcache.Reader sends a value from its segment file) does so, else the
// connection's own ReadFrom (sendfile from an *os.File) or a copy takes it. net/http's
// ResponseWriter.ReadFrom calls it for a body of known length.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if wt, ok := r.(io.WriterTo); ok {
		return wt.WriteTo(c)
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// WriteBuffers writes b to the connection, with one writev where it is a TCP connection:
// net.Buffers finds the connection's vectored write only on the connection itself, which this
// wrapper hides.
func (c *conn) WriteBuffers(b *net.Buffers) (int64, error) { return b.WriteTo(c.Conn) }

// WriteBuffers writes b to c with one writev where c is a TCP connection, itself or wrapped in a
// connection of this package's (or any that has a WriteBuffers method); otherwise as
// net.Buffers writes to c. It consumes b, as net.Buffers.WriteTo does.
func WriteBuffers(c net.Conn, b *net.Buffers) (int64, error) {
	if bw, ok := c.(interface {
		WriteBuffers(*net.Buffers) (int64, error)
	}); ok {
		return bw.WriteBuffers(b)
	}
	return b.WriteTo(c)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.p.Release()
	return err
}
