package vfs

import "errors"

// ErrLocked is returned by FS.Lock when another holder (another process, or
// another Lock call of this one) already has the lock.
var ErrLocked = errors.New("vfs: locked by another holder")
