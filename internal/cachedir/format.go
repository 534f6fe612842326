package cachedir

import (
	"encoding/binary"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// Format is the layout of a fixed record, the whole of a small file of the directory. Every
// field is a little-endian unsigned integer of 4 or 8 bytes; reserved bytes are zero; crc32c
// is the CRC-32C (record.CRC) of every byte before it:
//
//	0            len(Magic)
//	+------------+---------+---------+-----+---------------+----------+
//	| magic      | field 0 | field 1 | ... | reserved (0)  | crc32c   |
//	+------------+---------+---------+-----+---------------+----------+
//	                                                        Size()-4   Size()
//
// The root package's identity.go and versions.go hold the diagrams of the identity and state
// records. A Format must not be changed once in use: its bytes are on disk.
type Format struct {
	// Name says what the record is, in errors: "identity file".
	Name string
	// Magic starts the record.
	Magic string
	// Fields are the widths of the fields in bytes, in order: 4 or 8 each.
	Fields []int
	// Reserved is the count of zero bytes between the last field and the CRC.
	Reserved int
	// Check, if not nil, is the record's own rule on its fields (say, the versions a build
	// reads). Decode calls it after the magic and before the reserved bytes and the CRC, so
	// that a record of a version it does not know is reported as that, not as a checksum
	// mismatch; its error is returned wrapped in ErrBadField.
	Check func(fields []uint64) error
}

// Size is the length of an encoded record.
func (f *Format) Size() int {
	n := len(f.Magic) + f.Reserved + 4
	for _, w := range f.Fields {
		n += w
	}
	return n
}

// Encode returns the record of fields, one per f.Fields. It panics if their count is not
// len(f.Fields), if a width is not 4 or 8, or if a value does not fit its width: the caller's
// mistakes, not the disk's.
func (f *Format) Encode(fields ...uint64) []byte {
	if len(fields) != len(f.Fields) {
		panic(fmt.Sprintf("cachedir: %s has %d fields, Encode was given %d", f.Name, len(f.Fields), len(fields)))
	}
	b := make([]byte, f.Size())
	off := copy(b, f.Magic)
	for i, w := range f.Fields {
		switch {
		case w == 4 && fields[i] <= 1<<32-1:
			binary.LittleEndian.PutUint32(b[off:], uint32(fields[i]))
		case w == 8:
			binary.LittleEndian.PutUint64(b[off:], fields[i])
		default:
			panic(fmt.Sprintf("cachedir: %s field %d: %d does not fit in %d bytes", f.Name, i, fields[i], w))
		}
		off += w
	}
	crcOff := len(b) - 4
	binary.LittleEndian.PutUint32(b[crcOff:], record.CRC(b[:crcOff]))
	return b
}

// Decode checks that b is a record of f and returns its fields. It checks, in order, the
// length, the magic, f.Check, the reserved bytes and the CRC, and reports the first that fails
// with ErrLength, ErrMagic, ErrBadField, ErrReserved or ErrChecksum.
func (f *Format) Decode(b []byte) ([]uint64, error) {
	if size := f.Size(); len(b) != size {
		return nil, fmt.Errorf("%w: %s is %d bytes, want %d", ErrLength, f.Name, len(b), size)
	}
	if string(b[:len(f.Magic)]) != f.Magic {
		return nil, fmt.Errorf("%w: %s has magic %q, want %q", ErrMagic, f.Name, b[:len(f.Magic)], f.Magic)
	}
	fields := make([]uint64, len(f.Fields))
	off := len(f.Magic)
	for i, w := range f.Fields {
		switch w {
		case 4:
			fields[i] = uint64(binary.LittleEndian.Uint32(b[off:]))
		case 8:
			fields[i] = binary.LittleEndian.Uint64(b[off:])
		default:
			panic(fmt.Sprintf("cachedir: %s field %d is %d bytes wide", f.Name, i, w))
		}
		off += w
	}
	if f.Check != nil {
		if err := f.Check(fields); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadField, f.Name, err)
		}
	}
	crcOff := len(b) - 4
	if !record.IsZero(b[off:crcOff]) {
		return nil, fmt.Errorf("%w: %s", ErrReserved, f.Name)
	}
	stored, computed := binary.LittleEndian.Uint32(b[crcOff:]), record.CRC(b[:crcOff])
	if stored != computed {
		return nil, fmt.Errorf("%w: %s stored %#08x, computed %#08x", ErrChecksum, f.Name, stored, computed)
	}
	return fields, nil
}
