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
)

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
