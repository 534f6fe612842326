package errorfs

import (
	"os"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// file is a vfs.File whose operations pass through the faults of fs.
type file struct {
	vfs.File
	fs     *FS
	name   string
	direct bool // opened with OpenDirect: reads need aligned buffers
}

func total(bufs [][]byte) int64 {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// prefix returns the first n bytes of bufs as buffers sharing their memory.
func prefix(bufs [][]byte, n int64) [][]byte {
	var out [][]byte
	for _, b := range bufs {
		if n <= 0 {
			break
		}
		b = b[:min(int64(len(b)), n)]
		out = append(out, b)
		n -= int64(len(b))
	}
	return out
}

// flatten copies bufs into one buffer.
func flatten(bufs [][]byte) []byte {
	out := make([]byte, 0, total(bufs))
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

// flip XORs the fault's mask into the bytes of b (which holds file bytes
// from off) that fall in the fault's range.
func (f *Fault) flip(b []byte, off int64) {
	from := max(f.Off, off)
	to := off + int64(len(b))
	if f.Len > 0 {
		to = min(to, f.Off+f.Len)
	}
	for p := from; p < to; p++ {
		b[p-off] ^= f.mask()
	}
}

// keep is how many of n bytes a Short fault moves.
func (f *Fault) keep(n int64) int64 {
	if f.Keep < 0 {
		return n / 2
	}
	return min(int64(f.Keep), n)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	return f.readv("pread", [][]byte{p}, off)
}

func (f *file) ReadvAt(bufs [][]byte, off int64) (int, error) {
	return f.readv("preadv", bufs, off)
}

func (f *file) readv(op string, bufs [][]byte, off int64) (int, error) {
	n := total(bufs)
	flt := f.fs.fault(OpRead, f.name, off, n)
	if flt == nil {
		return f.read(bufs, off)
	}
	switch flt.Action {
	case Short:
		m, err := f.read(prefix(bufs, flt.keep(n)), off)
		if err == nil {
			err = pathErr(op, f.name, flt.err())
		}
		return m, err
	case Flip:
		m, err := f.read(bufs, off)
		b := flatten(prefix(bufs, int64(m)))
		flt.flip(b, off)
		for _, dst := range bufs {
			b = b[copy(dst, b):]
		}
		return m, err
	}
	return 0, pathErr(op, f.name, flt.err())
}

func (f *file) read(bufs [][]byte, off int64) (int, error) {
	if len(bufs) == 1 {
		return f.File.ReadAt(bufs[0], off)
	}
	return f.File.ReadvAt(bufs, off)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	return f.writev("pwrite", [][]byte{p}, off)
}

func (f *file) WritevAt(bufs [][]byte, off int64) (int, error) {
	return f.writev("pwritev", bufs, off)
}

func (f *file) writev(op string, bufs [][]byte, off int64) (int, error) {
	n := total(bufs)
	flt := f.fs.fault(OpWrite, f.name, off, n)
	if flt == nil {
		return f.write(op, bufs, off)
	}
	switch flt.Action {
	case Ignore:
		return int(n), nil
	case Short, Tear:
		k := flt.keep(n)
		if flt.Action == Tear {
			k = min(max(flt.Off-off, 0), n)
		}
		m, err := f.write(op, prefix(bufs, k), off)
		if err == nil {
			err = pathErr(op, f.name, flt.err())
		}
		return m, err
	case Flip:
		b := flatten(bufs)
		flt.flip(b, off)
		return f.write(op, [][]byte{b}, off)
	}
	return 0, pathErr(op, f.name, flt.err())
}

// write charges the bytes to the capacity model and writes them.
func (f *file) write(op string, bufs [][]byte, off int64) (int, error) {
	n := total(bufs)
	if n == 0 {
		return 0, nil
	}
	if err := f.fs.charge(f.name, off+n); err != nil {
		return 0, pathErr(op, f.name, err)
	}
	var m int
	err := f.track(off, n, func() (err error) {
		if len(bufs) == 1 {
			m, err = f.File.WriteAt(bufs[0], off)
		} else {
			m, err = f.File.WritevAt(bufs, off)
		}
		return err
	})
	return m, err
}

func (f *file) Sync() error {
	if flt := f.fs.fault(OpSync, f.name, -1, 0); flt != nil {
		if flt.Action == Ignore {
			return nil
		}
		return pathErr("fdatasync", f.name, flt.err())
	}
	return f.sync()
}

func (f *file) Truncate(size int64) error {
	if flt := f.fs.fault(OpTruncate, f.name, -1, 0); flt != nil {
		if flt.Action == Ignore {
			return nil
		}
		return pathErr("truncate", f.name, flt.err())
	}
	if err := f.track(size, -1, func() error { return f.File.Truncate(size) }); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.space.truncated(f.name, size)
	f.fs.mu.Unlock()
	return nil
}

func (f *file) Allocate(off, n int64) error {
	if flt := f.fs.fault(OpAllocate, f.name, off, n); flt != nil {
		if flt.Action == Ignore {
			return nil
		}
		return pathErr("fallocate", f.name, flt.err())
	}
	if err := f.fs.charge(f.name, off+n); err != nil {
		return pathErr("fallocate", f.name, err)
	}
	// The bytes do not change, the size may.
	return f.track(off+n, 0, func() error { return f.File.Allocate(off, n) })
}

func (f *file) PunchHole(off, n int64) error {
	if flt := f.fs.fault(OpPunchHole, f.name, off, n); flt != nil {
		if flt.Action == Ignore {
			return nil
		}
		return pathErr("fallocate", f.name, flt.err())
	}
	return f.track(off, n, func() error { return f.File.PunchHole(off, n) })
}

func (f *file) Stat() (os.FileInfo, error) {
	if flt := f.fs.fault(OpStat, f.name, -1, 0); flt != nil {
		return nil, pathErr("stat", f.name, flt.err())
	}
	return f.File.Stat()
}

func (f *file) Close() error {
	err := f.File.Close()
	if flt := f.fs.fault(OpClose, f.name, -1, 0); flt != nil && err == nil && flt.Action != Ignore {
		err = pathErr("close", f.name, flt.err())
	}
	return err
}

func (f *file) Name() string { return f.File.Name() }

var _ vfs.File = (*file)(nil)
