package memtier

// Entry buffers live outside the Go heap (mapped memory, arena_unix.go) where the platform
// allows: the tier's bytes are long-lived and reused, and on the heap they would raise the
// garbage collector's goal (by as much again as the tier holds, at the default GOGC) without
// ever becoming garbage. Buffers of slabBytes or more are mapped one by one and unmapped when the
// tier lets them go; smaller ones are cut from slabs of slabBytes that are never unmapped, and a
// small buffer the tier lets go waits in its class's spare list for the next entry of that class.
// The small buffers mapped are therefore at most what the tier held of them at its fullest, plus
// one part-cut slab a class.

// slabBytes is the size of the slabs small buffers are cut from, and the smallest buffer mapped
// on its own.
const slabBytes = 64 << 10

// arena hands out and takes back entry buffers by size class. Its methods are called with
// Tier.freeMu held.
type arena struct {
	slab  [numClasses][]byte   // what is left of the class's current slab
	spare [numClasses][][]byte // small buffers let go, for reuse
}

// alloc returns a new buffer of class c.
func (a *arena) alloc(c int) []byte {
	n := classSize(c)
	if n >= slabBytes {
		return mapBytes(n)
	}
	if l := len(a.spare[c]); l > 0 {
		b := a.spare[c][l-1]
		a.spare[c][l-1] = nil
		a.spare[c] = a.spare[c][:l-1]
		return b
	}
	if len(a.slab[c]) < n {
		a.slab[c] = mapBytes(slabBytes)
	}
	b := a.slab[c][:n:n]
	a.slab[c] = a.slab[c][n:]
	return b
}

// release takes back b, a buffer of class c that nothing refers to any more.
func (a *arena) release(c int, b []byte) {
	if classSize(c) >= slabBytes {
		unmapBytes(b)
		return
	}
	a.spare[c] = append(a.spare[c], b)
}
