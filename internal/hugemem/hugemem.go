package hugemem

import "unsafe"

// PageBytes is the size of an x86-64 transparent huge page.
const PageBytes = 2 << 20

// Slice returns n zeroed elements of T that start on a PageBytes boundary, advised as huge-page
// memory where the OS has such advice (Linux), up to the end of the huge page the slice ends in.
// The heap allocation behind it is up to two huge pages larger than the slice. T's size must
// divide PageBytes.
func Slice[T any](n int) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if size == 0 || PageBytes%size != 0 {
		panic("hugemem: element size does not divide the huge page size")
	}
	if n < 0 {
		panic("hugemem: negative length")
	}
	if n == 0 {
		return nil
	}
	// The advice covers whole huge pages: a last page only partly inside the advised range would
	// never be a huge page, and the slice's tail would sit on 4 KiB pages.
	per := PageBytes / size
	whole := (n + per - 1) / per * per
	buf := make([]T, whole+per-1)
	off := 0
	if mis := uintptr(unsafe.Pointer(&buf[0])) % PageBytes; mis != 0 {
		off = int(PageBytes-mis) / size
	}
	advise(unsafe.Slice((*byte)(unsafe.Pointer(&buf[off])), whole*size))
	return buf[off : off+n : off+n]
}
