package record

import (
	"errors"
	"fmt"
)

// Errors returned (wrapped, with details) by the decoders.
var (
	ErrBadMagic       = errors.New("record: bad magic")
	ErrBadVersion     = errors.New("record: unsupported version")
	ErrBadKind        = errors.New("record: bad kind")
	ErrBadLength      = errors.New("record: bad length")
	ErrHeaderChecksum = errors.New("record: header checksum mismatch")
	ErrValueChecksum  = errors.New("record: value checksum mismatch")
	ErrFooterChecksum = errors.New("record: footer checksum mismatch")
	ErrReserved       = errors.New("record: reserved bytes not zero")

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
