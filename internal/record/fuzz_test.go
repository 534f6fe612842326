package record

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Each fuzzer takes a flag, repair: when set, it first recomputes the
// checksums in the input, so the fuzzer also explores what lies behind them
// (lengths, kinds, reserved bytes, re-encoding) instead of stopping at a
// checksum mismatch nearly every time.

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to the
// same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range recordSeeds() {
		f.Add(s.b, false)
		f.Add(s.b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, repair bool) {
		if repair {
			b = bytes.Clone(b) // the fuzzing engine owns its input
			repairRecord(b)
		}
		h, key, err := Decode(b)
		if err != nil {
			return
		}
		if h.Kind != KindPut && h.Kind != KindDelete && h.Kind != KindPad {
			t.Fatalf("accepted kind %d", h.Kind)
		}
		if len(key) != int(h.KeyLen) || h.KeyLen > MaxKeyLen {
			t.Fatalf("key of %d bytes for KeyLen %d", len(key), h.KeyLen)
		}
		dst := make([]byte, HeaderSize)
		h.Encode(dst, key)
		if !bytes.Equal(dst, b[:HeaderSize]) {
			t.Fatalf("re-encoded header\n%x\ndiffers from\n%x", dst, b[:HeaderSize])
		}
		if !bytes.Equal(key, b[HeaderSize:HeaderSize+len(key)]) {
			t.Fatal("key is not the bytes after the header")
		}
	})
}

// FuzzDecodeSegmentHeader: never panics; accepted headers re-encode to the
// same bytes.
func FuzzDecodeSegmentHeader(f *testing.F) {
	for _, s := range segmentHeaderSeeds() {
		f.Add(s.b, false)
		f.Add(s.b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, repair bool) {
		if repair && len(b) >= SegmentHeaderSize {
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[segOffCRC:], CRC(b[:segOffCRC]))
		}
		h, err := DecodeSegmentHeader(b)
		if err != nil {
			return
		}
		dst := make([]byte, SegmentHeaderSize)
		h.Encode(dst)
		if !bytes.Equal(dst, b[:SegmentHeaderSize]) {
			t.Fatalf("re-encoded segment header\n%x\ndiffers from\n%x", dst, b[:SegmentHeaderSize])
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

// repairRecord recomputes the header checksum of the record at the start of
// b, if b holds its key.
func repairRecord(b []byte) {
	if len(b) < HeaderSize {
		return
	}
	end := HeaderSize + int64(binary.LittleEndian.Uint32(b[offKeyLen:]))
	if end > int64(len(b)) {
		return
	}
	binary.LittleEndian.PutUint32(b[offHeaderCRC:], UpdateCRC(CRC(b[:offHeaderCRC]), b[HeaderSize:end]))
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
		binary.LittleEndian.PutUint32(t[trOffEntriesCRC:], CRC(b[int64(len(b)-TrailerSize)-n:len(b)-TrailerSize]))
	}
	binary.LittleEndian.PutUint32(t[trOffCRC:], CRC(t[:trOffCRC]))
}

type seed struct {
	name string
	b    []byte
}

func flip(b []byte, i int, x byte) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= x
	return c
}

func recordSeeds() []seed {
	put := encodeRecord(Header{Kind: KindPut, Flags: FlagHasChecksum, Sum: 7, CTime: 1700000000000000000}, []byte("user:42"), []byte("hello, world"))
	del := encodeRecord(Header{Kind: KindDelete, CTime: 1}, []byte("user:42"), nil)
	pad := make([]byte, 100)
	EncodePad(pad)
	return []seed{
		{"put", put},
		{"delete", del},
		{"pad", pad},
		{"empty_key", encodeRecord(Header{Kind: KindPut}, nil, []byte("v"))},
		{"put_flipped_magic", flip(put, 1, 0x01)},
		{"put_flipped_kind", flip(put, offKind, 0x04)},
		{"put_flipped_keylen", flip(put, offKeyLen+1, 0x10)},
		{"put_flipped_key", flip(put, HeaderSize+2, 0x40)},
		{"put_flipped_crc", flip(put, offHeaderCRC, 0x01)},
		{"put_truncated_header", put[:20]},
		{"put_truncated_key", put[:HeaderSize+3]},
		{"zeros", make([]byte, 64)},
	}
}

func segmentHeaderSeeds() []seed {
	valid := make([]byte, SegmentHeaderSize)
	SegmentHeader{Version: Version, Flags: SegmentFlagDirect, ID: 17, Created: 1700000000000000000}.Encode(valid)
	block := make([]byte, 4096)
	SegmentHeader{Version: Version, ID: 1}.Encode(block)
	return []seed{
		{"valid", valid},
		{"valid_block", block},
		{"flipped_magic", flip(valid, 0, 0x02)},
		{"flipped_version", flip(valid, segOffVersion, 0x02)},
		{"flipped_id", flip(valid, segOffID, 0x01)},
		{"flipped_crc", flip(valid, segOffCRC+2, 0x80)},
		{"truncated", valid[:40]},
	}
}

func footerSeeds() []seed {
	entries := []Entry{
		{Hash: KeyHash([]byte("a")), Offset: 4096, Length: 50, Kind: KindPut},
		{Hash: KeyHash([]byte("b")), Offset: 4146, Length: 33, Kind: KindDelete},
		{Hash: KeyHash([]byte("c")), Offset: 4179, Length: 4000, Kind: KindPut, Flags: FlagHasChecksum},
	}
	valid := AppendFooter(nil, entries, 8179)
	withRecords := AppendFooter(bytes.Repeat([]byte{0x5a}, 64), entries, 8179)
	n := len(entries) * EntrySize
	return []seed{
		{"valid", valid},
		{"valid_after_data", withRecords},
		{"empty", AppendFooter(nil, nil, 4096)},
		{"flipped_entry", flip(valid, 3, 0x01)},
		{"flipped_kind", flip(valid, 2*EntrySize+entOffKind, 0x03)},
		{"flipped_count", flip(valid, n+trOffCount, 0x01)},
		{"flipped_trailer_crc", flip(valid, n+trOffCRC, 0x01)},
		{"truncated_trailer", valid[:len(valid)-1]},
		{"truncated_entries", valid[5:]},
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestUpdateCorpus writes the seeds above as committed corpus files
// (go test -run TestUpdateCorpus -update-corpus), so `go test` replays them
// and `go test -fuzz` starts from them.
func TestUpdateCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	for fuzzer, seeds := range map[string][]seed{
		"FuzzDecode":              recordSeeds(),
		"FuzzDecodeSegmentHeader": segmentHeaderSeeds(),
		"FuzzDecodeFooter":        footerSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", fuzzer)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			for _, repair := range []bool{false, true} {
				data := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%v)\n", s.b, repair)
				name := "seed_" + s.name
				if repair {
					name += "_repaired"
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
