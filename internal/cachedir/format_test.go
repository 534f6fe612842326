package cachedir

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/corruption"
)

// The layouts of the root package's identity and state records (identity.go, versions.go),
// repeated here so that the codec is tested on the bytes that are on disk.
var (
	identityFormat = Format{Name: "identity file", Magic: "BLOBCACH", Fields: []int{4, 4, 8}, Reserved: 4}
	stateFormat    = Format{Name: "state file", Magic: "BCSTATE\x00", Fields: []int{8, 8, 8}, Reserved: 4}
	boundFormat    = Format{Name: "bound file", Magic: "BCBOUND\x00", Fields: []int{8, 8, 4}, Reserved: 4}
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Records written by the builds before this package: the identity files of
// testdata/compat-format1 (version 1, a segment cache and a per-blob one), and an identity
// and a state record encoded by the codecs the root package had of its own.
var goldens = []struct {
	name   string
	format *Format
	hex    string
	fields []uint64
}{
	{"identity v1 segments", &identityFormat, "424c4f42434143480100000000000000" + "82b27ad73401eb18000000000375138b", []uint64{1, 0, 0x18eb0134d77ab282}},
	{"identity v1 per-blob", &identityFormat, "424c4f42434143480100000001000000" + "4adb74e33401eb1800000000b20d701e", []uint64{1, 1, 0x18eb0134e374db4a}},
	{"identity v2 per-blob", &identityFormat, "424c4f42434143480200000001000000" + "4adb74e33401eb18000000007515b447", []uint64{2, 1, 0x18eb0134e374db4a}},
	{"state", &stateFormat, "4243535441544500080706050403020118171615" + "14131211feffffffffffffff0000000055ff9f91", []uint64{0x0102030405060708, 0x1112131415161718, 0xfffffffffffffffe}},
	// 256 MiB of a 100 GiB file system, 800 per mille.
	{"bound", &boundFormat, "4243424f554e44000000001000000000" + "00000000190000002003000000000000327f0e88", []uint64{256 << 20, 100 << 30, 800}},
}

func TestFormatGolden(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			want := unhex(t, g.hex)
			if got := g.format.Encode(g.fields...); !bytes.Equal(got, want) {
				t.Fatalf("Encode:\n got %x\nwant %x", got, want)
			}
			fields, err := g.format.Decode(want)
			if err != nil || fmt.Sprint(fields) != fmt.Sprint(g.fields) {
				t.Fatalf("Decode: %x, %v; want %x", fields, err, g.fields)
			}
		})
	}
}

// TestFormatDamage: every kind of damage is refused with its own error, checked in the order
// the doc gives, and each is corruption.
func TestFormatDamage(t *testing.T) {
	good := identityFormat.Encode(2, 1, 12345)
	flip := func(b []byte, at int) []byte {
		b = bytes.Clone(b)
		b[at] ^= 0x10
		return b
	}
	versioned := identityFormat
	versioned.Check = func(f []uint64) error {
		if f[0] != 2 {
			return fmt.Errorf("format version %d, this build reads 2", f[0])
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		format *Format
		b      []byte
		want   error
	}{
		{"short", &identityFormat, good[:31], ErrLength},
		{"long", &identityFormat, append(bytes.Clone(good), 0), ErrLength},
		{"empty", &identityFormat, nil, ErrLength},
		{"magic", &identityFormat, flip(good, 3), ErrMagic},
		{"field", &identityFormat, flip(good, 17), ErrChecksum},
		{"reserved", &identityFormat, flip(good, 25), ErrReserved},
		{"crc", &identityFormat, flip(good, 30), ErrChecksum},
		{"refused by Check", &versioned, flip(good, 8), ErrBadField},
		// Check comes before the reserved bytes and the CRC, which the version flip also broke.
		{"Check before CRC", &versioned, flip(flip(good, 8), 25), ErrBadField},
		{"magic before Check", &versioned, flip(flip(good, 8), 0), ErrMagic},
		{"reserved before CRC", &identityFormat, flip(flip(good, 25), 29), ErrReserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.format.Decode(tc.b)
			if !errors.Is(err, tc.want) || !errors.Is(err, corruption.ErrCorrupt) {
				t.Fatalf("Decode: %v, want %v (corruption)", err, tc.want)
			}
		})
	}
	for i := range good {
		if _, err := identityFormat.Decode(flip(good, i)); err == nil {
			t.Fatalf("flip at byte %d not detected", i)
		}
	}
}

func TestFormatEncodePanics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      Format
		fields []uint64
	}{
		{"too few fields", identityFormat, []uint64{1, 2}},
		{"too many fields", identityFormat, []uint64{1, 2, 3, 4}},
		{"value wider than its field", identityFormat, []uint64{1 << 32, 0, 0}},
		{"width 2", Format{Name: "odd", Magic: "M", Fields: []int{2}}, []uint64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			tc.f.Encode(tc.fields...)
		})
	}
}
