package vfs

import (
	"sync"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/bufmem"
)

// DirectReadChunk is the most a DirectReader reads with one system call: a 1 MiB value with its
// record header, the longest key and the alignment slack at both ends fits in one.
const DirectReadChunk = 1<<20 + 16<<10

// smallBounce is the bounce of a read in place: the blocks around the buffers read in place
// (a record's header and longest key before its aligned value, and the block after it).
const smallBounce = 16 << 10

// bounce is the scratch of a read in place: an aligned buffer of smallBounce bytes and the
// vectors of a preadv (pooled with it: handed to File.ReadvAt, an array on the stack would
// escape to the heap on every call).
type bounce struct {
	buf []byte
	iov [maxDirectIovecs][]byte
}

var bouncePool = sync.Pool{New: func() any {
	b := &bounce{buf: AlignedBuffer(smallBounce)}
	bufmem.Track(b, smallBounce+DirectIOAlignment)
	return b
}}

// chunkPool holds the aligned buffers of DirectReadChunk bytes that reads which cannot be done
// in place go through.
var chunkPool = sync.Pool{New: func() any {
	b := AlignedBuffer(DirectReadChunk)
	bufmem.Track(&b, cap(b)+DirectIOAlignment)
	return &b
}}

// DirectReader reads a file through a descriptor opened with OpenDirect, so reads bypass the
// page cache: the device writes the blocks into an aligned buffer, and the bytes asked for are
// copied from there into the caller's buffers. Unlike the direct File itself it accepts any
// offset, length and memory: a read covers the aligned blocks around the range, one system call
// per DirectReadChunk.
//
// The kernel keeps direct reads coherent with buffered writes to the same file (it writes dirty
// pages of the range back first), so a DirectReader may read a file that another descriptor
// writes; it is cheapest when that descriptor writes with O_DIRECT too.
//
// A DirectReader is safe for concurrent use, like a File.
type DirectReader struct {
	f File // opened with OpenDirect
}

// NewDirectReader returns a reader of f, which must have been opened with OpenDirect. Close
// closes f.
func NewDirectReader(f File) *DirectReader { return &DirectReader{f: f} }

// Name returns the name of the file.
func (r *DirectReader) Name() string { return r.f.Name() }

// ReadAt implements io.ReaderAt.
func (r *DirectReader) ReadAt(p []byte, off int64) (int, error) {
	bufs := [1][]byte{p}
	return r.ReadvAt(bufs[:], off)
}

// ReadvAt fills bufs in order with the bytes starting at off, with the contract of
// File.ReadvAt: every byte, or the count read and a non-nil error (io.EOF at the end of the
// file).
//
// A buffer that sits in memory at the same offset from an aligned address as its bytes sit in
// the file from an aligned offset (a Go allocation of 8 KiB or more and a value stored at an
// aligned offset, say) has the aligned blocks in its middle read straight into it: the device
// writes them there and nothing is copied. The bytes around them come through the pooled bounce
// buffer, in the same system call.
func (r *DirectReader) ReadvAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	b := bouncePool.Get().(*bounce)
	inPlace := r.readvDirect(bufs, off, total, b)
	b.iov = [maxDirectIovecs][]byte{} // do not keep the caller's buffers reachable
	bouncePool.Put(b)
	if inPlace {
		return total, nil
	}
	c := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(c)
	return r.readvBounced(bufs, off, total, *c)
}

// maxDirectIovecs bounds the vectors of readvDirect: per buffer read in place, the bounce blocks
// before it and its middle, and the bounce blocks at the end.
const maxDirectIovecs = 8

