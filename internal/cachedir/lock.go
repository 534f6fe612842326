package cachedir

import (
	"errors"
	"io"
	iofs "io/fs"
	"path/filepath"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// lockRetry is how long a held lock is tried again before Lock reports it: a lock just
// released can still be held for a moment by a child process forked in between (the child
// shares the open file until it execs).
const (
	lockRetry     = 250 * time.Millisecond
	lockRetryStep = 10 * time.Millisecond
)

// Lock takes the lock of the cache directory dir, and returns what releases it: exclusive for
// a cache that writes, shared for a read-only one (readOnly), so that any number of readers
// exclude a writer and a writer excludes readers (a reader's index would go stale at the
// writer's next Put, and its reads could meet records the writer freed).
//
// A read-only Lock of a directory whose lock file it cannot open (missing, or another user's
// file it may not read) goes on without the lock, and returns a Closer that does nothing: no
// writer can have that directory open then, or the caller cannot be protected from one.
//
// An error is the file system's, as it came (it names the lock file): one that wraps
// vfs.ErrLocked means another holder kept the lock for as long as Lock tried.
func Lock(fsys vfs.FS, dir string, readOnly bool) (io.Closer, error) {
	name := filepath.Join(dir, LockFile)
	take := fsys.Lock
	if readOnly {
		take = fsys.LockShared
	}
	deadline := time.Now().Add(lockRetry)
	for {
		lk, err := take(name)
		switch {
		case err == nil:
			return lk, nil
		case errors.Is(err, vfs.ErrLocked) && time.Now().Before(deadline):
			time.Sleep(lockRetryStep)
		case errors.Is(err, vfs.ErrLocked):
			return nil, err
		case readOnly && (errors.Is(err, iofs.ErrNotExist) || errors.Is(err, iofs.ErrPermission)):
			return unlocked{}, nil
		default:
			return nil, err
		}
	}
}

// unlocked is the lock of a read-only open that could not take one.
type unlocked struct{}

func (unlocked) Close() error { return nil }
