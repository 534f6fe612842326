package cachedir

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
	"github.com/seed57392e9e/blobcache/internal/vfs/errorfs"
)

// TestLockExcludes: a writer excludes everybody, readers exclude a writer but not each other,
// and a held lock is reported only after the retry.
func TestLockExcludes(t *testing.T) {
	dir := t.TempDir()
	w, err := Lock(vfs.Default, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Lock(vfs.Default, dir, false); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited < lockRetry {
		t.Fatalf("held lock reported after %v, before the retry of %v", waited, lockRetry)
	}
	if _, err := Lock(vfs.Default, dir, true); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("reader beside a writer: %v, want ErrLocked", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1, err := Lock(vfs.Default, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Lock(vfs.Default, dir, true)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := Lock(vfs.Default, dir, false); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("writer beside readers: %v, want ErrLocked", err)
	}
	r1.Close()
	r2.Close()
	w, err = Lock(vfs.Default, dir, false)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	w.Close()
}

// TestLockReleasedDuringRetry: a lock that is released while Lock retries (held for a moment
// by a forked child) is taken.
func TestLockReleasedDuringRetry(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, LockFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		fs := errorfs.New(vfs.Default, 1)
		held := fs.Add(&errorfs.Fault{Ops: errorfs.OpLock, Name: LockFile, Err: vfs.ErrLocked, Times: 3})
		lk, err := Lock(fs, dir, readOnly)
		if err != nil {
			t.Fatalf("read-only %v: lock released during the retry: %v", readOnly, err)
		}
		lk.Close()
		if held.Injected() != 3 {
			t.Fatalf("read-only %v: %d tries refused, want 3", readOnly, held.Injected())
		}
	}
}

// TestLockReadOnlyWithout: a read-only Lock goes on without a lock file it cannot open; a
// writer does not, and other errors are reported as they came.
func TestLockReadOnlyWithout(t *testing.T) {
	dir := t.TempDir()
	lk, err := Lock(vfs.Default, dir, true)
	if err != nil {
		t.Fatalf("read-only, no lock file: %v", err)
	}
	lk.Close()
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !os.IsNotExist(err) {
		t.Fatalf("a read-only Lock created the lock file: %v", err)
	}

	fs := errorfs.New(vfs.Default, 1)
	fs.Add(&errorfs.Fault{Ops: errorfs.OpLock, Name: LockFile, Err: syscall.EACCES})
	if lk, err := Lock(fs, dir, true); err != nil {
		t.Fatalf("read-only, lock file not readable: %v", err)
	} else {
		lk.Close()
	}
	if _, err := Lock(fs, dir, false); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("writer, lock file not writable: %v, want EACCES", err)
	}
	fs.Clear()
	fs.Add(&errorfs.Fault{Ops: errorfs.OpLock, Name: LockFile, Err: syscall.EIO})
	if _, err := Lock(fs, dir, true); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read-only, EIO: %v, want EIO", err)
	}
}
