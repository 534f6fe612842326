package vfs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/cputime"
)

// openDirectReader writes data to a new file through the page cache and returns a DirectReader
// of it, skipping where the platform or file system has no O_DIRECT.
func openDirectReader(t *testing.T, data []byte) *DirectReader {
	t.Helper()
	name := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := NewDirectReader(openDirectOrSkip(t, name, os.O_RDONLY))
	t.Cleanup(func() { r.Close() })
	return r
}

// TestDirectReader reads random ranges, into random splits of unaligned memory, including
// ranges longer than a chunk and ranges that cross or start at the end of the file, and compares
// with the bytes written (through the page cache, which direct reads must see).
func TestDirectReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	size := 3*DirectReadChunk + 12345 // not a multiple of the alignment
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	r := openDirectReader(t, data)
	mem := AlignedBuffer(DirectReadChunk*3 + 2*DirectIOAlignment)
	for i := range 600 {
		var off, n int
		switch i % 4 {
		case 0: // small
			off, n = rng.IntN(size), rng.IntN(9000)
		case 1: // about a 1 MiB value with its header, unaligned
			off, n = rng.IntN(size-(1<<20)), 1<<20+rng.IntN(5000)
		case 2: // several chunks
			off, n = rng.IntN(size/3), DirectReadChunk+rng.IntN(2*DirectReadChunk)
		default: // across the end of the file
			off, n = size-rng.IntN(9000), rng.IntN(20000)
		}
		want := data[min(off, size):min(off+n, size)]
		// Split the destination into up to three buffers, at odd memory addresses or (every
		// other read) at addresses congruent with the file offset, so the aligned middle is read
		// in place.
		at := rng.IntN(DirectIOAlignment)
		if i%2 == 1 {
			at = off % DirectIOAlignment
		}
		dst := mem[at : at+n]
		var bufs [][]byte
		for rest := dst; ; {
			if len(rest) == 0 || len(bufs) == 2 {
				bufs = append(bufs, rest)
				break
			}
			k := rng.IntN(len(rest) + 1)
			bufs = append(bufs, rest[:k])
			rest = rest[k:]
		}
		for j := range dst {
			dst[j] = 0xee
		}
		got, err := r.ReadvAt(bufs, int64(off))
		if got != len(want) || !bytes.Equal(dst[:got], want) {
			t.Fatalf("read %d bytes at %d into %d buffers: got %d bytes (want %d), equal %v, err %v",
				n, off, len(bufs), got, len(want), bytes.Equal(dst[:got], want), err)
		}
		switch {
		case len(want) < n && err != io.EOF:
			t.Fatalf("read %d bytes at %d, %d before the end: err %v, want io.EOF", n, off, len(want), err)
		case len(want) == n && err != nil:
			t.Fatalf("read %d bytes at %d: %v", n, off, err)
		}
	}
	// ReadAt is ReadvAt of one buffer.
	p := make([]byte, 100)
	if n, err := r.ReadAt(p, 4095); n != 100 || err != nil || !bytes.Equal(p, data[4095:4195]) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if n, err := r.ReadAt(p[:0], int64(size)+5); n != 0 || err != nil {
		t.Fatalf("empty ReadAt past the end = %d, %v", n, err)
	}
}

