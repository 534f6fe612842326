package memcache

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/server/netlimit"
)

// replyBuffer gathers a connection's answers until they are flushed, as bufio.Writer does, and
// can also keep a value by reference (Hold, store.Holder) instead of copying it: a flush then
// hands the answers and the values between them to the kernel in one writev, and closes what
// held each value (a Reader of the memory tier or of a pooled buffer) once it is written.
//
// Invariants: buf holds the bytes written since the last flush, except the held values; each
// held value goes after buf[:at] and before buf[at:], in the order held; every closer of a held
// value is closed exactly once, by the flush that writes it or by release.
type replyBuffer struct {
	out     replySink      // what a flush writes to
	written *atomic.Uint64 // bytes_written
	buf     []byte
	held    []heldValue
	// Reused by flushes: the pieces of a send, which of them are held values, their closers.
	iov     net.Buffers
	isHeld  []bool
	closers []io.Closer
	err     error // the first write error: later writes fail with it
}

// replySink is where a replyBuffer's flushes go: a goroutine's blocking socket (connSink), or an
// event loop's connection (loopSink).
type replySink interface {
	// send writes iov, whose elements held[i] are values held by reference, and closes holds
	// once they are written or never will be. It may change iov's elements.
	send(iov [][]byte, held []bool, holds []io.Closer) (int64, error)
}

// connSink writes to a connection with blocking writes: one writev a send.
type connSink struct {
	conn   net.Conn
	pieces net.Buffers // what of a send is still to write (WriteTo consumes it)
}

func (s *connSink) send(iov [][]byte, _ []bool, holds []io.Closer) (int64, error) {
	var n int64
	var err error
	if len(iov) == 1 {
		var k int
		k, err = s.conn.Write(iov[0])
		n = int64(k)
	} else {
		s.pieces = iov // a field, not a local: a pointer to it passed on does not escape each send
		n, err = netlimit.WriteBuffers(s.conn, &s.pieces)
		s.pieces = nil
	}
	for _, h := range holds {
		h.Close()
	}
	return n, err
}

type heldValue struct {
	at int
	p  []byte
	c  io.Closer
}

// replyBufferSize is the bytes a replyBuffer gathers before it flushes on its own; maxHeld the
// values it holds before it does (a writev takes at most 1024 pieces).
const (
	replyBufferSize = 16 << 10
	maxHeld         = 256
)

func newReplyBuffer(out replySink, written *atomic.Uint64) *replyBuffer {
	return &replyBuffer{out: out, written: written, buf: make([]byte, 0, replyBufferSize)}
}

func (b *replyBuffer) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(b.buf)+len(p) > cap(b.buf) {
		if err := b.Flush(); err != nil {
			return 0, err
		}
		if len(p) > cap(b.buf) {
			b.iov = append(b.iov[:0], p)
			n, err := b.out.send(b.iov, nil, nil)
			clear(b.iov)
			b.written.Add(uint64(n))
			if err != nil {
				b.err = err
			}
			return int(n), err
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *replyBuffer) WriteString(s string) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(b.buf)+len(s) > cap(b.buf) {
		return b.Write([]byte(s))
	}
	b.buf = append(b.buf, s...)
	return len(s), nil
}

// writeUint writes a space, the flag letter (none if 0) and u in decimal.
func (b *replyBuffer) writeUint(flag byte, u uint64) {
	if b.room(22) {
		b.buf = strconv.AppendUint(b.flag(flag), u, 10)
	}
}

// writeInt is writeUint for a signed number.
func (b *replyBuffer) writeInt(flag byte, n int64) {
	if b.room(23) {
		b.buf = strconv.AppendInt(b.flag(flag), n, 10)
	}
}

// room makes n bytes of room, flushing if need be; false after a write error.
func (b *replyBuffer) room(n int) bool {
	if b.err == nil && len(b.buf)+n > cap(b.buf) {
		b.Flush()
	}
	return b.err == nil
}

func (b *replyBuffer) flag(flag byte) []byte {
	if flag == 0 {
		return append(b.buf, ' ')
	}
	return append(b.buf, ' ', flag)
}

// Hold writes p at this point of the answer without copying it: p must stay as it is until the
// flush that writes it, which then closes c (as release does, should no flush come). It
// implements store.Holder.
func (b *replyBuffer) Hold(p []byte, c io.Closer) {
	b.held = append(b.held, heldValue{at: len(b.buf), p: p, c: c})
	if len(b.held) >= maxHeld {
		b.Flush()
	}
}

// Flush writes what was gathered, with one writev when values are held, and hands their holders
// to the sink, which closes them once the values are written.
func (b *replyBuffer) Flush() error {
	if len(b.held) == 0 && len(b.buf) == 0 || b.err != nil {
		b.release()
		return b.err
	}
	iov, isHeld, closers, prev := b.iov[:0], b.isHeld[:0], b.closers[:0], 0
	for _, h := range b.held {
		if h.at > prev {
			iov, isHeld = append(iov, b.buf[prev:h.at]), append(isHeld, false)
			prev = h.at
		}
		iov, isHeld, closers = append(iov, h.p), append(isHeld, true), append(closers, h.c)
	}
	if len(b.buf) > prev {
		iov, isHeld = append(iov, b.buf[prev:]), append(isHeld, false)
	}
	clear(b.held) // the sink has the holders now
	b.held = b.held[:0]
	n, err := b.out.send(iov, isHeld, closers)
	b.written.Add(uint64(n))
	clear(iov) // no reference to the values outlives their holders
	clear(closers)
	b.iov, b.isHeld, b.closers = iov, isHeld, closers
	b.buf = b.buf[:0]
	if err != nil {
		b.err = err
	}
	return err
}

// release closes the holders of values not written (the connection is done), or written.
func (b *replyBuffer) release() {
	for i := range b.held {
		b.held[i].c.Close()
		b.held[i] = heldValue{}
	}
	b.held = b.held[:0]
}

// errClosedReply is what writes to a replyBuffer get after close.
var errClosedReply = errors.New("memcache: connection closed")

// close releases what is still held; later writes fail.
func (b *replyBuffer) close() {
	b.release()
	if b.err == nil {
		b.err = errClosedReply
	}
}
