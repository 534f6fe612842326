package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// ScanResult is the outcome of Scan.
type ScanResult struct {
	// End is the end of the last whole record (pads included): where the
	// next record would go, or where the footer goes when sealing.
	End int64
	// Records counts the puts and deletes handed to fn.
	Records int
	// Torn says the scan stopped at what a crash leaves behind; see Scan.
	Torn bool
	// Skipped counts damaged records the scan stepped over: their header and key checked but
	// their value did not (Err describes the first). Each is handed to fn as a delete of its key
	// (Kind KindDelete, the record's offset and length, key nil), so the caller forgets the key
	// rather than fall back to an older record of it. Records freed by the cache (their blocks
	// punched out, superseded by a later record) are stepped over silently.
	Skipped int
	// Err is the corruption (a *CorruptionError naming file, offset and
	// both checksums), read error or fn error that stopped the scan.
	Err error
}

const (
	// scanBufSize is how much Scan reads at once; a record header and key
	// always fit, values are checksummed through it piece by piece.
	scanBufSize = 1 << 20
	// sectorSize is the smallest unit a device writes: a crash leaves each
	// sector either fully written or as it was (zero, in a preallocated
	// segment).
	sectorSize = 512
)

// Scan reads the records of a segment of the given size from HeaderSize on,
// in order, and calls fn for each put and delete whose header (magic, kind,
// lengths within the file, headerCRC) and value (valueCRC) check, with
// e.Hash = record.KeyHash(key). key is valid only during the call. Pads are
// skipped. The value is not handed to fn; read it from f if needed.
//
// Scan stops at the end of the file, at the first record that does not
// check, or when fn returns an error (End and Records then exclude the
// record fn refused, and Err is fn's error). End is the end of the last
// whole record.
//
// Torn is set when the stop is what a crash leaves:
//   - a record (or its header) that runs past size;
//   - a record overlapping a sector (512 bytes, file-aligned) that reads as
//     zeros, where the write that should have filled it did not reach the
//     disk (this covers "all bytes from End to size are zero", the tail of
//     every preallocated segment);
//   - a footer that a crash cut short: the bytes at End are, sector by
//     sector, either the footer Seal would write for the records scanned or
//     zeros.
//
// Otherwise Err is a *CorruptionError with the file name, the offset and
// both checksums. A sealed segment scanned to its footer stops there with
// neither Torn nor Err.
//
// The zero-sector rule can take a damaged record whose value holds a whole
// zero sector for a torn one; either way the records after it are lost.
func Scan(f vfs.File, size int64, fn func(e Entry, h record.Header, key []byte) error) (res ScanResult) {
	s := &scanner{f: f, name: f.Name(), size: size, fn: fn}
	res = ScanResult{End: HeaderSize}
	if size < HeaderSize {
		res.End = size
		res.Err = corruptedf(s.name, 0, "%w: file of %d bytes is shorter than the %d-byte header block", record.ErrTruncated, size, HeaderSize)
		return res
	}
	s.buf = make([]byte, min(scanBufSize, size-HeaderSize))
	key := make([]byte, 0, record.MaxKeyLen)
	// first is the first entry, enough to tell whether a footer may follow
	// the records; see footerAt.
	var first Entry
	// bad holds damaged records stepped over since the last good one: damage if a good record
	// follows, part of a torn tail if the scan ends in one.
	var bad []skip
	defer func() {
		if !res.Torn && res.Err == nil {
			s.tailSkips(&res, bad)
		}
	}()
	off := int64(HeaderSize)
	for off < size {
		b, err := s.window(off, min(size-off, record.HeaderSize+record.MaxKeyLen))
		if err != nil {
			res.Err = err
			return res
		}
		h, k, err := record.Decode(b)
		if err != nil {
			s.stop(&res, off, err, h, first)
			return res
		}
		end := off + h.Len()
		if end > size {
			res.Torn = true
			return res
		}
		if end > MaxSize {
			res.Err = corruptedf(s.name, off, "%w: record [%d, %d) ends past the largest segment (%d bytes)", record.ErrBadLength, off, end, int64(MaxSize))
			return res
		}
		if h.Kind != record.KindPad {
			key = append(key[:0], k...) // k lives in the window, which reading the value moves
			attrs := end - int64(h.AttrLen)
			crc, err := s.crc(attrs-int64(h.ValueLen), attrs)
			var acrc uint32
			if err == nil && h.AttrLen > 0 {
				acrc, err = s.crc(attrs, end)
			}
			if err != nil {
				res.Err = err
				return res
			}
			if crc != h.ValueCRC || acrc != h.AttrCRC {
				// The header and key check, so the record's length can be trusted: step over
				// it and go on, so one bad value (or a record the cache freed) does not cost
				// the records after it.
				freed, err := s.freed(off, end)
				if err != nil {
					res.Err = err
					return res
				}
				if !freed {
					bad = append(bad, skip{off, end, corrupted(s.name, off,
						fmt.Errorf("%w: value stored %#08x, computed %#08x; attributes stored %#08x, computed %#08x",
							record.ErrValueChecksum, h.ValueCRC, crc, h.AttrCRC, acrc)),
						Entry{Hash: record.KeyHash(key), Offset: uint32(off), Length: uint32(h.Len()), Kind: record.KindDelete}, h})
				}
				off = end
				continue
			}
			s.countSkips(&res, bad)
			bad = bad[:0]
			e := Entry{Hash: record.KeyHash(key), Offset: uint32(off), Length: uint32(h.Len()), Kind: h.Kind, Flags: h.Flags}
			if err := fn(e, h, key); err != nil {
				res.Err = err
				return res
			}
			if res.Records == 0 {
				first = e
			}
			res.Records++
		}
		off = end
		res.End = end
	}
	return res
}

