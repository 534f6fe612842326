package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatPageCache follows a range in and out of the page cache: written (cached), dropped
// with fadvise(DONTNEED) (not cached, and not counted as evicted: no memory pressure dropped
// it), read back (cached).
func TestStatPageCache(t *testing.T) {
	const n = 1 << 20
	f := writtenFile(t, n)
	st, err := StatPageCache(f, 0, n)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("cachestat: %v (Linux before 6.5)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	pages := int64(n / os.Getpagesize())
	if st.Pages != pages || st.Cached != pages {
		t.Fatalf("after the write: %+v, want %d pages all cached", st, pages)
	}
	dropPages(t, f, n)
	if st, err = StatPageCache(f, 0, n); err != nil || st.Cached != 0 || st.Evicted != 0 {
		t.Fatalf("after DONTNEED: %+v, %v; want nothing cached or evicted", st, err)
	}
	// A range that is not page-aligned covers every page it touches.
	if st, err = StatPageCache(f, 100, 8192); err != nil || st.Pages != 3 {
		t.Fatalf("3 pages from offset 100: %+v, %v", st, err)
	}
	if _, err := f.ReadAt(make([]byte, 64<<10), 64<<10); err != nil {
		t.Fatal(err)
	}
	if st, err = StatPageCache(f, 64<<10, 64<<10); err != nil || st.Cached != st.Pages {
		t.Fatalf("after reading the range: %+v, %v; want all of it cached", st, err)
	}
}

// TestStatPageCacheUnsupported: a file that cannot tell says so.
func TestStatPageCacheUnsupported(t *testing.T) {
	if _, err := StatPageCache(namedOnly{}, 0, 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

// writtenFile is a new file of n zero bytes, written through the page cache (so cached), closed
// with the test.
func writtenFile(t *testing.T, n int) File {
	t.Helper()
	f, err := Default.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// dropPages writes the first n bytes of f back and drops them from the page cache
// (fadvise(DONTNEED), which the kernel does not count as an eviction).
func dropPages(t *testing.T, f File, n int64) {
	t.Helper()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.(*osFile).Fd()), 0, n, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// namedOnly is a File that has a name and nothing else.
type namedOnly struct{ File }

func (namedOnly) Name() string { return "f" }

// TestAdviseRandomReads: a 4 KiB read through the page cache of a file advised random brings in
// the pages it asks for and no more; without the advice the kernel reads ahead past them (so the
// check can fail). A file that cannot take the advice says so.
func TestAdviseRandomReads(t *testing.T) {
	const n = 4 << 20
	cachedAfterRead := func(advise bool) int64 {
		f := writtenFile(t, n)
		dropPages(t, f, n)
		if advise {
			if err := AdviseRandomReads(f); err != nil {
				t.Fatal(err)
			}
		}
		// The start of a file, where the kernel reads ahead from a first read.
		if _, err := f.ReadAt(make([]byte, 4096), 0); err != nil {
			t.Fatal(err)
		}
		st, err := StatPageCache(f, 0, n)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("cachestat: %v (Linux before 6.5)", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return st.Cached
	}
	if got := cachedAfterRead(true); got != 1 {
		t.Errorf("advised random: %d pages cached after a one-page read, want 1", got)
	}
	if got := cachedAfterRead(false); got <= 1 {
		t.Logf("without the advice the kernel read no further either (%d pages): readahead is off here", got)
	}
	if err := AdviseRandomReads(namedOnly{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a file that cannot take the advice: %v", err)
	}
}
