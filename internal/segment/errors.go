package segment

import (
	"errors"
	"fmt"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

var (
	// ErrMisaligned is returned by WriteBatch of a Direct segment when the
	// batch is not one aligned buffer at an aligned offset.
	ErrMisaligned = errors.New("segment: direct write not aligned")

	// ErrSealed is returned by WriteBatch and Seal after Seal.
	ErrSealed = errors.New("segment: sealed")

	// ErrNoFooter means a segment ends without a footer trailer: it is
	// unsealed (or its seal did not complete) and must be scanned.
	ErrNoFooter = errors.New("segment: no footer")

	// ErrBadVersion is a format this build does not read: not damage by itself (a caller that
	// knows it must be damage, because the version was written by this build, wraps it in a
	// corruption).
	ErrBadVersion = errors.New("segment: unsupported version")
)

// Errors of damaged segment headers and footers, returned (wrapped, with details) by the
// decoders: errors.Is(err, corruption.ErrCorrupt) holds for each.
var (
	ErrBadMagic       = corruption.New("segment: bad magic")
	ErrHeaderChecksum = corruption.New("segment: header checksum mismatch")
	ErrFooterChecksum = corruption.New("segment: footer checksum mismatch")
	ErrReserved       = corruption.New("segment: reserved bytes not zero")
)

// checksumError wraps sentinel with both checksums.
func checksumError(sentinel error, what string, stored, computed uint32) error {
	return fmt.Errorf("%w: %s stored %#08x, computed %#08x", sentinel, what, stored, computed)
}

// CorruptionError reports damaged bytes in a segment file. It unwraps to
// corruption.ErrCorrupt and to the decoder's error, so both
// errors.Is(err, corruption.ErrCorrupt) and errors.Is(err,
// record.ErrHeaderChecksum) (say) hold.
type CorruptionError struct {
	File   string
	Offset int64 // of the damaged header, record or footer
	Err    error // what is wrong, with both checksums where there are two
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("segment: corruption in %s at offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() []error { return []error{corruption.ErrCorrupt, e.Err} }

func corrupted(file string, off int64, err error) error {
	return &CorruptionError{File: file, Offset: off, Err: err}
}

func corruptedf(file string, off int64, format string, args ...any) error {
	return corrupted(file, off, fmt.Errorf(format, args...))
}
