package record

import (
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
	ErrReserved       = corruption.New("record: reserved bytes not zero")

	// ErrTruncated is the ErrBadLength of a buffer that ends before the
	// header or key it must hold: errors.Is(ErrTruncated, ErrBadLength).
	// Readers of a file tell by it that a record runs past the end of what
	// they read.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrBadLength)
)

// checksumError wraps sentinel with both checksums.
func checksumError(sentinel error, what string, stored, computed uint32) error {
	return fmt.Errorf("%w: %s stored %#08x, computed %#08x", sentinel, what, stored, computed)
}
