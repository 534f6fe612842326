package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// noWriteFS is a read-only file system that also records every attempt to change it: a
// read-only cache must not even try (root ignores file modes, so a chmod would not show it).
type noWriteFS struct {
	vfs.FS
	mu    sync.Mutex
	tried []string
}

func (r *noWriteFS) refuse(op, name string) error {
	r.mu.Lock()
	r.tried = append(r.tried, op+" "+name)
	r.mu.Unlock()
	return &os.PathError{Op: op, Path: name, Err: syscall.EROFS}
}

func (r *noWriteFS) attempts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.tried...)
}

func (r *noWriteFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, r.refuse("open for writing", name)
	}
	return r.FS.OpenFile(name, flag, perm)
}

func (r *noWriteFS) OpenDirect(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		return nil, r.refuse("open direct for writing", name)
	}
	return r.FS.OpenDirect(name, flag, perm)
}

func (r *noWriteFS) Remove(name string) error   { return r.refuse("remove", name) }
func (r *noWriteFS) Rename(old, _ string) error { return r.refuse("rename", old) }
func (r *noWriteFS) MkdirAll(p string, _ os.FileMode) error {
	if _, err := r.FS.Stat(p); err == nil {
		return nil
	}
	return r.refuse("mkdir", p)
}
func (r *noWriteFS) SyncDir(name string) error { return r.refuse("sync dir", name) }
func (r *noWriteFS) Lock(name string) (io.Closer, error) {
	return nil, r.refuse("exclusive lock", name)
}

// snapshot is the name, size and content checksum of every file under dir.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %d %08x", rel, len(b), crcOf(b)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func crcOf(b []byte) uint32 {
	var h uint32 = 2166136261
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// TestReadOnlyNoCache: a read-only open creates nothing: a missing or empty directory is
// ErrNoCache, a directory of something else ErrNotBlobCache.
func TestReadOnlyNoCache(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := New(missing, WithReadOnly(true)); !errors.Is(err, ErrNoCache) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("read-only open of a missing directory: %v, want ErrNoCache naming it", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only open created %s: %v", missing, err)
	}
	empty := t.TempDir()
	if _, err := New(empty, WithReadOnly(true)); !errors.Is(err, ErrNoCache) {
		t.Fatalf("read-only open of an empty directory: %v, want ErrNoCache", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("read-only open wrote into an empty directory: %v", ents)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "photo.jpg"), []byte("x"), 0o644)
	if _, err := New(other, WithReadOnly(true)); !errors.Is(err, ErrNotBlobCache) {
		t.Fatalf("read-only open of another program's directory: %v, want ErrNotBlobCache", err)
	}
}

