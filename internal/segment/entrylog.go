package segment

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// An active segment's footer entries wait for its seal in a side file, the entry log, not in
// memory: a segment of small records has millions of them, and the index already holds what
// readers need. The log is written a chunk at a time, so that memory holds at most one chunk of
// entries per active segment; the seal reads it back a chunk at a time and writes the footer
// (footerWriter). The log is scratch: a crash leaves the segment unsealed, Scan finds its
// records without the log, and recovery removes the file (EntryLogName says which files these
// are).
//
// Entry log: chunks of logChunkEntries entries, each followed by the CRC-32C of its entries,
// chunk i at offset i*logChunkBytes. Little-endian, entries encoded as in the footer.
//
//	chunk:  0                                 logChunkEntries*EntrySize      logChunkBytes
//	        +---------------------------------+----------+
//	        | logChunkEntries footer entries  | CRC-32C  |
//	        +---------------------------------+----------+
const (
	logChunkEntries = 3276
	logChunkBytes   = logChunkEntries*EntrySize + 4
	// LogChunkSpace is the disk space a chunk of the log takes: logChunkBytes in whole blocks.
	LogChunkSpace = (logChunkBytes + allocationUnit - 1) / allocationUnit * allocationUnit

	entryLogSuffix = ".entries"
)

// EntryLogName returns the file name of segment id's entry log.
func EntryLogName(id uint32) string { return FileName(id) + entryLogSuffix }

// ParseEntryLogName returns the id of an entry log's file name made by EntryLogName, and false
// for any other name.
func ParseEntryLogName(name string) (uint32, bool) {
	seg, ok := strings.CutSuffix(name, entryLogSuffix)
	if !ok {
		return 0, false
	}
	return ParseFileName(seg)
}

// LogSpace is the disk space the entry log of a segment takes once entries of its records are
// logged: the log writes whole chunks only, the rest stays in memory until the seal.
func LogSpace(entries int64) int64 { return entries / logChunkEntries * LogChunkSpace }

// entryLog holds the footer entries of an active segment until its seal: full chunks in the
// file, the last partial chunk in buf, and the few entries that came out of record order in
// late. The segment's committer adds to it; the seal, which runs after the last add, reads it.
type entryLog struct {
	fs   vfs.FS
	name string
	f    vfs.File // nil until the first chunk is written
	buf  []byte   // the entries of the chunk being filled
	// chunks is how many chunks f holds.
	chunks int64
	// end is where the record of the last entry in order ends: an entry that starts before it
	// came out of order (a streamed record is committed after batches placed behind it).
	end  int64
	late []Entry
	// err is the first write that failed: the seal fails with it (and Scan recovers the
	// segment on the next open).
	err error
}

// add logs e.
func (l *entryLog) add(e Entry) {
	if int64(e.Offset) < l.end {
		l.late = append(l.late, e)
		return
	}
	l.end = int64(e.Offset) + int64(e.Length)
	if l.err != nil {
		return
	}
	if l.buf == nil {
		l.buf = make([]byte, 0, logChunkBytes)
	}
	l.buf = appendEntry(l.buf, e)
	if len(l.buf) == logChunkEntries*EntrySize {
		l.spill()
	}
}

// spill writes buf, a full chunk, to the file.
func (l *entryLog) spill() {
	if l.f == nil {
		f, err := l.fs.OpenFile(l.name, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
		if err != nil {
			l.err = fmt.Errorf("segment: create entry log: %w", err)
			return
		}
		l.f = f
	}
	l.buf = binary.LittleEndian.AppendUint32(l.buf, record.CRC(l.buf))
	if _, err := l.f.WriteAt(l.buf, l.chunks*logChunkBytes); err != nil {
		l.err = fmt.Errorf("segment: write entry log %s: %w", l.name, err)
		return
	}
	l.chunks++
	l.buf = l.buf[:0]
}

// each calls fn with every entry logged, in record order.
func (l *entryLog) each(fn func(Entry) error) error {
	if l.err != nil {
		return l.err
	}
	late := slices.SortedFunc(slices.Values(l.late), func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	emit := func(e Entry) error {
		for len(late) > 0 && late[0].Offset < e.Offset {
			if err := fn(late[0]); err != nil {
				return err
			}
			late = late[1:]
		}
		return fn(e)
	}
	if l.chunks > 0 {
		chunk := make([]byte, logChunkBytes)
		for i := range l.chunks {
			if err := readFull(l.f, chunk, i*logChunkBytes); err != nil {
				return fmt.Errorf("segment: read entry log %s: %w", l.name, err)
			}
			if err := eachLogged(chunk, l.name, i, emit); err != nil {
				return err
			}
		}
	}
	if err := eachEntry(l.buf, emit); err != nil {
		return err
	}
	for _, e := range late {
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// eachLogged checks chunk i of an entry log and calls fn with its entries.
func eachLogged(chunk []byte, name string, i int64, fn func(Entry) error) error {
	n := logChunkEntries * EntrySize
	stored, computed := binary.LittleEndian.Uint32(chunk[n:]), record.CRC(chunk[:n])
	if stored != computed {
		return corrupted(name, i*logChunkBytes, checksumError(ErrFooterChecksum, "entry log chunk", stored, computed))
	}
	return eachEntry(chunk[:n], fn)
}

// eachEntry decodes the entries in b and calls fn with each.
func eachEntry(b []byte, fn func(Entry) error) error {
	for i := 0; i+EntrySize <= len(b); i += EntrySize {
		e, err := decodeEntry(b[i:i+EntrySize], i/EntrySize)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// drop closes and removes the log's file, if any, and forgets what it held.
func (l *entryLog) drop() error {
	l.buf, l.late = nil, nil
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	if rerr := l.fs.Remove(l.name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	l.f = nil
	return err
}
