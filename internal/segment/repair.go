package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// HeaderUnwritten reports whether segment id in dir ends before its header or holds zeros where
// the header goes: what a crash between creating the file and writing its header leaves (a
// torn tail, not damage).
func HeaderUnwritten(fs vfs.FS, dir string, id uint32) bool {
	f, err := fs.OpenFile(filepath.Join(dir, FileName(id)), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, HeaderLen)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return record.IsZero(b[:n])
}

// RepairHeader writes a new header block naming id over the damaged or unwritten one of segment
// id in dir (growing a file shorter than the block), syncs it if sync, and returns the file,
// open for reading and writing, with its size. The records after the block check themselves:
// recovery scans them.
func RepairHeader(fs vfs.FS, dir string, id uint32, sync bool) (vfs.File, int64, error) {
	name := filepath.Join(dir, FileName(id))
	f, err := fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open %s: %w", name, err)
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < HeaderSize {
		err = f.Truncate(HeaderSize)
	}
	if err == nil {
		block := make([]byte, HeaderSize)
		Header{Version: Version, ID: id, Created: time.Now().UnixNano()}.Encode(block)
		_, err = f.WriteAt(block, 0)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("segment: repair header of %s: %w", name, err)
	}
	return f, fi.Size(), nil
}
