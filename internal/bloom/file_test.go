package bloom

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// hideLen hides Len and Seek from Decode, so it cannot know the input's size.
type hideLen struct{ r io.Reader }

func (h hideLen) Read(p []byte) (int, error) { return h.r.Read(p) }

func filled(r *rand.Rand, sizedFor uint64, bitsPerKey, keys int) (*Filter, []uint64) {
	f := New(sizedFor, bitsPerKey)
	hs := randHashes(r, keys)
	for _, h := range hs {
		f.Add(h)
	}
	return f, hs
}

func encode(t testing.TB, f *Filter, stamp Stamp) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := f.WriteTo(&buf, stamp)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(buf.Len()) || n != headerSize+f.Bytes()+crcSize {
		t.Fatalf("WriteTo returned %d, wrote %d, want %d", n, buf.Len(), headerSize+f.Bytes()+crcSize)
	}
	return buf.Bytes()
}

func sameFilter(t *testing.T, got, want *Filter) {
	t.Helper()
	if got.Words() != want.Words() || got.bits.Words() != want.bits.Words() {
		t.Fatalf("decoded %d words (set of %d); want %d (set of %d)",
			got.Words(), got.bits.Words(), want.Words(), want.bits.Words())
	}
	for w := range want.bits.Words() {
		if g, e := got.bits.LoadWord(w), want.bits.LoadWord(w); g != e {
			t.Fatalf("word %d: decoded %#x, want %#x", w, g, e)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	r := newRand(t)
	tmp := t.TempDir()
	for _, tc := range []struct {
		sizedFor   uint64
		bitsPerKey int
		keys       int
	}{
		{1, 10, 0},
		{1, 10, 1},
		{1000, 10, 1000},
		{100_000, 16, 100_000}, // ~200 KiB: past chunkSize, several chunks
		{1000, 64, 500},
		{1 << 20, 12, 10_000}, // one huge page (2 MiB)
	} {
		f, hs := filled(r, tc.sizedFor, tc.bitsPerKey, tc.keys)
		stamp := Stamp{r.Uint64(), r.Uint64(), 0, ^uint64(0)}
		data := encode(t, f, stamp)
		path := filepath.Join(tmp, fmt.Sprintf("bloom-%d.dat", len(data)))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		readers := map[string]func() io.Reader{
			"bytes":      func() io.Reader { return bytes.NewReader(data) },
			"unknownLen": func() io.Reader { return hideLen{bytes.NewReader(data)} },
			"oneByte":    func() io.Reader { return iotest.OneByteReader(hideLen{bytes.NewReader(data)}) },
			"half":       func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
			"dataErr":    func() io.Reader { return iotest.DataErrReader(hideLen{bytes.NewReader(data)}) },
			"file": func() io.Reader {
				fh, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fh.Close() })
				return fh
			},
		}
		for name, open := range readers {
			if name == "oneByte" && len(data) > 1<<16 {
				continue // slow, and the small cases cover it
			}
			g, gotStamp, err := Decode(open())
			if err != nil {
				t.Fatalf("%+v via %s: Decode: %v", tc, name, err)
			}
			if gotStamp != stamp {
				t.Fatalf("%+v via %s: stamp %x, want %x", tc, name, gotStamp, stamp)
			}
			sameFilter(t, g, f)
			for _, h := range hs {
				if !g.Test(h) {
					t.Fatalf("%+v via %s: decoded filter lost %#x", tc, name, h)
				}
			}
		}
	}
}

// smallFile is a valid file of 16 words (188 bytes).
func smallFile(t testing.TB) []byte {
	f := New(100, 10)
	r := rand.New(rand.NewPCG(7, 7))
	for range 100 {
		f.Add(r.Uint64())
	}
	return encode(t, f, Stamp{1, 2, 3, 4})
}

func decodeBoth(data []byte) (known, unknown error) {
	_, _, known = Decode(bytes.NewReader(data))
	_, _, unknown = Decode(hideLen{bytes.NewReader(data)})
	return known, unknown
}

