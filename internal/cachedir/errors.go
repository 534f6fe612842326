package cachedir

import "github.com/seed57392e9e/blobcache/internal/corruption"

// The kinds of damage Format.Decode reports, wrapped with the record's name and what it found.
// Each is a corruption marker: errors.Is(err, corruption.ErrCorrupt) holds for it.
var (
	ErrLength   = corruption.New("cachedir: wrong length")
	ErrMagic    = corruption.New("cachedir: wrong magic")
	ErrBadField = corruption.New("cachedir: field refused")
	ErrReserved = corruption.New("cachedir: reserved bytes not zero")
	ErrChecksum = corruption.New("cachedir: checksum mismatch")
)
