package bitset

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

// allocHuge returns n words (a multiple of a huge page) starting on a
// HugePageBytes boundary, advised to the kernel with MADV_HUGEPAGE. With
// transparent huge pages in "madvise" mode (a common default) the kernel
// backs the range with 2 MiB pages at first touch only if asked; in "always"
// mode the advice is redundant, in "never" mode it is ignored.
//
// The words come from the Go heap, so the garbage collector owns them as it
// owns any slice: we over-allocate by a huge page less a word and skip to the
// boundary (the heap does not move objects, so the alignment holds for the
// life of the slice). The advice is given before the set is touched; a fresh
// heap span is not touched either, while a reused one has been zeroed by the
// runtime already and is collapsed into huge pages later, by khugepaged, if
// at all. madvise errors are ignored: the advice only affects speed.
//
// The advice outlives the set: once the set is garbage, the heap may reuse
// the range for other objects, still advised. That costs nothing but some
// granularity of the memory the runtime returns to the OS.
func allocHuge(n int) []atomic.Uint64 {
	buf := make([]atomic.Uint64, n+hugePageWords-1)
	off := 0
	if mis := uintptr(unsafe.Pointer(&buf[0])) % HugePageBytes; mis != 0 {
		off = int(HugePageBytes-mis) / 8
	}
	words := buf[off : off+n : off+n]
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n*8), syscall.MADV_HUGEPAGE)
	return words
}