// TestCorruptionDetected flips every bit, truncates at every length and
// appends a byte to a small file: each must fail with ErrCorrupt.
func TestCorruptionDetected(t *testing.T) {
	data := smallFile(t)
	if len(data) != headerSize+16*8+crcSize {
		t.Fatalf("small file is %d bytes", len(data))
	}
	check := func(what string, bad []byte) {
		t.Helper()
		known, unknown := decodeBoth(bad)
		for _, err := range []error{known, unknown} {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: Decode error %v, want ErrCorrupt", what, err)
			}
		}
	}
	bad := make([]byte, len(data))
	for i := range data {
		for bit := range 8 {
			copy(bad, data)
			bad[i] ^= 1 << bit
			check(fmt.Sprintf("bit %d of byte %d flipped", bit, i), bad)
		}
		copy(bad, data)
		bad[i] = ^bad[i]
		check(fmt.Sprintf("byte %d inverted", i), bad)
	}
	for n := range len(data) {
		check(fmt.Sprintf("truncated to %d bytes", n), data[:n])
		known, unknown := decodeBoth(data[:n])
		if !errors.Is(known, io.ErrUnexpectedEOF) || !errors.Is(unknown, io.ErrUnexpectedEOF) {
			t.Fatalf("truncated to %d bytes: %v / %v, want io.ErrUnexpectedEOF too", n, known, unknown)
		}
	}
	check("trailing byte", append(bytes.Clone(data), 0))
}

// TestDecodeCheckOrder checks that each check fires on its own, in the
// documented order, with a message saying which.
func TestDecodeCheckOrder(t *testing.T) {
	good := smallFile(t)
	put32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	put64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
	}
	for _, tc := range []struct {
		name string
		edit []func([]byte)
		want string
	}{
		{"magic before version", []func([]byte){func(b []byte) { b[0] = 'X' }, put32(8, 3)}, "bad magic"},
		{"version before k", []func([]byte){put32(8, 3), put32(12, 0)}, "unsupported version 3"},
		{"version 1", []func([]byte){put32(8, 1)}, "unsupported version 1 at offset 8 (the 512-bit-block layout"},
		{"version 0", []func([]byte){put32(8, 0)}, "unsupported version 0"},
		{"k zero", []func([]byte){put32(12, 0)}, "k 0 at offset 12, want 5"},
		{"k 6", []func([]byte){put32(12, 6)}, "k 6 at offset 12, want 5"},
		{"k 4", []func([]byte){put32(12, 4)}, "k 4 at offset 12, want 5"},
		{"k before nwords", []func([]byte){put32(12, 99), put64(16, 0)}, "k 99"},
		{"nwords zero", []func([]byte){put64(16, 0)}, "nwords 0"},
		{"nwords too big", []func([]byte){put64(16, maxWords+1)}, "nwords 1073741825 at offset 16 not in [1, 1073741824]"},
		{"nwords not whole huge pages", []func([]byte){put64(16, 131_073)}, "nwords 131073 at offset 16 is not a filter size"},
		{"nwords before length", []func([]byte){put64(16, 3*262_144+1)}, "not a filter size"},
		{"nwords past input", []func([]byte){put64(16, 17)}, "truncated"},
		{"nwords huge pages past input", []func([]byte){put64(16, 262_144)}, "truncated"},
		{"nwords before checksum", []func([]byte){put64(16, 17), func(b []byte) { b[100] ^= 1 }}, "truncated"},
		{"checksum", []func([]byte){func(b []byte) { b[100] ^= 1 }}, "checksum at offset 184: stored"},
		{"stamp is checksummed", []func([]byte){put64(24, 5)}, "checksum"},
	} {
		bad := bytes.Clone(good)
		for _, e := range tc.edit {
			e(bad)
		}
		known, unknown := decodeBoth(bad)
		for _, err := range []error{known, unknown} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %q, want ErrCorrupt mentioning %q", tc.name, err, tc.want)
			}
		}
	}
}

// TestDecodeHugeClaim checks that a header claiming the maximum size, followed
// by little data, fails without allocating anywhere near that size.
func TestDecodeHugeClaim(t *testing.T) {
	data := smallFile(t)
	binary.LittleEndian.PutUint64(data[16:], maxWords) // claims 8 GiB
	data = append(data, make([]byte, 1<<20)...)        // but 1 MiB follows
	for name, r := range map[string]io.Reader{
		"bytes":      bytes.NewReader(data),
		"unknownLen": hideLen{bytes.NewReader(data)},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _, err := Decode(r)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: error %v, want ErrCorrupt", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("%s: Decode allocated %d bytes for a %d-byte input", name, alloc, len(data))
		}
	}
}

