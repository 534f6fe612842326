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
	f, err := Default.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const n = 1 << 20
	if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
		t.Fatal(err)
	}
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
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fd := int(f.(*osFile).Fd())
	if err := unix.Fadvise(fd, 0, n, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
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

// namedOnly is a File that has a name and nothing else.
type namedOnly struct{ File }

func (namedOnly) Name() string { return "f" }
