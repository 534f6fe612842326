package vfs

import (
	"io"
)

// iovMax is IOV_MAX on Linux and Darwin: the most buffers one preadv or
// pwritev call accepts.
const iovMax = 1024

// vectorFunc transfers a prefix of bufs at off with one system call (or one
// ReadAt or WriteAt) and returns how many bytes it moved.
type vectorFunc func(bufs [][]byte, off int64) (int, error)

// vectorLoop calls fn until every byte of bufs has moved, at most iovMax
// buffers per call, skipping past what each call moved. A call that moves
// nothing and reports no error ends the loop with the error short (io.EOF
// for reads, io.ErrShortWrite for writes). bufs itself is never modified:
// the first time a call stops inside a buffer, the remaining slice headers
// are copied.
func vectorLoop(bufs [][]byte, off int64, fn vectorFunc, short error) (int, error) {
	total := 0
	copied := false
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return total, nil
		}
		n, err := fn(bufs[:min(len(bufs), iovMax)], off)
		if n < 0 {
			n = 0
		}
		total += n
		off += int64(n)
		moved := n
		for moved > 0 && len(bufs) > 0 {
			if moved < len(bufs[0]) {
				if !copied {
					bufs = append([][]byte(nil), bufs...)
					copied = true
				}
				bufs[0] = bufs[0][moved:]
				break
			}
			moved -= len(bufs[0])
			bufs = bufs[1:]
		}
		if err != nil {
			if err == io.EOF && len(bufs) == 0 {
				// ReadAt may report io.EOF together with the last bytes.
				return total, nil
			}
			return total, err
		}
		if n == 0 {
			return total, short
		}
	}
}

// readvLoop implements ReadvAt with ReadAt calls, for platforms without
// preadv and for File implementations that only have ReadAt.
func readvLoop(r io.ReaderAt, bufs [][]byte, off int64) (int, error) {
	return vectorLoop(bufs, off, func(bufs [][]byte, off int64) (int, error) {
		return r.ReadAt(bufs[0], off)
	}, io.EOF)
}

// writevLoop implements WritevAt with WriteAt calls.
func writevLoop(w io.WriterAt, bufs [][]byte, off int64) (int, error) {
	return vectorLoop(bufs, off, func(bufs [][]byte, off int64) (int, error) {
		return w.WriteAt(bufs[0], off)
	}, io.ErrShortWrite)
}