var errDisk = errors.New("disk on fire")

// TestDecodeIOError checks that a failing reader's error comes back, not
// disguised as corruption.
func TestDecodeIOError(t *testing.T) {
	data := smallFile(t)
	for _, n := range []int{0, 10, headerSize, 100, len(data) - 2, len(data)} {
		r := io.MultiReader(bytes.NewReader(data[:n]), iotest.ErrReader(errDisk))
		_, _, err := Decode(r)
		if !errors.Is(err, errDisk) || errors.Is(err, ErrCorrupt) {
			t.Errorf("reader failing after %d bytes: error %v, want errDisk and not ErrCorrupt", n, err)
		}
	}
}

type failWriter struct {
	n int // bytes accepted before failing
}

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, errDisk
}

func TestWriteToError(t *testing.T) {
	f := New(100_000, 10) // several chunks
	size := headerSize + f.Bytes() + crcSize
	for _, n := range []int{0, 100, chunkSize, int(size) - 1} {
		got, err := f.WriteTo(&failWriter{n: n}, Stamp{})
		if !errors.Is(err, errDisk) || got != int64(n) {
			t.Errorf("writer failing after %d bytes: WriteTo = %d, %v; want %d, errDisk", n, got, err, n)
		}
	}
}

// TestWriteToConcurrentAdd checks that a file written while keys are added
// decodes, holds every key added before WriteTo began, and is checksummed.
func TestWriteToConcurrentAdd(t *testing.T) {
	r := newRand(t)
	f, before := filled(r, 50_000, 10, 25_000)
	during := randHashes(r, 25_000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, h := range during {
			f.Add(h)
		}
	}()
	var buf bytes.Buffer
	if _, err := f.WriteTo(&buf, Stamp{9}); err != nil {
		t.Fatal(err)
	}
	<-done
	g, _, err := Decode(&buf)
	if err != nil {
		t.Fatalf("Decode of a file written during Add: %v", err)
	}
	for _, h := range before {
		if !g.Test(h) {
			t.Fatalf("key added before WriteTo missing from the file")
		}
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the FuzzDecode seed corpus in testdata")

// seedInputs are the FuzzDecode seeds, also committed under
// testdata/fuzz/FuzzDecode (go test ./internal/bloom -run TestSeedCorpus -args -update-corpus).
func seedInputs(t testing.TB) map[string][]byte {
	good := smallFile(t)
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 0x10; return b }
	version1 := bytes.Clone(good) // as the 512-bit-block filter wrote it: 2 blocks, k 6
	binary.LittleEndian.PutUint32(version1[8:], 1)
	binary.LittleEndian.PutUint32(version1[12:], 6)
	binary.LittleEndian.PutUint64(version1[16:], 2)
	binary.LittleEndian.PutUint32(version1[len(version1)-4:],
		crc32.Checksum(version1[:len(version1)-4], castagnoli))
	return map[string][]byte{
		"valid":           good,
		"valid-1word":     encode(t, New(1, 10), Stamp{}),
		"version-1":       version1,
		"truncated-hdr":   good[:20],
		"truncated-words": good[:100],
		"truncated-crc":   good[:len(good)-1],
		"flip-version":    flip(8),
		"flip-k":          flip(12),
		"flip-nwords":     flip(16),
		"flip-word":       flip(120),
		"flip-crc":        flip(len(good) - 1),
		"empty":           {},
	}
}

func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for name, data := range seedInputs(t) {
		path := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		if *updateCorpus {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale or missing (err %v): run go test ./internal/bloom -run TestSeedCorpus -args -update-corpus", path, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, data := range seedInputs(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, stamp, err := Decode(bytes.NewReader(data))
		_, _, err2 := Decode(hideLen{bytes.NewReader(data)})
		if (err == nil) != (err2 == nil) {
			t.Fatalf("known-length Decode: %v; unknown-length Decode: %v", err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("in-memory input failed with %v, not ErrCorrupt", err)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := g.WriteTo(&buf, stamp); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatalf("decoded input re-encodes differently:\n in %x\nout %x", data, buf.Bytes())
		}
	})
}
