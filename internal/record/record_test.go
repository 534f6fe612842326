package record

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
)

func encodeRecord(h Header, key, value []byte) []byte {
	h.KeyLen = uint32(len(key))
	h.ValueLen = uint32(len(value))
	if h.Kind != KindPad {
		h.ValueCRC = CRC(value)
	}
	n := int(h.Size())
	b := make([]byte, n+len(key)+len(value))
	h.Encode(b, key)
	copy(b[n:], key)
	copy(b[n+len(key):], value)
	return b
}

func TestCRCAndKeyHash(t *testing.T) {
	// Check values from the CRC-32C and xxHash64 specifications.
	if got := CRC([]byte("123456789")); got != 0xe3069283 {
		t.Errorf("CRC(123456789) = %#x, want 0xe3069283", got)
	}
	if got := UpdateCRC(CRC([]byte("1234")), []byte("56789")); got != 0xe3069283 {
		t.Errorf("UpdateCRC chain = %#x, want 0xe3069283", got)
	}
	if got := KeyHash(nil); got != 0xef46db3751d8e999 {
		t.Errorf("KeyHash(empty) = %#x, want 0xef46db3751d8e999", got)
	}
	if KeyHash([]byte("a")) == KeyHash([]byte("b")) {
		t.Error("KeyHash(a) == KeyHash(b)")
	}
}

