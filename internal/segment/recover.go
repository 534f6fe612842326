package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seed57392e9e/blobcache/internal/corruption"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Recovered is what Recover (or Inspect) found in a segment file and made of it.
type Recovered struct {
	// File is the segment, open for reading and writing (Recover) or for reading alone
	// (Inspect), or nil when Foreign; the caller closes it.
	File    vfs.File
	Size    int64 // of the file (sealed, after Recover)
	DataEnd int64 // where its records end
	// Entries are, after a read-only scan, the segment's records in offset order, and after
	// any scan a delete entry for each key in Lost, last. A footer's entries, the one found or
	// the one a scan wrote, are not read into memory: Each hands all of them over.
	Entries []Entry
	// footer is the number of entries of the footer Each reads: the checked one, or the one a
	// scan wrote (then Entries holds only the deletes of Lost).
	footer int
	fs     vfs.FS
	// Lost are the keys of the records that damage the scan stopped at took with it (see
	// LostKeys): the caller forgets them, durably.
	Lost [][]byte

	// HeaderUnwritten says the header block was never written (a crash right after the file
	// was created: a torn tail, not damage); HeaderDamage that it fails its checks.
	// HeaderRepaired says Recover wrote a new header block over either.
	HeaderUnwritten bool
	HeaderDamage    error
	HeaderRepaired  bool
	// Foreign says the file has a segment's name but neither a valid header nor a single
	// record that checks: not a segment (a stray file, or one whose every byte is damaged).
	// Recover leaves it unchanged and does not open it; the caller decides what to do with it.
	Foreign bool
	// Scanned says the segment had no usable footer and was scanned (and, by Recover, sealed
	// with a footer of what the scan found). TornTail says the scan met an unfinished tail
	// (what a crash leaves; Recover cuts it); Damage is the damage it met (Skipped records
	// stepped over, or the rest lost).
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
// says whether what it writes is synced. A file whose header is damaged and that holds no
// record is Foreign, and left as it is.
//
// Damage is reported in the result, not as an error; an error is an I/O failure or misuse, and
// leaves what it could not read as it was (the caller refuses to open rather than cut good
// records off).
func Recover(fs vfs.FS, dir string, id uint32, sync bool) (*Recovered, error) {
	return recoverFile(fs, dir, id, sync, false)
}

// Inspect is Recover that changes nothing: the file is opened for reading alone (so it works on
// a read-only file system), a damaged or unwritten header is read past rather than repaired,
// and a scanned segment is neither cut nor sealed. It finds the same entries Recover would.
func Inspect(fs vfs.FS, dir string, id uint32) (*Recovered, error) {
	return recoverFile(fs, dir, id, false, true)
}

func recoverFile(fs vfs.FS, dir string, id uint32, sync, readOnly bool) (*Recovered, error) {
	rec := &Recovered{fs: fs}
	var f vfs.File
	var size int64
	var err error
	if readOnly {
		f, size, err = OpenReadOnly(fs, dir, id)
	} else {
		f, size, err = Open(fs, dir, id)
	}
	if err != nil {
		if !errors.Is(err, corruption.ErrCorrupt) {
			return nil, err
		}
		if rec.HeaderUnwritten = HeaderUnwritten(fs, dir, id); !rec.HeaderUnwritten {
			rec.HeaderDamage = err
		}
		if f, size, err = openPastHeader(fs, dir, id); err != nil {
			return nil, err
		}
		if !rec.HeaderUnwritten && !holdsRecord(f, size) {
			f.Close()
			rec.Foreign = true
			return rec, nil
		}
		if readOnly && size <= HeaderSize {
			rec.File, rec.Size, rec.DataEnd = f, size, size // nothing was written to it
			return rec, nil
		}
		if !readOnly {
			f.Close()
			if f, size, err = RepairHeader(fs, dir, id, sync); err != nil {
				return nil, err
			}
			rec.HeaderRepaired = true
		}
	}
	rec.File, rec.Size = f, size
	count, dataEnd, err := CheckFooter(f, size)
	if err == nil {
		rec.footer, rec.DataEnd = count, dataEnd
		return rec, nil
	}
	if !errors.Is(err, ErrNoFooter) && !errors.Is(err, corruption.ErrCorrupt) {
		f.Close()
		return nil, err
	}
	if err := rec.scan(sync, readOnly); err != nil {
		f.Close()
		return nil, err
	}
	return rec, nil
}

// Count is how many entries Each hands over.
func (rec *Recovered) Count() int { return rec.footer + len(rec.Entries) }

// Each calls fn with the segment's entries: its records in offset order, from the footer (read
// a chunk at a time) or, read-only, from the scan, then after a scan a delete entry per key in
// Lost. It stops at fn's first error and returns it.
func (rec *Recovered) Each(fn func(Entry) error) error {
	if rec.footer > 0 {
		if err := EachFooterEntry(rec.File, rec.DataEnd, rec.footer, fn); err != nil {
			return err
		}
	}
	for _, e := range rec.Entries {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// openPastHeader opens segment id in dir for reading alone, whatever its header holds, with its
// size.
func openPastHeader(fs vfs.FS, dir string, id uint32) (vfs.File, int64, error) {
	name := filepath.Join(dir, FileName(id))
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("segment: open %s: %w", name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("segment: open %s: %w", name, err)
	}
	return f, fi.Size(), nil
}

// holdsRecord reports whether the first record after the header block of f checks: whether a
// file whose header is damaged is a segment at all.
func holdsRecord(f vfs.File, size int64) bool {
	found := false
	Scan(f, size, func(Entry, record.Header, []byte) error {
		found = true
		return errStopScan
	})
	return found
}

// errStopScan ends a Scan early.
var errStopScan = errors.New("segment: scan stopped")

// scan recovers the records of a segment without a usable footer, then, unless readOnly, seals
// it (synced if sync). Sealing, the entries the scan finds wait in an entry log, as an active
// segment's do, and Each reads them back from the footer written from it; read-only, they are
// kept in Entries.
func (rec *Recovered) scan(sync, readOnly bool) error {
	f, size := rec.File, rec.Size
	rec.Scanned = true
	var log *entryLog
	if !readOnly {
		dir, name := filepath.Split(f.Name())
		log = &entryLog{fs: rec.fs, name: filepath.Join(dir, name+entryLogSuffix)}
		defer log.drop()
	}
	res := Scan(f, size, func(e Entry, _ record.Header, _ []byte) error {
		if log != nil {
			log.add(e)
		} else {
			rec.Entries = append(rec.Entries, e)
		}
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
	rec.DataEnd = res.End
	if log != nil {
		if err := checkDataEnd(res.End); err != nil {
			return fmt.Errorf("segment: seal recovered %s: %w", f.Name(), err)
		}
		w := newFooterWriter(f, res.End)
		err := log.each(func(e Entry) error {
			rec.footer++
			return w.add(e)
		})
		if err == nil {
			rec.Size, err = w.finish(sync)
		}
		if err != nil {
			return fmt.Errorf("segment: seal recovered %s: %w", f.Name(), err)
		}
	}
	for _, k := range rec.Lost {
		rec.Entries = append(rec.Entries, Entry{Hash: record.KeyHash(k), Kind: record.KindDelete})
	}
	return nil
}
