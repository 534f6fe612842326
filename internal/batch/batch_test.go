package batch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

func put(t *testing.T, b *Batch, key string, value []byte, copyValue bool) {
	t.Helper()
	hdr := record.Header{Kind: record.KindPut, KeyLen: uint32(len(key)), ValueLen: uint32(len(value)), ValueCRC: record.CRC(value)}
	if !b.Fits(hdr.Len()) {
		t.Fatalf("%s does not fit", key)
	}
	b.Append(record.KeyHash([]byte(key)), hdr, []byte(key), value, nil, copyValue)
}

// stream concatenates the buffers Seal returns: the bytes a segment receives.
func stream(bufs [][]byte) []byte {
	var out []byte
	for _, b := range bufs {
		out = append(out, b...)
	}
	return out
}

func TestAppendLookupSeal(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			b := New(4<<20, direct)
			vals := map[string][]byte{}
			for i := range 100 {
				k := fmt.Sprintf("key%d", i%60)
				v := bytes.Repeat([]byte{byte(i)}, i*300) // crosses 1 MiB chunks
				put(t, b, k, v, i%2 == 0)
				vals[k] = v
			}
			for k, v := range vals {
				got, ok := withValue(b, k)
				if !ok || !bytes.Equal(got.Value, v) || got.Kind != record.KindPut {
					t.Fatalf("Lookup(%s): ok %v, %d bytes", k, ok, len(got.Value))
				}
			}
			if _, ok := withValue(b, "absent"); ok {
				t.Fatal("Lookup of an absent key")
			}
			bufs, n := b.Seal()
			s := stream(bufs)
			if int64(len(s)) != n {
				t.Fatalf("Seal: %d bytes in buffers, length %d", len(s), n)
			}
			if direct && n%vfs.DirectIOAlignment != 0 {
				t.Fatalf("direct batch of %d bytes is not aligned", n)
			}
			// Every entry decodes at its offset, and the stream ends on whole records.
			for _, e := range b.Entries() {
				h, key, err := record.Decode(s[e.Offset:])
				if err != nil || record.KeyHash(key) != e.Hash || h.Len() != int64(e.Length) {
					t.Fatalf("entry at %d: %v", e.Offset, err)
				}
				v := s[int64(e.Offset)+record.HeaderSize+int64(len(key)) : int64(e.Offset)+h.Len()]
				if record.CRC(v) != h.ValueCRC {
					t.Fatalf("entry at %d: value crc", e.Offset)
				}
			}
			b.Reset()
			if b.Size() != 0 || b.Len() != 0 {
				t.Fatal("Reset left records")
			}
			put(t, b, "again", []byte("v"), true)
			if got, ok := withValue(b, "again"); !ok || string(got.Value) != "v" {
				t.Fatal("batch unusable after Reset")
			}
		})
	}
}

func TestFitsBoundsSize(t *testing.T) {
	b := New(64<<10, false)
	v := make([]byte, 1000)
	n := 0
	for {
		hdr := record.Header{Kind: record.KindPut, KeyLen: 3, ValueLen: 1000}
		if !b.Fits(hdr.Len()) {
			break
		}
		b.Append(uint64(n+1), hdr, []byte("key"), v, nil, true)
		n++
	}
	if per := int(record.HeaderSize) + 3 + 1000; b.Size() > 64<<10 || n != 64<<10/per {
		t.Fatalf("%d records, %d bytes", n, b.Size())
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 4 << 10, 1 << 20} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			v := make([]byte, size)
			key := []byte("0123456789abcdef0123456789abcdef")
			hdr := record.Header{Kind: record.KindPut, KeyLen: uint32(len(key)), ValueLen: uint32(size)}
			bt := New(64<<20, false)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if !bt.Fits(hdr.Len()) {
					bt.Reset()
				}
				bt.Append(uint64(i)|1, hdr, key, v, nil, true)
			}
		})
	}
}

