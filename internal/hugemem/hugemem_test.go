package hugemem

import (
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestSlice(t *testing.T) {
	if Slice[byte](0) != nil {
		t.Error("Slice(0) is not nil")
	}
	for _, n := range []int{1, 4095, PageBytes, PageBytes + 1} {
		b := Slice[byte](n)
		if len(b) != n || cap(b) != n {
			t.Errorf("Slice[byte](%d): len %d cap %d", n, len(b), cap(b))
		}
		if p := uintptr(unsafe.Pointer(&b[0])); p%PageBytes != 0 {
			t.Errorf("Slice[byte](%d) at %#x", n, p)
		}
		for i, v := range b {
			if v != 0 {
				t.Fatalf("Slice[byte](%d)[%d] = %d", n, i, v)
			}
		}
	}
	w := Slice[atomic.Uint64](100)
	if p := uintptr(unsafe.Pointer(&w[0])); len(w) != 100 || p%PageBytes != 0 {
		t.Errorf("Slice[atomic.Uint64](100): len %d at %#x", len(w), p)
	}
	defer func() {
		if recover() == nil {
			t.Error("an element size that does not divide the page did not panic")
		}
	}()
	Slice[[3]byte](1)
}
