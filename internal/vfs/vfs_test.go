package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func openTemp(t testing.TB) File {
	t.Helper()
	f, err := Default.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// split cuts data into n buffers of random lengths (some empty) that share
// its memory.
func split(rng *rand.Rand, data []byte, n int) [][]byte {
	cuts := make([]int, 0, n+1)
	cuts = append(cuts, 0)
	for range n - 1 {
		cuts = append(cuts, rng.IntN(len(data)+1))
	}
	cuts = append(cuts, len(data))
	for i := 1; i < len(cuts); i++ { // insertion sort keeps it obvious
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	bufs := make([][]byte, 0, n)
	for i := 1; i < len(cuts); i++ {
		bufs = append(bufs, data[cuts[i-1]:cuts[i]])
	}
	return bufs
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestVectoredRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, tc := range []struct {
		name     string
		size     int
		writeN   int
		readN    int
		writeOff int64
	}{
		{"one buffer", 1000, 1, 1, 0},
		{"few buffers", 10000, 7, 13, 4096},
		{"exactly IOV_MAX", 100000, iovMax, iovMax, 1},
		{"more than IOV_MAX", 300000, 3*iovMax + 17, 2*iovMax + 5, 12345},
		{"empty", 0, 3, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openTemp(t)
			data := randomBytes(rng, tc.size)
			wbufs := split(rng, data, tc.writeN)
			n, err := f.WritevAt(wbufs, tc.writeOff)
			if err != nil || n != tc.size {
				t.Fatalf("WritevAt = %d, %v; want %d, nil", n, err, tc.size)
			}
			got := make([]byte, tc.size)
			rbufs := split(rng, got, tc.readN)
			before := append([][]byte(nil), rbufs...)
			n, err = f.ReadvAt(rbufs, tc.writeOff)
			if err != nil || n != tc.size {
				t.Fatalf("ReadvAt = %d, %v; want %d, nil", n, err, tc.size)
			}
			if !bytes.Equal(got, data) {
				t.Fatal("ReadvAt returned different bytes")
			}
			for i := range rbufs {
				if len(rbufs[i]) != len(before[i]) {
					t.Fatalf("ReadvAt modified the caller's slice headers (buffer %d)", i)
				}
			}
			plain := make([]byte, tc.size)
			if _, err := f.ReadAt(plain, tc.writeOff); err != nil && !(err == io.EOF && tc.size == 0) {
				t.Fatal(err)
			}
			if !bytes.Equal(plain, data) {
				t.Fatal("ReadAt disagrees with WritevAt")
			}
		})
	}
}

func TestReadvAtEOF(t *testing.T) {
	f := openTemp(t)
	if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 100), 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		off   int64
		sizes []int
		wantN int
		want  error
	}{
		{"whole file", 0, []int{60, 40}, 100, nil},
		{"past end", 0, []int{60, 60}, 100, io.EOF},
		{"past end in second chunk", 10, []int{50, 0, 30, 30}, 90, io.EOF},
		{"at end", 100, []int{1}, 0, io.EOF},
		{"beyond end", 1000, []int{10}, 0, io.EOF},
		{"nothing asked", 1000, []int{0, 0}, 0, nil},
		{"no buffers", 0, nil, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bufs [][]byte
			for _, s := range tc.sizes {
				bufs = append(bufs, make([]byte, s))
			}
			n, err := f.ReadvAt(bufs, tc.off)
			if n != tc.wantN || err != tc.want {
				t.Fatalf("ReadvAt = %d, %v; want %d, %v", n, err, tc.wantN, tc.want)
			}
		})
	}
}

// awkwardReaderAt returns at most one byte per call, and io.EOF together
// with the last byte, like the readers of testing/iotest.
type awkwardReaderAt struct{ data []byte }

func (r awkwardReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[off]
	if off == int64(len(r.data))-1 {
		return 1, io.EOF
	}
	return 1, nil
}

// awkwardWriterAt writes at most max bytes per call and then fails with err
// once limit bytes have been written.
type awkwardWriterAt struct {
	buf   []byte
	max   int
	limit int
	err   error
}

func (w *awkwardWriterAt) WriteAt(p []byte, off int64) (int, error) {
	n := min(len(p), w.max)
	if off+int64(n) > int64(w.limit) {
		n = max(0, w.limit-int(off))
		copy(w.buf[off:], p[:n])
		return n, w.err
	}
	copy(w.buf[off:], p[:n])
	return n, nil
}

func TestVectorLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := randomBytes(rng, 5000)

	got := make([]byte, len(data))
	n, err := readvLoop(awkwardReaderAt{data}, split(rng, got, 50), 0)
	if n != len(data) || err != nil || !bytes.Equal(got, data) {
		t.Fatalf("readvLoop one byte at a time = %d, %v", n, err)
	}
	got = make([]byte, len(data)+10)
	n, err = readvLoop(awkwardReaderAt{data}, split(rng, got, 50), 0)
	if n != len(data) || err != io.EOF {
		t.Fatalf("readvLoop past the end = %d, %v; want %d, EOF", n, err, len(data))
	}

	w := &awkwardWriterAt{buf: make([]byte, len(data)), max: 3, limit: len(data)}
	n, err = writevLoop(w, split(rng, data, 50), 0)
	if n != len(data) || err != nil || !bytes.Equal(w.buf, data) {
		t.Fatalf("writevLoop three bytes at a time = %d, %v", n, err)
	}
	errDisk := errors.New("disk on fire")
	w = &awkwardWriterAt{buf: make([]byte, len(data)), max: 100, limit: 777, err: errDisk}
	n, err = writevLoop(w, split(rng, data, 50), 0)
	if n != 777 || err != errDisk {
		t.Fatalf("writevLoop with failing writer = %d, %v; want 777, %v", n, err, errDisk)
	}
	w = &awkwardWriterAt{buf: make([]byte, len(data)), max: 100, limit: 777}
	n, err = writevLoop(w, split(rng, data, 50), 0)
	if n != 777 || err != io.ErrShortWrite {
		t.Fatalf("writevLoop with stalling writer = %d, %v; want 777, ErrShortWrite", n, err)
	}
}

func TestConcurrentVectoredIO(t *testing.T) {
	f := openTemp(t)
	const workers, chunk = 8, 64 << 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			data := randomBytes(rng, chunk)
			off := int64(w * chunk)
			if _, err := f.WritevAt(split(rng, data, 100), off); err != nil {
				t.Error(err)
				return
			}
			got := make([]byte, chunk)
			if _, err := f.ReadvAt(split(rng, got, 77), off); err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, data) {
				t.Errorf("worker %d read back different bytes", w)
			}
		})
	}
	wg.Wait()
}

func TestClosedFile(t *testing.T) {
	f, err := Default.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.ReadvAt([][]byte{make([]byte, 1)}, 0); err == nil {
		t.Error("ReadvAt on a closed file succeeded")
	}
	if _, err := f.WritevAt([][]byte{make([]byte, 1)}, 0); err == nil {
		t.Error("WritevAt on a closed file succeeded")
	}
	if err := f.Sync(); err == nil {
		t.Error("Sync on a closed file succeeded")
	}
}

func TestAllocateAndPunchHole(t *testing.T) {
	f := openTemp(t)
	const size = 1 << 20
	if err := f.Allocate(0, size); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("Allocate: %v", err)
		}
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size || AllocatedBytes(fi) < size {
		t.Fatalf("after Allocate: size %d, allocated %d; want %d, >= %d", fi.Size(), AllocatedBytes(fi), size, size)
	}

	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAB}, size), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fi, _ = f.Stat()
	before := AllocatedBytes(fi)
	const hole = 512 << 10
	if err := f.PunchHole(128<<10, hole); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("PunchHole: %v", err)
		}
		t.Fatal(err)
	}
	fi, _ = f.Stat()
	after := AllocatedBytes(fi)
	if fi.Size() != size {
		t.Errorf("PunchHole changed the size to %d", fi.Size())
	}
	if after > before-hole {
		t.Errorf("AllocatedBytes %d -> %d after punching %d bytes", before, after, hole)
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	for i, c := range got {
		want := byte(0xAB)
		if i >= 128<<10 && i < 128<<10+hole {
			want = 0
		}
		if c != want {
			t.Fatalf("byte %d = %#x after PunchHole, want %#x", i, c, want)
		}
	}
}

