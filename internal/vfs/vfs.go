package vfs

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// File is an open file. See the package documentation for the guarantees
// every implementation keeps.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer

	// Name returns the name the file was opened with.
	Name() string

	// ReadvAt fills bufs in order with the bytes starting at off (preadv on
	// Linux). It returns the number of bytes read; fewer than the sum of
	// the buffer lengths comes with a non-nil error, io.EOF at the end of
	// the file.
	ReadvAt(bufs [][]byte, off int64) (int, error)

	// WritevAt writes bufs in order starting at off (pwritev on Linux). It
	// returns the number of bytes written; fewer than the sum of the buffer
	// lengths comes with a non-nil error.
	WritevAt(bufs [][]byte, off int64) (int, error)

	// Sync makes the file's data and size durable (fdatasync on Linux,
	// F_FULLFSYNC on Darwin).
	Sync() error

	// Truncate changes the size of the file.
	Truncate(size int64) error

	// Allocate reserves disk space for [off, off+n), extending the file
	// size if needed, so later writes there do not fail with ENOSPC. The
	// error wraps errors.ErrUnsupported where the platform or file system
	// cannot do it.
	Allocate(off, n int64) error

	// PunchHole releases the disk space of [off, off+n) without changing
	// the file size; the range then reads as zeros. The error wraps
	// errors.ErrUnsupported where the platform or file system cannot do it.
	PunchHole(off, n int64) error

	// Stat returns the file's metadata.
	Stat() (os.FileInfo, error)
}

// FS is a file system. See the package documentation.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)

	// OpenDirect opens a file like OpenFile but bypassing the page cache
	// (O_DIRECT on Linux). Its I/O must use AlignedBuffer memory, aligned
	// offsets and aligned lengths. The error wraps errors.ErrUnsupported on
	// platforms without direct I/O.
	OpenDirect(name string, flag int, perm os.FileMode) (File, error)

	// Remove removes a file or an empty directory.
	Remove(name string) error

	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error

	// MkdirAll creates a directory and any missing parents.
	MkdirAll(path string, perm os.FileMode) error

	// ReadDir returns the entries of a directory sorted by name.
	ReadDir(name string) ([]os.DirEntry, error)

	// Stat returns a file's metadata.
	Stat(name string) (os.FileInfo, error)

	// SyncDir makes the directory's entries (creations, renames, removals)
	// durable.
	SyncDir(name string) error

	// Lock creates name if needed and takes an exclusive lock on it,
	// without waiting: if another holder has it, the error wraps ErrLocked.
	// Closing the returned Closer releases the lock.
	Lock(name string) (io.Closer, error)

	// LockShared takes a shared lock on the existing file name, without
	// waiting and without writing: any number of shared holders exclude an
	// exclusive one (Lock), and an exclusive holder makes it fail with an
	// error that wraps ErrLocked. It needs only read permission, so it works
	// on a read-only file system. Closing the returned Closer releases it.
	LockShared(name string) (io.Closer, error)
}

// DirectIOAlignment is the alignment of memory addresses, file offsets and
// lengths for files opened with OpenDirect.
const DirectIOAlignment = 4096

// Default is the operating system's file system.
var Default FS = osFS{}

// AlignedBuffer returns a zeroed buffer of n bytes rounded up to a multiple
// of DirectIOAlignment, whose first byte is DirectIOAlignment-aligned in
// memory. It panics if n is negative.
func AlignedBuffer(n int) []byte {
	if n < 0 {
		panic("vfs: AlignedBuffer: negative size")
	}
	size := (n + DirectIOAlignment - 1) &^ (DirectIOAlignment - 1)
	b := make([]byte, size+DirectIOAlignment)
	skip := 0
	if rem := int(uintptr(unsafe.Pointer(&b[0])) & (DirectIOAlignment - 1)); rem != 0 {
		skip = DirectIOAlignment - rem
	}
	return b[skip : skip+size : skip+size]
}

// IsAligned reports whether b starts at a DirectIOAlignment-aligned address
// and its length is a multiple of DirectIOAlignment. An empty b is aligned.
func IsAligned(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	return uintptr(unsafe.Pointer(&b[0]))&(DirectIOAlignment-1) == 0 && len(b)%DirectIOAlignment == 0
}

// AllocatedBytes returns the disk space a file really uses, holes excluded
// (st_blocks*512 on Unix). Where the platform does not tell, it returns
// fi.Size().
func AllocatedBytes(fi os.FileInfo) int64 {
	return allocatedBytes(fi)
}

// osFS is the operating system's file system. The platform files supply
// openDirect, lock and the osFile methods that differ between systems.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return newOSFile(f)
}

func (osFS) OpenDirect(name string, flag int, perm os.FileMode) (File, error) {
	return openDirect(name, flag, perm)
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

func (osFS) Lock(name string) (io.Closer, error) {
	return lock(filepath.Clean(name))
}

func (osFS) LockShared(name string) (io.Closer, error) {
	return lockShared(filepath.Clean(name))
}

// osFile is a File backed by an *os.File. rc gives the platform code the
// descriptor without os.File's read and write locks (RawConn.Control only
// holds a reference), so positioned vectored calls run concurrently like
// ReadAt does, and a racing Close cannot recycle the descriptor under them.
type osFile struct {
	*os.File
	rc syscall.RawConn
}

func newOSFile(f *os.File) (*osFile, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &osFile{File: f, rc: rc}, nil
}

func (f *osFile) ReadvAt(bufs [][]byte, off int64) (int, error)  { return f.readvAt(bufs, off) }
func (f *osFile) WritevAt(bufs [][]byte, off int64) (int, error) { return f.writevAt(bufs, off) }
func (f *osFile) Sync() error                                    { return f.datasync() }
func (f *osFile) Allocate(off, n int64) error                    { return f.allocate(off, n) }
func (f *osFile) PunchHole(off, n int64) error                   { return f.punchHole(off, n) }

// The embedded *os.File supplies ReadAt, WriteAt, Close, Name, Truncate and
// Stat.
var _ File = (*osFile)(nil)

// dataSeeker is implemented by files that can find data past holes (lseek SEEK_DATA).
type dataSeeker interface {
	seekData(off int64) (int64, error)
}

// IsHole reports whether the n bytes of f at off hold no data (a hole, such as PunchHole
// leaves). ok is false when f cannot tell.
func IsHole(f File, off, n int64) (hole, ok bool) {
	ds, can := f.(dataSeeker)
	if !can {
		return false, false
	}
	next, err := ds.seekData(off)
	if err != nil {
		return false, false
	}
	return next >= off+n, true
}