// scanner reads a segment sequentially through one buffer.
type scanner struct {
	fn    func(e Entry, h record.Header, key []byte) error
	f     vfs.File
	name  string
	size  int64
	buf   []byte
	start int64 // file offset of buf[0]
	n     int   // bytes of buf holding file data
}

// window returns the n bytes of the file at off, which must lie within size
// and be at most len(s.buf) long, reading from off on when they are not
// already buffered.
func (s *scanner) window(off, n int64) ([]byte, error) {
	if off >= s.start && off+n <= s.start+int64(s.n) {
		return s.buf[off-s.start : off-s.start+n], nil
	}
	m := min(int64(len(s.buf)), s.size-off)
	s.n = 0
	if err := readFull(s.f, s.buf[:m], off); err != nil {
		return nil, fmt.Errorf("segment: read %s at %d: %w", s.name, off, err)
	}
	s.start, s.n = off, int(m)
	return s.buf[:n], nil
}

// crc returns the CRC-32C of the file bytes [from, to).
func (s *scanner) crc(from, to int64) (uint32, error) {
	var crc uint32
	for from < to {
		b, err := s.window(from, min(to-from, int64(len(s.buf))))
		if err != nil {
			return 0, err
		}
		crc = record.UpdateCRC(crc, b)
		from += int64(len(b))
	}
	return crc, nil
}

// stop fills res for a scan stopped at off by cause, the record there
// failing its checks (h holds its unverified fields). res.Records records
// precede off, the first of them being first.
func (s *scanner) stop(res *ScanResult, off int64, cause error, h record.Header, first Entry) {
	headerOK := errors.Is(cause, record.ErrValueChecksum)
	if !headerOK { // what is at off may be a footer rather than a record
		match, complete, err := s.footerAt(off, res.Records, first)
		if err != nil {
			res.Err = err
			return
		}
		if complete {
			return // a sealed segment: clean stop at its footer
		}
		if match {
			res.Torn = true
			return
		}
		if errors.Is(cause, record.ErrTruncated) {
			res.Torn = true // the header or key runs past the end of the file
			return
		}
		zero, err := s.zeroHeader(off)
		if err != nil {
			res.Err = err
			return
		}
		if zero {
			// Nothing was ever written here: a batch still being written when the process
			// died, while a later one (another flush worker's) had reached the file. The
			// later records were never acknowledged by a Drain, which waits for both.
			res.Torn = true
			return
		}
	}
	// The extent of the record that the scan can trust its header for.
	end := off + h.Size()
	switch {
	case headerOK:
		end = off + h.Len()
	case errors.Is(cause, record.ErrHeaderChecksum):
		end += int64(h.KeyLen) // Decode checked KeyLen <= MaxKeyLen first
	}
	end = min(end, s.size)
	zero, err := s.zeroSector(off, end)
	if err != nil {
		res.Err = err
		return
	}
	if zero {
		res.Torn = true
		return
	}
	res.Err = corrupted(s.name, off, cause)
}

