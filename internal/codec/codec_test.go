package codec

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/seed57392e9e/blobcache/internal/corpus"
)

// text returns n bytes of Go source (internal/corpus): real text.
func text(t testing.TB, n int) []byte {
	t.Helper()
	b, err := corpus.GoSource(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func compress(t testing.TB, c Codec, value []byte) []byte {
	t.Helper()
	cp, err := NewCompressor(c)
	if err != nil {
		t.Fatal(err)
	}
	stored, ok := cp.Compress(nil, value)
	if !ok {
		t.Fatalf("%v: %d bytes of text did not compress", c, len(value))
	}
	return stored
}

// TestRoundTrip compresses text of lengths around the block size with both codecs, and reads
// back the whole value and random ranges, each from the blocks Cover and Span name alone.
func TestRoundTrip(t *testing.T) {
	text := text(t, 3*BlockSize+1000)
	rng := mrand.New(mrand.NewPCG(1, 2))
	for _, c := range []Codec{Zstd, S2} {
		for _, n := range []int{4096, 5000, BlockSize - 1, BlockSize, BlockSize + 1, 2*BlockSize + 7, len(text)} {
			value := text[:n]
			stored := compress(t, c, value)
			if len(stored) >= n {
				t.Fatalf("%v %d: stored %d bytes", c, n, len(stored))
			}
			got := make([]byte, n)
			if err := DecodeAll(c, got, stored); err != nil {
				t.Fatalf("%v %d: %v", c, n, err)
			}
			if !bytes.Equal(got, value) {
				t.Fatalf("%v %d: whole value differs", c, n)
			}
			tab, err := ParseTable(stored, int64(len(stored)), int64(n))
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				off := rng.Int64N(int64(n))
				end := off + 1 + rng.Int64N(int64(n)-off)
				first, last := tab.Cover(off, end)
				s, e := tab.Span(first, last)
				dst := make([]byte, end-off)
				if err := tab.Decode(c, dst, off, stored[s:e], first, last); err != nil {
					t.Fatalf("%v %d [%d,%d): %v", c, n, off, end, err)
				}
				if !bytes.Equal(dst, value[off:end]) {
					t.Fatalf("%v %d [%d,%d): bytes differ", c, n, off, end)
				}
			}
		}
	}
}

// TestIncompressible: random bytes, and values too short to gain, are declined (stored as
// given by the caller), and dst is handed back unchanged.
func TestIncompressible(t *testing.T) {
	cp, err := NewCompressor(Zstd)
	if err != nil {
		t.Fatal(err)
	}
	dst := []byte("keep")
	for _, v := range [][]byte{random(400 << 10), random(2 * BlockSize), bytes.Repeat([]byte("a"), MinValue-1)} {
		out, ok := cp.Compress(dst, v)
		if ok || string(out) != "keep" {
			t.Fatalf("%d bytes: compressed %v, dst %q", len(v), ok, out[:min(len(out), 8)])
		}
	}
	// A value whose sample compresses but whose whole does not is measured and declined too.
	v := random(BlockSize * 2)
	mid := len(v)/2 - sampleLen/2
	clear(v[mid : mid+sampleLen])
	if out, ok := cp.Compress(nil, v); ok {
		t.Fatalf("a value %d bytes long that compresses to %d was kept compressed", len(v), len(out))
	}
}

// TestZstdStream checks the stored form of a zstd value against decoders nobody here wrote:
// klauspost's streaming decoder and, where installed, the zstd command. Both must skip the
// table (a skippable frame) and return the value: this is what lets the server hand the stored
// bytes to an HTTP client that accepts Content-Encoding zstd.
func TestZstdStream(t *testing.T) {
	value := text(t, 2*BlockSize+12345)
	stored := compress(t, Zstd, value)
	d, err := zstd.NewReader(bytes.NewReader(stored))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(d)
	d.Close()
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("zstd stream decoder: %d bytes, %v", len(got), err)
	}
	bin, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the zstd command is not installed (scripts/test.sh installs it in CI)")
		}
		t.Skip("no zstd command")
	}
	cmd := exec.Command(bin, "-d", "-c")
	cmd.Stdin = bytes.NewReader(stored)
	out, err := cmd.Output()
	if err != nil || !bytes.Equal(out, value) {
		t.Fatalf("zstd -d: %d bytes, %v", len(out), err)
	}
}

// TestDamage flips each of many bytes of a stored value in turn: every read of the whole value
// or of a range either fails with ErrCorrupt or returns the right bytes (a flip in a block the
// range does not read), never wrong ones.
func TestDamage(t *testing.T) {
	value := text(t, BlockSize+5000)
	for _, c := range []Codec{Zstd, S2} {
		stored := compress(t, c, value)
		step := max(1, len(stored)/300)
		for i := 0; i < len(stored); i += step {
			bad := bytes.Clone(stored)
			bad[i] ^= 0x10
			got := make([]byte, len(value))
			err := DecodeAll(c, got, bad)
			if err == nil {
				t.Fatalf("%v: a flip at %d of %d went unnoticed", c, i, len(stored))
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: flip at %d: %v, not ErrCorrupt", c, i, err)
			}
			tab, err := ParseTable(bad, int64(len(bad)), int64(len(value)))
			if err != nil {
				continue
			}
			dst := make([]byte, 100)
			off := int64(BlockSize + 10) // in block 1
			s, e := tab.Span(1, 1)
			if err := tab.Decode(c, dst, off, bad[s:e], 1, 1); err == nil && !bytes.Equal(dst, value[off:off+100]) {
				t.Fatalf("%v: flip at %d: a range read returned wrong bytes", c, i)
			}
		}
	}
}

// TestTableChecks: lengths the record's header gives that do not match the table are refused.
func TestTableChecks(t *testing.T) {
	value := text(t, 3000)
	stored := compress(t, S2, value)
	for _, tc := range []struct {
		name         string
		storedLen, n int64
		b            []byte
	}{
		{"short", int64(len(stored)), 3000, stored[:6]},
		{"value length", int64(len(stored)), 3001, stored},
		{"stored length", int64(len(stored)) + 1, 3000, stored},
		{"no value", int64(len(stored)), 0, stored},
	} {
		if _, err := ParseTable(tc.b, tc.storedLen, tc.n); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
