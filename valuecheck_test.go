package blobcache

import (
	"errors"
	"hash"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// TestValueCheck writes a value's header through valueCheck.seal and reads it back through
// verify, with and without a blob checksum and a user hash, whole and in random chunks.
func TestValueCheck(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	value := make([]byte, 100_003)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	castagnoli := crc32.Checksum(value, crc32.MakeTable(crc32.Castagnoli))
	loc := index.Loc{Segment: 7, Offset: 4096, Length: 1}
	for _, tc := range []struct {
		name    string
		newHash func() hash.Hash32
		sum     bool
		wantSum uint32 // the header's Sum after seal
	}{
		{"no blob checksum", nil, false, 0},
		{"blob checksum is the crc32c", nil, true, castagnoli},
		{"user hash", crc32.NewIEEE, true, crc32.ChecksumIEEE(value)},
		{"user hash, no blob checksum", crc32.NewIEEE, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := newValueCheck(tc.newHash, tc.sum)
			whole.write(value)
			var hdr record.Header
			if err := whole.seal(&hdr, nil); err != nil {
				t.Fatal(err)
			}
			if hdr.ValueCRC != castagnoli || hdr.Sum != tc.wantSum || (hdr.Flags&record.FlagHasChecksum != 0) != tc.sum {
				t.Fatalf("sealed header: ValueCRC %#08x Sum %#08x flags %#x; want %#08x %#08x, checksum %v",
					hdr.ValueCRC, hdr.Sum, hdr.Flags, castagnoli, tc.wantSum, tc.sum)
			}
			read := func(v []byte, hdr record.Header) error {
				vc := newValueCheck(tc.newHash, hdr.Flags&record.FlagHasChecksum != 0)
				for len(v) > 0 {
					n := min(len(v), 1+rng.IntN(5000))
					vc.write(v[:n])
					v = v[n:]
				}
				return vc.verify(hdr, loc)
			}
			if err := read(value, hdr); err != nil {
				t.Fatalf("the value in chunks: %v", err)
			}

			// A caller's checksum: the right one is taken, any other refused.
			chunked := newValueCheck(tc.newHash, true)
			for v := value; len(v) > 0; {
				n := min(len(v), 1+rng.IntN(70_000))
				chunked.write(v[:n])
				v = v[n:]
			}
			right := castagnoli
			if tc.newHash != nil {
				right = crc32.ChecksumIEEE(value)
			}
			var h2 record.Header
			if err := chunked.seal(&h2, &right); err != nil || h2.Sum != right || h2.ValueCRC != castagnoli {
				t.Fatalf("seal with the right caller's checksum: %v, header %+v", err, h2)
			}
			wrong := right + 1
			h3 := record.Header{Flags: 0x80}
			if err := chunked.seal(&h3, &wrong); !errors.Is(err, ErrChecksumMismatch) || h3 != (record.Header{Flags: 0x80}) {
				t.Fatalf("seal with a wrong caller's checksum: %v, header %+v", err, h3)
			}

			// A damaged value, and a damaged blob checksum, are refused.
			bad := append([]byte(nil), value...)
			bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
			if err := read(bad, hdr); !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("a flipped bit: %v", err)
			}
			if err := read(value[:len(value)-1], hdr); !errors.Is(err, ErrChecksumMismatch) {
				t.Fatalf("a short value: %v", err)
			}
			badSum := hdr
			badSum.Sum ^= 1
			err := read(value, badSum)
			if tc.newHash != nil && tc.sum {
				if !errors.Is(err, ErrChecksumMismatch) {
					t.Fatalf("a wrong stored user checksum: %v", err)
				}
			} else if err != nil {
				// Without a user hash the blob checksum is the crc32c, checked as ValueCRC.
				t.Fatalf("the stored Sum checked without a user hash: %v", err)
			}
		})
	}
}

// TestValueCheckAllocs: without a user hash, checking a value allocates nothing.
func TestValueCheckAllocs(t *testing.T) {
	value := make([]byte, 4096)
	var hdr record.Header
	n := testing.AllocsPerRun(100, func() {
		vc := newValueCheck(nil, true)
		vc.write(value[:100])
		vc.write(value[100:])
		if vc.seal(&hdr, nil) != nil || vc.verify(hdr, index.Loc{}) != nil {
			t.Fatal("mismatch")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
