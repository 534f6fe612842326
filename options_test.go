package blobcache

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDerivedDefaults: setting one option adapts the defaults that depend on it, and only
// contradictions the caller wrote are refused.
func TestDerivedDefaults(t *testing.T) {
	for _, tc := range []struct {
		name          string
		o             Options
		segment, wbuf int64
	}{
		{"defaults", Options{}, DefaultSegmentSize, DefaultWriteBufferSize},
		{"a 16 MiB segment alone", Options{SegmentSize: 16 << 20}, 16 << 20, 4 << 20},
		{"a 2 MiB segment alone", Options{SegmentSize: 2 << 20}, 2 << 20, 512 << 10},
		{"MaxSize alone", Options{MaxSize: 1 << 30}, 32 << 20, 8 << 20},
		{"MaxSize of 8 GiB", Options{MaxSize: 8 << 30}, DefaultSegmentSize, DefaultWriteBufferSize},
		{"a small MaxSize", Options{MaxSize: 256 << 20}, 8 << 20, 2 << 20},
		{"a tiny MaxSize", Options{MaxSize: 8 << 20}, 4 << 20, 1 << 20},
		{"a large MaxSize", Options{MaxSize: 1 << 40}, DefaultSegmentSize, DefaultWriteBufferSize},
		{"both set", Options{SegmentSize: 32 << 20, WriteBufferSize: 1 << 20}, 32 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.Validate(); err != nil {
				t.Fatal(err)
			}
			d := tc.o.withDefaults()
			if d.SegmentSize != tc.segment || d.WriteBufferSize != tc.wbuf {
				t.Fatalf("SegmentSize %d, WriteBufferSize %d; want %d, %d", d.SegmentSize, d.WriteBufferSize, tc.segment, tc.wbuf)
			}
		})
	}
	c, err := New(t.TempDir(), WithSegmentSize(16<<20))
	if err != nil {
		t.Fatalf("WithSegmentSize(16 MiB) alone: %v", err)
	}
	c.Close()
	for _, o := range []Options{
		{SegmentSize: 1 << 20, WriteBufferSize: 1 << 20}, // written by the caller: refused
		{MaxSize: 4 << 20},                                 // room for fewer than two segments
		{SegmentSize: 64 << 20, MaxSize: 100 << 20},        // the same, both written
		{WriteBufferSize: 32 << 20, SegmentSize: 16 << 20}, // a buffer larger than a segment
	} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Validate = %v, want ErrInvalidOptions", o, err)
		}
	}
}

// TestMinSegmentSize: a segment of MinSegmentSize takes whole write buffers of the smallest
// records (one-byte keys, empty values: the most footer entries a batch can bring), with direct
// writes and without, and values up to MaxValueSize; one 4 KiB smaller is refused.
func TestMinSegmentSize(t *testing.T) {
	const wbs = 64 << 10
	seg := MinSegmentSize(wbs)
	if err := (Options{WriteBufferSize: wbs, SegmentSize: seg - 4096}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("SegmentSize %d with a %d-byte write buffer: %v, want ErrInvalidOptions", seg-4096, wbs, err)
	}
	for _, buffered := range []bool{true, false} {
		t.Run(fmt.Sprintf("buffered=%v", buffered), func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, WithBufferedWrites(buffered), WithWriteBufferSize(wbs), WithSegmentSize(seg), WithMaxSize(8*seg))
			const keys = 256 // one-byte keys, each written many times: batches of tiny records
			for round := range 40 {
				for k := range keys {
					if err := c.Put([]byte{byte(k)}, nil); err != nil {
						t.Fatalf("round %d key %d: %v", round, k, err)
					}
				}
			}
			big := value("big", 0, int(c.MaxValueSize(3)))
			if err := c.Put([]byte("big"), big); err != nil {
				t.Fatalf("a value of MaxValueSize (%d) in a %d-byte segment: %v", len(big), seg, err)
			}
			if err := c.Put([]byte("big"), make([]byte, c.MaxValueSize(3)+1)); !errors.Is(err, ErrValueTooLarge) {
				t.Fatalf("a value over MaxValueSize: %v, want ErrValueTooLarge", err)
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.Segments < 2 || st.FlushErrors != 0 {
				t.Fatalf("%d segments, %d flush errors: want several and none", st.Segments, st.FlushErrors)
			}
			expect(t, c, "big", big)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			c = open(t, dir, WithBufferedWrites(buffered), WithWriteBufferSize(wbs), WithSegmentSize(seg), WithMaxSize(8*seg))
			defer c.Close()
			expect(t, c, "big", big)
			for k := range keys {
				if got := mustGet(t, c, string([]byte{byte(k)})); len(got) != 0 {
					t.Fatalf("key %d: %d bytes, want the empty value", k, len(got))
				}
			}
		})
	}
}

// TestParseMemoryAdmission: each admission's String reads back as itself; any other word is
// refused, naming the words it takes.
func TestParseMemoryAdmission(t *testing.T) {
	for _, a := range []MemoryAdmission{MemoryOnSecondHit, MemoryOnWrite} {
		if got, err := ParseMemoryAdmission(a.String()); err != nil || got != a {
			t.Errorf("ParseMemoryAdmission(%q) = %v, %v", a.String(), got, err)
		}
	}
	if _, err := ParseMemoryAdmission("first"); err == nil || !strings.Contains(err.Error(), "second-hit or write") {
		t.Errorf("ParseMemoryAdmission(first): %v", err)
	}
}
