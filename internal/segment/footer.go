package segment

import (
	"encoding/binary"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// EntrySize is the encoded size of a footer entry.
const EntrySize = 20

// TrailerSize is the encoded size of the footer trailer, which ends a sealed
// segment file.
const TrailerSize = 32

// footerMagic starts the trailer.
var footerMagic = [8]byte{'B', 'C', 'F', 'O', 'O', 'T', 'R', 0}

// Entry is a hint-footer entry: where one put or delete record of a sealed
// segment is, so opening the segment needs no scan. Pads have no entry.
type Entry struct {
	Hash   uint64      // record.KeyHash of the record's key
	Offset uint32      // of the record in the segment
	Length uint32      // of the whole record: header, key and value
	Kind   record.Kind // record.KindPut or record.KindDelete
	Flags  uint8       // the record's flags
}

// FooterSize returns the size of a footer with n entries.
func FooterSize(n int) int64 {
	return int64(n)*EntrySize + TrailerSize
}

// Hint footer: n entries in record order, then the trailer, which ends the
// file. entriesCRC is the CRC-32C of the n entries, trailerCRC that of
// trailer bytes 0..28. Little-endian.
//
//	entry:   0            8          12         16     17      18          20
//	         +------------+----------+----------+------+-------+-----------+
//	         | key hash   | offset   | length   | kind | flags | reserved  |
//	         +------------+----------+----------+------+-------+-----------+
//
//	trailer: 0                   8          12         16                 24            28           32
//	         +-------------------+----------+----------+------------------+-------------+------------+
//	         | magic "BCFOOTR\0" | version  | count n  | dataEnd (uint64) | entriesCRC  | trailerCRC |
//	         +-------------------+----------+----------+------------------+-------------+------------+
const (
	entOffOffset   = 8
	entOffLength   = 12
	entOffKind     = 16
	entOffFlags    = 17
	entOffReserved = 18

	trOffVersion    = 8
	trOffCount      = 12
	trOffDataEnd    = 16
	trOffEntriesCRC = 24
	trOffCRC        = 28
)

// AppendFooter appends the footer for entries (in record order) and dataEnd
// (the end of the last record, where the footer starts) to dst.
func AppendFooter(dst []byte, entries []Entry, dataEnd uint64) []byte {
	start := len(dst)
	for _, e := range entries {
		dst = appendEntry(dst, e)
	}
	return appendTrailer(dst, len(entries), dataEnd, record.CRC(dst[start:]))
}

// appendEntry appends the encoding of e to dst.
func appendEntry(dst []byte, e Entry) []byte {
	var p [EntrySize]byte
	binary.LittleEndian.PutUint64(p[:], e.Hash)
	binary.LittleEndian.PutUint32(p[entOffOffset:], e.Offset)
	binary.LittleEndian.PutUint32(p[entOffLength:], e.Length)
	p[entOffKind] = byte(e.Kind)
	p[entOffFlags] = e.Flags
	return append(dst, p[:]...)
}

// appendTrailer appends the trailer of a footer of n entries, whose bytes have the CRC-32C
// entriesCRC, after records ending at dataEnd.
func appendTrailer(dst []byte, n int, dataEnd uint64, entriesCRC uint32) []byte {
	var t [TrailerSize]byte
	copy(t[:], footerMagic[:])
	binary.LittleEndian.PutUint32(t[trOffVersion:], Version)
	binary.LittleEndian.PutUint32(t[trOffCount:], uint32(n))
	binary.LittleEndian.PutUint64(t[trOffDataEnd:], dataEnd)
	binary.LittleEndian.PutUint32(t[trOffEntriesCRC:], entriesCRC)
	binary.LittleEndian.PutUint32(t[trOffCRC:], record.CRC(t[:trOffCRC]))
	return append(dst, t[:]...)
}

// DecodeTrailer decodes the footer trailer in b[:TrailerSize], checking
// magic (ErrNoFooter when absent: the segment is not sealed), version and
// trailerCRC. The entries are checked by DecodeEntries with entriesCRC.
func DecodeTrailer(b []byte) (count uint32, dataEnd uint64, entriesCRC uint32, err error) {
	if len(b) < TrailerSize {
		return 0, 0, 0, fmt.Errorf("%w: %d bytes, a footer trailer needs %d", record.ErrTruncated, len(b), TrailerSize)
	}
	if [8]byte(b[:8]) != footerMagic {
		return 0, 0, 0, ErrNoFooter
	}
	if v := binary.LittleEndian.Uint32(b[trOffVersion:]); v != Version {
		return 0, 0, 0, fmt.Errorf("%w: footer version %d, want %d", ErrBadVersion, v, Version)
	}
	stored := binary.LittleEndian.Uint32(b[trOffCRC:])
	if computed := record.CRC(b[:trOffCRC]); computed != stored {
		return 0, 0, 0, checksumError(ErrFooterChecksum, "footer trailer", stored, computed)
	}
	return binary.LittleEndian.Uint32(b[trOffCount:]),
		binary.LittleEndian.Uint64(b[trOffDataEnd:]),
		binary.LittleEndian.Uint32(b[trOffEntriesCRC:]), nil
}

// DecodeEntries decodes footer entries from b, whose length must be a
// multiple of EntrySize, after checking b against crc (the trailer's
// entriesCRC). Every entry must be a put or a delete, at least a record
// header long, with zero reserved bytes.
func DecodeEntries(b []byte, crc uint32) ([]Entry, error) {
	if len(b)%EntrySize != 0 {
		return nil, fmt.Errorf("%w: %d bytes of footer entries is not a multiple of %d", record.ErrBadLength, len(b), EntrySize)
	}
	if computed := record.CRC(b); computed != crc {
		return nil, checksumError(ErrFooterChecksum, "footer entries", crc, computed)
	}
	entries := make([]Entry, len(b)/EntrySize)
	for i := range entries {
		e, err := decodeEntry(b[i*EntrySize:(i+1)*EntrySize], i)
		if err != nil {
			return nil, err
		}
		entries[i] = e
	}
	return entries, nil
}

// decodeEntry decodes entry i of a footer from p[:EntrySize]: a put or a delete, at least a
// record header long, with zero reserved bytes.
func decodeEntry(p []byte, i int) (Entry, error) {
	e := Entry{
		Hash:   binary.LittleEndian.Uint64(p),
		Offset: binary.LittleEndian.Uint32(p[entOffOffset:]),
		Length: binary.LittleEndian.Uint32(p[entOffLength:]),
		Kind:   record.Kind(p[entOffKind]),
		Flags:  p[entOffFlags],
	}
	if e.Kind != record.KindPut && e.Kind != record.KindDelete {
		return Entry{}, fmt.Errorf("%w: footer entry %d has kind %d", record.ErrBadKind, i, uint8(e.Kind))
	}
	if e.Length < record.LegacyHeaderSize {
		return Entry{}, fmt.Errorf("%w: footer entry %d has record length %d", record.ErrBadLength, i, e.Length)
	}
	if p[entOffReserved] != 0 || p[entOffReserved+1] != 0 {
		return Entry{}, fmt.Errorf("%w: footer entry %d", ErrReserved, i)
	}
	return e, nil
}
