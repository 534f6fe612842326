package blobcache

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/record"
)

// sharedEntryKeys returns two keys whose hashes differ but agree on the bits the index keeps
// (index.Canonical): a birthday search over a few million keys.
func sharedEntryKeys(t *testing.T) (a, b []byte) {
	t.Helper()
	type kh struct {
		c uint64
		i int
	}
	const n = 1 << 22
	hs := make([]kh, n)
	key := func(i int) []byte { return fmt.Appendf(nil, "shared-%d", i) }
	for i := range hs {
		hs[i] = kh{index.Canonical(record.KeyHash(key(i))), i}
	}
	slices.SortFunc(hs, func(x, y kh) int { return cmp.Or(cmp.Compare(x.c, y.c), cmp.Compare(x.i, y.i)) })
	for j := 1; j < n; j++ {
		if hs[j].c == hs[j-1].c {
			a, b = key(hs[j-1].i), key(hs[j].i)
			if record.KeyHash(a) != record.KeyHash(b) {
				return a, b
			}
		}
	}
	t.Fatal("no two keys share an index entry")
	return nil, nil
}

// TestKeysSharingAnIndexEntry: two keys whose hashes agree on the bits the index keeps are one
// index entry. The later write wins it; the other key is a miss (its reader finds the other key's
// record and says so), never the other key's blob, for reads, conditional writes and deletes
// alike, and after a reopen the same key holds the entry.
func TestKeysSharingAnIndexEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("a birthday search over 4M keys")
	}
	a, b := sharedEntryKeys(t)
	dir := t.TempDir()
	c, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	get := func(c *Cache, k []byte) (string, bool) {
		buf := make([]byte, 64)
		n, err := c.ReadAt(k, buf, 0)
		if errors.Is(err, ErrNotFound) {
			return "", false
		}
		if err != nil && err != io.EOF {
			t.Fatalf("ReadAt(%s): %v", k, err)
		}
		return string(buf[:n]), true
	}
	if err := c.Put(a, []byte("value of a")); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if v, ok := get(c, b); ok {
		t.Fatalf("%s read %q, the blob of %s", b, v, a)
	}
	// b is absent, so a write of it if absent succeeds, and takes the entry from a.
	if _, err := c.PutWith(b, []byte("value of b"), PutOptions{If: IfAbsent()}); err != nil {
		t.Fatalf("PutWith(%s, IfAbsent): %v", b, err)
	}
	c.Drain()
	if v, ok := get(c, b); !ok || v != "value of b" {
		t.Fatalf("%s: %q %v", b, v, ok)
	}
	if v, ok := get(c, a); ok {
		t.Fatalf("%s read %q after %s took the entry", a, v, b)
	}
	if _, err := c.PutWith(a, []byte("again"), PutOptions{If: IfPresent()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("PutWith(%s, IfPresent) = %v, want ErrNotFound", a, err)
	}
	if st := c.Stats(); st.Blobs != 1 || st.CorruptRecord != 0 {
		t.Fatalf("%d blobs, %d corrupt; want 1 and none", st.Blobs, st.CorruptRecord)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, ok := get(c, b); !ok || v != "value of b" {
		t.Fatalf("after reopening, %s: %q %v", b, v, ok)
	}
	if v, ok := get(c, a); ok {
		t.Fatalf("after reopening, %s read %q", a, v)
	}
}
