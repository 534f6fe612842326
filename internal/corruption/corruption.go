package corruption

import "errors"

// ErrCorrupt marks damaged bytes. The root package exports it as blobcache.ErrCorrupt.
var ErrCorrupt = errors.New("blobcache: corrupt data")

// New returns a sentinel error with text msg that errors.Is finds to be ErrCorrupt, for a
// package's own kinds of damage (record.ErrHeaderChecksum, bloom.ErrCorrupt, ...): callers can
// test for the kind or for damage in general.
func New(msg string) error { return &marker{msg} }

type marker struct{ msg string }

func (m *marker) Error() string        { return m.msg }
func (m *marker) Is(target error) bool { return target == ErrCorrupt }
