package segment

import (
	"errors"
	"fmt"
	"io"

	"github.com/seed57392e9e/blobcache/internal/corruption"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Problem is one damaged record or footer that Verify found.
type Problem struct {
	Offset int64
	Err    error // a corruption marker (errors.Is corruption.ErrCorrupt)
}

// Verified is what Verify found in one segment.
type Verified struct {
	Records  int // records whose header, key and value checked out
	Freed    int // dead records whose blocks were punched out (FreedRange is a hole)
	Problems []Problem
}

// Verify checks every record of segment f of the given size, reading it only: a sealed
// segment's records against its footer (header, key, value CRC), an unsealed one's by scanning
// (an unfinished tail is what a crash or a writer at work leaves, not a problem). An error is an
// I/O failure; damage is in Problems.
func Verify(f vfs.File, size int64) (Verified, error) {
	var v Verified
	entries, _, ferr := ReadFooter(f, size)
	if ferr != nil {
		scan := Scan(f, size, func(Entry, record.Header, []byte) error { return nil })
		v.Records = scan.Records
		if !errors.Is(ferr, ErrNoFooter) {
			v.Problems = append(v.Problems, Problem{Offset: size, Err: ferr})
		}
		if scan.Err != nil && !scan.Torn {
			v.Problems = append(v.Problems, Problem{Offset: scan.End, Err: scan.Err})
		}
		return v, nil
	}
	buf := make([]byte, 0, 1<<20)
	for _, e := range entries {
		if cap(buf) < int(e.Length) {
			buf = make([]byte, 0, e.Length)
		}
		b := buf[:e.Length]
		if _, err := f.ReadAt(b, int64(e.Offset)); err != nil && !errors.Is(err, io.EOF) {
			return v, fmt.Errorf("segment: read %s offset %d: %w", f.Name(), e.Offset, err)
		}
		if err := CheckRecord(b, e); err != nil {
			if errors.Is(err, record.ErrValueChecksum) && freed(f, e) {
				v.Freed++
				continue
			}
			v.Problems = append(v.Problems, Problem{Offset: int64(e.Offset), Err: err})
			continue
		}
		v.Records++
	}
	return v, nil
}

// CheckRecord checks the whole record b (header, key and value) against its footer entry e.
func CheckRecord(b []byte, e Entry) error {
	h, key, err := record.Decode(b)
	if err != nil {
		return err
	}
	if h.Len() != int64(len(b)) || h.Kind != e.Kind || record.KeyHash(key) != e.Hash {
		return fmt.Errorf("%w: record does not match its footer entry", corruption.ErrCorrupt)
	}
	if h.Kind == record.KindPut {
		if err := record.CheckValue(h, b[h.ValueOffset():]); err != nil {
			return err
		}
		if err := record.CheckAttrs(h, b[h.AttrOffset():]); err != nil {
			return err
		}
	}
	return nil
}

// freed reports whether the FreedRange of record e is a hole: punched out when the record died.
func freed(f vfs.File, e Entry) bool {
	from, to := FreedRange(int64(e.Offset), int64(e.Length))
	if to <= from {
		return false
	}
	hole, ok := vfs.IsHole(f, from, to-from)
	return ok && hole
}
