package blobcache

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/seed57392e9e/blobcache/internal/codec"
	"github.com/seed57392e9e/blobcache/internal/corpus"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// goSource returns n bytes of Go source from the toolchain's tree, starting at byte skip: real
// text, which compresses several-fold.
func goSource(t testing.TB, skip, n int) []byte {
	t.Helper()
	b, err := corpus.GoSource(skip, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compressedCase is a blob of a compression test: text compresses, random bytes and short
// values are stored as given.
type compressedCase struct {
	key   string
	value []byte
	text  bool // compressible and long enough: stored compressed
}

func compressionCases(t testing.TB) []compressedCase {
	random := make([]byte, 300<<10)
	rand.Read(random)
	return []compressedCase{
		{"short", []byte("a short value, stored as given"), false},
		{"text-2k", goSource(t, 0, 2000), true},
		{"text-400k", goSource(t, 10000, 400<<10), true},
		{"text-3blocks", goSource(t, 500000, 2*codec.BlockSize+12345), true},
		{"random", random, false},
	}
}

// checkBlobs reads every case back through Get, ReadAt (whole and ranges), GetRange and Stat.
func checkBlobs(t *testing.T, c *Cache, cases []compressedCase, when string) {
	t.Helper()
	for _, tc := range cases {
		r, ok := c.Get([]byte(tc.key))
		if !ok {
			t.Fatalf("%s: Get %s: miss", when, tc.key)
		}
		if r.Size() != int64(len(tc.value)) {
			t.Fatalf("%s: Get %s: Size %d, want %d", when, tc.key, r.Size(), len(tc.value))
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, tc.value) {
			t.Fatalf("%s: Get %s: %d bytes, %v", when, tc.key, len(got), err)
		}
		p := make([]byte, len(tc.value)+10)
		n, err := c.ReadAt([]byte(tc.key), p, 0)
		if err != io.EOF || n != len(tc.value) || !bytes.Equal(p[:n], tc.value) {
			t.Fatalf("%s: ReadAt %s whole: %d, %v", when, tc.key, n, err)
		}
		for _, rg := range [][2]int{{1, 100}, {len(tc.value) / 2, 5000}, {codec.BlockSize - 10, 20}, {len(tc.value) - 7, 7}} {
			off, ln := min(rg[0], len(tc.value)), rg[1]
			end := min(off+ln, len(tc.value))
			q := make([]byte, end-off)
			n, err := c.ReadAt([]byte(tc.key), q, int64(off))
			if err != nil && err != io.EOF || !bytes.Equal(q[:n], tc.value[off:end]) {
				t.Fatalf("%s: ReadAt %s [%d,%d): %d, %v", when, tc.key, off, end, n, err)
			}
			r, ok := c.GetRange([]byte(tc.key), int64(off), int64(ln))
			if !ok {
				t.Fatalf("%s: GetRange %s: miss", when, tc.key)
			}
			got, err := io.ReadAll(r)
			r.Close()
			if err != nil || !bytes.Equal(got, tc.value[off:end]) {
				t.Fatalf("%s: GetRange %s [%d,%d): %d bytes, %v", when, tc.key, off, end, len(got), err)
			}
		}
		info, err := c.Stat([]byte(tc.key))
		if err != nil || info.Size != int64(len(tc.value)) {
			t.Fatalf("%s: Stat %s: %+v, %v", when, tc.key, info, err)
		}
	}
	keys := make([][]byte, len(cases))
	for i, tc := range cases {
		keys[i] = []byte(tc.key)
	}
	seen := 0
	err := c.GetMany(keys, func(i int, r *Reader) error {
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, cases[i].value) {
			return fmt.Errorf("GetMany %s: %d bytes, %v", cases[i].key, len(got), err)
		}
		seen++
		return nil
	})
	if err != nil || seen != len(cases) {
		t.Fatalf("%s: %d of %d, %v", when, seen, len(cases), err)
	}
}

// TestCompressionRoundTrip stores text, random bytes and a short value with each codec, and
// reads them back while in the write buffer, from the segments (twice: the second hit brings a
// value into the memory tier where there is one), and after a reopen without compression.
func TestCompressionRoundTrip(t *testing.T) {
	for _, comp := range []Compression{CompressionZstd, CompressionS2} {
		for _, memory := range []int64{0, 64 << 20} {
			t.Run(fmt.Sprintf("%v/memory=%d", comp, memory), func(t *testing.T) {
				dir := t.TempDir()
				cases := compressionCases(t)
				c, err := New(dir, WithCompression(comp), WithMemorySize(memory), WithChecksum(true))
				if err != nil {
					t.Fatal(err)
				}
				var in int64
				for _, tc := range cases {
					if err := c.Put([]byte(tc.key), tc.value); err != nil {
						t.Fatal(err)
					}
					if tc.text {
						in += int64(len(tc.value))
					}
				}
				checkBlobs(t, c, cases, "write buffer")
				c.Drain()
				checkBlobs(t, c, cases, "segments")
				checkBlobs(t, c, cases, "segments again")
				st := c.Stats()
				if st.CompressedPuts != 3 || st.StoredAsGiven != 1 || st.CompressedBytesIn != uint64(in) ||
					st.CompressedBytesOut*2 > st.CompressedBytesIn {
					t.Fatalf("stats: %d compressed (%d -> %d bytes), %d as given", st.CompressedPuts,
						st.CompressedBytesIn, st.CompressedBytesOut, st.StoredAsGiven)
				}
				if memory > 0 && c.Stats().MemoryHits == 0 {
					t.Fatal("no hit from the memory tier")
				}
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				c, err = New(dir) // no compression: compressed records are still read
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				checkBlobs(t, c, cases, "reopened")
				// Touch writes a blob again with a new expiry: compressed or not as this open
				// decides (none here), the same bytes.
				for _, tc := range cases {
					if err := c.Touch([]byte(tc.key), time.Now().Add(time.Hour)); err != nil {
						t.Fatal(err)
					}
				}
				checkBlobs(t, c, cases, "touched")
				if id, err := readIdentityFile(dir); err != nil || id.Version != identityCompressedVersion {
					t.Fatalf("identity after a reopen without compression: %+v, %v", id, err)
				}
			})
		}
	}
}

// TestCompressionPutFrom: PutFrom of a value a write buffer holds reads it whole and compresses
// it, past StreamThreshold too.
func TestCompressionPutFrom(t *testing.T) {
	c, err := New(t.TempDir(), WithCompression(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	value := goSource(t, 0, 3*StreamThreshold)
	if err := c.PutFrom([]byte("k"), bytes.NewReader(value), int64(len(value))); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.CompressedPuts != 1 {
		t.Fatalf("%d compressed puts", st.CompressedPuts)
	}
	c.Drain()
	checkBlobs(t, c, []compressedCase{{"k", value, true}}, "PutFrom")
	if st := c.Stats(); st.CompressedBytesOut*2 > uint64(len(value)) {
		t.Fatalf("%d bytes stored for a %d-byte value of text", st.CompressedBytesOut, len(value))
	}
}

// TestCompressionFormatVersion: a directory made or opened with compression is format 3, which
// is what a build without compression refuses; one without stays format 2.
func TestCompressionFormatVersion(t *testing.T) {
	plain, comp := t.TempDir(), t.TempDir()
	for _, dir := range []string{plain, comp} {
		c, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	c, err := New(comp, WithCompression(CompressionS2))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	for dir, want := range map[string]uint32{plain: identityVersion, comp: identityCompressedVersion} {
		if id, err := readIdentityFile(dir); err != nil || id.Version != want {
			t.Fatalf("%s: %+v, %v; want version %d", dir, id, err, want)
		}
	}
	fresh := t.TempDir()
	c, err = New(fresh, WithCompression(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if id, err := readIdentityFile(fresh); err != nil || id.Version != identityCompressedVersion {
		t.Fatalf("a new directory with compression: %+v, %v", id, err)
	}
}

// TestCompressionDamage flips bits in a compressed value on disk, in its table and in each of
// its blocks: a read that needs a damaged block is a miss, counted as corruption, never wrong
// bytes, and a range in an undamaged block still reads right.
func TestCompressionDamage(t *testing.T) {
	value := goSource(t, 0, 2*codec.BlockSize+5000)
	for _, at := range []string{"table", "block 0", "block 2"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			c, err := New(dir, WithCompression(CompressionZstd))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Put([]byte("k"), value); err != nil {
				t.Fatal(err)
			}
			c.Close()
			_, b, off, h := segmentRecord(t, dir, "k")
			stored := b[off+h.ValueOffset() : off+h.AttrOffset()]
			tab, err := codec.ParseTable(stored, int64(len(stored)), int64(len(value)))
			if err != nil {
				t.Fatal(err)
			}
			var flip int64 = 20 // in the table
			switch at {
			case "block 0":
				s, e := tab.Span(0, 0)
				flip = (s + e) / 2
			case "block 2":
				s, e := tab.Span(2, 2)
				flip = (s + e) / 2
			}
			flipValueBit(t, dir, "k", flip)
			c, err = New(dir, WithCompression(CompressionZstd))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if r, ok := c.Get([]byte("k")); ok {
				got, err := io.ReadAll(r)
				t.Fatalf("Get of a damaged value: a hit, %d bytes, %v", len(got), err)
			}
			p := make([]byte, len(value))
			if n, err := c.ReadAt([]byte("k"), p, 0); !errors.Is(err, ErrNotFound) {
				t.Fatalf("ReadAt of a damaged value: %d, %v", n, err)
			}
			if c.Stats().CorruptRecord == 0 {
				t.Fatal("damage not counted")
			}
			q := make([]byte, 1000)
			n, err := c.ReadAt([]byte("k"), q, codec.BlockSize+10) // block 1
			switch {
			case at == "table" && !errors.Is(err, ErrNotFound):
				t.Fatalf("a range under a damaged table: %d, %v", n, err)
			case at != "table" && (err != nil || !bytes.Equal(q, value[codec.BlockSize+10:codec.BlockSize+1010])):
				t.Fatalf("a range in an undamaged block: %d, %v", n, err)
			}
		})
	}
}

// TestOpenEncoded: a value stored compressed with the codec asked for comes as stored, and a
// zstd decoder nobody here wrote turns it back into the value; any other comes as Get gives it.
func TestOpenEncoded(t *testing.T) {
	c, err := New(t.TempDir(), WithCompression(CompressionZstd), WithVerifyOnRead(true), WithChecksum(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text := goSource(t, 0, 700<<10)
	random := make([]byte, 100<<10)
	rand.Read(random)
	c.Put([]byte("text"), text)
	c.Put([]byte("random"), random)
	read := func(key string, accept Compression) (Compression, []byte, *Reader) {
		t.Helper()
		r, ok := c.OpenEncoded([]byte(key), accept)
		if !ok {
			t.Fatalf("OpenEncoded %s: miss", key)
		}
		defer r.Close()
		var buf bytes.Buffer
		if _, err := r.WriteTo(&buf); err != nil {
			t.Fatalf("OpenEncoded %s: %v", key, err)
		}
		if int64(buf.Len()) != r.Size() || r.Info().Size != int64(len(map[string][]byte{"text": text, "random": random}[key])) {
			t.Fatalf("OpenEncoded %s: %d bytes, Size %d, Info().Size %d", key, buf.Len(), r.Size(), r.Info().Size)
		}
		return r.Encoding(), buf.Bytes(), r
	}
	// In the write buffer: delivered decompressed.
	if enc, got, _ := read("text", CompressionZstd); enc != CompressionNone || !bytes.Equal(got, text) {
		t.Fatalf("from the write buffer: %v, %d bytes", enc, len(got))
	}
	c.Drain()
	enc, got, _ := read("text", CompressionZstd)
	if enc != CompressionZstd || len(got) >= len(text) {
		t.Fatalf("stored zstd: %v, %d bytes for %d", enc, len(got), len(text))
	}
	d, err := zstd.NewReader(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(d)
	d.Close()
	if err != nil || !bytes.Equal(plain, text) {
		t.Fatalf("the stored bytes decode to %d bytes, %v", len(plain), err)
	}
	for _, tc := range []struct {
		key    string
		accept Compression
		want   []byte
	}{{"text", CompressionS2, text}, {"text", CompressionNone, text}, {"random", CompressionZstd, random}} {
		if enc, got, _ := read(tc.key, tc.accept); enc != CompressionNone || !bytes.Equal(got, tc.want) {
			t.Fatalf("%s accepting %v: %v, %d bytes", tc.key, tc.accept, enc, len(got))
		}
	}
}

// readCountingFS counts the bytes read from files through it.
type readCountingFS struct {
	vfs.FS
	n atomic.Int64
}

func (fs *readCountingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := fs.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &readCountingFile{File: f, n: &fs.n}, nil
}

type readCountingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func (f *readCountingFile) ReadvAt(bufs [][]byte, off int64) (int, error) {
	n, err := f.File.ReadvAt(bufs, off)
	f.n.Add(int64(n))
	return n, err
}

// TestCompressedRangeReadsItsBlocks: a range of a large compressed value (stored in more than
// smallRecord bytes: a smaller record is read whole, as any record that small) reads the
// record's header, the table and the blocks that hold the range, not the value: through GetRange
// and ReadAt.
func TestCompressedRangeReadsItsBlocks(t *testing.T) {
	fs := &readCountingFS{FS: vfs.Default}
	c, err := New(t.TempDir(), withFS(fs), WithBufferedReads(true), WithCompression(CompressionZstd))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	value := goSource(t, 0, 24*codec.BlockSize)
	if err := c.Put([]byte("k"), value); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	stored := int64(c.Stats().CompressedBytesOut)
	if stored <= smallRecord {
		t.Fatalf("the value is stored in %d bytes, not more than smallRecord", stored)
	}
	off := int64(17*codec.BlockSize + 100) // in block 17
	for _, how := range []string{"GetRange", "ReadAt"} {
		before := fs.n.Load()
		got := make([]byte, 1000)
		switch how {
		case "GetRange":
			r, ok := c.GetRange([]byte("k"), off, 1000)
			if !ok {
				t.Fatal("GetRange missed")
			}
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatal(err)
			}
			r.Close()
		case "ReadAt":
			if _, err := c.ReadAt([]byte("k"), got, off); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, value[off:off+1000]) {
			t.Fatalf("%s: wrong bytes", how)
		}
		// The header and key, the table, and one block: about a 24th of the stored value.
		read := fs.n.Load() - before
		if read > stored/12 {
			t.Fatalf("%s of 1,000 bytes read %d bytes of a value stored in %d", how, read, stored)
		}
		t.Logf("%s of 1,000 bytes in block 17 of 24: %d bytes read, the value is stored in %d", how, read, stored)
	}
}

// TestCompressionCountsStoredBytes: MaxSize and eviction count the bytes stored, so a cache that
// compresses holds values worth twice its MaxSize without evicting, where one that does not
// evicts; the disk stays within the bound either way.
func TestCompressionCountsStoredBytes(t *testing.T) {
	const maxSize = 8 << 20
	text := goSource(t, 0, 4<<20)
	for _, comp := range []Compression{CompressionNone, CompressionZstd} {
		c, err := New(t.TempDir(), small(WithMaxSize(maxSize), WithPolicy(PolicyFIFO), WithCompression(comp))...)
		if err != nil {
			t.Fatal(err)
		}
		const n, size = 400, 40 << 10 // 16 MB of values, twice MaxSize, each within a write buffer
		for i := range n {
			off := i * 9973 % (len(text) - size)
			if err := c.Put(fmt.Appendf(nil, "k%d", i), text[off:off+size]); err != nil {
				t.Fatal(err)
			}
		}
		c.Drain()
		var held int64
		for i := range n {
			if info, err := c.Stat(fmt.Appendf(nil, "k%d", i)); err == nil {
				held += info.Size
			}
		}
		st := c.Stats()
		t.Logf("%v: %d blobs, %d value bytes held in MaxSize %d, %d evictions, %d disk bytes", comp, st.Blobs, held, maxSize, st.Evictions, st.DiskBytes)
		switch {
		case st.DiskBytes > maxSize:
			t.Fatalf("%v: %d disk bytes over MaxSize %d", comp, st.DiskBytes, maxSize)
		case comp == CompressionNone && (st.Evictions == 0 || held > maxSize):
			t.Fatalf("without compression: %d evictions, %d bytes held", st.Evictions, held)
		case comp != CompressionNone && (st.Evictions != 0 || st.Blobs != n || held < 2*maxSize-maxSize/8):
			t.Fatalf("with compression: %d evictions, %d blobs, %d bytes held", st.Evictions, st.Blobs, held)
		}
		c.Close()
	}
}
