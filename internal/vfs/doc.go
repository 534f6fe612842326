// Package vfs is the file-system seam of BlobCache: every file operation of
// the engine goes through an [FS] and the [File]s it opens, so tests can
// substitute an implementation that injects torn writes, I/O errors or bit
// flips. [Default] is the operating system.
//
// Invariants:
//   - ReadvAt and WritevAt either transfer every byte of every buffer or
//     return a non-nil error together with the count actually transferred; a
//     read that stops at the end of the file returns io.EOF.
//   - Sync is a data sync (fdatasync on Linux, F_FULLFSYNC on Darwin): once
//     it returns nil, every byte written before it survives a power loss,
//     and so does the file size.
//   - Operations a platform or file system cannot perform (Allocate,
//     PunchHole, OpenDirect) return an error wrapping errors.ErrUnsupported,
//     so callers can fall back instead of failing.
//   - Buffers for files opened with OpenDirect must come from AlignedBuffer,
//     and offsets and lengths must be multiples of DirectIOAlignment.
//
// Concurrency: the positioned methods of a File (ReadAt, WriteAt, ReadvAt,
// WritevAt, Sync, Allocate, PunchHole, Stat) may be called from many
// goroutines at once; writes to overlapping ranges are not ordered. Close
// must not race with them. An FS is safe for concurrent use.
//
// Lock is advisory (flock(2) on Unix) and belongs to an open file
// description, so two Lock calls for the same name conflict even inside one
// process. On platforms other than Linux and Darwin it only excludes other
// Lock calls of the same process.
package vfs