// zeroHeader reports whether the record header at off (or what the file holds of it) is all
// zeros. No record header is: its magic is not zero.
func (s *scanner) zeroHeader(off int64) (bool, error) {
	b, err := s.window(off, min(record.LegacyHeaderSize, s.size-off))
	if err != nil {
		return false, err
	}
	return record.IsZero(b), nil
}

// zeroSector reports whether a sector overlapping [from, to) reads as zeros
// from from (or its start) to its end (or the end of the file).
func (s *scanner) zeroSector(from, to int64) (bool, error) {
	for pos := from; pos < to; {
		end := min(pos-pos%sectorSize+sectorSize, s.size)
		b, err := s.window(pos, end-pos)
		if err != nil {
			return false, err
		}
		if record.IsZero(b) {
			return true, nil
		}
		pos = end
	}
	return false, nil
}

// footerAt reports whether the bytes from off on are, sector by sector,
// either the footer that would seal the n records before off or zeros, with
// at least the first sector's bytes written (match), and whether they are
// exactly that footer, ending the file (complete). A first sector of zeros
// is left to the zero-sector rule.
//
// The entries are not kept while scanning (they would cost 24 bytes a
// record): the first sector's bytes are compared with the start of the
// footer (first, or the trailer when there are no records), and only when
// they match are the entries rebuilt by reading the headers again.
func (s *scanner) footerAt(off int64, n int, first Entry) (match, complete bool, err error) {
	var head []Entry
	if n > 0 {
		head = []Entry{first}
	}
	want := AppendFooter(nil, head, uint64(off))
	if n > 0 {
		want = want[:EntrySize]
	}
	pend := min(off-off%sectorSize+sectorSize, s.size)
	got, err := s.window(off, pend-off)
	if err != nil {
		return false, false, err
	}
	got = got[:min(len(got), len(want))]
	if !bytes.Equal(got, want[:len(got)]) {
		return false, false, nil
	}

	entries, err := s.entriesBefore(off, n)
	if err != nil || entries == nil {
		return false, false, err
	}
	want = AppendFooter(nil, entries, uint64(off))
	end := min(off+int64(len(want)), s.size)
	exact := true
	for pos := off; pos < end; {
		pend := min(pos-pos%sectorSize+sectorSize, end)
		got, err := s.window(pos, pend-pos)
		if err != nil {
			return false, false, err
		}
		if !bytes.Equal(got, want[pos-off:pend-off]) {
			if !record.IsZero(got) {
				return false, false, nil
			}
			exact = false
		}
		pos = pend
	}
	return true, exact && off+int64(len(want)) == s.size, nil
}

// entriesBefore reads again the headers and keys of the n records the scan
// checked before off and returns their footer entries (non-nil), or nil if
// they no longer decode the same way.
func (s *scanner) entriesBefore(off int64, n int) ([]Entry, error) {
	entries := make([]Entry, 0, n)
	for pos := int64(HeaderSize); pos < off; {
		b, err := s.window(pos, min(off-pos, record.HeaderSize+record.MaxKeyLen))
		if err != nil {
			return nil, err
		}
		h, key, err := record.Decode(b)
		if err != nil || pos+h.Len() > off {
			return nil, nil
		}
		if h.Kind != record.KindPad {
			entries = append(entries, Entry{Hash: record.KeyHash(key), Offset: uint32(pos), Length: uint32(h.Len()), Kind: h.Kind, Flags: h.Flags})
		}
		pos += h.Len()
	}
	if len(entries) != n {
		return nil, nil
	}
	return entries, nil
}

