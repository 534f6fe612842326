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
		n := h.Size()
		dst := make([]byte, n)
		h.Encode(dst, key)
		if !bytes.Equal(dst, b[:n]) {
			t.Fatalf("re-encoded header\n%x\ndiffers from\n%x", dst, b[:n])
		}
		if !bytes.Equal(key, b[n:n+int64(len(key))]) {
			t.Fatal("key is not the bytes after the header")
		}
	})
}

// repairRecord recomputes the header checksum of the record at the start of
// b, if b holds its key.
func repairRecord(b []byte) {
	if len(b) < LegacyHeaderSize {
		return
	}
	size := int64(LegacyHeaderSize)
	if b[offFlags]&flagMeta != 0 {
		size = HeaderSize
	}
	end := size + int64(binary.LittleEndian.Uint32(b[offKeyLen:]))
	if end > int64(len(b)) {
		return
	}
	crc := CRC(b[:offHeaderCRC])
	if size == HeaderSize {
		crc = UpdateCRC(crc, b[offVersion:HeaderSize])
	}
	binary.LittleEndian.PutUint32(b[offHeaderCRC:], UpdateCRC(crc, b[size:end]))
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
	put := encodeRecord(Header{Kind: KindPut, Flags: FlagHasChecksum, Sum: 7, CTime: 1700000000000000000,
		Version: 99, Expires: 1800000000000000000, ClientFlags: 0xcafe}, []byte("user:42"), []byte("hello, world"))
	legacy := encodeRecord(Header{Kind: KindPut, CTime: 1700000000000000000, Legacy: true}, []byte("user:42"), []byte("hello, world"))
	del := encodeRecord(Header{Kind: KindDelete, CTime: 1}, []byte("user:42"), nil)
	pad := make([]byte, 100)
	EncodePad(pad)
	return []seed{
		{"put", put},
		{"put_attrs", encodeRecord(Header{Kind: KindPut, Version: 5, AttrLen: 3, AttrCRC: CRC([]byte("a=b"))}, []byte("k"), []byte("v"))},
		{"legacy_put", legacy},
		{"legacy_put_flipped_flags", flip(legacy, offFlags, flagMeta)},
		{"put_reserved", flip(put, offDataLen, 0x01)},
		{"put_compressed", encodeRecord(Header{Kind: KindPut, Version: 6, Codec: 1, DataLen: 4000}, []byte("k"), []byte("stored"))},
		{"put_flipped_expires", flip(put, offExpires+3, 0x10)},
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

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestUpdateCorpus writes the seeds above as committed corpus files
// (go test -run TestUpdateCorpus -update-corpus), so `go test` replays them
// and `go test -fuzz` starts from them.
func TestUpdateCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	for fuzzer, seeds := range map[string][]seed{
		"FuzzDecode": recordSeeds(),
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
