package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// HeaderSize is the size of the header of the records this build writes
// (format 2); the key follows it, then the value, then the attributes.
const HeaderSize = 64

// MaxAttrLen is the most attribute bytes a record may carry.
const MaxAttrLen = 4096

// LegacyHeaderSize is the size of a format-1 record header, written by
// earlier builds: read, never written (except by tests).
const LegacyHeaderSize = 32

// Magic starts every record header ("BC" on disk, little-endian).
const Magic uint16 = 0x4342

// MaxKeyLen is the longest key a record may hold.
const MaxKeyLen = 4096

// Kind is what a record means.
type Kind uint8

const (
	// KindPut stores a value under a key.
	KindPut Kind = 1
	// KindDelete is a tombstone: the key has no value (ValueLen 0).
	KindDelete Kind = 2
	// KindPad fills space (DirectIO batches are padded to 4 KiB): no key,
	// ValueLen zero bytes, ValueCRC 0 and not checked. Pads have no footer
	// entry.
	KindPad Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindPut:
		return "put"
	case KindDelete:
		return "delete"
	case KindPad:
		return "pad"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// FlagHasChecksum is the record flag saying Sum holds the blob's checksum as
// the application sees it.
const FlagHasChecksum = 1

// The codec bits of the flags byte, on disk: how the value is stored (internal/codec's Codec: 0
// as given, else compressed). Header.Flags never holds them; Header.Codec does.
const (
	codecShift = 2
	codecMask  = 3 << codecShift
)

// flagMeta, on disk, marks a format-2 header: the meta block (version,
// expiry, client flags) follows the first 32 bytes. Header.Flags never
// holds it; Header.Legacy says whether it was clear.
const flagMeta = 2

// Header is a decoded record header. The zero value describes a record of
// the format this build writes; only Decode sets Legacy.
type Header struct {
	Kind     Kind
	Flags    uint8 // FlagHasChecksum
	KeyLen   uint32
	ValueLen uint32
	Sum      uint32 // the application's checksum of the value (FlagHasChecksum)
	CTime    int64  // creation time, Unix nanoseconds
	ValueCRC uint32 // CRC-32C of the value; 0 for pads

	// The meta block (format 2; zero in a legacy header).
	Version     uint64 // unique per write of a cache; 0 in legacy records
	Expires     int64  // Unix nanoseconds from which the record is a miss; 0: never
	ClientFlags uint32 // stored for the application, never interpreted
	AttrLen     uint32 // bytes of attributes after the value (at most MaxAttrLen)
	AttrCRC     uint32 // CRC-32C of the attributes

	// Codec says how the value is stored (internal/codec: 0 as given); with a codec, ValueLen
	// and ValueCRC are the stored bytes' and DataLen is the length of the value they decompress
	// to. Format 2 only, in the flags byte and the reserved word.
	Codec   uint8
	DataLen uint32

	// Legacy marks a format-1 header (LegacyHeaderSize bytes, no meta block).
	Legacy bool
}

// Size returns the length of the header itself: HeaderSize, or
// LegacyHeaderSize for a legacy header.
func (h Header) Size() int64 {
	if h.Legacy {
		return LegacyHeaderSize
	}
	return HeaderSize
}

// BlobLen returns the length of the value as the application sees it: DataLen for a compressed
// value, else ValueLen.
func (h Header) BlobLen() int64 {
	if h.Codec != 0 {
		return int64(h.DataLen)
	}
	return int64(h.ValueLen)
}

// SizeAt returns the size of the header that starts b (at least
// LegacyHeaderSize bytes), as its flags byte announces: unverified, for
// reading what a damaged header may still tell.
func SizeAt(b []byte) int64 {
	if b[offFlags]&flagMeta != 0 {
		return HeaderSize
	}
	return LegacyHeaderSize
}

// Len returns the length of the whole record: header, key, value and attributes.
func (h Header) Len() int64 {
	return h.Size() + int64(h.KeyLen) + int64(h.ValueLen) + int64(h.AttrLen)
}

// AttrOffset returns the offset of the attributes from the start of the record: they follow
// the value, so a reader of the value never needs them first.
func (h Header) AttrOffset() int64 {
	return h.ValueOffset() + int64(h.ValueLen)
}

// ValueOffset returns the offset of the value from the start of the record.
func (h Header) ValueOffset() int64 {
	return h.Size() + int64(h.KeyLen)
}

// Record header, little-endian. Format 2 (flags bit 1 set) is 64 bytes:
// the first 32 as in format 1, then the meta block. headerCRC is the
// CRC-32C of bytes 0..28, then (format 2) bytes 32..64, then the key. The
// attributes are covered by attrCRC (checked by CheckAttrs), the value by
// valueCRC.
//
//	0        2      3       4          8            12         16                24           28           32
//	+--------+------+-------+----------+------------+----------+-----------------+------------+------------+
//	| magic  | kind | flags | keyLen   | valueLen   | sum      | ctime (unix ns) | valueCRC   | headerCRC  |
//	| 0x4342 |      |       | uint32   | uint32     | uint32   | int64           | uint32     | uint32     |
//	+--------+------+-------+----------+------------+----------+-----------------+------------+------------+
//	32                  40                  48             52          56          60             64
//	+-------------------+-------------------+--------------+-----------+-----------+--------------+
//	| version (uint64)  | expires (unix ns) | client flags | attrLen   | attrCRC   | dataLen      |
//	+-------------------+-------------------+--------------+-----------+-----------+--------------+
//	| key (keyLen bytes) | value (valueLen bytes) | attributes (attrLen bytes) |
//
// Flags: bit 0 FlagHasChecksum, bit 1 the meta block, bits 2-3 the codec. dataLen, the length
// of a compressed value once decompressed, is 0 when the codec bits are (the word was reserved
// before compression existed: a build without it refuses a compressed record as damaged, which
// is why a directory that may hold one has format version 3).
//
// Format 1 (flags bit 1 clear) ends at byte 32: the key follows the
// headerCRC.
const (
	offMagic       = 0
	offKind        = 2
	offFlags       = 3
	offKeyLen      = 4
	offValueLen    = 8
	offSum         = 12
	offCTime       = 16
	offValueCRC    = 24
	offHeaderCRC   = 28
	offVersion     = 32
	offExpires     = 40
	offClientFlags = 48
	offAttrLen     = 52
	offAttrCRC     = 56
	offDataLen     = 60
)

// Encode writes the header into dst[:h.Size()], with a headerCRC covering
// key; it does not copy key (the caller places it after the header). The
// caller sets KeyLen to len(key). Encode panics if dst is shorter than
// h.Size().
func (h *Header) Encode(dst []byte, key []byte) {
	_ = dst[h.Size()-1]
	flags := h.Flags | h.Codec<<codecShift&codecMask
	if !h.Legacy {
		flags |= flagMeta
	}
	binary.LittleEndian.PutUint16(dst[offMagic:], Magic)
	dst[offKind] = byte(h.Kind)
	dst[offFlags] = flags
	binary.LittleEndian.PutUint32(dst[offKeyLen:], h.KeyLen)
	binary.LittleEndian.PutUint32(dst[offValueLen:], h.ValueLen)
	binary.LittleEndian.PutUint32(dst[offSum:], h.Sum)
	binary.LittleEndian.PutUint64(dst[offCTime:], uint64(h.CTime))
	binary.LittleEndian.PutUint32(dst[offValueCRC:], h.ValueCRC)
	crc := CRC(dst[:offHeaderCRC])
	if !h.Legacy {
		binary.LittleEndian.PutUint64(dst[offVersion:], h.Version)
		binary.LittleEndian.PutUint64(dst[offExpires:], uint64(h.Expires))
		binary.LittleEndian.PutUint32(dst[offClientFlags:], h.ClientFlags)
		binary.LittleEndian.PutUint32(dst[offAttrLen:], h.AttrLen)
		binary.LittleEndian.PutUint32(dst[offAttrCRC:], h.AttrCRC)
		binary.LittleEndian.PutUint32(dst[offDataLen:], h.DataLen)
		crc = UpdateCRC(crc, dst[offVersion:HeaderSize])
	}
	binary.LittleEndian.PutUint32(dst[offHeaderCRC:], UpdateCRC(crc, key))
}

// Decode decodes the record header at the start of b and returns it with
// the key, a sub-slice of b. b must hold at least the header and the key;
// bytes after them are ignored. Checks, in order: magic, kind, lengths
// (KeyLen <= MaxKeyLen, no key for pads, no value for deletes), that b holds
// the header and the key (ErrTruncated otherwise), headerCRC, reserved
// bytes. The value is not checked: see ValueCRC. A header of either format
// is read; Legacy says which.
//
// On error the returned header holds the unverified fields (zero when b is
// shorter than a legacy header or the magic is wrong), for diagnostics only.
func Decode(b []byte) (h Header, key []byte, err error) {
	if len(b) < LegacyHeaderSize {
		return Header{}, nil, fmt.Errorf("%w: %d bytes, a record header needs %d", ErrTruncated, len(b), LegacyHeaderSize)
	}
	if m := binary.LittleEndian.Uint16(b[offMagic:]); m != Magic {
		return Header{}, nil, fmt.Errorf("%w: record magic %#04x, want %#04x", ErrBadMagic, m, Magic)
	}
	h = Header{
		Kind:     Kind(b[offKind]),
		Flags:    b[offFlags] &^ (flagMeta | codecMask),
		Codec:    b[offFlags] & codecMask >> codecShift,
		KeyLen:   binary.LittleEndian.Uint32(b[offKeyLen:]),
		ValueLen: binary.LittleEndian.Uint32(b[offValueLen:]),
		Sum:      binary.LittleEndian.Uint32(b[offSum:]),
		CTime:    int64(binary.LittleEndian.Uint64(b[offCTime:])),
		ValueCRC: binary.LittleEndian.Uint32(b[offValueCRC:]),
		Legacy:   b[offFlags]&flagMeta == 0,
	}
	switch h.Kind {
	case KindPut:
	case KindDelete:
		if h.ValueLen != 0 {
			return h, nil, fmt.Errorf("%w: delete record with a %d-byte value", ErrBadLength, h.ValueLen)
		}
	case KindPad:
		if h.KeyLen != 0 {
			return h, nil, fmt.Errorf("%w: pad record with a %d-byte key", ErrBadLength, h.KeyLen)
		}
	default:
		return h, nil, fmt.Errorf("%w: %d", ErrBadKind, uint8(h.Kind))
	}
	if h.KeyLen > MaxKeyLen {
		return h, nil, fmt.Errorf("%w: key length %d > %d", ErrBadLength, h.KeyLen, MaxKeyLen)
	}
	size := int(h.Size())
	end := size + int(h.KeyLen)
	if len(b) < end {
		return h, nil, fmt.Errorf("%w: %d bytes, header and key need %d", ErrTruncated, len(b), end)
	}
	key = b[size:end:end]
	crc := CRC(b[:offHeaderCRC])
	if !h.Legacy {
		h.Version = binary.LittleEndian.Uint64(b[offVersion:])
		h.Expires = int64(binary.LittleEndian.Uint64(b[offExpires:]))
		h.ClientFlags = binary.LittleEndian.Uint32(b[offClientFlags:])
		h.AttrLen = binary.LittleEndian.Uint32(b[offAttrLen:])
		h.AttrCRC = binary.LittleEndian.Uint32(b[offAttrCRC:])
		crc = UpdateCRC(crc, b[offVersion:HeaderSize])
	}
	stored := binary.LittleEndian.Uint32(b[offHeaderCRC:])
	if computed := UpdateCRC(crc, key); computed != stored {
		return h, nil, checksumError(ErrHeaderChecksum, "record header", stored, computed)
	}
	if !h.Legacy {
		h.DataLen = binary.LittleEndian.Uint32(b[offDataLen:])
	}
	switch {
	case h.Codec == 0 && h.DataLen != 0:
		return h, nil, fmt.Errorf("%w: record header", ErrReserved)
	case h.Codec != 0 && (h.Legacy || h.Kind != KindPut || h.DataLen == 0):
		return h, nil, fmt.Errorf("%w: codec %d on a %v record of %d bytes (legacy %v)", ErrBadLength, h.Codec, h.Kind, h.DataLen, h.Legacy)
	}
	if h.AttrLen > MaxAttrLen || h.AttrLen > 0 && h.Kind != KindPut {
		return h, nil, fmt.Errorf("%w: %d attribute bytes on a %v record", ErrBadLength, h.AttrLen, h.Kind)
	}
	return h, key, nil
}

// CheckAttrs checks the attributes attrs (h.AttrLen bytes) against h.AttrCRC.
func CheckAttrs(h Header, attrs []byte) error {
	if len(attrs) != int(h.AttrLen) {
		return fmt.Errorf("%w: %d attribute bytes, the header says %d", ErrBadLength, len(attrs), h.AttrLen)
	}
	if computed := CRC(attrs); computed != h.AttrCRC {
		return checksumError(ErrValueChecksum, "attributes", h.AttrCRC, computed)
	}
	return nil
}

// CheckValue checks value against h.ValueCRC (pads are not checked). Bytes of
// value past h.ValueLen (the attributes, say) are not part of it.
func CheckValue(h Header, value []byte) error {
	if h.Kind == KindPad {
		return nil
	}
	if int64(len(value)) > int64(h.ValueLen) {
		value = value[:h.ValueLen]
	}
	if computed := CRC(value); computed != h.ValueCRC {
		return checksumError(ErrValueChecksum, "value", h.ValueCRC, computed)
	}
	return nil
}

// PadLen returns the length of the pad record that, placed at offset off, ends on the next
// multiple of align: 0 if off is already a multiple, else the distance to the next one, or to the
// one after when the distance is too short to hold a pad record's header (so
// HeaderSize..align+HeaderSize-1 bytes). align must be a positive power of two of at least HeaderSize.
func PadLen(off, align int64) int64 {
	rem := off & (align - 1)
	if rem == 0 {
		return 0
	}
	pad := align - rem
	if pad < HeaderSize {
		pad += align
	}
	return pad
}

// EncodePad fills dst with one pad record that occupies exactly len(dst)
// bytes: a header with ValueLen len(dst)-HeaderSize, then zeros. It panics
// if dst is shorter than HeaderSize or longer than a record can be.
func EncodePad(dst []byte) {
	EncodePadHeader(dst, int64(len(dst)))
	clear(dst[HeaderSize:])
}

// EncodePadHeader writes into dst[:HeaderSize] the header of a pad record
// of n bytes in all, for a pad whose body is written elsewhere or not at
// all (a scan steps over a pad by its length). It panics if n is shorter than HeaderSize or longer than
// a record can be.
func EncodePadHeader(dst []byte, n int64) {
	if n < HeaderSize || n-HeaderSize > math.MaxUint32 {
		panic(fmt.Sprintf("record: %d bytes cannot hold one pad record", n))
	}
	h := Header{Kind: KindPad, ValueLen: uint32(n - HeaderSize)}
	h.Encode(dst, nil)
}
