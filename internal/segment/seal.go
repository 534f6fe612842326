package segment

import (
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// WriteFooter writes the hint footer for entries at dataEnd, truncates f to
// dataEnd+20n+32 so the trailer ends the file, and with sync makes it
// durable. A crash part way leaves no trailer at the end of the file (or
// one whose checks fail), so the segment reads as unsealed and Scan
// recovers it.
func WriteFooter(f vfs.File, entries []Entry, dataEnd int64, sync bool) (size int64, err error) {
	if err := checkEntries(entries, dataEnd); err != nil {
		return 0, fmt.Errorf("segment: cannot seal %s: %w", f.Name(), err)
	}
	w := newFooterWriter(f, dataEnd)
	for _, e := range entries {
		if err := w.add(e); err != nil {
			return 0, err
		}
	}
	return w.finish(sync)
}

// footerWriter writes a footer to a file a piece at a time, so that no more than
// footerWriteChunk bytes of it are in memory, whatever the number of entries. What it writes
// before finish is no footer: the trailer, written last, is what makes the rest one (and
// truncating the file there makes it end the file).
type footerWriter struct {
	f       vfs.File
	dataEnd int64
	check   entryCheck
	buf     []byte // encoded entries not written yet
	off     int64  // where buf goes
	crc     uint32 // of the entries written so far
	n       int
}

// footerWriteChunk is how many bytes of entries a footerWriter holds before writing them.
const footerWriteChunk = 256 << 10

// newFooterWriter starts a footer at dataEnd, which the caller has checked with checkDataEnd.
func newFooterWriter(f vfs.File, dataEnd int64) *footerWriter {
	return &footerWriter{f: f, dataEnd: dataEnd, check: entryCheck{dataEnd: dataEnd, next: HeaderSize}, off: dataEnd}
}

// add appends e, the next entry in record order.
func (w *footerWriter) add(e Entry) error {
	if err := w.check.entry(e, w.n); err != nil {
		return fmt.Errorf("segment: cannot seal %s: %w", w.f.Name(), err)
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, footerWriteChunk)
	}
	w.buf = appendEntry(w.buf, e)
	w.n++
	if len(w.buf)+EntrySize > footerWriteChunk {
		return w.flush()
	}
	return nil
}

func (w *footerWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return fmt.Errorf("segment: write footer of %s: %w", w.f.Name(), err)
	}
	w.crc = record.UpdateCRC(w.crc, w.buf)
	w.off += int64(len(w.buf))
	w.buf = w.buf[:0]
	return nil
}

// finish writes what is left and the trailer (in one write, like a footer that fits in the
// buffer), truncates the file to end with it and, with sync, makes the footer durable. It
// returns the file's size.
func (w *footerWriter) finish(sync bool) (size int64, err error) {
	name := w.f.Name()
	w.crc = record.UpdateCRC(w.crc, w.buf)
	n := len(w.buf)
	w.buf = appendTrailer(w.buf, w.n, uint64(w.dataEnd), w.crc)
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return 0, fmt.Errorf("segment: write footer of %s: %w", name, err)
	}
	w.off += int64(n)
	size = w.off + TrailerSize
	if err := w.f.Truncate(size); err != nil {
		return 0, fmt.Errorf("segment: truncate %s to its footer: %w", name, err)
	}
	if sync {
		if err := w.f.Sync(); err != nil {
			return 0, fmt.Errorf("segment: sync footer of %s: %w", name, err)
		}
	}
	return size, nil
}

// checkEntries checks what a footer may hold: puts and deletes in record
// order, not overlapping, between the header block and dataEnd.
func checkEntries(entries []Entry, dataEnd int64) error {
	if err := checkDataEnd(dataEnd); err != nil {
		return err
	}
	c := entryCheck{dataEnd: dataEnd, next: HeaderSize}
	for i, e := range entries {
		if err := c.entry(e, i); err != nil {
			return err
		}
	}
	return nil
}

// checkDataEnd checks where a footer starts: past the header block, within MaxSize.
func checkDataEnd(dataEnd int64) error {
	if dataEnd < HeaderSize || dataEnd > MaxSize {
		return fmt.Errorf("%w: data end %d outside [%d, %d]", record.ErrBadLength, dataEnd, HeaderSize, int64(MaxSize))
	}
	return nil
}

// entryCheck checks footer entries one at a time, in order: each a put or a delete of at least
// a record header, starting at or after next (where the one before it ended) and ending by
// dataEnd.
type entryCheck struct {
	dataEnd, next int64
}

func (c *entryCheck) entry(e Entry, i int) error {
	if e.Kind != record.KindPut && e.Kind != record.KindDelete {
		return fmt.Errorf("%w: footer entry %d has kind %v", record.ErrBadKind, i, e.Kind)
	}
	start, end := int64(e.Offset), int64(e.Offset)+int64(e.Length)
	if start < c.next || e.Length < record.LegacyHeaderSize || end > c.dataEnd {
		return fmt.Errorf("%w: footer entry %d covers [%d, %d), want a record of at least %d bytes in [%d, %d)",
			record.ErrBadLength, i, start, end, record.LegacyHeaderSize, c.next, c.dataEnd)
	}
	c.next = end
	return nil
}
