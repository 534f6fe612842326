package blobcache

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"syscall"

	"github.com/seed57392e9e/blobcache/internal/batch"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// streamChunk is how much of a large blob's value the first read brings in with its header, and
// what a Reader reads at a time when it streams through a buffer of its own.
const streamChunk = 256 << 10

// Reader streams one blob. It is what Get returns as an io.Reader; it also implements
// io.WriterTo and io.Closer. Close (or reading to the end) returns its buffer and file reference;
// a Reader dropped without either is cleaned up by the garbage collector. A Reader the caller
// owns (its zero value, or one Get returned) can be read into again and again with GetInto and
// its kin, with no allocation past the first; it is not for concurrent use.
//
// With verification on, the Read that delivers the last byte returns an error wrapping
// ErrChecksumMismatch if the bytes do not match their stored checksums. A blob that was
// overwritten or deleted while a large Reader streamed it makes Read fail with an error rather
// than return bytes of another blob.
type Reader struct {
	c    *Cache
	h    uint64
	loc  index.Loc
	size int64 // bytes this reader delivers in all

	buf *[]byte // pooled buffer holding the record (or its start)
	val []byte  // buffered value bytes not yet delivered

	ref    *segRef  // held while value bytes remain to be read from the file
	rd     blobFile // what they are read through (the route the hit chose)
	off    int64    // file offset of the next unbuffered value byte
	remain int64    // unbuffered value bytes left

	verify bool
	sums   valueCheck // of the value delivered so far, when verify

	hdr   record.Header // the record's header: Info is made from it when asked
	attrs string        // the record's attributes, if any
	err   error

	mem *memHold // the memory tier's entry val lies in, held until the last byte or Close

	stored bool // the value is delivered compressed, as stored (OpenEncoded)

	// owned is where a Reader the caller owns (GetInto) keeps its holds, so that taking one
	// allocates nothing: made at the Reader's first use, with the one cleanup that releases
	// what it holds should the Reader be dropped unclosed. Nil until GetInto or its kin first
	// read into the Reader.
	owned *readerHolds
}

// readerHolds are the holds of a Reader the caller owns, reused from read to read. Each is
// released (released true) while the reader holds nothing.
type readerHolds struct {
	mem memHold
	ref segRef
}

func (h *readerHolds) release() {
	h.mem.release()
	h.ref.release()
}

// newReader returns a new Reader for c: dst, closed first if it was reading and keeping its
// holds, when the caller owns one (GetInto), else a Reader of its own.
func (c *Cache) newReader(dst *Reader) *Reader {
	if dst == nil {
		return &Reader{c: c}
	}
	dst.Close()
	owned := dst.owned
	*dst = Reader{c: c, owned: owned}
	if owned == nil {
		owned = &readerHolds{}
		owned.mem.released.Store(true)
		owned.ref.released.Store(true)
		dst.owned = owned
		runtime.AddCleanup(dst, (*readerHolds).release, owned)
	}
	return dst
}

// errReader is newReader for a hit whose read failed with err.
func (c *Cache) errReader(dst *Reader, err error) *Reader {
	r := c.newReader(dst)
	r.err = err
	return r
}

// holdMemory makes r hold e, the memory tier's entry its bytes lie in, until its last byte or
// Close.
func (r *Reader) holdMemory(e *memtier.Entry) {
	if h := r.owned; h != nil {
		h.mem.tier, h.mem.e = r.c.mem, e
		h.mem.released.Store(false)
		r.mem = &h.mem
		return
	}
	r.mem = &memHold{tier: r.c.mem, e: e}
	runtime.AddCleanup(r, func(h *memHold) { h.release() }, r.mem)
}

// memHold is a reader's hold on an entry of the memory tier, released once: by the reader at the
// end or on Close, or by the cleanup registered for a reader dropped early (the entry's buffer
// lies outside the Go heap, and goes back to the tier only once released).
type memHold struct {
	tier     *memtier.Tier
	e        *memtier.Entry
	released atomic.Bool
}

func (h *memHold) release() {
	if h != nil && !h.released.Swap(true) {
		h.tier.Release(h.e)
		h.e = nil
	}
}

// segRef is a reader's reference on a segment, released once: by the reader at the end or on
// Close, or by the cleanup registered for a reader dropped early.
type segRef struct {
	s        *segHandle
	released atomic.Bool
}

func (r *segRef) release() {
	if r != nil && !r.released.Swap(true) {
		r.s.unref()
		r.s = nil
	}
}

