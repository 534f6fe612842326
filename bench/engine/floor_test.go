package engine

import (
	"bytes"
	"testing"
)

func TestFloorPutGet(t *testing.T) {
	e, err := Open("floor", Config{Dir: t.TempDir(), ExpectedKeys: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	buf := make([]byte, 64)
	if _, found, err := e.Get([]byte("a"), buf); found || err != nil {
		t.Fatalf("Get of an absent key = %v, %v", found, err)
	}
	for i, v := range []string{"first value", "second, longer value", "3rd"} {
		if err := e.Put([]byte("a"), []byte(v)); err != nil {
			t.Fatal(err)
		}
		if err := e.Put([]byte("b"), []byte(v+v)); err != nil {
			t.Fatal(err)
		}
		n, found, err := e.Get([]byte("a"), buf)
		if !found || err != nil || !bytes.Equal(buf[:n], []byte(v)) {
			t.Fatalf("Put %d: Get = %q, %v, %v", i, buf[:n], found, err)
		}
		n, found, err = e.Get([]byte("b"), buf[:4])
		if !found || err != nil || n != 2*len(v) || !bytes.Equal(buf[:4], []byte(v + v)[:4]) {
			t.Fatalf("Put %d: Get into a short buffer = %d %q, %v, %v", i, n, buf[:4], found, err)
		}
	}
	if err := e.Flush(); err != nil {
		t.Fatal(err)
	}
}
