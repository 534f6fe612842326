package record

import (
	"fmt"
	"testing"
)

func BenchmarkHeaderEncode(b *testing.B) {
	key := make([]byte, 32)
	dst := make([]byte, HeaderSize)
	h := Header{Kind: KindPut, KeyLen: 32, ValueLen: 4096, CTime: 1, ValueCRC: 2}
	b.SetBytes(HeaderSize + 32)
	b.ReportAllocs()
	for b.Loop() {
		h.Encode(dst, key)
	}
}

func BenchmarkDecode(b *testing.B) {
	buf := encodeRecord(Header{Kind: KindPut}, make([]byte, 32), make([]byte, 100))
	b.SetBytes(HeaderSize + 32)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyHash(b *testing.B) {
	key := []byte("0123456789abcdef0123456789abcdef")
	b.SetBytes(int64(len(key)))
	b.ReportAllocs()
	for b.Loop() {
		KeyHash(key)
	}
}

func BenchmarkCRC(b *testing.B) {
	for _, n := range []int{64, 4096, 1 << 20} {
		buf := make([]byte, n)
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				CRC(buf)
			}
		})
	}
}
