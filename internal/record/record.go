package record

import (
	"encoding/binary"
	"fmt"
	"math"
)

// HeaderSize is the size of a record header; the key follows it, then the
// value.
const HeaderSize = 32

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

// Header is a decoded record header.
type Header struct {
	Kind     Kind
	Flags    uint8
	KeyLen   uint32
	ValueLen uint32
	Sum      uint32 // the application's checksum of the value (FlagHasChecksum)
	CTime    int64  // creation time, Unix nanoseconds
	ValueCRC uint32 // CRC-32C of the value; 0 for pads
}

// Len returns the length of the whole record: header, key and value.
func (h Header) Len() int64 {
	return HeaderSize + int64(h.KeyLen) + int64(h.ValueLen)
}

// Record header, little-endian. headerCRC is the CRC-32C of bytes 0..28
// followed by the key.
//
//	0        2      3       4          8            12         16                24           28           32
//	+--------+------+-------+----------+------------+----------+-----------------+------------+------------+
//	| magic  | kind | flags | keyLen   | valueLen   | sum      | ctime (unix ns) | valueCRC   | headerCRC  |
//	| 0x4342 |      |       | uint32   | uint32     | uint32   | int64           | uint32     | uint32     |
//	+--------+------+-------+----------+------------+----------+-----------------+------------+------------+
//	| key (keyLen bytes) | value (valueLen bytes) |
const (
	offMagic     = 0
	offKind      = 2
	offFlags     = 3
	offKeyLen    = 4
	offValueLen  = 8
	offSum       = 12
	offCTime     = 16
	offValueCRC  = 24
	offHeaderCRC = 28
)

// Encode writes the header into dst[:HeaderSize], with a headerCRC covering
// key; it does not copy key (the caller places it after the header). The
// caller sets KeyLen to len(key). Encode panics if dst is shorter than
// HeaderSize.
func (h *Header) Encode(dst []byte, key []byte) {
	_ = dst[HeaderSize-1]
	binary.LittleEndian.PutUint16(dst[offMagic:], Magic)
	dst[offKind] = byte(h.Kind)
	dst[offFlags] = h.Flags
	binary.LittleEndian.PutUint32(dst[offKeyLen:], h.KeyLen)
	binary.LittleEndian.PutUint32(dst[offValueLen:], h.ValueLen)
	binary.LittleEndian.PutUint32(dst[offSum:], h.Sum)
	binary.LittleEndian.PutUint64(dst[offCTime:], uint64(h.CTime))
	binary.LittleEndian.PutUint32(dst[offValueCRC:], h.ValueCRC)
	binary.LittleEndian.PutUint32(dst[offHeaderCRC:], UpdateCRC(CRC(dst[:offHeaderCRC]), key))
}

// Decode decodes the record header at the start of b and returns it with
// the key, a sub-slice of b. b must hold at least the header and the key;
// bytes after them are ignored. Checks, in order: magic, kind, lengths
// (KeyLen <= MaxKeyLen, no key for pads, no value for deletes), that b holds
// the key (ErrTruncated otherwise), headerCRC. The value is not checked: see
// ValueCRC.
//
// On error the returned header holds the unverified fields (zero when b is
// shorter than a header or the magic is wrong), for diagnostics only.
func Decode(b []byte) (h Header, key []byte, err error) {
	if len(b) < HeaderSize {
		return Header{}, nil, fmt.Errorf("%w: %d bytes, a record header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	if m := binary.LittleEndian.Uint16(b[offMagic:]); m != Magic {
		return Header{}, nil, fmt.Errorf("%w: record magic %#04x, want %#04x", ErrBadMagic, m, Magic)
	}
	h = Header{
		Kind:     Kind(b[offKind]),
		Flags:    b[offFlags],
		KeyLen:   binary.LittleEndian.Uint32(b[offKeyLen:]),
		ValueLen: binary.LittleEndian.Uint32(b[offValueLen:]),
		Sum:      binary.LittleEndian.Uint32(b[offSum:]),
		CTime:    int64(binary.LittleEndian.Uint64(b[offCTime:])),
		ValueCRC: binary.LittleEndian.Uint32(b[offValueCRC:]),
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
	end := HeaderSize + int(h.KeyLen)
	if len(b) < end {
		return h, nil, fmt.Errorf("%w: %d bytes, header and key need %d", ErrTruncated, len(b), end)
	}
	key = b[HeaderSize:end:end]
	stored := binary.LittleEndian.Uint32(b[offHeaderCRC:])
	if computed := UpdateCRC(CRC(b[:offHeaderCRC]), key); computed != stored {
		return h, nil, checksumError(ErrHeaderChecksum, "record header", stored, computed)
	}
	return h, key, nil
}

// CheckValue checks value against h.ValueCRC (pads are not checked).
func CheckValue(h Header, value []byte) error {
	if h.Kind == KindPad {
		return nil
	}
	if computed := CRC(value); computed != h.ValueCRC {
		return checksumError(ErrValueChecksum, "value", h.ValueCRC, computed)
	}
	return nil
}

// PadLen returns the length of the pad record that, placed at offset off, ends on the next
// multiple of align: 0 if off is already a multiple, else the distance to the next one, or to the
// one after when the distance is too short to hold a pad record's header (so 32..align+31
// bytes). align must be a positive power of two of at least HeaderSize.
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
