package blobcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/segment"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Corruption is one damaged record or footer found by Verify.
type Corruption struct {
	File   string
	Offset int64
	Err    error
}

func (c Corruption) String() string { return fmt.Sprintf("%s offset %d: %v", c.File, c.Offset, c.Err) }

// VerifyResult sums up a Verify run.
type VerifyResult struct {
	Segments int
	Records  int   // records whose header, key and value checked out
	Freed    int   // overwritten or deleted records whose blocks the cache punched out
	Bytes    int64 // bytes of segment files read
	Corrupt  []Corruption
}

// Verify reads every record of every segment in dir and checks its header, key and value
// checksums, and each sealed segment's footer against its records. It does not modify anything
// and does not need the cache to be closed (an active segment's unfinished tail is not an
// error). progress, if not nil, is called with the bytes read so far and the total.
func Verify(dir string, progress func(done, total int64)) (VerifyResult, error) {
	return verify(vfs.Default, dir, progress)
}

// verify is Verify through fs. It opens every file read-only.
func verify(fs vfs.FS, dir string, progress func(done, total int64)) (VerifyResult, error) {
	var res VerifyResult
	sd := filepath.Join(dir, segDir)
	if _, err := fs.Stat(filepath.Join(dir, identityFile)); err != nil {
		return res, fmt.Errorf("%w: %s: %w", ErrNotBlobCache, dir, err)
	}
	ents, err := fs.ReadDir(sd)
	if err != nil {
		return res, fmt.Errorf("blobcache: read %s: %w", sd, err)
	}
	var ids []uint32
	var total int64
	for _, e := range ents {
		if id, ok := segment.ParseFileName(e.Name()); ok {
			ids = append(ids, id)
			if fi, err := e.Info(); err == nil {
				total += fi.Size()
			}
		}
	}
	slices.Sort(ids)
	blobFiles := listBlobFiles(filepath.Join(dir, blobDir))
	for _, p := range blobFiles {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	var done int64
	for _, id := range ids {
		path := filepath.Join(sd, segment.FileName(id))
		n, err := verifySegment(fs, sd, id, &res)
		if err != nil {
			res.Corrupt = append(res.Corrupt, Corruption{File: path, Err: err})
		}
		res.Segments++
		done += n
		res.Bytes += n
		if progress != nil {
			progress(done, total)
		}
	}
	for _, p := range blobFiles {
		n, err := verifyBlobFile(fs, p, &res)
		if err != nil {
			res.Corrupt = append(res.Corrupt, Corruption{File: p, Err: err})
		}
		done += n
		res.Bytes += n
		if progress != nil {
			progress(done, total)
		}
	}
	return res, nil
}

// listBlobFiles lists the files of a per-blob cache.
func listBlobFiles(root string) []string {
	var out []string
	dirs, _ := os.ReadDir(root)
	for _, d := range dirs {
		ents, _ := os.ReadDir(filepath.Join(root, d.Name()))
		for _, e := range ents {
			if _, _, ok := parseBlobName(e.Name()); ok {
				out = append(out, filepath.Join(root, d.Name(), e.Name()))
			}
		}
	}
	return out
}

// verifyBlobFile checks the one record of a blob file.
func verifyBlobFile(fs vfs.FS, path string, res *VerifyResult) (int64, error) {
	b, err := cachedir.ReadFile(fs, path)
	if err != nil {
		return 0, err
	}
	h, _, _ := parseBlobName(filepath.Base(path))
	if err := segment.CheckRecord(b, segment.Entry{Hash: h, Kind: record.KindPut}); err != nil {
		res.Corrupt = append(res.Corrupt, Corruption{File: path, Err: verifyError(err)})
	} else {
		res.Records++
	}
	return int64(len(b)), nil
}

// verifySegment checks one segment (segment.Verify), appending what it finds to res, and
// returns the bytes read.
func verifySegment(fs vfs.FS, dir string, id uint32, res *VerifyResult) (int64, error) {
	path := filepath.Join(dir, segment.FileName(id))
	f, size, err := segment.OpenReadOnly(fs, dir, id)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	v, err := segment.Verify(f, size)
	res.Records += v.Records
	res.Freed += v.Freed
	for _, p := range v.Problems {
		res.Corrupt = append(res.Corrupt, Corruption{File: path, Offset: p.Offset, Err: verifyError(p.Err)})
	}
	return size, err
}

// verifyError is a damaged value's error as the cache's readers report it (ErrChecksumMismatch),
// any other damage as it is (ErrCorrupt).
func verifyError(err error) error {
	if errors.Is(err, record.ErrValueChecksum) {
		return fmt.Errorf("%w: %w", ErrChecksumMismatch, err)
	}
	return err
}
