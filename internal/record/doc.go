// Package record holds BlobCache's fixed binary codecs: the record header,
// the segment header and the hint footer of a sealed segment, plus the key
// hash and the CRC-32C every checksum uses. The formats are the ones in
// docs/DESIGN.md ("On-disk format", version 1, little-endian); each encoder
// carries its byte diagram.
//
// Invariants:
//   - Decoders check magic, then version (where there is one), then lengths
//     and kinds, then the checksum, and return a wrapped sentinel error
//     (ErrBadMagic, ErrBadVersion, ErrBadKind, ErrBadLength,
//     ErrHeaderChecksum, ErrFooterChecksum, ErrReserved, ErrNoFooter) that
//     names what was expected and what was found.
//   - Whatever a decoder accepts re-encodes to the very same bytes: reserved
//     bytes must be zero and every field is covered by a checksum.
//   - Encoding and decoding headers allocate nothing; a decoded key is a
//     sub-slice of the input.
//   - KeyHash never returns 0, so 0 can mean "empty" in hash tables.
//
// Concurrency: everything here is a pure function of its arguments and is
// safe for concurrent use.
package record