// keep takes over from h what the reader keeps of its read: the buffer (r.val lies in it) and,
// when value bytes remain to be read from the file, the file reference, released by a cleanup if
// the reader is dropped without Close. What it does not take, h still releases.
func (r *Reader) keep(h *readHold) {
	r.buf, h.buf = h.buf, nil
	if r.remain == 0 {
		return
	}
	if o := r.owned; o != nil {
		o.ref.s = h.file
		o.ref.released.Store(false)
		r.ref = &o.ref
	} else {
		r.ref = &segRef{s: h.file}
		runtime.AddCleanup(r, func(ref *segRef) { ref.release() }, r.ref)
	}
	h.file = nil
}

// Encoding is how the bytes the reader delivers are encoded: CompressionNone for the value as
// it was put, or the codec of a value OpenEncoded delivers as stored.
func (r *Reader) Encoding() Compression {
	if r.stored {
		return Compression(r.hdr.Codec)
	}
	return CompressionNone
}

// Verifies reports whether the reader checks the value against its stored checksums as it
// delivers it (Options.VerifyOnRead, for a whole blob): a mismatch is then known only once the
// last bytes are delivered.
func (r *Reader) Verifies() bool { return r.verify }

// Size is the number of bytes the reader delivers (the blob's size for Get).
func (r *Reader) Size() int64 { return r.size }

// Checksum returns the blob's stored checksum (see Options.Checksum), if it has one.
func (r *Reader) Checksum() (uint32, bool) {
	return r.hdr.Sum, r.hdr.Flags&record.FlagHasChecksum != 0
}

// Info describes the blob the reader reads (its Size is the blob's, not the range's).
func (r *Reader) Info() BlobInfo { return infoOf(r.hdr, r.attrs) }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	if len(r.val) > 0 {
		n = copy(p, r.val)
		r.val = r.val[n:]
	} else if r.remain > 0 {
		// Read straight into p; but with direct reads a small p would cost a device read each,
		// so then a chunk is read into the reader's buffer and p is served from there.
		dst := p
		if _, direct := r.rd.(*vfs.DirectReader); direct && len(p) < streamChunk {
			if r.buf == nil || cap(*r.buf) < streamChunk {
				if r.buf != nil {
					putBuf(r.buf)
				}
				r.buf = getBuf(streamChunk)
			}
			dst = (*r.buf)[:streamChunk]
		}
		want := int(min(int64(len(dst)), r.remain))
		m, err := r.rd.ReadAt(dst[:want], r.off)
		if err == nil && !r.c.stillAt(r.h, r.loc) {
			err = fmt.Errorf("%w: blob was replaced while being read", ErrNotFound)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: segment %d ends inside a record at offset %d", ErrCorrupt, r.loc.Segment, r.off)
			}
			r.fail(err)
			return 0, r.err
		}
		n = m
		r.off += int64(m)
		r.remain -= int64(m)
		if &dst[0] != &p[0] {
			n = copy(p, dst[:m])
			r.val = dst[n:m]
		}
	}
	if r.verify {
		r.sums.write(p[:n])
	}
	if len(r.val) == 0 && r.remain == 0 {
		r.finish()
		return n, r.err
	}
	return n, nil
}

