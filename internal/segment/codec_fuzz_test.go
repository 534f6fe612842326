package segment

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
)

// The header and footer fuzzers take a flag, repair: when set, they first
// recompute the checksums in the input, so the fuzzer also explores what lies
// behind them (lengths, kinds, reserved bytes, re-encoding) instead of
// stopping at a checksum mismatch nearly every time.

// FuzzDecodeHeader: never panics; accepted headers re-encode to the
// same bytes.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s.b, false)
		f.Add(s.b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, repair bool) {
		if repair && len(b) >= HeaderLen {
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[segOffCRC:], record.CRC(b[:segOffCRC]))
		}
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		dst := make([]byte, HeaderLen)
		h.Encode(dst)
		if !bytes.Equal(dst, b[:HeaderLen]) {
			t.Fatalf("re-encoded segment header\n%x\ndiffers from\n%x", dst, b[:HeaderLen])
		}
	})
}

// FuzzDecodeFooter takes b as the end of a segment: its last TrailerSize
// bytes are the trailer, the count entries before them the entries, as
// ReadFooter reads them. Never panics; accepted footers re-encode to the
// same bytes.
func FuzzDecodeFooter(f *testing.F) {
	for _, s := range footerSeeds() {
		f.Add(s.b, false)
		f.Add(s.b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, repair bool) {
		if repair {
			b = bytes.Clone(b)
			repairFooter(b)
		}
		if len(b) < TrailerSize {
			if _, _, _, err := DecodeTrailer(b); err == nil {
				t.Fatal("DecodeTrailer accepted a short buffer")
			}
			return
		}
		count, dataEnd, crc, err := DecodeTrailer(b[len(b)-TrailerSize:])
		if err != nil {
			return
		}
		n := int64(count) * EntrySize
		if n > int64(len(b)-TrailerSize) {
			return
		}
		footer := b[int64(len(b))-n-TrailerSize:]
		entries, err := DecodeEntries(footer[:n], crc)
		if err != nil {
			return
		}
		if len(entries) != int(count) {
			t.Fatalf("%d entries for count %d", len(entries), count)
		}
		if got := AppendFooter(nil, entries, dataEnd); !bytes.Equal(got, footer) {
			t.Fatalf("re-encoded footer\n%x\ndiffers from\n%x", got, footer)
		}
	})
}

// repairFooter recomputes the checksums of the footer ending b, if b holds
// its entries.
func repairFooter(b []byte) {
	if len(b) < TrailerSize {
		return
	}
	t := b[len(b)-TrailerSize:]
	n := int64(binary.LittleEndian.Uint32(t[trOffCount:])) * EntrySize
	if n <= int64(len(b)-TrailerSize) {
		binary.LittleEndian.PutUint32(t[trOffEntriesCRC:], record.CRC(b[int64(len(b)-TrailerSize)-n:len(b)-TrailerSize]))
	}
	binary.LittleEndian.PutUint32(t[trOffCRC:], record.CRC(t[:trOffCRC]))
}

func headerSeeds() []codecSeed {
	valid := make([]byte, HeaderLen)
	Header{Version: Version, Flags: FlagDirect, ID: 17, Created: 1700000000000000000}.Encode(valid)
	block := make([]byte, 4096)
	Header{Version: Version, ID: 1}.Encode(block)
	return []codecSeed{
		{"valid", valid},
		{"valid_block", block},
		{"flipped_magic", flipByteIn(valid, 0, 0x02)},
		{"flipped_version", flipByteIn(valid, segOffVersion, 0x02)},
		{"flipped_id", flipByteIn(valid, segOffID, 0x01)},
		{"flipped_crc", flipByteIn(valid, segOffCRC+2, 0x80)},
		{"truncated", valid[:40]},
	}
}

func footerSeeds() []codecSeed {
	entries := []Entry{
		{Hash: record.KeyHash([]byte("a")), Offset: 4096, Length: 50, Kind: record.KindPut},
		{Hash: record.KeyHash([]byte("b")), Offset: 4146, Length: 33, Kind: record.KindDelete},
		{Hash: record.KeyHash([]byte("c")), Offset: 4179, Length: 4000, Kind: record.KindPut, Flags: record.FlagHasChecksum},
	}
	valid := AppendFooter(nil, entries, 8179)
	withRecords := AppendFooter(bytes.Repeat([]byte{0x5a}, 64), entries, 8179)
	n := len(entries) * EntrySize
	return []codecSeed{
		{"valid", valid},
		{"valid_after_data", withRecords},
		{"empty", AppendFooter(nil, nil, 4096)},
		{"flipped_entry", flipByteIn(valid, 3, 0x01)},
		{"flipped_kind", flipByteIn(valid, 2*EntrySize+entOffKind, 0x03)},
		{"flipped_count", flipByteIn(valid, n+trOffCount, 0x01)},
		{"flipped_trailer_crc", flipByteIn(valid, n+trOffCRC, 0x01)},
		{"truncated_trailer", valid[:len(valid)-1]},
		{"truncated_entries", valid[5:]},
	}
}

type codecSeed struct {
	name string
	b    []byte
}

func flipByteIn(b []byte, i int, x byte) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= x
	return c
}
