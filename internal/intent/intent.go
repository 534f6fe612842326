package intent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

const (
	magic     = "BCINTENT"
	version   = 1
	headerLen = 4096
	slotLen   = 16
)

// ErrFull says the ring holds as many pending intents as it has slots.
var ErrFull = errors.New("intent: the log is full of pending intents")

// Intent is one acknowledged write: its key hash and its record's version.
type Intent struct {
	Hash    uint64
	Version uint64
}

// Log is an open intent log. Append and Done are called by one writer at a time (the cache's
// writer lock).
type Log struct {
	mem   []byte // the mapping: header, then the slots
	slots uint64
	first *atomic.Uint64 // in the mapping
	next  *atomic.Uint64 // in the mapping
	unmap func() error
}

// Size is the file size of a log of n slots.
func Size(n int) int64 { return headerLen + int64(n)*slotLen }

// Open maps the log at path, creating it with n slots if it does not exist, and returns it with
// the intents it holds pending. A log of another slot count is made anew with n (its pending
// intents are returned first). Damage is an error wrapping corruption.ErrCorrupt, with the log
// unopened; the caller may remove the file and open again.
func Open(path string, n int) (*Log, []Intent, error) {
	if n <= 0 {
		return nil, nil, fmt.Errorf("intent: %d slots", n)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("intent: open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("intent: %w", err)
	}
	var pending []Intent
	if fi.Size() > 0 {
		b := make([]byte, fi.Size())
		if _, err := f.ReadAt(b, 0); err != nil {
			return nil, nil, fmt.Errorf("intent: read %s: %w", path, err)
		}
		if pending, err = Decode(b); err != nil {
			return nil, nil, fmt.Errorf("intent: %s: %w", path, err)
		}
	}
	if fi.Size() != Size(n) {
		if err := f.Truncate(0); err != nil {
			return nil, nil, fmt.Errorf("intent: %w", err)
		}
		if err := f.Truncate(Size(n)); err != nil {
			return nil, nil, fmt.Errorf("intent: %w", err)
		}
	}
	mem, unmap, err := mapFile(f, Size(n))
	if err != nil {
		return nil, nil, fmt.Errorf("intent: map %s: %w", path, err)
	}
	l := &Log{mem: mem, slots: uint64(n), unmap: unmap}
	l.first = (*atomic.Uint64)(unsafe.Pointer(&mem[16]))
	l.next = (*atomic.Uint64)(unsafe.Pointer(&mem[24]))
	if string(mem[:8]) != magic || fi.Size() != Size(n) {
		copy(mem, magic)
		binary.LittleEndian.PutUint32(mem[8:], version)
		binary.LittleEndian.PutUint32(mem[12:], uint32(n))
		l.first.Store(0)
		l.next.Store(0)
	}
	return l, pending, nil
}

// Decode returns the pending intents of a log file's bytes b, or an error wrapping
// corruption.ErrCorrupt.
func Decode(b []byte) ([]Intent, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: intent log of %d bytes, shorter than its header", corruption.ErrCorrupt, len(b))
	}
	if string(b[:8]) != magic {
		return nil, fmt.Errorf("%w: intent log magic %q", corruption.ErrCorrupt, b[:8])
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != version {
		return nil, fmt.Errorf("%w: intent log version %d", corruption.ErrCorrupt, v)
	}
	n := uint64(binary.LittleEndian.Uint32(b[12:]))
	if n == 0 || int64(len(b)) != Size(int(n)) {
		return nil, fmt.Errorf("%w: intent log of %d slots in %d bytes", corruption.ErrCorrupt, n, len(b))
	}
	first, next := binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])
	if next < first || next-first > n {
		return nil, fmt.Errorf("%w: intent log positions %d..%d in %d slots", corruption.ErrCorrupt, first, next, n)
	}
	out := make([]Intent, 0, next-first)
	for p := first; p < next; p++ {
		s := b[headerLen+(p%n)*slotLen:]
		out = append(out, Intent{Hash: binary.LittleEndian.Uint64(s), Version: binary.LittleEndian.Uint64(s[8:])})
	}
	return out, nil
}

// Append records an intent and returns its position, or ErrFull if the ring holds as many
// pending intents as it has slots (the caller waits for Done and tries again).
func (l *Log) Append(in Intent) (uint64, error) {
	p := l.next.Load()
	if p-l.first.Load() >= l.slots {
		return 0, ErrFull
	}
	s := l.mem[headerLen+(p%l.slots)*slotLen:]
	binary.LittleEndian.PutUint64(s, in.Hash)
	binary.LittleEndian.PutUint64(s[8:], in.Version)
	l.next.Store(p + 1) // after the slot: a crash between the two loses an unacknowledged intent
	return p, nil
}

// Next is the position the next intent gets.
func (l *Log) Next() uint64 { return l.next.Load() }

// Done marks every intent before position p as no longer pending: their records reached the
// kernel.
func (l *Log) Done(p uint64) {
	if p > l.first.Load() && p <= l.next.Load() {
		l.first.Store(p)
	}
}

// Close unmaps the log. Its pending intents stay in the file. A nil Log is closed already.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	return l.unmap()
}

// Full reports whether the ring holds as many pending intents as it has slots.
func (l *Log) Full() bool { return l.next.Load()-l.first.Load() >= l.slots }
