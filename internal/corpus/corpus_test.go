package corpus

import (
	"bytes"
	"testing"
)

func TestGoSource(t *testing.T) {
	a, err := GoSource(1000, 5000)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GoSource(0, 6000)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 5000 || !bytes.Equal(a, b[1000:]) || !bytes.Contains(b, []byte("package ")) {
		t.Fatalf("%d bytes, not the same text from another offset", len(a))
	}
}
