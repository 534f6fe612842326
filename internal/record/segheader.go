package record

import (
	"encoding/binary"
	"fmt"
)

// Version is the on-disk format version of segment headers and footers.
const Version = 1

// SegmentHeaderSize is the encoded size of a segment header. It sits at the
// start of a segment's first 4096-byte block, the rest of which is zero.
const SegmentHeaderSize = 64

// SegmentFlagDirect marks a segment written with O_DIRECT: its batches are
// padded to 4 KiB with pad records.
const SegmentFlagDirect = 1

// segmentMagic starts every segment file.
var segmentMagic = [8]byte{'B', 'C', 'S', 'E', 'G', 'M', 'T', 0}

// SegmentHeader is a decoded segment header.
type SegmentHeader struct {
	Version uint32 // Version when written by this package
	Flags   uint32 // SegmentFlagDirect
	ID      uint32 // the segment's id, as in its file name
	Created int64  // Unix nanoseconds
}

// Segment header, little-endian; crc32c is the CRC-32C of bytes 0..60.
//
//	0                   8          12         16         20         24                  32
//	+-------------------+----------+----------+----------+----------+-------------------+
//	| magic "BCSEGMT\0" | version  | flags    | id       | reserved | created (unix ns) |
//	+-------------------+----------+----------+----------+----------+-------------------+
//	32                                                              60         64
//	+---------------------------------------------------------------+----------+
//	| reserved (zero)                                               | crc32c   |
//	+---------------------------------------------------------------+----------+
const (
	segOffVersion = 8
	segOffFlags   = 12
	segOffID      = 16
	segOffCreated = 24
	segOffCRC     = 60
)

// Encode writes the header into dst[:SegmentHeaderSize], zeroing the
// reserved bytes. It writes h.Version as given: set it to Version. Encode
// panics if dst is shorter than SegmentHeaderSize.
func (h SegmentHeader) Encode(dst []byte) {
	_ = dst[SegmentHeaderSize-1]
	copy(dst, segmentMagic[:])
	binary.LittleEndian.PutUint32(dst[segOffVersion:], h.Version)
	binary.LittleEndian.PutUint32(dst[segOffFlags:], h.Flags)
	binary.LittleEndian.PutUint32(dst[segOffID:], h.ID)
	clear(dst[segOffID+4 : segOffCreated])
	binary.LittleEndian.PutUint64(dst[segOffCreated:], uint64(h.Created))
	clear(dst[segOffCreated+8 : segOffCRC])
	binary.LittleEndian.PutUint32(dst[segOffCRC:], CRC(dst[:segOffCRC]))
}

// DecodeSegmentHeader decodes the segment header at the start of b,
// checking magic, version, checksum and reserved bytes in that order.
func DecodeSegmentHeader(b []byte) (SegmentHeader, error) {
	if len(b) < SegmentHeaderSize {
		return SegmentHeader{}, fmt.Errorf("%w: %d bytes, a segment header needs %d", ErrTruncated, len(b), SegmentHeaderSize)
	}
	if [8]byte(b[:8]) != segmentMagic {
		return SegmentHeader{}, fmt.Errorf("%w: segment magic %q, want %q", ErrBadMagic, b[:8], segmentMagic[:])
	}
	h := SegmentHeader{
		Version: binary.LittleEndian.Uint32(b[segOffVersion:]),
		Flags:   binary.LittleEndian.Uint32(b[segOffFlags:]),
		ID:      binary.LittleEndian.Uint32(b[segOffID:]),
		Created: int64(binary.LittleEndian.Uint64(b[segOffCreated:])),
	}
	if h.Version != Version {
		return SegmentHeader{}, fmt.Errorf("%w: segment version %d, want %d", ErrBadVersion, h.Version, Version)
	}
	stored := binary.LittleEndian.Uint32(b[segOffCRC:])
	if computed := CRC(b[:segOffCRC]); computed != stored {
		return SegmentHeader{}, checksumError(ErrHeaderChecksum, "segment header", stored, computed)
	}
	if !IsZero(b[segOffID+4:segOffCreated]) || !IsZero(b[segOffCreated+8:segOffCRC]) {
		return SegmentHeader{}, fmt.Errorf("%w: segment header", ErrReserved)
	}
	return h, nil
}
