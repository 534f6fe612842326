package memtier

// Entry buffers live outside the Go heap (mapped memory, arena_unix.go) where the platform
// allows: the tier's bytes are long-lived and reused, and on the heap they would raise the
// garbage collector's goal (by as much again as the tier holds, at the default GOGC) without
// ever becoming garbage. Buffers of slabBytes or more are mapped one by one and unmapped when the
// tier lets them go; smaller ones are cut from slabs of slabBytes that are not unmapped while the
// tier is open, and a small buffer the tier lets go waits in its class's spare list for the next
// entry of that class. The small buffers mapped are therefore at most what the tier held of them
// at its fullest, plus one part-cut slab a class. A closed tier unmaps everything (arena.close).

// slabBytes is the size of the slabs small buffers are cut from, and the smallest buffer mapped
// on its own.
const slabBytes = 64 << 10

// arena hands out and takes back entry buffers by size class. Its methods are called with
// Tier.freeMu held.
//
// Once the tier is closed (close), a buffer given back is unmapped rather than kept, and the
// slabs are unmapped when the last small buffer cut from them is given back: a closed tier holds
// no memory once no reader holds its entries.
type arena struct {
	slab   [numClasses][]byte   // what is left of the class's current slab
	spare  [numClasses][][]byte // small buffers let go, for reuse
	slabs  [][]byte             // every slab mapped
	out    int                  // small buffers handed out and not given back
	mapped int64                // bytes mapped: slabs and buffers mapped on their own
	closed bool
}

// alloc returns a new buffer of class c.
func (a *arena) alloc(c int) []byte {
	n := classSize(c)
	if n >= slabBytes {
		a.mapped += int64(n)
		return mapBytes(n)
	}
	a.out++
	if l := len(a.spare[c]); l > 0 {
		b := a.spare[c][l-1]
		a.spare[c][l-1] = nil
		a.spare[c] = a.spare[c][:l-1]
		return b
	}
	if len(a.slab[c]) < n {
		a.slab[c] = mapBytes(slabBytes)
		a.slabs = append(a.slabs, a.slab[c])
		a.mapped += slabBytes
	}
	b := a.slab[c][:n:n]
	a.slab[c] = a.slab[c][n:]
	return b
}

// release takes back b, a buffer of class c that nothing refers to any more.
func (a *arena) release(c int, b []byte) {
	if classSize(c) >= slabBytes {
		unmapBytes(b)
		a.mapped -= int64(classSize(c))
		return
	}
	a.out--
	a.spare[c] = append(a.spare[c], b)
	a.unmapIdle()
}

// close makes the arena unmap what it is given back from now on, and its slabs once every small
// buffer is back.
func (a *arena) close() {
	a.closed = true
	a.unmapIdle()
}

// unmapIdle unmaps the slabs of a closed arena when no small buffer cut from them is out.
func (a *arena) unmapIdle() {
	if !a.closed || a.out > 0 {
		return
	}
	for _, s := range a.slabs {
		unmapBytes(s)
		a.mapped -= slabBytes
	}
	a.slabs = nil
	a.slab = [numClasses][]byte{}
	a.spare = [numClasses][][]byte{}
}
