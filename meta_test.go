package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache/internal/record"
)

func withVersionLease(n uint64) Option { return func(o *Options) { o.versionLease = n } }

// readBlob returns the value and info of key through Get, or ok false.
func readBlob(t testing.TB, c *Cache, key string) ([]byte, BlobInfo, bool) {
	t.Helper()
	r, ok := c.GetRange([]byte(key), 0, -1)
	if !ok {
		return nil, BlobInfo{}, false
	}
	defer r.Close()
	v, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return v, r.Info(), true
}

// TestMetaRoundTrip: flags, expiry and version come back from Get, Stat and the write buffer,
// and after reopen, for buffered and streamed values.
func TestMetaRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	expires := time.Now().Add(time.Hour).Truncate(time.Nanosecond)
	want := map[string]BlobInfo{}
	for i, size := range []int{0, 100, 200 << 10} { // the last is larger than the write buffer: streamed
		key := fmt.Sprint("k", i)
		attrs := strings.Repeat("Content-Type: text/plain\n", i) // none, one line, two
		v, err := c.PutWith([]byte(key), value(key, 0, size), PutOptions{Flags: uint32(0xfff0 + i), Expires: expires, Attrs: attrs})
		if err != nil {
			t.Fatal(err)
		}
		want[key] = BlobInfo{Size: int64(size), Version: v, Flags: uint32(0xfff0 + i), Expires: expires, Attrs: attrs}
	}
	check := func(when string) {
		t.Helper()
		seen := map[uint64]bool{}
		for key, w := range want {
			got, info, ok := readBlob(t, c, key)
			if !ok || !bytes.Equal(got, value(key, 0, int(w.Size))) {
				t.Fatalf("%s: %s: ok %v", when, key, ok)
			}
			st, err := c.Stat([]byte(key))
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range []BlobInfo{info, st} {
				if i.Version != w.Version || i.Flags != w.Flags || !i.Expires.Equal(w.Expires) || i.Size != w.Size || i.Attrs != w.Attrs {
					t.Fatalf("%s: %s: info %+v, want %+v", when, key, i, w)
				}
			}
			// ReadAt with room to spare delivers the value and no attribute byte.
			p := make([]byte, w.Size+100)
			if n, err := c.ReadAt([]byte(key), p, 0); int64(n) != w.Size || err != io.EOF || !bytes.Equal(p[:n], value(key, 0, int(w.Size))) {
				t.Fatalf("%s: %s: ReadAt = %d, %v", when, key, n, err)
			}
			if w.Version == 0 || seen[w.Version] {
				t.Fatalf("%s: version %d of %s is 0 or not unique", when, w.Version, key)
			}
			seen[w.Version] = true
		}
	}
	check("write buffer")
	c.Drain()
	check("segment")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	check("reopened")
}

