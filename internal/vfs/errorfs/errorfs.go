package errorfs

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Op is a set of file-system operations a Fault can hit.
type Op uint32

// Operations. Opens are split by whether they may create the file, so a test
// can fail the creation of segments without failing the reopening of old ones.
const (
	OpOpen      Op = 1 << iota // OpenFile and OpenDirect without O_CREATE
	OpCreate                   // OpenFile and OpenDirect with O_CREATE
	OpRead                     // ReadAt, ReadvAt
	OpWrite                    // WriteAt, WritevAt
	OpSync                     // File.Sync
	OpTruncate                 // File.Truncate
	OpAllocate                 // File.Allocate
	OpPunchHole                // File.PunchHole
	OpStat                     // File.Stat and FS.Stat
	OpClose                    // File.Close (the file is closed anyway)
	OpRemove                   // FS.Remove
	OpRename                   // FS.Rename (matched on the old name)
	OpMkdir                    // FS.MkdirAll
	OpReadDir                  // FS.ReadDir
	OpSyncDir                  // FS.SyncDir
	OpLock                     // FS.Lock

	// OpData is every operation that touches a file's bytes; only these
	// are matched against a Fault's byte range.
	OpData = OpRead | OpWrite | OpAllocate | OpPunchHole
	// OpAll is every operation.
	OpAll Op = 1<<iota - 1
)

// Action is what a fired Fault does.
type Action int

const (
	// Fail does not perform the operation and returns the Fault's error.
	Fail Action = iota
	// Short moves only the first Keep bytes of a read or write (half of
	// them when Keep is negative) and returns them with the Fault's error.
	// Other operations fail as with Fail.
	Short
	// Tear writes only the bytes of a write that fall before file offset
	// Off, the rest never reaching the file, and returns the error: what a
	// crash in the middle of the write leaves. A tear is counted when the
	// write reaches past Off. Other operations fail as with Fail.
	Tear
	// Flip performs a read or write but XORs Mask into every byte of it
	// that falls in the Fault's range: bytes damaged on the way from or to
	// the disk. The operation reports success. Other operations fail as
	// with Fail.
	Flip
	// Ignore reports success without performing the operation: a sync
	// that lies, a write lost by the device. Reads fail as with Fail.
	Ignore
)

// Fault describes a fault to inject. The zero value of every field means
// "any" or the default stated on it. Do not change a Fault after Add.
type Fault struct {
	// Ops is the set of operations the fault hits. Required.
	Ops Op
	// Name is a filepath.Match pattern on the base name of the file
	// ("*.seg", "bloom.dat"). Empty matches every file.
	Name string
	// Off and Len are the byte range [Off, Off+Len) of the file that data
	// operations (OpData) must overlap to be hit; Len 0 means to the end
	// of the file. Other operations ignore the range. Tear tears at Off.
	Off, Len int64
	// Skip lets the first Skip matching operations through unharmed.
	Skip int
	// Times is how many operations the fault hits at most; 0 means every
	// matching operation.
	Times int
	// Prob, if in (0, 1), is the chance that a matching operation is hit.
	Prob float64
	// Action is what the fault does; default Fail.
	Action Action
	// Err is the error the fault returns, wrapped in an *os.PathError.
	// Default syscall.EIO.
	Err error
	// Keep is the number of bytes a Short read or write moves; negative
	// means half.
	Keep int
	// Mask is XORed into the damaged bytes of a Flip; 0 means 0x01.
	Mask byte
	// Hold, if not nil, makes a hit operation wait until Hold is closed before the fault acts:
	// a test orders the faulty operation after others (a batch's failed write after the next
	// batch's placement, say).
	Hold <-chan struct{}

	fs      *FS
	matched int // guarded by fs.mu
	fired   int // guarded by fs.mu
}