// TestAlignedValues: in direct mode a value of AlignedValueMin bytes or more starts at an
// aligned stream offset, behind a pad record that the stream's records account for exactly;
// smaller values, and values whose pad would not fit, are not padded; outside direct mode
// nothing is.
func TestAlignedValues(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			const limit = 2 << 20
			b := New(limit, direct)
			sizes := []int{100, AlignedValueMin, 7, AlignedValueMin - 1, 300 << 10, 1, 200 << 10}
			for i, n := range sizes {
				put(t, b, fmt.Sprintf("key-%d", i), bytes.Repeat([]byte{byte(i + 1)}, n), true)
			}
			// The last value fills the batch to within a few bytes of its limit: too little room
			// for a pad, so it goes unaligned.
			rest := int(limit-b.Size()) - record.HeaderSize - len("key-last")
			put(t, b, "key-last", bytes.Repeat([]byte{9}, rest), true)
			bufs, n := b.Seal()
			s := stream(bufs)
			// Walk the stream record by record: every byte belongs to a record or a pad.
			var pads int
			entries := b.Entries()
			for off, i := int64(0), 0; off < n; {
				h, _, err := record.Decode(s[off:])
				if err != nil {
					t.Fatalf("record at %d: %v", off, err)
				}
				if h.Kind == record.KindPad {
					pads++
					off += h.Len()
					continue
				}
				e := entries[i]
				if int64(e.Offset) != off {
					t.Fatalf("entry %d at %d, the stream has a record at %d", i, e.Offset, off)
				}
				valueOff := off + record.HeaderSize + int64(h.KeyLen)
				aligned := valueOff%vfs.DirectIOAlignment == 0
				wantAligned := direct && int(h.ValueLen) >= AlignedValueMin && i < len(sizes)
				if wantAligned && !aligned {
					t.Errorf("entry %d: %d-byte value at %d, not aligned", i, h.ValueLen, valueOff)
				}
				off += h.Len()
				i++
			}
			if !direct && pads != 0 {
				t.Fatalf("%d pads outside direct mode", pads)
			}
			if direct && pads < 3 {
				t.Fatalf("%d pads in direct mode, want at least 3 (two aligned values and the seal's)", pads)
			}
		})
	}
}

// TestRecordBytes: a record's bytes come back whole, as the slices of Record joined, whether the
// record lies in one chunk of the stream or across chunks.
func TestRecordBytes(t *testing.T) {
	b := New(1<<20, false)
	for i, n := range []int{10, 70 << 10, 3, 200 << 10, 5} {
		key := []byte(fmt.Sprintf("k%d", i))
		v := bytes.Repeat([]byte{byte('a' + i)}, n)
		b.Append(uint64(i+1), record.Header{Kind: record.KindPut, KeyLen: uint32(len(key)), ValueLen: uint32(n)}, key, v, nil, n < 100<<10) // the largest is referenced, not copied: its own chunk
	}
	spans := 0
	for i := range b.Len() {
		parts := b.Record(i)
		if len(parts) > 1 {
			spans++
		}
		if got, want := b.RecordBytes(i, nil), bytes.Join(parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("record %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
	if spans == 0 {
		t.Fatal("no record across chunks: the test does not reach the copy")
	}
}

// withValue is LookupInto of key k with its value in a new slice.
func withValue(b *Batch, k string) (Value, bool) {
	v, _, ok := b.LookupInto(record.KeyHash([]byte(k)), []byte(k), func(n int) *[]byte {
		buf := make([]byte, n)
		return &buf
	})
	return v, ok
}

// TestMayHold: the lock-free filter of a batch's key hashes answers true for every key appended
// and false for most others, and Reset clears it; a lookup of a key appended while others look
// keys up never misses it once its Append returned (run with -race).
func TestMayHold(t *testing.T) {
	b := New(16<<20, false)
	const n = 2000
	for i := range n {
		put(t, b, fmt.Sprintf("k%d", i), []byte("v"), true)
	}
	for i := range n {
		if !b.mayHold(record.KeyHash([]byte(fmt.Sprintf("k%d", i)))) {
			t.Fatalf("k%d appended, mayHold false", i)
		}
	}
	may := 0
	for i := range 10000 {
		if b.mayHold(record.KeyHash([]byte(fmt.Sprintf("absent%d", i)))) {
			may++
		}
	}
	// 2,000 of 65,536 bits set: about 3% of absent keys pass.
	if may > 600 {
		t.Fatalf("%d of 10000 absent keys may be held", may)
	}
	b.Reset()
	for i := range n {
		if b.mayHold(record.KeyHash([]byte(fmt.Sprintf("k%d", i)))) {
			t.Fatalf("k%d may be held after Reset", i)
		}
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			withValue(b, fmt.Sprintf("k%d", (i*7)%n))
		}
	}()
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		put(t, b, k, []byte(k), true)
		if v, ok := withValue(b, k); !ok || string(v.Value) != k {
			t.Fatalf("%s: found %v, %q", k, ok, v.Value)
		}
	}
	<-done
}
