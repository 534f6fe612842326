//go:build linux

package memtier

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"
)

// residentPages is how many pages of b's capacity the kernel holds in memory (mincore).
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	b = b[:cap(b)]
	// mincore wants a page-aligned start: a buffer mapped on its own starts on a page.
	if uintptr(unsafe.Pointer(&b[0]))%uintptr(pageSize) != 0 {
		t.Fatalf("buffer at %p is not page-aligned", &b[0])
	}
	vec := make([]byte, (len(b)+pageSize-1)/pageSize)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestResidentAccounting: an entry in a buffer mapped on its own counts the pages its value (and
// a key too long to lie in the Entry) take, not its size class, and the kernel holds exactly those pages of the buffer; a
// buffer kept for reuse and taken by a smaller entry counts what its larger one made resident;
// and the tier holds as many entries as that accounting lets in, within its capacity.
func TestResidentAccounting(t *testing.T) {
	tr := New(64 << 20)
	const n = 100 << 10 // a class of 114,688 bytes: 28 pages; 100 KiB take 25
	e := add(tr, "big", 1, n, 'b')
	if cap(e.buf) <= n+8192 {
		t.Fatalf("class of %d bytes for %d: the test needs a class with an untouched tail", cap(e.buf), n)
	}
	want := (n + pageSize - 1) / pageSize // the key lies in the Entry
	if e.resident != want*pageSize {
		t.Fatalf("counts %d resident bytes, want %d pages", e.resident, want)
	}
	if got := residentPages(t, e.buf); got != want {
		t.Fatalf("the kernel holds %d pages of the buffer, the tier counts %d", got, want)
	}
	if e.Size() != int64(e.resident)+EntryOverhead {
		t.Fatalf("Size %d", e.Size())
	}

	// A newer, smaller record of the key replaces the entry and takes its buffer (the same
	// class), which still counts the pages the larger one made resident.
	add(tr, "big", 2, n-4000, 's')
	small := add(tr, "other", 1, n-4000, 'o') // a fresh buffer: only the pages it writes
	if small.resident != ((n-4000+pageSize-1)/pageSize)*pageSize || residentPages(t, small.buf) != small.resident/pageSize {
		t.Fatalf("a fresh buffer for %d bytes counts %d", n-4000, small.resident)
	}
	// A key too long for the Entry lies behind the value, and its bytes count: 50 bytes short of
	// 25 pages, and 100 of key, take 26.
	longKey := strings.Repeat("L", inlineKey+36)
	long := add(tr, longKey, 1, n-50, 'l')
	if long.resident != (want+1)*pageSize || residentPages(t, long.buf) != want+1 {
		t.Fatalf("an entry with a long key counts %d bytes; the kernel holds %d pages", long.resident, residentPages(t, long.buf))
	}
	v2 := tr.Get(xxhash.Sum64String("big"), 2, []byte("big"))
	if v2 == nil || &v2.buf[:1][0] != &e.buf[:1][0] {
		t.Fatal("the newer record did not take the buffer of its key's older one")
	}
	if v2.resident != want*pageSize {
		t.Fatalf("the buffer kept from the larger entry counts %d bytes, want its %d pages", v2.resident, want)
	}
	tr.Release(v2)

	// Filled with 100 KiB values, the tier holds the entries its capacity has room for by pages.
	tr = New(16 << 20)
	for i := range 400 {
		add(tr, fmt.Sprintf("k%03d", i), 1, n, 'x')
	}
	per := int64(want*pageSize) + EntryOverhead
	if st := tr.Stats(); st.Items != tr.capacity/per || st.Bytes > tr.capacity {
		t.Fatalf("holds %d entries in %d bytes; want %d within %d", st.Items, st.Bytes, tr.capacity/per, tr.capacity)
	}
}
