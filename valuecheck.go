package blobcache

import (
	"fmt"
	"hash"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// valueCheck is the check of one value against its record header, the one every write and read
// of a value goes through. Two sums cover a value:
//
//   - the record's ValueCRC, the CRC-32C of the value, always;
//   - the blob checksum the application sees, the record's Sum under FlagHasChecksum, when a
//     write stores one (Options.Checksum, or a caller's checksum to match). It is the hash of
//     Options.ChecksumHash, or the CRC-32C itself when none is set (then it costs nothing).
//
// Both run over the value a chunk at a time, in order: any split of the value into writes gives
// the sums of the whole. A write ends with seal (what its header stores), a read with verify
// (whether the bytes are the ones the header describes). Without a user hash a valueCheck
// holds no pointer and allocates nothing; it is used by value, from one goroutine.
type valueCheck struct {
	crc uint32 // CRC-32C of the bytes so far
	// sum says the blob checksum is wanted: a write stores it, a read's record has it.
	sum bool
	// user is the blob checksum's hash when it is not the CRC-32C (Options.ChecksumHash): set
	// only when sum is.
	user hash.Hash32
}

// newValueCheck starts the check of a value; sum says the blob checksum is wanted, made by
// newHash (nil: the CRC-32C).
func newValueCheck(newHash func() hash.Hash32, sum bool) valueCheck {
	v := valueCheck{sum: sum}
	if sum && newHash != nil {
		v.user = newHash()
	}
	return v
}

// writeCheck starts the check of a value a write stores; sum says the record stores the blob
// checksum.
func (c *Cache) writeCheck(sum bool) valueCheck { return newValueCheck(c.opts.ChecksumHash, sum) }

// readCheck starts the check of the value of the record whose header is hdr: its CRC-32C, and
// its blob checksum when the record has one computed with the configured hash. A record whose
// blob checksum is the CRC-32C (no hash configured) is checked by its ValueCRC alone, and so is
// a compressed one.
func (c *Cache) readCheck(hdr record.Header) valueCheck {
	// A compressed value's stored bytes are checked by their CRC-32C alone: the blob checksum
	// is of the value they decompress to.
	return newValueCheck(c.opts.ChecksumHash, hdr.Flags&record.FlagHasChecksum != 0 && hdr.Codec == 0)
}

// write adds the next bytes of the value.
func (v *valueCheck) write(p []byte) {
	v.crc = record.UpdateCRC(v.crc, p)
	if v.user != nil {
		v.user.Write(p)
	}
}

// blobSum is the blob checksum of the bytes so far.
func (v *valueCheck) blobSum() uint32 {
	if v.user != nil {
		return v.user.Sum32()
	}
	return v.crc
}

// seal ends the check of a written value: it sets what hdr stores of it (ValueCRC; with the blob
// checksum, FlagHasChecksum and Sum). want, if not nil, is the caller's blob checksum
// (PutChecksummed): a value that does not match it is refused with ErrChecksumMismatch, and hdr
// is left as it was.
func (v *valueCheck) seal(hdr *record.Header, want *uint32) error {
	if !v.sum {
		hdr.ValueCRC = v.crc
		return nil
	}
	sum := v.blobSum()
	if want != nil && *want != sum {
		return fmt.Errorf("%w: caller's checksum %#08x, value's %#08x", ErrChecksumMismatch, *want, sum)
	}
	hdr.ValueCRC = v.crc
	hdr.Flags |= record.FlagHasChecksum
	hdr.Sum = sum
	return nil
}

// verify ends the check of a value read whole from the record at loc whose header is hdr: nil
// if the bytes match its ValueCRC and (with a user hash) its Sum, else an error wrapping
// ErrChecksumMismatch with the record's place and both sums.
func (v *valueCheck) verify(hdr record.Header, loc index.Loc) error {
	if v.crc != hdr.ValueCRC {
		return fmt.Errorf("%w: segment %d offset %d: value crc32c %#08x, stored %#08x",
			ErrChecksumMismatch, loc.Segment, loc.Offset, v.crc, hdr.ValueCRC)
	}
	if v.user != nil {
		if got := v.user.Sum32(); got != hdr.Sum {
			return fmt.Errorf("%w: segment %d offset %d: blob checksum %#08x, stored %#08x",
				ErrChecksumMismatch, loc.Segment, loc.Offset, got, hdr.Sum)
		}
	}
	return nil
}