// skip is a damaged record the scan stepped over.
type skip struct {
	off, end int64
	err      error
	entry    Entry // a delete of the record's key
	h        record.Header
}

// countSkips records damaged records as corruption, and hands each to fn as a delete of its key:
// the record's value is lost, and an older record of the same key must not stand in for it.
func (s *scanner) countSkips(res *ScanResult, bad []skip) {
	if len(bad) == 0 {
		return
	}
	res.Skipped += len(bad)
	if res.Err == nil {
		res.Err = bad[0].err
	}
	for _, b := range bad {
		if err := s.fn(b.entry, b.h, nil); err != nil {
			res.Err = err
			return
		}
	}
}

// tailSkips classifies damaged records at the very end of the scanned data: one that holds a
// zero sector is what a crash leaves (torn); others are corruption.
func (s *scanner) tailSkips(res *ScanResult, bad []skip) {
	for i, b := range bad {
		zero, err := s.zeroSector(b.off, b.end)
		if err != nil {
			res.Err = err
			return
		}
		if zero {
			s.countSkips(res, bad[:i])
			res.Torn = true
			return
		}
	}
	s.countSkips(res, bad)
}

// freed reports whether the record [off, end) was freed by the cache: its FreedRange is a hole
// (punched out). A file that cannot report holes counts blocks of zeros instead.
func (s *scanner) freed(off, end int64) (bool, error) {
	from, to := FreedRange(off, end-off)
	if to <= from {
		return false, nil
	}
	if hole, ok := vfs.IsHole(s.f, from, to-from); ok {
		return hole, nil
	}
	for pos := from; pos < to; pos += int64(len(s.buf)) {
		b, err := s.window(pos, min(to-pos, int64(len(s.buf))))
		if err != nil {
			return false, err
		}
		if !record.IsZero(b) {
			return false, nil
		}
	}
	return true, nil
}

// LostKeys returns the keys of the records that a scan stopped by damage at off could not
// recover: the apparent key of the damaged record itself (its header failed its checks, so this
// is a best guess), and the key of every record further on whose header and key check. The
// caller forgets these keys, so that an older record of one of them does not stand in for a
// newer one lost with the damage. A key may be returned that was never lost (a record image
// stored inside a value, say): forgetting it too is harmless for a cache.
func LostKeys(f vfs.File, off, size int64) ([][]byte, error) {
	if off >= size {
		return nil, nil
	}
	s := &scanner{f: f, name: f.Name(), size: size, buf: make([]byte, min(scanBufSize, size-off))}
	var keys [][]byte
	// The damaged record: its key length may be intact even if its checksum is not.
	if b, err := s.window(off, min(size-off, record.LegacyHeaderSize)); err == nil && len(b) == record.LegacyHeaderSize {
		hs := record.SizeAt(b)
		if n := int64(binary.LittleEndian.Uint32(b[4:])); n > 0 && n <= record.MaxKeyLen && off+hs+n <= size {
			if k, err := s.window(off+hs, n); err == nil {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
	}
	magic := binary.LittleEndian.AppendUint16(nil, record.Magic)
	for pos := off + 1; pos+record.LegacyHeaderSize <= size; {
		chunk, err := s.window(pos, min(size-pos, int64(len(s.buf))))
		if err != nil {
			return keys, err
		}
		i := bytes.Index(chunk, magic)
		if i < 0 {
			pos += int64(max(1, len(chunk)-1)) // keep a magic split across chunks
			continue
		}
		pos += int64(i)
		if b, err := s.window(pos, min(size-pos, record.HeaderSize+record.MaxKeyLen)); err == nil {
			if h, k, err := record.Decode(b); err == nil && h.Kind != record.KindPad && len(k) > 0 {
				keys = append(keys, append([]byte(nil), k...))
			}
		}
		pos++
	}
	return keys, nil
}
