package segment

import (
	"encoding/binary"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// Version is the on-disk format version of segment headers and footers.
const Version = 1

// HeaderLen is the encoded size of a segment header. It sits at the start
// of the HeaderSize block, the rest of which is zero.
const HeaderLen = 64

// FlagDirect marks a segment written with O_DIRECT: its batches are
// padded to 4 KiB with pad records.
const FlagDirect = 1

// fileMagic starts every segment file.
var fileMagic = [8]byte{'B', 'C', 'S', 'E', 'G', 'M', 'T', 0}

// Header is a decoded segment header.
type Header struct {
	Version uint32 // Version when written by this package
	Flags   uint32 // FlagDirect
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

// Encode writes the header into dst[:HeaderLen], zeroing the
// reserved bytes. It writes h.Version as given: set it to Version. Encode
// panics if dst is shorter than HeaderLen.
func (h Header) Encode(dst []byte) {
	_ = dst[HeaderLen-1]
	copy(dst, fileMagic[:])
	binary.LittleEndian.PutUint32(dst[segOffVersion:], h.Version)
	binary.LittleEndian.PutUint32(dst[segOffFlags:], h.Flags)
	binary.LittleEndian.PutUint32(dst[segOffID:], h.ID)
	clear(dst[segOffID+4 : segOffCreated])
	binary.LittleEndian.PutUint64(dst[segOffCreated:], uint64(h.Created))
	clear(dst[segOffCreated+8 : segOffCRC])
	binary.LittleEndian.PutUint32(dst[segOffCRC:], record.CRC(dst[:segOffCRC]))
}

// DecodeHeader decodes the segment header at the start of b,
// checking magic, version, checksum and reserved bytes in that order.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes, a segment header needs %d", record.ErrTruncated, len(b), HeaderLen)
	}
	if [8]byte(b[:8]) != fileMagic {
		return Header{}, fmt.Errorf("%w: segment magic %q, want %q", ErrBadMagic, b[:8], fileMagic[:])
	}
	h := Header{
		Version: binary.LittleEndian.Uint32(b[segOffVersion:]),
		Flags:   binary.LittleEndian.Uint32(b[segOffFlags:]),
		ID:      binary.LittleEndian.Uint32(b[segOffID:]),
		Created: int64(binary.LittleEndian.Uint64(b[segOffCreated:])),
	}
	if h.Version != Version {
		return Header{}, fmt.Errorf("%w: segment version %d, want %d", ErrBadVersion, h.Version, Version)
	}
	stored := binary.LittleEndian.Uint32(b[segOffCRC:])
	if computed := record.CRC(b[:segOffCRC]); computed != stored {
		return Header{}, checksumError(ErrHeaderChecksum, "segment header", stored, computed)
	}
	if !record.IsZero(b[segOffID+4:segOffCreated]) || !record.IsZero(b[segOffCreated+8:segOffCRC]) {
		return Header{}, fmt.Errorf("%w: segment header", ErrReserved)
	}
	return h, nil
}