// WriteTo implements io.WriterTo. A buffered blob is checked before any byte is written, and
// a streamed one that fails its check does not have its last chunk written: a writer never
// gets the whole of a value that does not match its checksums. When w
// is a socket (a syscall.Conn: *net.TCPConn, *net.UnixConn) and value bytes are left in the
// segment file, read through the page cache, with no checksum to verify on the way (see Open),
// the kernel sends them from the file (vfs.SendFile); otherwise they are read and written.
func (r *Reader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if r.err == nil {
		// Held whole: checked first (Buffered), written, and only then is the buffer given
		// back (finish), as v lives in it.
		if v, ok := r.Buffered(); ok && len(v) > 0 {
			r.val = nil
			n, err := w.Write(v)
			if err != nil {
				r.Close()
				return int64(n), err
			}
			r.finish()
			return int64(n), nil
		}
	}
	var chunk *[]byte // pooled: Read copies out of it, never keeps it (r.val does not lie in it)
	defer func() {
		if chunk != nil {
			putBuf(chunk)
		}
	}()
	for {
		if len(r.val) > 0 && r.err == nil {
			v := r.val
			if r.verify {
				r.sums.write(v)
			}
			r.val = nil
			n, err := w.Write(v)
			total += int64(n)
			if err != nil {
				r.Close()
				return total, err
			}
			if r.remain == 0 {
				r.finish()
			}
			continue
		}
		if r.err != nil {
			if r.err == io.EOF {
				return total, nil
			}
			return total, r.err
		}
		if sc, ok := w.(syscall.Conn); ok && !r.verify {
			if f, ok := r.rd.(vfs.File); ok {
				n, err := r.send(sc, f)
				total += n
				if n > 0 || !errors.Is(err, errors.ErrUnsupported) {
					if err == nil || err == io.EOF {
						return total, nil
					}
					return total, err
				}
				// Nothing sent: the file or the socket cannot; copy instead.
			}
		}
		if chunk == nil {
			chunk = getBuf(streamChunk)
		}
		n, err := r.Read(*chunk)
		if n > 0 && (err == nil || err == io.EOF) {
			// The last bytes of a value that fails its check are not written.
			m, werr := w.Write((*chunk)[:n])
			total += int64(m)
			if werr != nil {
				r.Close()
				return total, werr
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// send has the kernel copy the value bytes left in the file f to the socket sc, sendChunk at a
// time. The reader's segment reference keeps the bytes as they are meanwhile (a freed range is
// punched out only once no reader holds the segment); like Read, it fails if the blob is
// replaced or deleted while it is sent, with what was sent counted. It ends the reader.
func (r *Reader) send(sc syscall.Conn, f vfs.File) (int64, error) {
	var total int64
	for r.remain > 0 {
		n, err := vfs.SendFile(sc, f, r.off, min(r.remain, sendChunk))
		total += n
		r.off += n
		r.remain -= n
		r.c.stats.sentBytes.Add(uint64(n))
		if err == nil && !r.c.stillAt(r.h, r.loc) {
			err = fmt.Errorf("%w: blob was replaced while being sent", ErrNotFound)
		}
		if err != nil {
			if total == 0 && errors.Is(err, errors.ErrUnsupported) {
				return 0, err // the caller copies instead
			}
			r.fail(err)
			return total, err
		}
	}
	r.finish()
	return total, r.err
}

// sendChunk is how many bytes send asks the kernel to send before it checks that the blob is
// still there.
const sendChunk = 4 << 20

// finish ends the reader after its last byte: checks checksums, releases resources.
func (r *Reader) finish() {
	r.check()
	r.release()
}

// check sets the reader's final error after its last byte: io.EOF, or a checksum mismatch.
func (r *Reader) check() {
	r.err = io.EOF
	if r.verify {
		if err := r.verified(); err != nil {
			r.err = err
		}
	}
}

// verified checks the bytes added to r.sums against the record's checksums, counting a
// mismatch as corruption.
func (r *Reader) verified() error {
	err := r.sums.verify(r.hdr, r.loc)
	if err != nil {
		r.c.stats.corrupt.Add(1)
	}
	return err
}

func (r *Reader) fail(err error) {
	r.err = err
	r.release()
}

func (r *Reader) release() {
	r.val = nil
	if r.buf != nil {
		putBuf(r.buf)
		r.buf = nil
	}
	r.mem.release()
	r.ref.release()
}

// Buffered returns the value bytes r has not delivered yet when it holds all of them in memory:
// a value from the memory tier (checked as it entered), or one read whole. A check due at the
// end (Verifies) is made first, over the bytes in memory: a value that fails it is not returned,
// and Read then reports the mismatch. A caller that takes the bytes writes them out in place of
// reading r, reads nothing more from r, and closes r once done with them; they stay valid until
// then. ok is false while bytes remain in the file, or after an error; r is then read as usual.
func (r *Reader) Buffered() (b []byte, ok bool) {
	if r.remain > 0 || r.err != nil && r.err != io.EOF {
		return nil, false
	}
	if r.verify {
		r.sums.write(r.val)
		r.verify = false // checked here, once: Read does not add the bytes again
		if err := r.verified(); err != nil {
			r.fail(err)
			return nil, false
		}
	}
	return r.val, true
}

// Close releases the reader's buffer and file reference. Reads after Close return io.EOF if
// the blob was read to the end, or ErrClosed.
func (r *Reader) Close() error {
	if r.err == nil {
		r.err = ErrClosed
	}
	r.release()
	return nil
}

// memReader is a Reader of the value bytes [off, off+n) of a blob still in the write buffer,
// copied out into buf (from getBuf, given back with the Reader's holds; nil: memory of its own).
func (c *Cache) memReader(dst *Reader, v batch.Value, buf *[]byte, off, n int64) *Reader {
	off = min(off, int64(len(v.Value)))
	end := int64(len(v.Value))
	if n >= 0 {
		end = min(end, off+n)
	}
	r := c.newReader(dst)
	r.val, r.size, r.hdr, r.attrs = v.Value[off:end], end-off, pendingHeader(v), string(v.Attrs)
	r.buf = buf
	return r
}
