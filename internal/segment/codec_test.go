package segment

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
)

func TestSegmentHeader(t *testing.T) {
	h := Header{Version: Version, Flags: FlagDirect, ID: 123456, Created: 1700000000000000000}
	valid := make([]byte, 4096)
	for i := range valid {
		valid[i] = 0xaa // Encode must zero the reserved bytes itself
	}
	h.Encode(valid)
	got, err := DecodeHeader(valid)
	if err != nil || got != h {
		t.Fatalf("DecodeHeader = %+v, %v; want %+v", got, err, h)
	}
	if string(valid[:8]) != "BCSEGMT\x00" {
		t.Fatalf("magic on disk = %q", valid[:8])
	}
	mutate := func(i int, x byte) []byte {
		b := append([]byte(nil), valid[:HeaderLen]...)
		b[i] ^= x
		return b
	}
	withVersion := func(v uint32) []byte {
		b := make([]byte, HeaderLen)
		Header{Version: v, ID: 1}.Encode(b)
		return b
	}
	reservedSet := func() []byte {
		b := append([]byte(nil), valid[:HeaderLen]...)
		b[40] = 1
		b[segOffCRC], b[segOffCRC+1], b[segOffCRC+2], b[segOffCRC+3] = byte(record.CRC(b[:60])), byte(record.CRC(b[:60])>>8), byte(record.CRC(b[:60])>>16), byte(record.CRC(b[:60])>>24)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", valid[:63], record.ErrTruncated},
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
			if _, err := DecodeHeader(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeHeader = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFooterRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 3, 1000} {
		entries := make([]Entry, n)
		off := uint32(4096)
		for i := range entries {
			kind := record.KindPut
			if i%3 == 2 {
				kind = record.KindDelete
			}
			entries[i] = Entry{Hash: record.KeyHash(fmt.Appendf(nil, "key%d", i)), Offset: off, Length: uint32(40 + i), Kind: kind, Flags: uint8(i % 2)}
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
		{Hash: 1, Offset: 4096, Length: 40, Kind: record.KindPut},
		{Hash: 2, Offset: 4136, Length: 35, Kind: record.KindDelete, Flags: 1},
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
		{"short", valid[n : n+31], record.ErrTruncated},
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
		return b, record.CRC(b)
	}
	badKind, badKindCRC := withEntry(Entry{Hash: 1, Offset: 4096, Length: 40, Kind: record.KindPad})
	shortLen, shortLenCRC := withEntry(Entry{Hash: 1, Offset: 4096, Length: 31, Kind: record.KindPut})
	reserved, _ := withEntry(Entry{Hash: 1, Offset: 4096, Length: 40, Kind: record.KindPut})
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
		{"truncated", valid[:n-1], crc, record.ErrBadLength},
		{"pad entry", badKind, badKindCRC, record.ErrBadKind},
		{"record shorter than a header", shortLen, shortLenCRC, record.ErrBadLength},
		{"reserved", reserved, record.CRC(reserved), ErrReserved},
	} {
		t.Run("entries/"+tc.name, func(t *testing.T) {
			if _, err := DecodeEntries(tc.b, tc.crc); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeEntries = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCodecNoAllocations(t *testing.T) {
	hdr := make([]byte, HeaderLen)
	h := Header{Version: Version, ID: 7}
	h.Encode(hdr)
	for name, f := range map[string]func(){
		"Header.Encode": func() { h.Encode(hdr) },
		"DecodeHeader":  func() { _, _ = DecodeHeader(hdr) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %.1f times", name, n)
		}
	}
}