func TestIsZero(t *testing.T) {
	for n := range 40 {
		b := make([]byte, n)
		if !IsZero(b) {
			t.Fatalf("IsZero(%d zeros) = false", n)
		}
		for i := range n {
			b[i] = 1
			if IsZero(b) {
				t.Fatalf("IsZero with byte %d of %d set = true", i, n)
			}
			b[i] = 0
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     Header
		key   []byte
		value []byte
	}{
		{"put", Header{Kind: KindPut, CTime: 1700000000123456789}, []byte("key"), []byte("value")},
		{"put with checksum", Header{Kind: KindPut, Flags: FlagHasChecksum, Sum: 0xdeadbeef, CTime: -1}, []byte("k"), bytes.Repeat([]byte{9}, 1000)},
		{"put empty value", Header{Kind: KindPut}, []byte("k"), nil},
		{"put longest key", Header{Kind: KindPut}, bytes.Repeat([]byte{'k'}, MaxKeyLen), []byte("v")},
		{"put empty key", Header{Kind: KindPut}, nil, []byte("v")},
		{"delete", Header{Kind: KindDelete, CTime: 42}, []byte("gone"), nil},
		{"put with meta", Header{Kind: KindPut, CTime: 7, Version: 1 << 40, Expires: 1800000000000000000, ClientFlags: 0xffffffff}, []byte("m"), []byte("value")},
		{"compressed put", Header{Kind: KindPut, Flags: FlagHasChecksum, Sum: 3, Version: 9, Codec: 2, DataLen: 1 << 20}, []byte("c"), []byte("stored")},
		{"legacy put", Header{Kind: KindPut, CTime: 1700000000123456789, Legacy: true}, []byte("key"), []byte("value")},
		{"legacy put with checksum", Header{Kind: KindPut, Flags: FlagHasChecksum, Sum: 1, Legacy: true}, []byte("k"), []byte("v")},
		{"legacy delete", Header{Kind: KindDelete, CTime: 42, Legacy: true}, []byte("gone"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeRecord(tc.h, tc.key, tc.value)
			// Trailing bytes after the key are the value (and beyond):
			// Decode ignores them.
			h, key, err := Decode(append(b, 0xff))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.h
			want.KeyLen, want.ValueLen, want.ValueCRC = uint32(len(tc.key)), uint32(len(tc.value)), CRC(tc.value)
			if h != want {
				t.Fatalf("Decode = %+v, want %+v", h, want)
			}
			if !bytes.Equal(key, tc.key) {
				t.Fatalf("key = %q, want %q", key, tc.key)
			}
			if h.Len() != int64(len(b)) {
				t.Fatalf("Len = %d, want %d", h.Len(), len(b))
			}
			if h.ValueOffset() != h.Size()+int64(len(key)) || (h.Legacy && h.Size() != LegacyHeaderSize) {
				t.Fatalf("ValueOffset %d, Size %d for a legacy header: %v", h.ValueOffset(), h.Size(), h.Legacy)
			}
			if err := CheckValue(h, b[h.ValueOffset():]); err != nil {
				t.Fatal(err)
			}
			if len(tc.value) > 0 {
				other := append([]byte(nil), tc.value...)
				other[0] ^= 1
				if err := CheckValue(h, other); !errors.Is(err, ErrValueChecksum) {
					t.Fatalf("CheckValue of another value = %v, want ErrValueChecksum", err)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := encodeRecord(Header{Kind: KindPut, CTime: 5}, []byte("key"), []byte("value"))
	mutate := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), valid...))
	}
	// reseal recomputes the header CRC after a mutation, so the check under
	// test is the one that fails.
	reseal := func(b []byte) []byte {
		h, _, _ := Decode(valid)
		h.Kind = Kind(b[offKind])
		h.KeyLen = uint32(b[offKeyLen]) | uint32(b[offKeyLen+1])<<8 | uint32(b[offKeyLen+2])<<16 | uint32(b[offKeyLen+3])<<24
		h.ValueLen = uint32(b[offValueLen]) | uint32(b[offValueLen+1])<<8
		end := min(len(b), HeaderSize+int(min(h.KeyLen, MaxKeyLen)))
		h.Encode(b, b[HeaderSize:end])
		return b
	}
	// resealMeta recomputes the header CRC over the bytes as they are.
	resealMeta := func(b []byte) []byte {
		crc := UpdateCRC(CRC(b[:offHeaderCRC]), b[offVersion:HeaderSize])
		crc = UpdateCRC(crc, b[HeaderSize:HeaderSize+3])
		b[offHeaderCRC], b[offHeaderCRC+1], b[offHeaderCRC+2], b[offHeaderCRC+3] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", valid[:LegacyHeaderSize-1], ErrTruncated},
		{"short key", valid[:HeaderSize+2], ErrTruncated},
		{"bad magic", mutate(func(b []byte) []byte { b[0] ^= 1; return b }), ErrBadMagic},
		{"zeros", make([]byte, 64), ErrBadMagic},
		{"kind 0", mutate(func(b []byte) []byte { b[offKind] = 0; return reseal(b) }), ErrBadKind},
		{"kind 4", mutate(func(b []byte) []byte { b[offKind] = 4; return reseal(b) }), ErrBadKind},
		{"key too long", mutate(func(b []byte) []byte { b[offKeyLen], b[offKeyLen+1] = 0x01, 0x10; return reseal(b) }), ErrBadLength},
		{"pad with key", mutate(func(b []byte) []byte { b[offKind] = byte(KindPad); return reseal(b) }), ErrBadLength},
		{"delete with value", mutate(func(b []byte) []byte { b[offKind] = byte(KindDelete); return reseal(b) }), ErrBadLength},
		{"flipped flags", mutate(func(b []byte) []byte { b[offFlags] ^= 0x80; return b }), ErrHeaderChecksum},
		{"flipped ctime", mutate(func(b []byte) []byte { b[offCTime+7] ^= 0x01; return b }), ErrHeaderChecksum},
		{"flipped key", mutate(func(b []byte) []byte { b[HeaderSize+1] ^= 0x20; return b }), ErrHeaderChecksum},
		{"flipped header crc", mutate(func(b []byte) []byte { b[offHeaderCRC] ^= 0x01; return b }), ErrHeaderChecksum},
		{"flipped version", mutate(func(b []byte) []byte { b[offVersion] ^= 0x01; return b }), ErrHeaderChecksum},
		{"flipped expires", mutate(func(b []byte) []byte { b[offExpires+7] ^= 0x01; return b }), ErrHeaderChecksum},
		{"flipped client flags", mutate(func(b []byte) []byte { b[offClientFlags] ^= 0x01; return b }), ErrHeaderChecksum},
		{"meta flag cleared", mutate(func(b []byte) []byte { b[offFlags] &^= flagMeta; return b }), ErrHeaderChecksum},
		{"reserved set", mutate(func(b []byte) []byte { b[offDataLen] = 1; return resealMeta(b) }), ErrReserved},
		{"codec without a data length", mutate(func(b []byte) []byte { b[offFlags] |= 1 << codecShift; return resealMeta(b) }), ErrBadLength},
		{"codec on a delete", mutate(func(b []byte) []byte {
			b[offKind], b[offFlags] = byte(KindDelete), b[offFlags]|1<<codecShift
			b[offValueLen], b[offDataLen] = 0, 9
			return resealMeta(b)
		}), ErrBadLength},
		{"short meta block", valid[:LegacyHeaderSize+3], ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, key, err := Decode(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %v, want %v", err, tc.want)
			}
			if key != nil {
				t.Fatal("Decode returned a key with an error")
			}
		})
	}
	if !errors.Is(ErrTruncated, ErrBadLength) {
		t.Error("ErrTruncated is not an ErrBadLength")
	}
	// A flipped value is the reader's business (CheckValue), not Decode's.
	b := mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })
	h, key, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode with a flipped value = %v", err)
	}
	err = CheckValue(h, b[HeaderSize+len(key):])
	if !errors.Is(err, ErrValueChecksum) {
		t.Fatalf("CheckValue = %v, want ErrValueChecksum", err)
	}
	stored, computed := h.ValueCRC, CRC(b[HeaderSize+len(key):])
	if want := fmt.Sprintf("stored %#08x, computed %#08x", stored, computed); !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("CheckValue error %q does not name both checksums (%s)", err, want)
	}
}

