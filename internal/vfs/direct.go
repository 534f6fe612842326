package vfs

import (
	"sync"
)

// DirectReadChunk is the most a DirectReader reads with one system call: a 1 MiB value with its
// record header, the longest key and the alignment slack at both ends fits in one.
const DirectReadChunk = 1<<20 + 16<<10

// bouncePool holds the aligned buffers DirectReaders read into, DirectReadChunk bytes each.
var bouncePool = sync.Pool{New: func() any {
	b := AlignedBuffer(DirectReadChunk)
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
func (r *DirectReader) ReadvAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	if total == 0 {
		return 0, nil
	}
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
	bounce := *bp
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
