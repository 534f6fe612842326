// Package cachedir owns the cache directory's own files: their names, which entry of the
// directory is the cache's, the directory's lock, the reading and atomic replacing of a small
// file, and the one fixed-record codec (Format) of the identity and STATE files. What those
// records mean (the versions a build reads, the upgrade of an old directory, the lease of
// record versions) is the root package's; the segments and blob files are internal/segment's
// and the root's. The directory looks like this:
//
//	LOCK         the lock (Lock); never written
//	BLOBCACHE    the identity file: a Format record
//	STATE        the lease of record versions and the InvalidateAll point: a Format record
//	bloom.dat    the saved bloom filter (internal/bloom's format)
//	segments/    segment files and their entry logs
//	blobs/       one file per blob (Options.PerBlobFiles)
//	NAME.tmp     a replace of BLOBCACHE, STATE or bloom.dat under way, or cut short by a crash
//
// Invariants:
//   - After a crash, a file written by Replace holds either its old bytes or the new ones,
//     never a mix: the new bytes reach a temporary file, are synced, and are renamed over
//     the old file, and the rename is synced. A failed Replace removes its temporary file.
//   - Every temporary file the cache makes is one of Replace's, named NAME.tmp for a NAME
//     that Replace writes; Classify says Temp for exactly those, and Stray for every name
//     the cache does not give, which the cache must then leave alone.
//   - Format.Decode accepts only bytes that Format.Encode of the fields it returns gives
//     back exactly: the length, the magic, the reserved bytes (zero) and the CRC-32C are
//     checked, so a record with a wrong CRC is never accepted. Every error of Decode is a
//     corruption marker (errors.Is(err, corruption.ErrCorrupt)) and says which check failed
//     (ErrLength, ErrMagic, ErrBadField, ErrReserved, ErrChecksum).
//   - A writer holds the exclusive lock, read-only opens a shared one, so any number of
//     readers exclude a writer and a writer excludes everybody. Lock's errors are the file
//     system's, unwrapped: one that wraps vfs.ErrLocked means another holder has the lock.
//
// Concurrency: the functions and a Format are safe for concurrent use, except that two
// Replaces of one name must not overlap (they share the temporary file): the cache writes each
// file from one goroutine at a time.
package cachedir