// Injected returns how many operations the fault has hit.
func (f *Fault) Injected() int {
	if f.fs == nil {
		return 0
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return f.fired
}

func (f *Fault) err() error {
	if f.Err != nil {
		return f.Err
	}
	return syscall.EIO
}

func (f *Fault) mask() byte {
	if f.Mask == 0 {
		return 1
	}
	return f.Mask
}

// overlaps reports whether [off, off+n) meets the fault's range.
func (f *Fault) overlaps(off, n int64) bool {
	if f.Action == Tear {
		return off+n > f.Off
	}
	if f.Len == 0 {
		return off+n > f.Off || (n == 0 && off >= f.Off)
	}
	return off < f.Off+f.Len && off+n > f.Off
}

// FS wraps a vfs.FS and injects the faults added to it.
type FS struct {
	inner vfs.FS

	nfaults atomic.Int32 // len(mu.faults), read without the lock on every operation
	// injected counts fired faults and writes refused for lack of space.
	injected atomic.Uint64
	ops      atomic.Uint64

	mu        sync.Mutex
	faults    []*Fault            // guarded by mu
	rng       *rand.Rand          // guarded by mu
	space     spaceModel          // guarded by mu
	tracking  bool                // the power-loss model is on (power.go); guarded by mu
	histories map[string]*history // guarded by mu
}

// New returns an FS that passes every operation to inner until faults are
// added. Its generator for Fault.Prob is seeded with seed.
func New(inner vfs.FS, seed uint64) *FS {
	return &FS{inner: inner, rng: rand.New(rand.NewPCG(seed, 0x6572726f72667321)), space: newSpaceModel(),
		histories: make(map[string]*history)}
}

// Add adds a fault and returns it, to be removed or asked for its count
// later. It panics if f.Ops is empty or f was added before.
func (fs *FS) Add(f *Fault) *Fault {
	if f.Ops == 0 {
		panic("errorfs: Fault with no Ops")
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.fs != nil {
		panic("errorfs: Fault added twice")
	}
	f.fs = fs
	fs.faults = append(fs.faults, f)
	fs.nfaults.Store(int32(len(fs.faults)))
	return f
}

// Drop removes a fault; it keeps its count.
func (fs *FS) Drop(f *Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, g := range fs.faults {
		if g == f {
			fs.faults = append(fs.faults[:i:i], fs.faults[i+1:]...)
			break
		}
	}
	fs.nfaults.Store(int32(len(fs.faults)))
}

// Clear removes every fault.
func (fs *FS) Clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
	fs.nfaults.Store(0)
}

// Injected returns how many faults the FS has injected in all: fired Faults
// plus writes and allocations refused for lack of space.
func (fs *FS) Injected() uint64 { return fs.injected.Load() }

// Ops returns how many operations went through the FS.
func (fs *FS) Ops() uint64 { return fs.ops.Load() }

// fault returns the first fault that fires for op on name over the bytes
// [off, off+n) (data operations), or nil.
func (fs *FS) fault(op Op, name string, off, n int64) *Fault {
	fs.ops.Add(1)
	if fs.nfaults.Load() == 0 {
		return nil
	}
	f := fs.match(op, name, off, n)
	if f != nil && f.Hold != nil {
		<-f.Hold
	}
	return f
}

// match returns the fault that hits the operation, if any, and counts it.
func (fs *FS) match(op Op, name string, off, n int64) *Fault {
	base := filepath.Base(name)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, f := range fs.faults {
		if f.Ops&op == 0 {
			continue
		}
		if f.Name != "" {
			if ok, _ := filepath.Match(f.Name, base); !ok {
				continue
			}
		}
		if op&OpData != 0 && !f.overlaps(off, n) {
			continue
		}
		f.matched++
		if f.matched <= f.Skip || (f.Times > 0 && f.fired >= f.Times) {
			continue
		}
		if f.Prob > 0 && f.Prob < 1 && fs.rng.Float64() >= f.Prob {
			continue
		}
		f.fired++
		fs.injected.Add(1)
		return f
	}
	return nil
}

// pathErr wraps err the way the os package does, so callers see what they
// would see from a real failure.
func pathErr(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	return fs.open(false, name, flag, func() (vfs.File, error) { return fs.inner.OpenFile(name, flag, perm) })
}

func (fs *FS) OpenDirect(name string, flag int, perm os.FileMode) (vfs.File, error) {
	return fs.open(true, name, flag, func() (vfs.File, error) { return fs.inner.OpenDirect(name, flag, perm) })
}

func (fs *FS) open(direct bool, name string, flag int, open func() (vfs.File, error)) (vfs.File, error) {
	op := OpOpen
	if flag&os.O_CREATE != 0 {
		op = OpCreate
	}
	if f := fs.fault(op, name, -1, 0); f != nil {
		return nil, pathErr("open", name, f.err())
	}
	fs.mu.Lock()
	tracking := fs.tracking
	fs.mu.Unlock()
	existed := true
	if tracking && flag&os.O_CREATE != 0 {
		_, err := fs.inner.Stat(name)
		existed = err == nil
	}
	inner, err := open()
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	fs.space.opened(fs.inner, name, flag&os.O_TRUNC != 0)
	if !existed {
		fs.created(name)
	}
	fs.mu.Unlock()
	return &file{File: inner, fs: fs, name: name, direct: direct}, nil
}

func (fs *FS) Remove(name string) error {
	if f := fs.fault(OpRemove, name, -1, 0); f != nil {
		if f.Action == Ignore {
			return nil
		}
		return pathErr("remove", name, f.err())
	}
	if err := fs.inner.Remove(name); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.space.removed(name)
	fs.forget(name, "")
	fs.mu.Unlock()
	return nil
}

func (fs *FS) Rename(oldname, newname string) error {
	if f := fs.fault(OpRename, oldname, -1, 0); f != nil {
		if f.Action == Ignore {
			return nil
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: f.err()}
	}
	if err := fs.inner.Rename(oldname, newname); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.space.renamed(oldname, newname)
	fs.forget(oldname, newname)
	fs.mu.Unlock()
	return nil
}

func (fs *FS) MkdirAll(path string, perm os.FileMode) error {
	if f := fs.fault(OpMkdir, path, -1, 0); f != nil {
		if f.Action == Ignore {
			return nil
		}
		return pathErr("mkdir", path, f.err())
	}
	return fs.inner.MkdirAll(path, perm)
}

func (fs *FS) ReadDir(name string) ([]os.DirEntry, error) {
	if f := fs.fault(OpReadDir, name, -1, 0); f != nil {
		return nil, pathErr("readdirent", name, f.err())
	}
	return fs.inner.ReadDir(name)
}

func (fs *FS) Stat(name string) (os.FileInfo, error) {
	if f := fs.fault(OpStat, name, -1, 0); f != nil {
		return nil, pathErr("stat", name, f.err())
	}
	return fs.inner.Stat(name)
}

func (fs *FS) SyncDir(name string) error {
	if f := fs.fault(OpSyncDir, name, -1, 0); f != nil {
		if f.Action == Ignore {
			return nil
		}
		return pathErr("sync", name, f.err())
	}
	if err := fs.inner.SyncDir(name); err != nil {
		return err
	}
	fs.mu.Lock()
	fs.dirSynced(name)
	fs.mu.Unlock()
	return nil
}

func (fs *FS) Lock(name string) (io.Closer, error) {
	if f := fs.fault(OpLock, name, -1, 0); f != nil {
		return nil, pathErr("flock", name, f.err())
	}
	return fs.inner.Lock(name)
}

func (fs *FS) LockShared(name string) (io.Closer, error) {
	if f := fs.fault(OpLock, name, -1, 0); f != nil {
		return nil, pathErr("flock", name, f.err())
	}
	return fs.inner.LockShared(name)
}

var _ vfs.FS = (*FS)(nil)
