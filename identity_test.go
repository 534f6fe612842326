package blobcache

import (
	"bytes"
	"errors"
	"testing"
)

func TestIdentityRoundTrip(t *testing.T) {
	id := newIdentity().withMode(true)
	got, err := decodeIdentity(id.encode())
	if err != nil || got != id {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	b := id.encode()
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := decodeIdentity(c); err == nil {
			t.Fatalf("flip at byte %d not detected", i)
		}
	}
	if _, err := decodeIdentity(b[:31]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short file: %v", err)
	}
	other := bytes.Clone(b)
	copy(other, "NOTMINE!")
	if _, err := decodeIdentity(other); !errors.Is(err, ErrNotBlobCache) {
		t.Fatalf("foreign magic: %v", err)
	}
}

// FuzzDecodeIdentity: the identity decoder never panics, and what it accepts re-encodes to the
// same bytes.
func FuzzDecodeIdentity(f *testing.F) {
	f.Add(newIdentity().encode())
	f.Add(newIdentity().withMode(true).encode())
	f.Add([]byte("BLOBCACH"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := decodeIdentity(b)
		if err != nil {
			return
		}
		if !bytes.Equal(id.encode(), b) {
			t.Fatalf("accepted %x but re-encodes as %x", b, id.encode())
		}
	})
}