func TestEncodePad(t *testing.T) {
	for _, n := range []int{HeaderSize, HeaderSize + 1, 100, 4096} {
		b := bytes.Repeat([]byte{0xee}, n)
		EncodePad(b)
		h, key, err := Decode(b)
		if err != nil {
			t.Fatalf("pad of %d bytes: %v", n, err)
		}
		if h.Kind != KindPad || len(key) != 0 || h.Len() != int64(n) || !IsZero(b[HeaderSize:]) {
			t.Fatalf("pad of %d bytes decodes as %+v", n, h)
		}
		if err := CheckValue(h, b[HeaderSize:]); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{0, HeaderSize - 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("EncodePad of %d bytes did not panic", n)
				}
			}()
			EncodePad(make([]byte, n))
		}()
	}
}

// A pad header alone describes a pad longer than the bytes at hand (stream.go's reservation).
func TestEncodePadHeader(t *testing.T) {
	b := bytes.Repeat([]byte{0xee}, HeaderSize+8)
	EncodePadHeader(b, 1<<20)
	h, _, err := Decode(b)
	if err != nil || h.Kind != KindPad || h.Len() != 1<<20 {
		t.Fatalf("pad header decodes as %+v, %v; want a pad of 1 MiB", h, err)
	}
	if !bytes.Equal(b[HeaderSize:], bytes.Repeat([]byte{0xee}, 8)) {
		t.Error("EncodePadHeader wrote past the header")
	}
	defer func() {
		if recover() == nil {
			t.Error("a pad shorter than a header did not panic")
		}
	}()
	EncodePadHeader(b, HeaderSize-1)
}

func TestNoAllocations(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	value := make([]byte, 100)
	b := encodeRecord(Header{Kind: KindPut}, key, value)
	h, _, _ := Decode(b)
	dst := make([]byte, HeaderSize)
	for name, f := range map[string]func(){
		"Header.Encode": func() { h.Encode(dst, key) },
		"Decode":        func() { _, _, _ = Decode(b) },
		"CheckValue":    func() { _ = CheckValue(h, value) },
		"KeyHash":       func() { _ = KeyHash(key) },
		"EncodePad":     func() { EncodePad(dst) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %.1f times", name, n)
		}
	}
}

func TestHeaderLenLimits(t *testing.T) {
	h := Header{KeyLen: MaxKeyLen, ValueLen: math.MaxUint32}
	if h.Len() != HeaderSize+MaxKeyLen+math.MaxUint32 {
		t.Fatalf("Len overflowed: %d", h.Len())
	}
}

// TestPadLen: a pad placed at off ends on the next multiple of the alignment, is never shorter
// than a pad header, and is 0 where nothing needs padding.
func TestPadLen(t *testing.T) {
	const a = 4096
	for _, tc := range []struct{ off, want int64 }{
		{0, 0}, {a, 0}, {1, a - 1}, {100, a - 100}, {a - HeaderSize, HeaderSize},
		{a - HeaderSize + 1, a + HeaderSize - 1}, {a - 1, a + 1}, {3*a + 5, a - 5},
	} {
		got := PadLen(tc.off, a)
		if got != tc.want {
			t.Errorf("PadLen(%d) = %d, want %d", tc.off, got, tc.want)
		}
		if got != 0 && (got < HeaderSize || (tc.off+got)%a != 0) {
			t.Errorf("PadLen(%d) = %d: not a pad ending on a boundary", tc.off, got)
		}
	}
}

func TestAttrs(t *testing.T) {
	attrs := []byte("Content-Type: text/plain\n")
	h := Header{Kind: KindPut, KeyLen: 1, ValueLen: 3, ValueCRC: CRC([]byte("abc")), AttrLen: uint32(len(attrs)), AttrCRC: CRC(attrs)}
	b := make([]byte, h.Len())
	h.Encode(b, []byte("k"))
	copy(b[HeaderSize:], "k")
	copy(b[h.ValueOffset():], "abc")
	copy(b[h.AttrOffset():], attrs)
	got, _, err := Decode(b)
	if err != nil || got != h || got.Len() != int64(len(b)) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	if err := CheckValue(got, b[got.ValueOffset():]); err != nil {
		t.Fatalf("CheckValue with the attributes behind the value: %v", err)
	}
	if err := CheckAttrs(got, b[got.AttrOffset():]); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := CheckAttrs(got, b[got.AttrOffset():]); !errors.Is(err, ErrValueChecksum) {
		t.Fatalf("CheckAttrs of damaged attributes = %v", err)
	}
	for _, bad := range []Header{
		{Kind: KindPut, AttrLen: MaxAttrLen + 1},
		{Kind: KindDelete, AttrLen: 1},
	} {
		b := make([]byte, HeaderSize)
		bad.Encode(b, nil)
		if _, _, err := Decode(b); !errors.Is(err, ErrBadLength) {
			t.Fatalf("Decode of %+v = %v, want ErrBadLength", bad, err)
		}
	}
}
