package segment

import (
	"errors"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/corruption"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Recovered is what Recover found in a segment file and made of it.
type Recovered struct {
	File    vfs.File // open for reading and writing; the caller closes it
	Size    int64    // of the file, sealed
	DataEnd int64    // where its records end
	// Entries are the segment's records in offset order (from its footer, or from the scan),
	// followed by a delete entry for each key in Lost.
	Entries []Entry
	// Lost are the keys of the records that damage the scan stopped at took with it (see
	// LostKeys): the caller forgets them, durably.
	Lost [][]byte

	// HeaderRepaired says the header block was rewritten: it was damaged (HeaderDamage), or
	// never written (HeaderUnwritten: a crash right after the file was created, not damage).
	HeaderRepaired  bool
	HeaderUnwritten bool
	HeaderDamage    error
	// Scanned says the segment had no usable footer and was scanned, then sealed with a footer
	// of what the scan found. TornTail says the scan cut an unfinished tail (what a crash
	// leaves); Damage is the damage it met (Skipped records stepped over, or the rest lost).
	Scanned  bool
	TornTail bool
	Damage   error
	Skipped  int
}

// Recover opens segment id in dir as recovery does when the cache opens: it checks the header
// block (repairing a damaged or unwritten one: the records check themselves, and the deletes
// among them must not be lost), reads the footer, or, for a segment without a usable one
// (unsealed, a seal a crash cut short, a damaged footer), scans the records, cuts an unfinished
// tail back to the last whole record and seals the segment with a footer of what it found. sync
// says whether what it writes is synced.
//
// Damage is reported in the result, not as an error; an error is an I/O failure or misuse, and
// leaves what it could not read as it was (the caller refuses to open rather than cut good
// records off).
func Recover(fs vfs.FS, dir string, id uint32, sync bool) (*Recovered, error) {
	rec := &Recovered{}
	f, size, err := Open(fs, dir, id)
	if err != nil {
		if !errors.Is(err, corruption.ErrCorrupt) {
			return nil, err
		}
		rec.HeaderRepaired = true
		if rec.HeaderUnwritten = HeaderUnwritten(fs, dir, id); !rec.HeaderUnwritten {
			rec.HeaderDamage = err
		}
		if f, size, err = RepairHeader(fs, dir, id, sync); err != nil {
			return nil, err
		}
	}
	rec.File, rec.Size = f, size
	entries, dataEnd, err := ReadFooter(f, size)
	if err == nil {
		rec.Entries, rec.DataEnd = entries, dataEnd
		return rec, nil
	}
	if !errors.Is(err, ErrNoFooter) && !errors.Is(err, corruption.ErrCorrupt) {
		f.Close()
		return nil, err
	}
	if err := rec.scan(sync); err != nil {
		f.Close()
		return nil, err
	}
	return rec, nil
}

// scan recovers the records of a segment without a usable footer, then seals it (synced if
// sync).
func (rec *Recovered) scan(sync bool) error {
	f, size := rec.File, rec.Size
	rec.Scanned = true
	var entries []Entry
	res := Scan(f, size, func(e Entry, _ record.Header, _ []byte) error {
		entries = append(entries, e)
		return nil
	})
	if res.Err != nil && !errors.Is(res.Err, corruption.ErrCorrupt) {
		return fmt.Errorf("segment: recover %s: %w", f.Name(), res.Err)
	}
	rec.TornTail = res.Torn
	if res.Err != nil {
		rec.Damage, rec.Skipped = res.Err, res.Skipped
	}
	if res.Err != nil && !res.Torn && res.End < size {
		// The scan stopped at damage: the records after it are lost with it.
		lost, err := LostKeys(f, res.End, size)
		if err != nil {
			return fmt.Errorf("segment: recover %s: %w", f.Name(), err)
		}
		rec.Lost = lost
	}
	var err error
	if rec.Size, err = WriteFooter(f, entries, res.End, sync); err != nil {
		return fmt.Errorf("segment: seal recovered %s: %w", f.Name(), err)
	}
	rec.DataEnd = res.End
	for _, k := range rec.Lost {
		entries = append(entries, Entry{Hash: record.KeyHash(k), Kind: record.KindDelete})
	}
	rec.Entries = entries
	return nil
}
