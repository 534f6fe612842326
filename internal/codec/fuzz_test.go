package codec

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary stored bytes, lengths and ranges to the decoders: they must never
// panic, never allocate past their bounds, and never succeed on bytes that are not a stored
// value's (every accepted block passed its CRC-32C).
func FuzzDecode(f *testing.F) {
	text := []byte("the quick brown fox jumps over the lazy dog; ")
	value := bytes.Repeat(text, 200)
	for _, c := range []Codec{Zstd, S2} {
		cp, _ := NewCompressor(c)
		stored, _ := cp.Compress(nil, value)
		f.Add(uint8(c), stored, int64(len(value)), int64(0), int64(len(value)))
		f.Add(uint8(c), stored, int64(len(value)), int64(100), int64(50))
	}
	f.Fuzz(func(t *testing.T, c uint8, stored []byte, n, off, length int64) {
		if n <= 0 || n > 4*BlockSize {
			return
		}
		tab, err := ParseTable(stored, int64(len(stored)), n)
		if err != nil {
			return
		}
		if off < 0 || length <= 0 || off >= n {
			return
		}
		end := min(n, off+length)
		first, last := tab.Cover(off, end)
		s, e := tab.Span(first, last)
		if s < 0 || e > int64(len(stored)) || s > e {
			t.Fatalf("span [%d, %d) outside %d stored bytes of an accepted table", s, e, len(stored))
		}
		dst := make([]byte, end-off)
		_ = tab.Decode(Codec(c), dst, off, stored[s:e], first, last)
		whole := make([]byte, n)
		_ = DecodeAll(Codec(c), whole, stored)
	})
}

// FuzzRoundTrip compresses arbitrary values: what Compress keeps decodes to the value.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(1), bytes.Repeat([]byte("abc"), 1000))
	f.Add(uint8(2), bytes.Repeat([]byte{0}, 5000))
	f.Fuzz(func(t *testing.T, c uint8, value []byte) {
		cp, err := NewCompressor(Codec(c))
		if err != nil {
			return
		}
		stored, ok := cp.Compress(nil, value)
		if !ok {
			return
		}
		got := make([]byte, len(value))
		if err := DecodeAll(Codec(c), got, stored); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, value) {
			t.Fatal("round trip differs")
		}
	})
}
