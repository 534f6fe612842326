package codec

import (
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkCompress is Compress per codec on 400 KiB values of Go source and of random bytes
// (declined after the sample), with a copy of the same bytes as the comparator: b.SetBytes
// makes the figures MB/s of values given.
func BenchmarkCompress(b *testing.B) {
	text, random := text(b, 400<<10), randomBytes(400<<10)
	for _, bc := range []struct {
		name  string
		value []byte
	}{{"text", text}, {"random", random}} {
		b.Run(bc.name+"/copy", func(b *testing.B) {
			dst := make([]byte, len(bc.value))
			b.SetBytes(int64(len(bc.value)))
			for b.Loop() {
				copy(dst, bc.value)
			}
		})
		for _, c := range []Codec{Zstd, S2} {
			b.Run(bc.name+"/"+c.String(), func(b *testing.B) {
				cp, err := NewCompressor(c)
				if err != nil {
					b.Fatal(err)
				}
				dst := make([]byte, 0, MaxStored(len(bc.value)))
				b.SetBytes(int64(len(bc.value)))
				b.ReportAllocs()
				var out []byte
				for b.Loop() {
					out, _ = cp.Compress(dst, bc.value)
				}
				b.ReportMetric(float64(len(bc.value))/float64(max(len(out), 1)), "ratio")
			})
		}
	}
}

// BenchmarkDecode is DecodeAll per codec of a 400 KiB value of Go source, and a 4 KiB range of
// it (one block decompressed).
func BenchmarkDecode(b *testing.B) {
	text := text(b, 400<<10)
	for _, c := range []Codec{Zstd, S2} {
		cp, _ := NewCompressor(c)
		stored, _ := cp.Compress(nil, text)
		b.Run(c.String()+"/whole", func(b *testing.B) {
			dst := make([]byte, len(text))
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if err := DecodeAll(c, dst, stored); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.String()+"/range4K", func(b *testing.B) {
			t, _ := ParseTable(stored, int64(len(stored)), int64(len(text)))
			dst := make([]byte, 4096)
			off := int64(300 << 10)
			first, last := t.Cover(off, off+4096)
			s, e := t.Span(first, last)
			b.SetBytes(4096)
			b.ReportAllocs()
			for b.Loop() {
				if err := t.Decode(c, dst, off, stored[s:e], first, last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func randomBytes(n int) []byte { return random(n) }

// BenchmarkBlockSize is what BlockSize was chosen by: zstd's fastest level on 400 KiB values of
// Go source (32 of them) cut into blocks of each size and compressed block by block, its ratio
// ("ratio") and that ratio over the values' compressed whole ("of-whole"). A smaller block
// costs capacity; a larger one, decompression for each small range.
func BenchmarkBlockSize(b *testing.B) {
	const valueSize, values = 400 << 10, 32
	src := text(b, valueSize*values)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false))
	if err != nil {
		b.Fatal(err)
	}
	ratio := func(block int) float64 {
		var out int
		var dst []byte
		for v := range values {
			value := src[v*valueSize : (v+1)*valueSize]
			for o := 0; o < len(value); o += block {
				dst = enc.EncodeAll(value[o:min(o+block, len(value))], dst[:0])
				out += len(dst)
			}
		}
		return float64(len(src)) / float64(out)
	}
	whole := ratio(valueSize)
	for _, block := range []int{64 << 10, 128 << 10, BlockSize, valueSize} {
		b.Run(fmt.Sprintf("%dKiB", block>>10), func(b *testing.B) {
			var r float64
			for b.Loop() {
				r = ratio(block)
			}
			b.ReportMetric(r, "ratio")
			b.ReportMetric(r/whole, "of-whole")
		})
	}
}