// TestReadOnlyReads: every read works on a read-only file system, every write returns
// ErrReadOnly, and nothing on disk changes, not even an attempt: for a cache closed cleanly, one
// a crash left with an unsealed segment and its write buffer lost, and one with a damaged
// record that a writable open would cut and seal.
func TestReadOnlyReads(t *testing.T) {
	for _, state := range []string{"closed", "crashed", "damaged"} {
		t.Run(state, func(t *testing.T) {
			dir := t.TempDir()
			c := open(t, dir, small()...)
			vals := putKeys(t, c, "k", 120, 0, 20000) // sealed segments and an active one
			c.Delete([]byte("k3"))
			if _, err := c.PutWith([]byte("meta"), []byte("v"), PutOptions{Flags: 7}); err != nil {
				t.Fatal(err)
			}
			c.Drain()
			if state == "closed" {
				c.Close()
			} else {
				c.crash()
			}
			if state == "damaged" {
				damageLastSegment(t, dir)
			}

			before := snapshot(t, dir)
			rofs := &noWriteFS{FS: vfs.Default}
			ro, err := New(dir, WithReadOnly(true), withFS(rofs))
			if err != nil {
				t.Fatal(err)
			}
			closer, err := ro.Start()
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for i := range 120 {
				k := fmt.Sprintf("k%d", i)
				b, ok := getBytes(t, ro, k)
				if !ok {
					continue
				}
				if k == "k3" {
					t.Fatalf("deleted k3 read back")
				}
				if !bytes.Equal(b, vals[k]) {
					t.Fatalf("%s: wrong bytes (%d)", k, len(b))
				}
				seen[k] = true
			}
			if info, err := ro.Stat([]byte("meta")); err != nil || info.Flags != 7 {
				t.Fatalf("Stat(meta): %+v, %v", info, err)
			}
			p := make([]byte, 10)
			if n, err := ro.ReadAt([]byte("k1"), p, 5); state != "damaged" && (err != nil || n != 10) {
				t.Fatalf("ReadAt: %d, %v", n, err)
			}
			for name, err := range map[string]error{
				"Put":           ro.Put([]byte("x"), []byte("y")),
				"Delete":        ro.Delete([]byte("k1")),
				"PutFrom":       ro.PutFrom([]byte("x"), strings.NewReader("y"), 1),
				"DeleteIf":      ro.DeleteIf([]byte("k1"), IfPresent()),
				"Touch":         ro.Touch([]byte("k1"), time.Time{}),
				"InvalidateAll": ro.InvalidateAll(time.Now()),
			} {
				if !errors.Is(err, ErrReadOnly) {
					t.Errorf("%s on a read-only cache: %v, want ErrReadOnly", name, err)
				}
			}
			if _, err := ro.PutWith([]byte("x"), []byte("y"), PutOptions{If: IfAbsent()}); !errors.Is(err, ErrReadOnly) {
				t.Errorf("PutWith on a read-only cache: %v", err)
			}
			if st := ro.Stats(); state == "damaged" && st.CorruptRecord == 0 {
				t.Fatalf("the damage was not met: %+v", st)
			}
			if err := ro.Flush(); err != nil {
				t.Errorf("Flush of a read-only cache: %v", err)
			}
			ro.Drain()
			if err := closer(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if tried := rofs.attempts(); len(tried) > 0 {
				t.Fatalf("a read-only cache tried to change the disk: %v", tried)
			}
			if after := snapshot(t, dir); after != before {
				t.Fatalf("the directory changed:\nbefore\n%s\nafter\n%s", before, after)
			}

			// A writable open (which repairs) finds the same keys.
			rw := open(t, dir, small()...)
			defer rw.Close()
			for i := range 120 {
				k := fmt.Sprintf("k%d", i)
				_, ok := rw.Get([]byte(k))
				if ok != seen[k] {
					t.Errorf("%s: writable open found it %v, read-only %v", k, ok, seen[k])
				}
			}
			if state == "closed" && len(seen) != 119 {
				t.Errorf("read-only open of a clean cache found %d of 119 keys", len(seen))
			}
		})
	}
}

// damageLastSegment flips a byte in the value of the newest segment's first record.
func damageLastSegment(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, segDir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("segments: %v %v", ents, err)
	}
	p := filepath.Join(dir, segDir, ents[len(ents)-1].Name())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[4096+1000] ^= 0xff // in the first record's value
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyLock: read-only opens share the directory with each other and exclude a writer,
// both ways (bbolt's rule: a reader's index would go stale at the writer's next Put).
func TestReadOnlyLock(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	c.Put([]byte("k"), []byte("v"))
	if _, err := New(dir, WithReadOnly(true)); !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open beside a writer: %v, want ErrLocked", err)
	}
	c.Close()
	r1, err := New(dir, WithReadOnly(true))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := New(dir, WithReadOnly(true))
	if err != nil {
		t.Fatalf("second read-only open: %v", err)
	}
	expect(t, r2, "k", []byte("v"))
	if _, err := New(dir, small()...); !errors.Is(err, ErrLocked) {
		t.Fatalf("writable open beside readers: %v, want ErrLocked", err)
	}
	r1.Close()
	r2.Close()
	c = open(t, dir, small()...)
	c.Close()
}

// TestReadOnlyPerBlob: the one-file-per-blob layout reads read-only too, changing nothing.
func TestReadOnlyPerBlob(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small(WithPerBlobFiles(true))...)
	vals := putKeys(t, c, "k", 50, 0, 3000)
	c.Close()
	os.WriteFile(filepath.Join(dir, "blobs", "07", "README"), []byte("mine"), 0o644)
	before := snapshot(t, dir)
	rofs := &noWriteFS{FS: vfs.Default}
	ro, err := New(dir, WithReadOnly(true), withFS(rofs))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range vals {
		expect(t, ro, k, v)
	}
	if got := ro.Stats().StrayFiles; got != 1 {
		t.Errorf("StrayFiles %d, want 1", got)
	}
	if err := ro.Put([]byte("x"), []byte("y")); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Put: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if tried := rofs.attempts(); len(tried) > 0 {
		t.Fatalf("a read-only cache tried to change the disk: %v", tried)
	}
	if after := snapshot(t, dir); after != before {
		t.Fatalf("the directory changed:\nbefore\n%s\nafter\n%s", before, after)
	}
}
