package blobcache

import (
	"errors"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

// Sentinel errors. Errors returned by the cache wrap one of these (test with errors.Is) and keep
// the underlying cause where there is one.
var (
	// ErrClosed is returned by every operation on a Cache after Close.
	ErrClosed = errors.New("blobcache: closed")
	// ErrInvalidKey is returned for an empty key or one longer than MaxKeyLen.
	ErrInvalidKey = errors.New("blobcache: invalid key")
	// ErrValueTooLarge is returned when a record (header, key and value) would not fit in one
	// write buffer or one segment; see (*Cache).MaxValueSize.
	ErrValueTooLarge = errors.New("blobcache: value too large")
	// ErrChecksumMismatch is returned by PutChecksummed when the checksum does not match the
	// value, and by a blob reader whose bytes do not match the checksums stored with them.
	ErrChecksumMismatch = errors.New("blobcache: checksum mismatch")
	// ErrCorrupt marks damaged bytes on disk: a record, footer or identity file that fails its
	// checks.
	// Every damaged-bytes error of the internal packages is one too (internal/corruption).
	ErrCorrupt = corruption.ErrCorrupt
	// ErrNotFound is returned by ReadAt and Stat-like calls for a key the cache does not hold,
	// and by a conditional write whose precondition (IfPresent, IfVersion) wanted a blob.
	ErrNotFound = errors.New("blobcache: not found")
	// ErrNotBlobCache is returned by New for a non-empty directory that was not created by
	// BlobCache.
	ErrNotBlobCache = errors.New("blobcache: directory is not a blobcache")
	// ErrNoCache is returned by a read-only New (Options.ReadOnly) for a directory that does
	// not exist or is empty: there is no cache to read.
	ErrNoCache = errors.New("blobcache: no cache")
	// ErrReadOnly is returned by every write to a cache opened with Options.ReadOnly.
	ErrReadOnly = errors.New("blobcache: cache is open read-only")
	// ErrLocked is returned by New when another process has the directory open.
	ErrLocked = errors.New("blobcache: directory is locked by another process")
	// ErrInvalidOptions is returned by Options.Validate.
	ErrInvalidOptions = errors.New("blobcache: invalid options")
	// ErrWriteFailed is returned by Put and friends after a background flush failed (for example
	// with ENOSPC); the blobs of the failed batch are forgotten. It wraps the I/O error.
	ErrWriteFailed = errors.New("blobcache: write failed")
	// ErrOutrun is returned by a PutFrom (or a Put of a value larger than WriteBufferSize) that
	// was still writing into the oldest segment when that segment had to be evicted to stay
	// under MaxSize, and held the eviction back for a second: its reader was too slow. Nothing
	// of the value is stored; the rest of it was read and dropped. The cache is fine.
	ErrOutrun = errors.New("blobcache: value outrun by eviction")
	// ErrExists is returned by a conditional write whose precondition found a blob it did not
	// want: IfAbsent and the key has one, or IfVersion and the key's blob has another version.
	// Nothing is written.
	ErrExists = errors.New("blobcache: key exists")
	// ErrConflict is returned by a conditional PutFromWith whose value streamed into the cache
	// while another write of the key landed: the precondition was tested against a blob that
	// is no longer there. Nothing is stored; the reader was consumed.
	ErrConflict = errors.New("blobcache: key changed while the value streamed")
)
