//go:build unix

package memtier

import "golang.org/x/sys/unix"

// mapsOnDemand tells that a buffer mapped on its own (mapBytes) takes memory only for the pages
// written: the untouched tail of its size class is never resident.
const mapsOnDemand = true

// mapBytes returns n bytes of anonymous mapped memory, or heap memory if the mapping fails
// (rare; a heap buffer's untouched pages are in most cases not resident either).
func mapBytes(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// unmapBytes gives back memory mapBytes mapped. Heap memory (a failed mapping) is left to the
// garbage collector: unmapping it fails, harmlessly.
func unmapBytes(b []byte) { _ = unix.Munmap(b[:cap(b)]) }
