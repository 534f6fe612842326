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
	b := make([]byte, HeaderSize+len(key)+len(value))
	h.Encode(b, key)
	copy(b[HeaderSize:], key)
	copy(b[HeaderSize+len(key):], value)
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
			if err := CheckValue(h, b[HeaderSize+len(key):]); err != nil {
				t.Fatal(err)
			}
			if err := CheckValue(h, append([]byte{1}, tc.value...)); !errors.Is(err, ErrValueChecksum) {
				t.Fatalf("CheckValue of another value = %v, want ErrValueChecksum", err)
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
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", valid[:HeaderSize-1], ErrTruncated},
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

func TestSegmentHeader(t *testing.T) {
	h := SegmentHeader{Version: Version, Flags: SegmentFlagDirect, ID: 123456, Created: 1700000000000000000}
	valid := make([]byte, 4096)
	for i := range valid {
		valid[i] = 0xaa // Encode must zero the reserved bytes itself
	}
	h.Encode(valid)
	got, err := DecodeSegmentHeader(valid)
	if err != nil || got != h {
		t.Fatalf("DecodeSegmentHeader = %+v, %v; want %+v", got, err, h)
	}
	if string(valid[:8]) != "BCSEGMT\x00" {
		t.Fatalf("magic on disk = %q", valid[:8])
	}
	mutate := func(i int, x byte) []byte {
		b := append([]byte(nil), valid[:SegmentHeaderSize]...)
		b[i] ^= x
		return b
	}
	withVersion := func(v uint32) []byte {
		b := make([]byte, SegmentHeaderSize)
		SegmentHeader{Version: v, ID: 1}.Encode(b)
		return b
	}
	reservedSet := func() []byte {
		b := append([]byte(nil), valid[:SegmentHeaderSize]...)
		b[40] = 1
		b[segOffCRC], b[segOffCRC+1], b[segOffCRC+2], b[segOffCRC+3] = byte(CRC(b[:60])), byte(CRC(b[:60])>>8), byte(CRC(b[:60])>>16), byte(CRC(b[:60])>>24)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", valid[:63], ErrTruncated},
		{"zeros", make([]byte, 64), ErrBadMagic},
		{"magic", mutate(3, 1), ErrBadMagic},
		{"version 0", withVersion(0), ErrBadVersion},
		{"version 2", withVersion(2), ErrBadVersion},
		{"flipped id", mutate(segOffID, 1), ErrHeaderChecksum},
		{"flipped created", mutate(segOffCreated+7, 0x80), ErrHeaderChecksum},
		{"flipped reserved", mutate(33, 1), ErrHeaderChecksum},
		{"flipped crc", mutate(63, 1), ErrHeaderChecksum},
		{"reserved set with valid crc", reservedSet(), ErrReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeSegmentHeader(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeSegmentHeader = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFooterRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		entries := make([]Entry, n)
		off := uint32(4096)
		for i := range entries {
			kind := KindPut
			if i%3 == 2 {
				kind = KindDelete
			}
			entries[i] = Entry{Hash: KeyHash(fmt.Appendf(nil, "key%d", i)), Offset: off, Length: uint32(40 + i), Kind: kind, Flags: uint8(i % 2)}
			off += uint32(40 + i)
		}
		prefix := []byte("prefix")
		b := AppendFooter(prefix, entries, uint64(off))
		if !bytes.Equal(b[:len(prefix)], prefix) || int64(len(b)-len(prefix)) != FooterSize(n) {
			t.Fatalf("AppendFooter(%d entries) wrote %d bytes, want %d", n, len(b)-len(prefix), FooterSize(n))
		}
		b = b[len(prefix):]
		count, dataEnd, crc, err := DecodeTrailer(b[len(b)-TrailerSize:])
		if err != nil || count != uint32(n) || dataEnd != uint64(off) {
			t.Fatalf("DecodeTrailer = %d, %d, %v; want %d, %d", count, dataEnd, err, n, off)
		}
		got, err := DecodeEntries(b[:len(b)-TrailerSize], crc)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("DecodeEntries: %d entries, want %d", len(got), n)
		}
		for i := range got {
			if got[i] != entries[i] {
				t.Fatalf("entry %d = %+v, want %+v", i, got[i], entries[i])
			}
		}
	}
}

func TestFooterErrors(t *testing.T) {
	entries := []Entry{
		{Hash: 1, Offset: 4096, Length: 40, Kind: KindPut},
		{Hash: 2, Offset: 4136, Length: 35, Kind: KindDelete, Flags: 1},
	}
	valid := AppendFooter(nil, entries, 4171)
	n := len(entries) * EntrySize
	trailer := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid[n:]...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", valid[n : n+31], ErrTruncated},
		{"zeros", make([]byte, 32), ErrNoFooter},
		{"entries, not a trailer", valid[:32], ErrNoFooter},
		{"magic", trailer(func(b []byte) { b[6] ^= 1 }), ErrNoFooter},
		{"version", trailer(func(b []byte) { b[trOffVersion] = 2 }), ErrBadVersion},
		{"count", trailer(func(b []byte) { b[trOffCount] ^= 1 }), ErrFooterChecksum},
		{"dataEnd", trailer(func(b []byte) { b[trOffDataEnd+5] ^= 1 }), ErrFooterChecksum},
		{"entriesCRC", trailer(func(b []byte) { b[trOffEntriesCRC] ^= 1 }), ErrFooterChecksum},
		{"trailerCRC", trailer(func(b []byte) { b[trOffCRC+3] ^= 1 }), ErrFooterChecksum},
	} {
		t.Run("trailer/"+tc.name, func(t *testing.T) {
			if _, _, _, err := DecodeTrailer(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeTrailer = %v, want %v", err, tc.want)
			}
		})
	}

	_, _, crc, err := DecodeTrailer(valid[n:])
	if err != nil {
		t.Fatal(err)
	}
	withEntry := func(e Entry) ([]byte, uint32) {
		b := AppendFooter(nil, []Entry{e}, 0)[:EntrySize]
		return b, CRC(b)
	}
	badKind, badKindCRC := withEntry(Entry{Hash: 1, Offset: 4096, Length: 40, Kind: KindPad})
	shortLen, shortLenCRC := withEntry(Entry{Hash: 1, Offset: 4096, Length: 31, Kind: KindPut})
	reserved, _ := withEntry(Entry{Hash: 1, Offset: 4096, Length: 40, Kind: KindPut})
	reserved[19] = 1
	flipped := append([]byte(nil), valid[:n]...)
	flipped[25] ^= 4
	for _, tc := range []struct {
		name string
		b    []byte
		crc  uint32
		want error
	}{
		{"flipped", flipped, crc, ErrFooterChecksum},
		{"truncated", valid[:n-1], crc, ErrBadLength},
		{"pad entry", badKind, badKindCRC, ErrBadKind},
		{"record shorter than a header", shortLen, shortLenCRC, ErrBadLength},
		{"reserved", reserved, CRC(reserved), ErrReserved},
	} {
		t.Run("entries/"+tc.name, func(t *testing.T) {
			if _, err := DecodeEntries(tc.b, tc.crc); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeEntries = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNoAllocations(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	value := make([]byte, 100)
	b := encodeRecord(Header{Kind: KindPut}, key, value)
	h, _, _ := Decode(b)
	dst := make([]byte, HeaderSize)
	seg := make([]byte, SegmentHeaderSize)
	sh := SegmentHeader{Version: Version, ID: 7}
	sh.Encode(seg)
	for name, f := range map[string]func(){
		"Header.Encode":        func() { h.Encode(dst, key) },
		"Decode":               func() { _, _, _ = Decode(b) },
		"CheckValue":           func() { _ = CheckValue(h, value) },
		"KeyHash":              func() { _ = KeyHash(key) },
		"EncodePad":            func() { EncodePad(dst) },
		"SegmentHeader.Encode": func() { sh.Encode(seg) },
		"DecodeSegmentHeader":  func() { _, _ = DecodeSegmentHeader(seg) },
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
