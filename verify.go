package blobcache

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

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
	b, err := readFile(fs, path)
	if err != nil {
		return 0, err
	}
	h, _, _ := parseBlobName(filepath.Base(path))
	if err := checkRecord(b, record.Entry{Hash: h, Kind: record.KindPut}); err != nil {
		res.Corrupt = append(res.Corrupt, Corruption{File: path, Err: err})
	} else {
		res.Records++
	}
	return int64(len(b)), nil
}

// verifySegment checks one segment, appending what it finds to res, and returns the bytes read.
func verifySegment(fs vfs.FS, dir string, id uint32, res *VerifyResult) (int64, error) {
	path := filepath.Join(dir, segment.FileName(id))
	f, size, err := segment.OpenReadOnly(fs, dir, id)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	entries, _, ferr := segment.ReadFooter(f, size)
	if ferr != nil {
		// Unsealed (active, or left by a crash): scan; a torn tail is expected, not corruption.
		scan := segment.Scan(f, size, func(record.Entry, record.Header, []byte) error { return nil })
		res.Records += scan.Records
		if !errors.Is(ferr, record.ErrNoFooter) {
			res.Corrupt = append(res.Corrupt, Corruption{File: path, Offset: size, Err: ferr})
		}
		if scan.Err != nil && !scan.Torn {
			res.Corrupt = append(res.Corrupt, Corruption{File: path, Offset: scan.End, Err: scan.Err})
		}
		return size, nil
	}
	buf := make([]byte, 0, 1<<20)
	for _, e := range entries {
		if cap(buf) < int(e.Length) {
			buf = make([]byte, 0, e.Length)
		}
		b := buf[:e.Length]
		if _, err := f.ReadAt(b, int64(e.Offset)); err != nil && !errors.Is(err, io.EOF) {
			return size, fmt.Errorf("read offset %d: %w", e.Offset, err)
		}
		if err := checkRecord(b, e); err != nil {
			if errors.Is(err, ErrChecksumMismatch) && freedRecord(f, e) {
				res.Freed++
				continue
			}
			res.Corrupt = append(res.Corrupt, Corruption{File: path, Offset: int64(e.Offset), Err: err})
			continue
		}
		res.Records++
	}
	return size, nil
}

// checkRecord checks a whole record against its footer entry.
func checkRecord(b []byte, e record.Entry) error {
	h, key, err := record.Decode(b)
	if err != nil {
		return err
	}
	if h.Len() != int64(len(b)) || h.Kind != e.Kind || record.KeyHash(key) != e.Hash {
		return fmt.Errorf("%w: record does not match its footer entry", ErrCorrupt)
	}
	if h.Kind == record.KindPut {
		v := b[record.HeaderSize+len(key):]
		if got := record.CRC(v); got != h.ValueCRC {
			return fmt.Errorf("%w: value crc32c %#08x, stored %#08x", ErrChecksumMismatch, got, h.ValueCRC)
		}
	}
	return nil
}

// freedRecord reports whether the blocks of record e past its header and longest key are a hole:
// the cache punched them out when the blob was overwritten or deleted (see Cache.freeRecord).
func freedRecord(f vfs.File, e record.Entry) bool {
	from, to := segment.FreedRange(int64(e.Offset), int64(e.Length))
	if to <= from {
		return false
	}
	hole, ok := vfs.IsHole(f, from, to-from)
	return ok && hole
}
