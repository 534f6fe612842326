// Package segment reads and writes BlobCache segment files: a 4096-byte
// header block, then records (see package record), then, once sealed, a
// hint footer. It owns the segment format: the header codec (header.go) and
// the footer codec (footer.go) carry their byte diagrams; the layout, byte by
// byte, is also in docs/DESIGN.md. Its decoders check magic, then version,
// then lengths and kinds, then checksums, and return wrapped sentinels
// (ErrBadMagic, ErrBadVersion, ErrHeaderChecksum, ErrFooterChecksum,
// ErrReserved, ErrNoFooter; lengths and kinds with package record's); what
// they accept re-encodes to the same bytes.
//
// Life of a segment: Create preallocates the file and writes the header
// block; WriteBatch writes batches of encoded records at offsets the caller
// reserves; Seal writes the footer (entries for every put and delete, in
// record order) and truncates the file to end with it. Open and ReadFooter
// load a sealed segment without reading its records; Scan recovers an
// unsealed or damaged one by reading its records one by one.
//
// Invariants:
//   - Records start at HeaderSize and follow each other without gaps; pad
//     records fill the space a batch leaves (DirectIO batches are padded to
//     4 KiB). The footer starts exactly where the last record ends.
//   - A footer is trusted only when its trailer ends the file and every
//     checksum holds, so a seal cut short by a crash reads as "no footer"
//     (or a corrupt footer) and the segment is recovered by Scan, which
//     recognises the partial footer as a torn tail.
//   - Scan hands its callback only records whose header and value checksums
//     hold. It tells a torn tail (what a crash leaves: zeros where writes
//     did not reach the disk, a record cut by the end of the file, a partly
//     written footer) from corruption, which it reports with file, offset
//     and both checksums.
//   - Offsets and lengths in footer entries are uint32, so a segment is at
//     most MaxSize bytes.
//
// Concurrency: WriteBatch calls at disjoint offsets may run concurrently, as
// may reads from Active.File. Seal and Close must not run concurrently with
// WriteBatch or with each other. ReadFooter and Scan only read.
package segment
