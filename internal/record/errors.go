package record

import (
	"errors"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

// Errors returned (wrapped, with details) by the decoders. Those of damaged bytes are
// corruption markers: errors.Is(err, corruption.ErrCorrupt) holds for them.
var (
	ErrBadMagic       = corruption.New("record: bad magic")
	ErrBadKind        = corruption.New("record: bad kind")
	ErrBadLength      = corruption.New("record: bad length")
	ErrHeaderChecksum = corruption.New("record: header checksum mismatch")
	ErrValueChecksum  = corruption.New("record: value checksum mismatch")
	ErrFooterChecksum = corruption.New("record: footer checksum mismatch")
	ErrReserved       = corruption.New("record: reserved bytes not zero")

	// ErrBadVersion is a format this build does not read: not damage by itself (a caller that
	// knows it must be damage, because the version was written by this build, wraps it in a
	// corruption).
	ErrBadVersion = errors.New("record: unsupported version")

	// ErrTruncated is the ErrBadLength of a buffer that ends before the
	// header or key it must hold: errors.Is(ErrTruncated, ErrBadLength).
	// Readers of a file tell by it that a record runs past the end of what
	// they read.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrBadLength)

	// ErrNoFooter means a segment ends without a footer trailer: it is
	// unsealed (or its seal did not complete) and must be scanned.
	ErrNoFooter = errors.New("record: no footer")
)

// checksumError wraps sentinel with both checksums.
func checksumError(sentinel error, what string, stored, computed uint32) error {
	return fmt.Errorf("%w: %s stored %#08x, computed %#08x", sentinel, what, stored, computed)
}
