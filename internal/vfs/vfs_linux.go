package vfs

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func (f *osFile) readvAt(bufs [][]byte, off int64) (int, error) {
	if n, err, done := f.fastVector(false, bufs, off); done {
		return n, err
	} else if n > 0 {
		m, err := f.readvAt(advance(bufs, n), off+int64(n))
		return n + m, err
	}
	n, err := vectorLoop(bufs, off, func(iovs [][]byte, off int64) (int, error) {
		return f.vectorCall(unix.Preadv, iovs, off)
	}, io.EOF)
	if err != nil && err != io.EOF {
		err = &os.PathError{Op: "preadv", Path: f.Name(), Err: err}
	}
	return n, err
}

func (f *osFile) writevAt(bufs [][]byte, off int64) (int, error) {
	if n, err, done := f.fastVector(true, bufs, off); done {
		return n, err
	} else if n > 0 {
		m, err := f.writevAt(advance(bufs, n), off+int64(n))
		return n + m, err
	}
	n, err := vectorLoop(bufs, off, func(iovs [][]byte, off int64) (int, error) {
		return f.vectorCall(unix.Pwritev, iovs, off)
	}, io.ErrShortWrite)
	if err != nil {
		err = &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
	}
	return n, err
}

// vectorCall runs one preadv or pwritev on the descriptor, retrying EINTR.
func (f *osFile) vectorCall(call func(int, [][]byte, int64) (int, error), iovs [][]byte, off int64) (int, error) {
	var n int
	var err error
	cerr := f.rc.Control(func(fd uintptr) {
		for {
			n, err = call(int(fd), iovs, off)
			if err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	return n, err
}

func (f *osFile) control(op string, fn func(fd int) error) error {
	var err error
	cerr := f.rc.Control(func(fd uintptr) {
		for {
			err = fn(int(fd))
			if err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	return nil
}

func (f *osFile) datasync() error {
	return f.control("fdatasync", unix.Fdatasync)
}

func (f *osFile) allocate(off, n int64) error {
	// Errno.Is maps EOPNOTSUPP and ENOSYS to errors.ErrUnsupported.
	return f.control("fallocate", func(fd int) error {
		return unix.Fallocate(fd, 0, off, n)
	})
}

func (f *osFile) adviseRandom() error {
	return f.control("fadvise", func(fd int) error {
		return unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM)
	})
}

func (f *osFile) punchHole(off, n int64) error {
	return f.control("punch hole", func(fd int) error {
		return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	})
}

func openDirect(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag|unix.O_DIRECT, perm)
	if err != nil {
		return nil, err
	}
	return newOSFile(f)
}

func lock(name string) (io.Closer, error) {
	return flock(name)
}

func lockShared(name string) (io.Closer, error) {
	return flockShared(name)
}

func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// vectorCall is one preadv or pwritev of a few buffers, pooled with its bound run method so
// that the common case (a header and a value) allocates nothing: a closure passed to
// RawConn.Control would escape to the heap on every call.
type vectorCall struct {
	iov   [8]unix.Iovec
	cnt   int
	off   int64
	write bool
	n     int
	errno unix.Errno
	run   func(fd uintptr)
}

var vectorCalls = sync.Pool{New: func() any {
	c := new(vectorCall)
	c.run = c.do
	return c
}}

func (c *vectorCall) do(fd uintptr) {
	trap := uintptr(unix.SYS_PREADV)
	if c.write {
		trap = unix.SYS_PWRITEV
	}
	// preadv and pwritev take the offset as two longs, low then high.
	lo, hi := uintptr(c.off), uintptr(uint64(c.off)>>(8*unsafe.Sizeof(uintptr(0))-1)>>1)
	for {
		r, _, e := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&c.iov[0])), uintptr(c.cnt), lo, hi, 0)
		if e == unix.EINTR {
			continue
		}
		c.n, c.errno = int(r), e
		if e != 0 {
			c.n = 0
		}
		return
	}
}

// fastVector transfers bufs with one system call when there are few of them. done is false
// when there were too many buffers or the call moved only n bytes of them; the caller goes on
// from there.
func (f *osFile) fastVector(write bool, bufs [][]byte, off int64) (n int, err error, done bool) {
	c := vectorCalls.Get().(*vectorCall)
	defer func() {
		c.iov = [8]unix.Iovec{}
		vectorCalls.Put(c)
	}()
	total := 0
	c.cnt = 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if c.cnt == len(c.iov) {
			return 0, nil, false
		}
		c.iov[c.cnt].Base = &b[0]
		c.iov[c.cnt].SetLen(len(b))
		c.cnt++
		total += len(b)
	}
	if c.cnt == 0 {
		return 0, nil, true
	}
	c.off, c.write = off, write
	op := "preadv"
	if write {
		op = "pwritev"
	}
	if cerr := f.rc.Control(c.run); cerr != nil {
		return 0, &os.PathError{Op: op, Path: f.Name(), Err: cerr}, true
	}
	if c.errno != 0 {
		return 0, &os.PathError{Op: op, Path: f.Name(), Err: c.errno}, true
	}
	if c.n == total {
		return c.n, nil, true
	}
	if c.n == 0 {
		if write {
			return 0, &os.PathError{Op: op, Path: f.Name(), Err: io.ErrShortWrite}, true
		}
		return 0, io.EOF, true
	}
	return c.n, nil, false
}

