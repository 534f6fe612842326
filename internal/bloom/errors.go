package bloom

import "github.com/seed57392e9e/blobcache/internal/corruption"

// ErrCorrupt is returned, wrapped with detail, by Decode for input that is not
// a well-formed filter file: wrong magic or version, impossible sizes, a
// truncated file, trailing bytes or a checksum mismatch. Test with errors.Is;
// it is a corruption marker (errors.Is(err, corruption.ErrCorrupt) holds).
var ErrCorrupt = corruption.New("bloom: corrupt filter file")
