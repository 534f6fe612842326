package record

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cespare/xxhash/v2"
)

// castagnoli is built once; crc32 uses the CPU's CRC-32C instruction when
// given this table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC returns the CRC-32C (Castagnoli) of b.
func CRC(b []byte) uint32 {
	return crc32.Update(0, castagnoli, b)
}

// UpdateCRC returns crc extended with b: UpdateCRC(CRC(a), b) == CRC(a+b).
func UpdateCRC(crc uint32, b []byte) uint32 {
	return crc32.Update(crc, castagnoli, b)
}

// KeyHash returns the 64-bit xxHash (seed 0) of key, with 0 mapped to 1 so
// that 0 can mark empty slots.
func KeyHash(key []byte) uint64 {
	h := xxhash.Sum64(key)
	if h == 0 {
		return 1
	}
	return h
}

// IsZero reports whether every byte of b is zero: a range a crash left
// unwritten in a preallocated file reads as zeros.
func IsZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
