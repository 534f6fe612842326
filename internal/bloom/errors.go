package bloom

import "errors"

// ErrCorrupt is returned, wrapped with detail, by Decode for input that is not
// a well-formed filter file: wrong magic or version, impossible sizes, a
// truncated file, trailing bytes or a checksum mismatch. Test with errors.Is.
var ErrCorrupt = errors.New("bloom: corrupt filter file")
