// Package hugemem allocates memory that the kernel may back with transparent huge pages: slices
// that start on a 2 MiB boundary and, on Linux, are advised with MADV_HUGEPAGE before first touch.
//
// Two users need it. The bloom filter's bitset: a random probe into tens of MiB misses the TLB far
// less often on 2 MiB pages. And buffers that O_DIRECT reads land in: a device request is built
// from the buffer's physically contiguous runs, so 1 MiB on 4 KiB pages is up to 256 segments,
// more than a request may carry on many devices (virtio-blk here: 254), and the read becomes two
// requests; on a huge page it is one segment (see BENCHMARKS.md for what that is worth).
//
// The memory comes from the Go heap, so the garbage collector owns it as it owns any slice: the
// allocation is rounded up to whole huge pages and over-sized by a huge page less one element, and
// the slice starts at the first boundary in it (the heap does not move objects, so the alignment holds for the slice's life).
// The advice is given before the memory is touched; a fresh heap span is not touched either,
// while a reused one has been zeroed by the runtime already and is collapsed into huge pages
// later, by khugepaged, if at all. madvise errors are ignored: the advice only affects speed. It
// outlives the slice: once the slice is garbage, the heap may reuse the range, still advised,
// which costs nothing but some granularity of the memory the runtime returns to the OS.
//
// In the kernel's "madvise" mode (a common default) the range is backed with huge pages at first
// touch only because of the advice; in "always" mode the advice is redundant, in "never" mode it
// is ignored. A huge page is resident as a whole once any byte of it is touched: memory is
// counted in 2 MiB steps.
package hugemem
