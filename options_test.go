package blobcache

import (
	"errors"
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
