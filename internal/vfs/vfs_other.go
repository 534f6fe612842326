//go:build !linux && !darwin

package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

func (f *osFile) readvAt(bufs [][]byte, off int64) (int, error) {
	return readvLoop(f.File, bufs, off)
}

func (f *osFile) writevAt(bufs [][]byte, off int64) (int, error) {
	return writevLoop(f.File, bufs, off)
}

func (f *osFile) datasync() error {
	return f.File.Sync()
}

func (f *osFile) allocate(off, n int64) error {
	return errUnsupported("fallocate", f.Name())
}

func (f *osFile) punchHole(off, n int64) error {
	return errUnsupported("punch hole", f.Name())
}

func openDirect(name string, flag int, perm os.FileMode) (File, error) {
	return nil, errUnsupported("open O_DIRECT", name)
}

func allocatedBytes(fi os.FileInfo) int64 {
	return fi.Size()
}

// Without flock, locks only exclude other Lock calls of this process: held
// records the absolute names currently locked.
var held struct {
	sync.Mutex
	names map[string]bool
}

type processLock struct {
	f    *os.File
	name string
	once sync.Once
}

func (l *processLock) Close() error {
	err := os.ErrClosed
	l.once.Do(func() {
		held.Lock()
		delete(held.names, l.name)
		held.Unlock()
		err = l.f.Close()
	})
	return err
}

// notHeld returns the absolute name of name, or an error wrapping ErrLocked if this process
// holds it. The caller holds held.
func notHeld(name string) (string, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return "", err
	}
	if held.names[abs] {
		return "", fmt.Errorf("%w: %s", ErrLocked, name)
	}
	return abs, nil
}

func lock(name string) (io.Closer, error) {
	held.Lock()
	defer held.Unlock()
	abs, err := notHeld(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if held.names == nil {
		held.names = make(map[string]bool)
	}
	held.names[abs] = true
	return &processLock{f: f, name: abs}, nil
}

// lockShared fails if this process holds name exclusively; other shared
// holders and other processes are not seen.
func lockShared(name string) (io.Closer, error) {
	held.Lock()
	defer held.Unlock()
	if _, err := notHeld(name); err != nil {
		return nil, err
	}
	return os.Open(name)
}
