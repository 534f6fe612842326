package item

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// encode is the envelope builds before record metadata stored for payload and m: payload itself
// when it needs no header (no meta, and it does not start with the magic), else the header
// (see the layout in item.go) and the payload.
func encode(payload []byte, m Meta) []byte {
	if m == (Meta{}) && !bytes.HasPrefix(payload, []byte(Magic)) {
		return payload
	}
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	copy(b, Magic)
	binary.LittleEndian.PutUint32(b[8:], m.Flags)
	binary.LittleEndian.PutUint64(b[12:], uint64(m.Expires))
	return append(b, payload...)
}

func TestDecode(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	magicValue := append([]byte(Magic), "and more than twenty bytes"...)
	tests := []struct {
		name       string
		payload    []byte
		meta       Meta
		wantHeader bool
	}{
		{"plain", []byte("hello"), Meta{}, false},
		{"empty", nil, Meta{}, false},
		{"flags", []byte("hello"), Meta{Flags: 7}, true},
		{"expiry", []byte("hello"), Meta{Expires: now.Unix() + 5}, true},
		{"starts with magic", magicValue, Meta{}, true},
		{"short magic prefix", []byte(Magic[:5]), Meta{}, false},
		{"whole magic, short", []byte(Magic), Meta{}, true},
		{"empty with flags", nil, Meta{Flags: 1 << 31}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blob := encode(tt.payload, tt.meta)
			if got := len(blob) == len(tt.payload)+HeaderSize; got != tt.wantHeader {
				t.Fatalf("header = %v, want %v", got, tt.wantHeader)
			}
			head := blob[:min(len(blob), HeaderSize)]
			m, n := Decode(head, int64(len(blob)))
			if m != tt.meta {
				t.Errorf("meta = %+v, want %+v", m, tt.meta)
			}
			if !bytes.Equal(blob[n:], tt.payload) {
				t.Errorf("payload = %q, want %q", blob[n:], tt.payload)
			}
		})
	}
}

func TestExpiresAt(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		exptime int64
		want    int64
		ok      bool
	}{
		{0, 0, true},
		{-1, 0, false},
		{10, now.Unix() + 10, true},
		{30 * 24 * 3600, now.Unix() + 30*24*3600, true},
		{now.Unix() - 1, 0, false},
		{now.Unix(), 0, false},
		{now.Unix() + 100, now.Unix() + 100, true},
	}
	for _, tt := range tests {
		got, ok := ExpiresAt(tt.exptime, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ExpiresAt(%d) = %d, %v; want %d, %v", tt.exptime, got, ok, tt.want, tt.ok)
		}
	}
	m := Meta{Expires: now.Unix() + 3}
	if m.Expired(now) || !m.Expired(now.Add(3*time.Second)) {
		t.Error("Expired is wrong around the expiry time")
	}
	if TTL(0, now) != -1 || TTL(now.Unix()+3, now) != 3 || TTL(now.Unix()-3, now) != 0 {
		t.Error("TTL is wrong")
	}
}

// FuzzDecode checks that any stored blob decodes without panicking, and that any payload and
// meta put in the envelope (encode) decode back to them.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("plain value"), uint32(0), int64(0))
	f.Add([]byte(Magic+"0123456789abcdefghij"), uint32(3), int64(99))
	f.Add([]byte(Magic), uint32(0), int64(0))
	f.Fuzz(func(t *testing.T, b []byte, flags uint32, expires int64) {
		m, n := Decode(b[:min(len(b), HeaderSize)], int64(len(b)))
		if n != 0 && n != HeaderSize {
			t.Fatalf("header length %d", n)
		}
		if n == 0 && m != (Meta{}) {
			t.Fatalf("meta %+v without a header", m)
		}
		meta := Meta{Flags: flags, Expires: expires}
		blob := encode(b, meta)
		got, n := Decode(blob[:min(len(blob), HeaderSize)], int64(len(blob)))
		if got != meta || !bytes.Equal(blob[n:], b) {
			t.Fatalf("round trip of %q %+v gave %q %+v", b, meta, blob[n:], got)
		}
	})
}