func TestLock(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	l1, err := Default.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := Default.Lock(name); !errors.Is(err, ErrLocked) {
		if l2 != nil {
			l2.Close()
		}
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	l3, err := Default.Lock(name)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	l3.Close()
}

// openDirectOrSkip opens name with OpenDirect, skipping the test where the platform or the file
// system has no O_DIRECT.
func openDirectOrSkip(t *testing.T, name string, flag int) File {
	t.Helper()
	d, err := Default.OpenDirect(name, flag, 0o644)
	switch {
	case errors.Is(err, syscall.EINVAL):
		t.Skipf("the file system of %s returned EINVAL for O_DIRECT: %v", name, err)
	case errors.Is(err, errors.ErrUnsupported) && runtime.GOOS != "linux":
		t.Skipf("no O_DIRECT on %s: %v", runtime.GOOS, err)
	case err != nil:
		t.Fatal(err)
	}
	return d
}

func TestOpenDirect(t *testing.T) {
	name := filepath.Join(t.TempDir(), "direct")
	d := openDirectOrSkip(t, name, os.O_CREATE|os.O_RDWR)
	defer d.Close()

	buf := AlignedBuffer(2 * DirectIOAlignment)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if n, err := d.WritevAt([][]byte{buf}, DirectIOAlignment); err != nil || n != len(buf) {
		t.Fatalf("direct WritevAt = %d, %v", n, err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	// A buffered reader of the same file sees the direct write.
	f, err := Default.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(buf))
	if _, err := f.ReadAt(got, DirectIOAlignment); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buf) {
		t.Fatal("buffered read differs from the direct write")
	}
	back := AlignedBuffer(len(buf))
	if n, err := d.ReadvAt([][]byte{back}, DirectIOAlignment); err != nil || n != len(back) || !bytes.Equal(back, buf) {
		t.Fatalf("direct ReadvAt = %d, %v", n, err)
	}
	if runtime.GOOS == "linux" {
		if _, err := d.WriteAt(buf[1:101], 0); err == nil {
			t.Error("misaligned O_DIRECT write succeeded; is the file really opened with O_DIRECT?")
		}
	}
}

func TestAlignedBuffer(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {1, 4096}, {4095, 4096}, {4096, 4096}, {4097, 8192}, {1 << 20, 1 << 20},
	} {
		b := AlignedBuffer(tc.n)
		if len(b) != tc.want || cap(b) != tc.want {
			t.Errorf("AlignedBuffer(%d): len %d cap %d, want %d", tc.n, len(b), cap(b), tc.want)
		}
		if !IsAligned(b) {
			t.Errorf("AlignedBuffer(%d) is not aligned", tc.n)
		}
	}
	b := AlignedBuffer(8192)
	if IsAligned(b[1:4097]) || IsAligned(b[:100]) {
		t.Error("IsAligned accepts a misaligned buffer")
	}
}

func TestDirectoryOperations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := Default.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f, err := Default.OpenFile(filepath.Join(dir, fmt.Sprintf("tmp%d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := Default.Rename(filepath.Join(dir, "tmp0"), filepath.Join(dir, "final")); err != nil {
		t.Fatal(err)
	}
	if err := Default.Remove(filepath.Join(dir, "tmp1")); err != nil {
		t.Fatal(err)
	}
	if err := Default.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := Default.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[final tmp2]" {
		t.Fatalf("ReadDir = %v, want [final tmp2]", names)
	}
	if _, err := Default.Stat(filepath.Join(dir, "tmp1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Stat of a removed file = %v", err)
	}
	if err := Default.SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncDir of a missing directory succeeded")
	}
}

func BenchmarkReadvAt(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("bufs=%d/4KiB", n), func(b *testing.B) {
			f := openTemp(b)
			bufs := make([][]byte, n)
			for i := range bufs {
				bufs[i] = make([]byte, 4096)
			}
			if _, err := f.WritevAt(bufs, 0); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n * 4096))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.ReadvAt(bufs, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWritevAt(b *testing.B) {
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("bufs=%d/4KiB", n), func(b *testing.B) {
			f := openTemp(b)
			bufs := make([][]byte, n)
			for i := range bufs {
				bufs[i] = make([]byte, 4096)
			}
			b.SetBytes(int64(n * 4096))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.WritevAt(bufs, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSpace: Space agrees with the statfs that df reads (checked against the numbers df prints
// where df is installed; the free space may move a little between the two calls).
func TestSpace(t *testing.T) {
	dir := t.TempDir()
	size, avail, err := Space(dir)
	if err != nil {
		t.Fatal(err)
	}
	if size <= 0 || avail < 0 || avail > size {
		t.Fatalf("size %d, avail %d", size, avail)
	}
	out, err := exec.Command("df", "-B1", "--output=size,avail", dir).Output()
	if err != nil {
		t.Skipf("df: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("df printed %q", out)
	}
	dfSize, _ := strconv.ParseInt(f[2], 10, 64)
	dfAvail, _ := strconv.ParseInt(f[3], 10, 64)
	if dfSize != size || math.Abs(float64(dfAvail-avail)) > float64(size)/100 {
		t.Fatalf("Space: size %d, avail %d; df: size %d, avail %d", size, avail, dfSize, dfAvail)
	}
	if _, _, err := Space(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Space of a missing path: no error")
	}
}
