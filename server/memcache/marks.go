package memcache

import "sync"

// Marks of the meta protocol's recache scheme, which memcached keeps in an item's flags: an item
// whose win token was handed out (W once, then Z) and an item marked stale (md I, ms I: X). The
// record has no room for them, so the server keeps them in memory by version: a version names
// one write of one item, so a new write clears them as memcached's new item does, and a touch,
// which keeps the version, keeps them. They are bounded (maxMarks, the oldest dropped first) and
// lost on restart: a dropped win mark lets a second client win, a dropped stale mark makes a
// stale item look fresh.
type itemMarks struct {
	mu   sync.Mutex
	m    map[uint64]uint8 // version -> markWon|markStale
	ring []uint64         // versions in order of marking, to drop the oldest
	next int
}

const (
	markWon   = 1 << iota // the W flag was sent for this version
	markStale             // invalidated: mg answers X
)

// maxMarks bounds the marked versions (about 40 bytes each).
const maxMarks = 1 << 16

func (t *itemMarks) get(version uint64) uint8 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[version]
}

// set replaces version's marks.
func (t *itemMarks) set(version uint64, marks uint8) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setLocked(version, marks)
}

func (t *itemMarks) setLocked(version uint64, marks uint8) {
	if t.m == nil {
		t.m = make(map[uint64]uint8)
		t.ring = make([]uint64, maxMarks)
	}
	if _, ok := t.m[version]; !ok {
		if old := t.ring[t.next]; old != 0 {
			delete(t.m, old)
		}
		t.ring[t.next] = version
		t.next = (t.next + 1) % maxMarks
	}
	t.m[version] = marks
}

// win marks version's win token sent, and reports whether this call did it (the caller won).
func (t *itemMarks) win(version uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.m[version]
	if m&markWon != 0 {
		return false
	}
	t.setLocked(version, m|markWon)
	return true
}
