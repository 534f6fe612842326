// Package record holds the record codec: the header that starts every put,
// delete and pad record, plus the key hash and the CRC-32C every checksum
// uses. The format is the one in docs/DESIGN.md ("On-disk format",
// little-endian); the encoder carries its byte diagram. The segment header
// and footer, which frame records in a segment file, are internal/segment's.
//
// Invariants:
//   - Decode checks magic, then lengths and kinds, then the checksum, and
//     returns a wrapped sentinel error (ErrBadMagic, ErrBadKind,
//     ErrBadLength, ErrHeaderChecksum) that names what was expected and what
//     was found.
//   - Whatever a decoder accepts re-encodes to the very same bytes: reserved
//     bytes must be zero and every field is covered by a checksum.
//   - Encoding and decoding headers allocate nothing; a decoded key is a
//     sub-slice of the input.
//   - KeyHash never returns 0, so 0 can mean "empty" in hash tables.
//
// Concurrency: everything here is a pure function of its arguments and is
// safe for concurrent use.
package record
