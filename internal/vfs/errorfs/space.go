package errorfs

import (
	"path/filepath"
	"syscall"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// spaceModel is the capacity model: every file is charged the highest byte
// written or allocated in it. See the package documentation.
type spaceModel struct {
	capacity int64 // 0: unlimited
	used     int64
	files    map[string]int64 // clean path -> bytes charged
}

func newSpaceModel() spaceModel { return spaceModel{files: make(map[string]int64)} }

// opened starts charging a file the first time it is opened: what it holds
// already counts.
func (s *spaceModel) opened(inner vfs.FS, name string, trunc bool) {
	name = filepath.Clean(name)
	if trunc {
		s.used -= s.files[name]
		s.files[name] = 0
		return
	}
	if _, ok := s.files[name]; ok {
		return
	}
	var size int64
	if fi, err := inner.Stat(name); err == nil {
		size = fi.Size()
	}
	s.files[name] = size
	s.used += size
}

func (s *spaceModel) removed(name string) {
	name = filepath.Clean(name)
	s.used -= s.files[name]
	delete(s.files, name)
}

func (s *spaceModel) renamed(oldname, newname string) {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	s.used -= s.files[newname]
	s.files[newname] = s.files[oldname]
	delete(s.files, oldname)
}

func (s *spaceModel) truncated(name string, size int64) {
	name = filepath.Clean(name)
	if cur := s.files[name]; size < cur {
		s.used -= cur - size
		s.files[name] = size
	}
}

// charge makes room for file name to hold bytes up to end, or returns
// ENOSPC (and counts it as an injected fault) when that would pass the
// capacity.
func (fs *FS) charge(name string, end int64) error {
	name = filepath.Clean(name)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := &fs.space
	cur := s.files[name]
	if end <= cur {
		return nil
	}
	if s.capacity > 0 && s.used+end-cur > s.capacity {
		fs.injected.Add(1)
		return syscall.ENOSPC
	}
	s.files[name] = end
	s.used += end - cur
	return nil
}

// SetCapacity sets the size of the modelled disk in bytes: writes and
// allocations that would take the charged bytes past it fail with ENOSPC.
// 0 means unlimited. Files count from the first time they are opened
// through the FS.
func (fs *FS) SetCapacity(n int64) {
	fs.mu.Lock()
	fs.space.capacity = n
	fs.mu.Unlock()
}

// Used returns the bytes charged to files opened through the FS.
func (fs *FS) Used() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.space.used
}
