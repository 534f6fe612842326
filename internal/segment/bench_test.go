package segment

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// BenchmarkScan measures recovery speed over 16 MiB of records of several
// value sizes, from the page cache.
func BenchmarkScan(b *testing.B) {
	for _, valueSize := range []int{100, 4096, 64 << 10} {
		b.Run(fmt.Sprintf("value=%d", valueSize), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			var recs []rec
			for total := 0; total < 16<<20; total += valueSize + 64 {
				v := make([]byte, valueSize)
				for i := range v {
					v[i] = byte(rng.Uint32())
				}
				recs = append(recs, rec{record.KindPut, fmt.Appendf(nil, "key-%d", len(recs)), v})
			}
			data, _, end := layout(recs)
			_, a := writeUnsealed(b, data, end)
			f := a.File()
			b.SetBytes(end - HeaderSize)
			b.ReportAllocs()
			for b.Loop() {
				res := Scan(f, end, func(Entry, record.Header, []byte) error { return nil })
				if res.Err != nil || res.Records != len(recs) {
					b.Fatalf("Scan = %+v", res)
				}
			}
		})
	}
}

// BenchmarkWriteBatch measures buffered batch writes of 1 MiB, without
// sync, at successive offsets of a preallocated segment.
func BenchmarkWriteBatch(b *testing.B) {
	const batch = 1 << 20
	const capacity = 256 << 20
	for _, bufs := range []int{1, 64} {
		b.Run(fmt.Sprintf("bufs=%d", bufs), func(b *testing.B) {
			a, err := Create(vfs.Default, b.TempDir(), 1, capacity, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			data := make([][]byte, bufs)
			for i := range data {
				data[i] = make([]byte, batch/bufs)
			}
			off := int64(HeaderSize)
			b.SetBytes(batch)
			b.ReportAllocs()
			for b.Loop() {
				if off+batch > capacity {
					off = HeaderSize
				}
				if err := a.WriteBatch(data, off); err != nil {
					b.Fatal(err)
				}
				off += batch
			}
		})
	}
}

func BenchmarkDecodeSegmentHeader(b *testing.B) {
	buf := make([]byte, HeaderLen)
	Header{Version: Version, ID: 1}.Encode(buf)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeader(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEntries(b *testing.B) {
	entries := make([]Entry, 1000)
	for i := range entries {
		entries[i] = Entry{Hash: uint64(i + 1), Offset: uint32(4096 + 100*i), Length: 100, Kind: record.KindPut}
	}
	buf := AppendFooter(nil, entries, uint64(4096+100*len(entries)))
	n := len(entries) * EntrySize
	_, _, crc, _ := DecodeTrailer(buf[n:])
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeEntries(buf[:n], crc); err != nil {
			b.Fatal(err)
		}
	}
}
