// Package codec compresses values for storage and reads them back: a value is cut into
// independent blocks of BlockSize bytes, each compressed alone (zstd at its fastest level, or
// s2), behind a block table, so that a range of a large value is read and decompressed from the
// blocks that cover it alone. The stored form is the one in docs/DESIGN.md ("Compressed
// values"); the encoder carries its byte diagram.
//
// Invariants:
//   - The stored form of a zstd value is itself a valid zstd stream: the table is a skippable
//     frame, each block a frame. A client that accepts Content-Encoding zstd can take it as is.
//   - Every block carries the CRC-32C of its stored bytes in the table, and the table its own,
//     so a range is checked by what it reads; nothing is decompressed before its check passes.
//   - A decoder never trusts a length it read: every block must decompress to exactly the
//     length the table's value length and block size give it, into memory the caller bounds.
//   - A value that does not shrink (sampled first, then measured) is not stored compressed:
//     Compress says so and the caller stores the value as given.
//
// Concurrency: a Compressor and the package's decoding functions are safe for concurrent use.
package codec