// readvDirect reads all total bytes of bufs with one preadv in which the aligned middle of every
// buffer congruent with the file (see ReadvAt) is a vector of its own, and the rest are blocks
// of bounce. It returns false when no buffer qualifies, the rest does not fit in bounce, or the
// read came up short; the caller then reads through bounce.
func (r *DirectReader) readvDirect(bufs [][]byte, off int64, total int, b *bounce) bool {
	const a = DirectIOAlignment
	iov, bounce := &b.iov, b.buf
	var direct [maxDirectIovecs]bool // iov[i] is a middle read in place
	nv := 0
	start := off &^ (a - 1)
	end := alignUp(off + int64(total))
	cover := start // the file is covered by vectors up to here
	used := int64(0)
	pos := off
	for _, q := range bufs {
		midStart, midEnd := alignUp(pos), (pos+int64(len(q)))&^(a-1)
		if midEnd-midStart >= a && congruent(q, pos) && nv+2 < maxDirectIovecs {
			if gap := midStart - cover; gap > 0 {
				if used+gap > int64(len(bounce)) {
					return false
				}
				iov[nv] = bounce[used : used+gap]
				nv, used = nv+1, used+gap
			}
			iov[nv], direct[nv] = q[midStart-pos:midEnd-pos], true
			nv++
			cover = midEnd
		}
		pos += int64(len(q))
	}
	if cover == start {
		return false // nothing to read in place
	}
	if gap := end - cover; gap > 0 {
		if used+gap > int64(len(bounce)) {
			return false
		}
		iov[nv] = bounce[used : used+gap]
		nv++
	}
	// A short read is the end of the file or an error. A direct read that stops at the end of
	// the file inside a vector is continued at an unaligned offset, which the kernel refuses, so
	// its error says little: the caller reads again through bounce, which reports the end as
	// io.EOF.
	if got, _ := r.f.ReadvAt(iov[:nv], start); start+int64(got) < off+int64(total) {
		return false
	}
	// Deliver the bytes that came through bounce: the overlap of every bounce vector with
	// every buffer (both cover the file contiguously).
	vpos := start
	for i, v := range iov[:nv] {
		if !direct[i] {
			qpos := off
			for _, q := range bufs {
				lo, hi := max(vpos, qpos), min(vpos+int64(len(v)), qpos+int64(len(q)))
				if lo < hi {
					copy(q[lo-qpos:hi-qpos], v[lo-vpos:])
				}
				qpos += int64(len(q))
			}
		}
		vpos += int64(len(v))
	}
	return true
}

// congruent reports whether q's first byte, meant for file offset pos, is as far past an
// aligned address as pos is past an aligned offset.
func congruent(q []byte, pos int64) bool {
	return len(q) > 0 && (uintptr(unsafe.Pointer(&q[0]))-uintptr(pos))&(DirectIOAlignment-1) == 0
}

// readvBounced reads bufs through bounce, one system call per len(bounce) bytes, and copies.
func (r *DirectReader) readvBounced(bufs [][]byte, off int64, total int, bounce []byte) (int, error) {
	end := alignUp(off + int64(total))
	done, bi, bo := 0, 0, 0 // bytes delivered; the buffer being filled and the offset in it
	for {
		pos := off + int64(done)
		start := pos &^ (DirectIOAlignment - 1)
		n, err := r.f.ReadAt(bounce[:min(end-start, int64(len(bounce)))], start)
		if src := int64(n) - (pos - start); src > 0 {
			from := bounce[pos-start : n]
			for len(from) > 0 && bi < len(bufs) {
				c := copy(bufs[bi][bo:], from)
				from, bo, done = from[c:], bo+c, done+c
				if bo == len(bufs[bi]) {
					bi, bo = bi+1, 0
				}
			}
		}
		switch {
		case done == total:
			// Every byte asked for, even if the aligned read ran past the end of the file.
			return done, nil
		case err != nil:
			return done, err
		}
	}
}

// Close closes the direct descriptor.
func (r *DirectReader) Close() error { return r.f.Close() }

func alignUp(n int64) int64 {
	return (n + DirectIOAlignment - 1) &^ (DirectIOAlignment - 1)
}