// advance returns a copy of bufs without its first n bytes.
func advance(bufs [][]byte, n int) [][]byte {
	out := make([][]byte, 0, len(bufs))
	for _, b := range bufs {
		if n >= len(b) {
			n -= len(b)
			continue
		}
		out = append(out, b[n:])
		n = 0
	}
	return out
}

// seekData returns the offset of the first data at or after off; past the last data it returns
// the file size (ENXIO from lseek).
func (f *osFile) seekData(off int64) (int64, error) {
	var next int64
	err := f.control("lseek", func(fd int) error {
		var err error
		next, err = unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			fi, serr := f.File.Stat()
			if serr != nil {
				return serr
			}
			next, err = fi.Size(), nil
		}
		return err
	})
	return next, err
}

// cachestatCall is one cachestat(2) on a descriptor, pooled with the function that runs it so
// that asking costs no allocation (a hit asks before every large read).
type cachestatCall struct {
	rng   unix.CachestatRange
	st    unix.Cachestat_t
	errno error
	run   func(fd uintptr)
}

var cachestatCalls = sync.Pool{New: func() any {
	c := new(cachestatCall)
	c.run = func(fd uintptr) { c.errno = unix.Cachestat(uint(fd), &c.rng, &c.st, 0) }
	return c
}}

func (f *osFile) statPageCache(off, n int64) (PageCacheStat, error) {
	c := cachestatCalls.Get().(*cachestatCall)
	defer cachestatCalls.Put(c)
	c.rng = unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	c.st, c.errno = unix.Cachestat_t{}, nil
	err := f.rc.Control(c.run)
	if err == nil {
		err = c.errno
	}
	if err != nil {
		// Errno.Is maps ENOSYS (a kernel before 6.5) and EOPNOTSUPP to errors.ErrUnsupported.
		return PageCacheStat{}, &os.PathError{Op: "cachestat", Path: f.Name(), Err: err}
	}
	page := int64(os.Getpagesize())
	pages := (off+n+page-1)/page - off/page
	return PageCacheStat{Pages: pages, Cached: int64(c.st.Cache), Evicted: int64(c.st.Evicted), Dirty: int64(c.st.Dirty + c.st.Writeback)}, nil
}

// sendTo sends the n bytes at off to the socket dst with sendfile(2), a call at a time of at
// most sendChunk bytes, waiting for dst to be writable when its buffer is full.
func (f *osFile) sendTo(dst syscall.RawConn, off, n int64) (int64, error) {
	var sent int64
	var serr error
	cerr := f.rc.Control(func(in uintptr) {
		werr := dst.Write(func(out uintptr) bool {
			for sent < n {
				o := off + sent
				k, err := unix.Sendfile(int(out), int(in), &o, int(min(n-sent, sendChunk)))
				if k > 0 {
					sent += int64(k)
				}
				switch {
				case err == unix.EAGAIN:
					return false // wait until the socket takes more
				case err == unix.EINTR:
				case err != nil:
					serr = err
					return true
				case k == 0:
					serr = io.ErrUnexpectedEOF // the file ends before the range does
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if serr == nil {
		serr = cerr
	}
	if serr != nil {
		if sent == 0 && (serr == unix.EINVAL || serr == unix.ENOSYS) {
			serr = errors.Join(errors.ErrUnsupported, serr)
		}
		return sent, &os.PathError{Op: "sendfile", Path: f.Name(), Err: serr}
	}
	return sent, nil
}

// sendChunk is the most one sendfile call is asked to send: a slow socket then gives the
// runtime a chance to wait for it between calls, and a call never blocks long.
const sendChunk = 1 << 20