// TestDirectReaderInPlace checks that a buffer congruent with the file is read with one system
// call and no bounce for its aligned middle: the header-and-value shape of a hit (a short
// buffer, then a long one that starts at an aligned offset) and a single unaligned long read.
func TestDirectReaderInPlace(t *testing.T) {
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	r := openDirectReader(t, data)
	bounce := bouncePool.Get().(*bounce)
	value := AlignedBuffer(1 << 20)
	hk := make([]byte, 40)
	const valueOff = 1 << 20 // aligned in the file, like a large value in a direct batch
	for _, tc := range []struct {
		name string
		bufs [][]byte
		off  int64
	}{
		{"header and value", [][]byte{hk, value[:1<<20-100]}, valueOff - 40},
		{"unaligned both ends", [][]byte{value[123 : 1<<20-5]}, valueOff + 123},
		// Two buffers read in place, each with bounce blocks before its middle: the bounce
		// blocks of the second must not reuse those of the first.
		{"two in place", [][]byte{AlignedBuffer(16384)[100 : 100+10000], AlignedBuffer(16384)[10100%DirectIOAlignment : 10100%DirectIOAlignment+10000]}, 100},
	} {
		for _, b := range tc.bufs {
			clear(b)
		}
		total := 0
		for _, b := range tc.bufs {
			total += len(b)
		}
		if !r.readvDirect(tc.bufs, tc.off, total, bounce) {
			t.Fatalf("%s: not read in place", tc.name)
		}
		pos := tc.off
		for i, b := range tc.bufs {
			if !bytes.Equal(b, data[pos:pos+int64(len(b))]) {
				t.Fatalf("%s: buffer %d differs", tc.name, i)
			}
			pos += int64(len(b))
		}
	}
	// Not congruent: refused, and ReadvAt falls back to bounce.
	if r.readvDirect([][]byte{value[1:4097]}, valueOff, 4096, bounce) {
		t.Fatal("a buffer one byte off its file alignment was read in place")
	}
	// Ending past the end of the file: refused, and ReadvAt reports io.EOF.
	tail := value[:2*DirectIOAlignment]
	off := int64(len(data) - DirectIOAlignment)
	if r.readvDirect([][]byte{tail}, off, len(tail), bounce) {
		t.Fatal("a read past the end of the file was reported whole")
	}
	if n, err := r.ReadAt(tail, off); n != DirectIOAlignment || err != io.EOF || !bytes.Equal(tail[:n], data[off:]) {
		t.Fatalf("ReadAt past the end = %d, %v", n, err)
	}
}

// TestDirectReaderBypassesCache checks the reader really uses O_DIRECT: the kernel refuses a
// misaligned read on the descriptor it wraps.
func TestDirectReaderBypassesCache(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("O_DIRECT alignment is enforced on Linux")
	}
	r := openDirectReader(t, make([]byte, 3*DirectIOAlignment))
	if _, err := r.f.ReadAt(make([]byte, 100), 1); err == nil {
		t.Fatal("misaligned read of the descriptor succeeded; is it opened with O_DIRECT?")
	}
	if n, err := r.ReadAt(make([]byte, 100), 1); n != 100 || err != nil {
		t.Fatalf("DirectReader.ReadAt = %d, %v", n, err)
	}
}

// BenchmarkDirectReaderReadAt1MiB reads a 1 MiB range at an unaligned offset: one system call
// and one copy out of the bounce buffer. Compare BenchmarkDirectReaderReadAt1MiBInPlace (the
// same read into a congruent buffer: no copy) and BenchmarkBufferedReadAt1MiB (the same read
// through the page cache, hot). Wall time is the device's; cpu-ns/op is the CPU (user + system)
// the process spent per read.
func BenchmarkDirectReaderReadAt1MiB(b *testing.B) {
	benchReadAt1MiB(b, true, false)
}

// BenchmarkDirectReaderReadAt1MiBInPlace reads 1 MiB at an aligned offset into an aligned
// buffer: the device writes it in place.
func BenchmarkDirectReaderReadAt1MiBInPlace(b *testing.B) {
	benchReadAt1MiB(b, true, true)
}

// BenchmarkBufferedReadAt1MiB is BenchmarkDirectReaderReadAt1MiB through the page cache.
func BenchmarkBufferedReadAt1MiB(b *testing.B) {
	benchReadAt1MiB(b, false, false)
}

func benchReadAt1MiB(b *testing.B, direct, inPlace bool) {
	const size = 64 << 20
	name := filepath.Join(b.TempDir(), "file")
	if err := os.WriteFile(name, make([]byte, size), 0o644); err != nil {
		b.Fatal(err)
	}
	var f interface {
		ReadAt([]byte, int64) (int, error)
		Close() error
	}
	if direct {
		d, err := Default.OpenDirect(name, os.O_RDONLY, 0)
		if err != nil {
			b.Skip(err)
		}
		f = NewDirectReader(d)
	} else {
		o, err := Default.OpenFile(name, os.O_RDONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		f = o
	}
	defer f.Close()
	p := AlignedBuffer(1 << 20)
	rng := rand.New(rand.NewPCG(3, 4))
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	before, cpuOK := cputime.Process()
	for b.Loop() {
		off := int64(rng.IntN(size-(2<<20))) + 100
		if inPlace {
			off &^= DirectIOAlignment - 1
		}
		if _, err := f.ReadAt(p, off); err != nil {
			b.Fatal(err)
		}
	}
	if after, _ := cputime.Process(); cpuOK {
		b.ReportMetric(float64(after-before)/float64(b.N), "cpu-ns/op")
	}
}