// TestVersionsUnique: versions never repeat across clean reopens, crashes and lease renewals,
// and a damaged state file forgets what was stored before rather than reuse versions.
func TestVersionsUnique(t *testing.T) {
	dir := t.TempDir()
	opts := small(withVersionLease(7))
	seen := map[uint64]string{}
	note := func(v uint64, what string) {
		t.Helper()
		if prev, ok := seen[v]; ok || v == 0 {
			t.Fatalf("version %d of %s was already %s's", v, what, prev)
		}
		seen[v] = what
	}
	for round := range 6 {
		c := open(t, dir, opts...)
		for i := range 20 { // several leases of 7 per round
			key := fmt.Sprintf("r%d-%d", round, i)
			v, err := c.PutWith([]byte(key), []byte(key), PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			note(v, key)
		}
		if round%2 == 0 {
			c.crash()
		} else if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever survived keeps the version it was written with.
	c := open(t, dir, opts...)
	survivors := 0
	for v, key := range seen {
		if info, err := c.Stat([]byte(key)); err == nil {
			survivors++
			if info.Version != v {
				t.Fatalf("%s: version %d after reopen, written with %d", key, info.Version, v)
			}
		}
	}
	if survivors < 60 {
		t.Fatalf("only %d blobs survived", survivors)
	}
	c.Close()
	// A damaged state file: the cache opens, counts it, and forgets what was there.
	state := filepath.Join(dir, stateFile)
	b, _ := os.ReadFile(state)
	b[10] ^= 1
	os.WriteFile(state, b, 0o644)
	c = open(t, dir, opts...)
	defer c.Close()
	if st := c.Stats(); st.CorruptRecord == 0 || st.LastCorruption == "" {
		t.Fatalf("damaged state file not reported: %+v", st)
	}
	for _, key := range seen {
		if _, err := c.Stat([]byte(key)); err == nil {
			t.Fatalf("%s is still served after the state file was damaged", key)
		}
	}
	v, err := c.PutWith([]byte("after"), []byte("x"), PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	note(v, "after")
}

// TestExpiry: an expired blob is a miss for every read, counted, stays one after reopen and
// crash, and its record is dropped from the index by a tombstone.
func TestExpiry(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	past := time.Now().Add(-time.Second)
	soon := time.Now().Add(300 * time.Millisecond)
	for _, size := range []int{10, 200 << 10} {
		c.PutWith([]byte(fmt.Sprint("past", size)), value("p", 0, size), PutOptions{Expires: past})
		c.PutWith([]byte(fmt.Sprint("soon", size)), value("s", 0, size), PutOptions{Expires: soon})
		c.PutWith([]byte(fmt.Sprint("never", size)), value("n", 0, size), PutOptions{})
	}
	misses := func(key string) {
		t.Helper()
		if _, ok := c.Get([]byte(key)); ok {
			t.Fatalf("Get %s: hit", key)
		}
		if _, ok := c.GetRange([]byte(key), 1, 5); ok {
			t.Fatalf("GetRange %s: hit", key)
		}
		if _, err := c.ReadAt([]byte(key), make([]byte, 8), 0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ReadAt %s: %v", key, err)
		}
		if _, err := c.Stat([]byte(key)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Stat %s: %v", key, err)
		}
	}
	hits := func(key string) {
		t.Helper()
		if _, err := c.Stat([]byte(key)); err != nil {
			t.Fatalf("Stat %s: %v", key, err)
		}
	}
	for _, size := range []int{10, 200 << 10} {
		misses(fmt.Sprint("past", size)) // in the write buffer (or streamed)
		hits(fmt.Sprint("soon", size))
	}
	if st := c.Stats(); st.Expired == 0 {
		t.Fatalf("Expired = 0 after reads of expired blobs")
	}
	c.Drain()
	c.crash()
	c = open(t, dir, small()...)
	time.Sleep(time.Until(soon) + 50*time.Millisecond)
	for _, size := range []int{10, 200 << 10} {
		misses(fmt.Sprint("past", size))
		misses(fmt.Sprint("soon", size))
		hits(fmt.Sprint("never", size))
	}
	c.Drain() // the tombstones queued by the reads above
	time.Sleep(50 * time.Millisecond)
	c.Put([]byte("nudge"), nil) // the writer writes queued tombstones at its next write
	c.Drain()
	// Left in the index: the two that never expire and the nudge. (Some of the expired ones
	// may have had their tombstones written before the crash, by the writer's tick.)
	if got := c.Stats().Blobs; got != 3 {
		t.Fatalf("%d blobs in the index after the expired ones were read, want 3", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	for _, size := range []int{10, 200 << 10} {
		misses(fmt.Sprint("soon", size))
		hits(fmt.Sprint("never", size))
	}
}

// TestPreconditions: each precondition against a missing, present (buffered and on disk),
// expired and deleted blob.
func TestPreconditions(t *testing.T) {
	c := open(t, t.TempDir(), small()...)
	defer c.Close()
	k := []byte("k")
	if _, err := c.PutWith(k, []byte("1"), PutOptions{If: IfPresent()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("IfPresent on a missing key: %v", err)
	}
	if _, err := c.PutWith(k, []byte("1"), PutOptions{If: IfVersion(5)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("IfVersion on a missing key: %v", err)
	}
	v1, err := c.PutWith(k, []byte("1"), PutOptions{If: IfAbsent()})
	if err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"write buffer", "segment"} {
		if where == "segment" {
			c.Drain()
		}
		if _, err := c.PutWith(k, []byte("x"), PutOptions{If: IfAbsent()}); !errors.Is(err, ErrExists) {
			t.Fatalf("%s: IfAbsent on a present key: %v", where, err)
		}
		if _, err := c.PutWith(k, []byte("x"), PutOptions{If: IfVersion(v1 + 1000)}); !errors.Is(err, ErrExists) {
			t.Fatalf("%s: IfVersion with another version: %v", where, err)
		}
		if err := c.DeleteIf(k, IfVersion(v1+1000)); !errors.Is(err, ErrExists) {
			t.Fatalf("%s: DeleteIf with another version: %v", where, err)
		}
		if got, _, _ := readBlob(t, c, "k"); string(got) != "1" {
			t.Fatalf("%s: a refused write changed the blob to %q", where, got)
		}
	}
	v2, err := c.PutWith(k, []byte("2"), PutOptions{If: IfVersion(v1)})
	if err != nil || v2 == v1 {
		t.Fatalf("IfVersion with the version: %d, %v", v2, err)
	}
	v3, err := c.PutWith(k, []byte("3"), PutOptions{If: IfPresent()})
	if err != nil {
		t.Fatal(err)
	}
	// Touch keeps value, flags and version.
	exp := time.Now().Add(time.Hour)
	if err := c.Touch(k, exp); err != nil {
		t.Fatal(err)
	}
	got, info, _ := readBlob(t, c, "k")
	if string(got) != "3" || info.Version != v3 || !info.Expires.Equal(exp) {
		t.Fatalf("after Touch: %q %+v", got, info)
	}
	if err := c.Touch([]byte("missing"), exp); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Touch of a missing key: %v", err)
	}
	if err := c.DeleteIf(k, IfVersion(v3)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutWith(k, []byte("4"), PutOptions{If: IfAbsent()}); err != nil {
		t.Fatalf("IfAbsent after a delete: %v", err)
	}
	// An expired blob is absent.
	c.PutWith([]byte("e"), []byte("old"), PutOptions{Expires: time.Now().Add(-time.Minute)})
	if _, err := c.PutWith([]byte("e"), []byte("new"), PutOptions{If: IfAbsent()}); err != nil {
		t.Fatalf("IfAbsent on an expired blob: %v", err)
	}
	if st := c.Stats(); st.PreconditionFailed < 6 {
		t.Fatalf("PreconditionFailed = %d", st.PreconditionFailed)
	}
}

// TestPreconditionsConcurrent: compare-and-swap increments by many goroutines lose none, and of
// many IfAbsent writers of one key exactly one wins; for values in the write buffer and
// streamed ones, with a writer of other keys flushing alongside. Run with -race.
func TestPreconditionsConcurrent(t *testing.T) {
	for _, size := range []int{8, 100 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := open(t, t.TempDir(), small()...)
			defer c.Close()
			const workers, incs = 4, 25
			pad := make([]byte, size)
			encode := func(n int) []byte { return append(fmt.Appendf(nil, "%08d", n), pad[8:]...) }
			if _, err := c.PutWith([]byte("n"), encode(0), PutOptions{}); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var noise sync.WaitGroup
			noise.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					c.Put(fmt.Appendf(nil, "noise%d", i%50), pad)
				}
			})
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for w := range workers {
				wg.Go(func() {
					for range incs {
						for misses := 0; ; {
							got, info, ok := readBlob(t, c, "n")
							if !ok {
								// A read that sees the index move under it too often is a
								// miss (a cache may forget for a moment); n must come back.
								if misses++; misses > 1000 {
									t.Error("n missing")
									return
								}
								continue
							}
							var n int
							fmt.Sscanf(string(got[:8]), "%d", &n)
							_, err := c.PutWith([]byte("n"), encode(n+1), PutOptions{If: IfVersion(info.Version)})
							if err == nil {
								break
							}
							if !errors.Is(err, ErrExists) {
								t.Error(err)
								return
							}
						}
					}
					if _, err := c.PutWith([]byte("once"), fmt.Appendf(nil, "%d", w), PutOptions{If: IfAbsent()}); err == nil {
						mu.Lock()
						wins++
						mu.Unlock()
					} else if !errors.Is(err, ErrExists) {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			close(stop)
			noise.Wait()
			got, _, _ := readBlob(t, c, "n")
			if string(got[:8]) != fmt.Sprintf("%08d", workers*incs) || wins != 1 {
				t.Fatalf("counter %q, want %d; %d IfAbsent winners", got[:8], workers*incs, wins)
			}
		})
	}
}

// TestRefusedConfirmed: a precondition that fails on what a conditional write saw is reported
// only if the key still holds what was seen. observe reads without the writer's lock, and while
// an eviction moves a hot record (its copy in the write buffer, its index entry gone) it can see
// nothing at all; such an observation, handed to refused, must send the write to observe again
// (RELIABILITY, finding 27).
func TestRefusedConfirmed(t *testing.T) {
	c := open(t, t.TempDir(), small()...)
	defer c.Close()
	key := []byte("k")
	h := record.KeyHash(key)
	nothing := &observation{} // what observe returns when it finds the key nowhere
	ifPresent := metaOf(PutOptions{If: IfPresent()})
	ifAbsent := metaOf(PutOptions{If: IfAbsent()})

	// Absent, and still absent: the failure stands.
	if err := c.refused(key, h, ifPresent, nothing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("absent key, IfPresent: %v, want ErrNotFound", err)
	}
	if _, err := c.PutWith(key, []byte("v1"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"write buffer", "index"} {
		if where == "index" {
			c.Drain()
		}
		// Seen absent, but the key has a record now: look again, report nothing.
		if err := c.refused(key, h, ifPresent, nothing); !errors.Is(err, errChanged) {
			t.Fatalf("key in the %s seen absent: %v, want errChanged", where, err)
		}
		// What observe sees now is confirmed.
		o, err := c.observe(key, h)
		if err != nil {
			t.Fatal(err)
		}
		if !o.present {
			t.Fatalf("key in the %s not observed", where)
		}
		if err := c.refused(key, h, ifAbsent, o); !errors.Is(err, ErrExists) {
			t.Fatalf("key in the %s, IfAbsent: %v, want ErrExists", where, err)
		}
		if err := c.refused(key, h, metaOf(PutOptions{If: IfVersion(o.version + 1)}), o); !errors.Is(err, ErrExists) {
			t.Fatalf("key in the %s, another version: %v, want ErrExists", where, err)
		}
	}
	// A location the index no longer holds (the key written again since): look again.
	o, _ := c.observe(key, h)
	if _, err := c.PutWith(key, []byte("v2"), PutOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Drain()
	if err := c.refused(key, h, metaOf(PutOptions{If: IfVersion(o.version + 1)}), o); !errors.Is(err, errChanged) {
		t.Fatalf("an old location's version refused: %v, want errChanged", err)
	}
}

// TestInvalidateAll: everything stored before the call is a miss, at once or from a later time,
// kept across reopen; what is stored after stays.
func TestInvalidateAll(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	c.Put([]byte("a"), []byte("1"))
	c.Drain()
	c.Put([]byte("b"), []byte("2")) // still in the write buffer
	if err := c.InvalidateAll(time.Time{}); err != nil {
		t.Fatal(err)
	}
	c.Put([]byte("c"), []byte("3"))
	for _, k := range []string{"a", "b"} {
		if _, ok := c.Get([]byte(k)); ok {
			t.Fatalf("%s survived InvalidateAll", k)
		}
	}
	if _, ok := c.Get([]byte("c")); !ok {
		t.Fatal("c, stored after InvalidateAll, is gone")
	}
	// A delayed one: nothing changes until its time.
	at := time.Now().Add(300 * time.Millisecond)
	if err := c.InvalidateAll(at); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Get([]byte("c")); !ok {
		t.Fatal("c gone before the invalidation time")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = open(t, dir, small()...)
	defer c.Close()
	if _, ok := c.Get([]byte("a")); ok {
		t.Fatal("a is back after reopen")
	}
	time.Sleep(time.Until(at) + 20*time.Millisecond)
	if _, ok := c.Get([]byte("c")); ok {
		t.Fatal("c survived the delayed InvalidateAll")
	}
	c.Put([]byte("d"), []byte("4"))
	if _, ok := c.Get([]byte("d")); !ok {
		t.Fatal("d, stored after the invalidation time, is gone")
	}
	if st := c.Stats(); st.Invalidated == 0 {
		t.Fatalf("stats %+v", st)
	}
}
