package errorfs

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
)

// The power-loss model. With TrackUnsynced on, the FS remembers, per file, what every write,
// truncation, allocation or hole punch since the file's last Sync replaced, and which files were
// created since their directory's last SyncDir. PowerLoss then puts each file back to a state a
// power loss may leave on a disk, at 512-byte sector granularity. Most often the kernel had
// written back the file's changes up to some point: the changes before a random one are kept,
// those after it undone, and the one at it torn sector by sector. Otherwise (one time in four)
// every unsynced sector keeps its new bytes or gets its old ones back at random. The file size
// keeps its new value or goes back to the synced one, and a file whose directory entry was never
// synced may vanish whole.
//
// Limits: removals and renames are taken as durable when they return (the engine syncs the
// directory after each one it needs durable); a removed file never comes back.

// sectorSize is the unit a device writes whole.
const sectorSize = 512

// undo is what one operation on a file replaced.
type undo struct {
	off     int64
	old     []byte // the bytes [off, off+len(old)) held before (only those below oldSize)
	n       int64  // bytes the operation covered from off
	oldSize int64
}

// history is what changed in a file since it was last synced.
type history struct {
	// mu orders changes against Sync: writes hold it shared, Sync exclusively, so a sync
	// covers exactly the writes that finished before it.
	mu      sync.RWMutex
	undos   []undo // guarded by FS.mu
	created bool   // created since its directory was last synced; guarded by FS.mu
}

// TrackUnsynced turns the power-loss model on or off. Turning it on forgets what happened
// before: every file counts as synced.
func (fs *FS) TrackUnsynced(on bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.tracking = on
	fs.histories = make(map[string]*history)
}

// historyOf returns the history of name, creating it. The caller holds fs.mu.
func (fs *FS) historyOf(name string) *history {
	name = filepath.Clean(name)
	h := fs.histories[name]
	if h == nil {
		h = &history{}
		fs.histories[name] = h
	}
	return h
}

// track runs op (a change to the bytes [off, off+n) of f, or its size) with what it replaces
// recorded first. n < 0 means the op changes bytes from off to the end of the file (a
// truncation to off).
func (f *file) track(off, n int64, op func() error) error {
	fs := f.fs
	fs.mu.Lock()
	if !fs.tracking {
		fs.mu.Unlock()
		return op()
	}
	h := fs.historyOf(f.name)
	fs.mu.Unlock()
	h.mu.RLock()
	defer h.mu.RUnlock()
	u := undo{off: off, n: n}
	fi, err := f.File.Stat()
	if err != nil {
		return err
	}
	u.oldSize = fi.Size()
	if n < 0 {
		u.n = max(u.oldSize-off, 0)
	}
	if end := min(off+u.n, u.oldSize); end > off {
		u.old = make([]byte, end-off)
		var r io.ReaderAt = f.File
		if f.direct {
			// A direct descriptor reads only into aligned buffers: read through the
			// page cache instead.
			bf, err := fs.inner.OpenFile(f.name, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			defer bf.Close()
			r = bf
		}
		if _, err := r.ReadAt(u.old, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	fs.mu.Lock()
	h.undos = append(h.undos, u)
	fs.mu.Unlock()
	return op()
}

// sync syncs f and forgets what the sync made durable.
func (f *file) sync() error {
	fs := f.fs
	fs.mu.Lock()
	if !fs.tracking {
		fs.mu.Unlock()
		return f.File.Sync()
	}
	h := fs.historyOf(f.name)
	fs.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := f.File.Sync(); err != nil {
		return err
	}
	fs.mu.Lock()
	h.undos = nil
	fs.mu.Unlock()
	return nil
}

// created notes a file created by an open. The caller holds fs.mu.
func (fs *FS) created(name string) {
	if fs.tracking {
		fs.historyOf(name).created = true
	}
}

// dirSynced notes that the entries of directory dir are durable. The caller holds fs.mu.
func (fs *FS) dirSynced(dir string) {
	dir = filepath.Clean(dir)
	for name, h := range fs.histories {
		if filepath.Dir(name) == dir {
			h.created = false
		}
	}
}

// forget drops the history of a removed file, or moves it with a renamed one. The caller holds
// fs.mu.
func (fs *FS) forget(name, to string) {
	name = filepath.Clean(name)
	if h, ok := fs.histories[name]; ok && to != "" {
		fs.histories[filepath.Clean(to)] = h
	}
	delete(fs.histories, name)
}

// PowerLoss puts every file changed since its last sync back to a state a power loss could leave,
// choosing with rng (see the top of this file), and returns how many files it changed. Every file
// must be closed. Tracking goes on from the new state, all of it synced.
func (fs *FS) PowerLoss(rng *rand.Rand) (int, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	changed := 0
	for name, h := range fs.histories {
		if h.created && rng.IntN(4) == 0 {
			if err := fs.inner.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return changed, err
			}
			fs.space.removed(name)
			changed++
			continue
		}
		if len(h.undos) == 0 {
			continue
		}
		if err := fs.revert(name, h.undos, rng); err != nil {
			return changed, err
		}
		changed++
	}
	fs.histories = make(map[string]*history)
	return changed, nil
}

// revert undoes, sector by sector at random, the changes to a file, newest first.
func (fs *FS) revert(name string, undos []undo, rng *rand.Rand) error {
	f, err := fs.inner.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	// Changes before cut reached the disk, the one at cut in part, those after it not; with
	// cut -1 every sector is left to chance.
	cut := rng.IntN(len(undos) + 1)
	if rng.IntN(4) == 0 {
		cut = -1
	}
	for i := len(undos) - 1; i >= 0; i-- {
		u := undos[i]
		if cut >= 0 && i < cut {
			break
		}
		for s := u.off - u.off%sectorSize; s < u.off+u.n; s += sectorSize {
			if (cut < 0 || i == cut) && rng.IntN(2) == 0 {
				continue // this sector reached the disk
			}
			from, to := max(s, u.off), min(s+sectorSize, u.off+u.n)
			old := make([]byte, to-from) // zeros past the old end of the file
			if from < u.off+int64(len(u.old)) {
				copy(old, u.old[from-u.off:])
			}
			if _, err := f.WriteAt(old, from); err != nil {
				return err
			}
		}
	}
	switch {
	case cut >= 0 && cut < len(undos):
		size = undos[cut].oldSize
		if rng.IntN(2) == 0 {
			size = max(size, undos[len(undos)-1].oldSize)
		}
	case cut < 0 && rng.IntN(2) == 0:
		size = undos[0].oldSize
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	fs.space.truncated(name, size)
	return f.Sync()
}
