package blobcache

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// TestChooseBound: MaxSizeAuto takes AutoMaxSizeShare of the file system, less where that would
// leave under AutoMaxSizeHeadroom of it free, counts the cache's own files as free, and refuses
// a file system too full to choose.
func TestChooseBound(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		size, avail, own, want int64
	}{
		{100 * gib, 99 * gib, 0, 80 * gib},        // a device of its own: the share
		{100 * gib, 30 * gib, 0, 25 * gib},        // a shared file system: leave 5% free
		{100 * gib, 10 * gib, 20 * gib, 25 * gib}, // the cache's own files count as free
		{100 * gib, 5*gib + 63<<20, 0, 0},         // too full: an error
	} {
		got, err := chooseBound(tc.size, tc.avail, tc.own)
		if tc.want == 0 {
			if !errors.Is(err, ErrInvalidOptions) {
				t.Errorf("chooseBound(%d, %d, %d) = %d, %v; want ErrInvalidOptions", tc.size, tc.avail, tc.own, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("chooseBound(%d, %d, %d) = %d, %v; want %d", tc.size, tc.avail, tc.own, got, err, tc.want)
		}
	}
}

// TestMaxSizeAuto: a cache made with MaxSizeAuto records the bound it chose from its file system
// and derives its segment size from it; later opens with MaxSizeAuto keep the recorded bound
// whatever the file system holds by then, an explicit MaxSize overrides it for its open without
// changing the record, a read-only open reports it, and a damaged record is chosen again.
func TestMaxSizeAuto(t *testing.T) {
	dir := t.TempDir()
	size, avail, err := vfs.Space(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := chooseBound(size, avail, 0)
	if err != nil {
		t.Skipf("the test's file system is too full for MaxSizeAuto: %v", err)
	}
	c := open(t, dir, WithMaxSize(MaxSizeAuto))
	got := c.Stats().MaxSize
	// The free space may move while the test runs: within 1% of the file system.
	if got <= 0 || got > int64(float64(size)*AutoMaxSizeShare) || abs(got-want) > size/100 {
		t.Fatalf("MaxSizeAuto chose %d on a file system of %d with %d free; want about %d", got, size, avail, want)
	}
	if seg := c.opts.SegmentSize; seg != min(DefaultSegmentSize, got/derivedSegmentsPerCache&^(1<<20-1)) {
		t.Fatalf("SegmentSize %d is not derived from the bound %d", seg, got)
	}
	if err := c.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := filepath.Join(dir, cachedir.BoundFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bd, err := decodeBound(b); err != nil || bd.maxSize != got || bd.fsSize != size || bd.perMille != 800 {
		t.Fatalf("bound file %+v, %v; want max %d of %d at 800 per mille", bd, err, got, size)
	}

	// Kept: a recorded bound is what later opens use, not one chosen again.
	const recorded = 256 << 20
	if err := os.WriteFile(path, bound{maxSize: recorded, fsSize: size, perMille: 800}.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, WithMaxSize(MaxSizeAuto))
	if got := c.Stats().MaxSize; got != recorded || c.opts.SegmentSize != recorded/derivedSegmentsPerCache {
		t.Fatalf("reopened with MaxSizeAuto: MaxSize %d, SegmentSize %d; want the recorded %d and %d", got, c.opts.SegmentSize, recorded, recorded/derivedSegmentsPerCache)
	}
	expect(t, c, "k", []byte("v"))
	c.Close()
	c = open(t, dir, WithMaxSize(128<<20))
	if got := c.Stats().MaxSize; got != 128<<20 {
		t.Fatalf("an explicit MaxSize did not override: %d", got)
	}
	c.Close()
	c = open(t, dir, WithMaxSize(MaxSizeAuto), WithReadOnly(true))
	if got := c.Stats().MaxSize; got != recorded {
		t.Fatalf("read-only with MaxSizeAuto: MaxSize %d, want the recorded %d", got, recorded)
	}
	c.Close()

	// Damaged: chosen again and recorded, the damage noted.
	b, _ = os.ReadFile(path)
	b[10] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, WithMaxSize(MaxSizeAuto))
	st := c.Stats()
	c.Close()
	if abs(st.MaxSize-want) > size/100 || st.LastCorruption == "" {
		t.Fatalf("after damage: MaxSize %d (want about %d), last corruption %q", st.MaxSize, want, st.LastCorruption)
	}
	if b, _ := os.ReadFile(path); func() error { _, err := decodeBound(b); return err }() != nil {
		t.Fatal("the damaged bound file was not written again")
	}

	// A read-only open of a cache with no recorded bound has none, and records nothing.
	dir2 := t.TempDir()
	c = open(t, dir2)
	c.Close()
	c = open(t, dir2, WithMaxSize(MaxSizeAuto), WithReadOnly(true))
	if got := c.Stats().MaxSize; got != 0 {
		t.Fatalf("read-only, nothing recorded: MaxSize %d", got)
	}
	c.Close()
	if _, err := os.Stat(filepath.Join(dir2, cachedir.BoundFile)); !os.IsNotExist(err) {
		t.Fatalf("a read-only open wrote the bound file: %v", err)
	}
	if _, err := New(t.TempDir(), WithMaxSize(-2)); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("MaxSize -2: %v", err)
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
