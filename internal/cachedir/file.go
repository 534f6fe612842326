package cachedir

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// ReadFile reads the whole of the (small) file name. An error is the file system's, as it came
// (it names the file): errors.Is(err, fs.ErrNotExist) for a missing file.
func ReadFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && len(b) == 0) {
		return nil, err
	}
	return b, nil
}

// Replace replaces the file name with data so that a crash leaves either the old bytes or
// data: it writes data to name+TempSuffix, syncs it, renames it over name and syncs the
// directory. On an error the temporary file is removed, and name is as it was unless the
// error came from the directory's sync (the rename is done, but not durable).
func Replace(fsys vfs.FS, name string, data []byte) error {
	tmp := name + TempSuffix
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("cachedir: create %s: %w", tmp, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err == nil {
		err = fsys.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("cachedir: replace %s: %w", name, err)
	}
	return nil
}
