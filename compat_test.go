package blobcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// testdata/compat-format1 holds two cache directories (segments, and one file per blob) written
// by the build before record metadata (commit 5a5c641, record format 1, identity version 1),
// with testdata/compat-format1/gen_test.go.txt. This build must open them, serve every blob as
// it was stored (no expiry, flags 0, a stable version), and upgrade them.

// compatWant is what the generator stored, as the library sees it: the server's items carry
// their old in-value envelope.
func compatWant(perBlob bool) map[string][]byte {
	want := map[string][]byte{}
	for i := range 40 {
		want[fmt.Sprintf("key-%02d", i)] = bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*37)
	}
	want["overwritten"] = []byte("new value")
	want["empty"] = []byte{}
	if !perBlob {
		want["streamed"] = bytes.Repeat([]byte("0123456789abcdef"), 80<<10/16)
	}
	for _, m := range []struct {
		key  string
		meta legacyMeta
	}{
		{"server-flags", legacyMeta{Flags: 42}},
		{"server-expired", legacyMeta{Flags: 7, Expires: 1577836800}},
		{"server-future", legacyMeta{Flags: 9, Expires: 4102444800}},
		{"server-plain", legacyMeta{}},
	} {
		want[m.key] = legacyItem([]byte("payload of "+m.key), m.meta)
	}
	return want
}

// legacyMeta is what the item envelope of the server of that build added to a payload.
type legacyMeta struct {
	Flags   uint32 // memcached client flags
	Expires int64  // unix seconds
}

// The item envelope of the server of that build (server/item, which still decodes it): its magic
// and its header's length, written out here so that the directory this test opens does not
// depend on the server's code.
const (
	legacyItemMagic  = "\x00bcitem\x01"
	legacyItemHeader = 20
)

// legacyItem is the blob the server of that build stored for payload with meta m: the payload
// behind the item envelope's header (magic, flags, expiry) when m is not zero or the payload
// starts with the magic, else the payload alone.
func legacyItem(payload []byte, m legacyMeta) []byte {
	if m == (legacyMeta{}) && !bytes.HasPrefix(payload, []byte(legacyItemMagic)) {
		return payload
	}
	b := make([]byte, legacyItemHeader, legacyItemHeader+len(payload))
	copy(b, legacyItemMagic)
	binary.LittleEndian.PutUint32(b[8:], m.Flags)
	binary.LittleEndian.PutUint64(b[12:], uint64(m.Expires))
	return append(b, payload...)
}

func TestOpensFormat1(t *testing.T) {
	for _, run := range []struct {
		layout string
		comp   Compression
	}{{"segments", CompressionNone}, {"perblob", CompressionNone}, {"segments", CompressionZstd}, {"perblob", CompressionS2}} {
		layout := run.layout
		t.Run(fmt.Sprintf("%s/%v", layout, run.comp), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cache")
			copyDir(t, filepath.Join("testdata", "compat-format1", layout), dir, "")
			want := compatWant(layout == "perblob")
			rewritten := map[string]bool{}
			check := func(c *Cache, when string) map[string]uint64 {
				t.Helper()
				versions := map[string]uint64{}
				for key, v := range want {
					got, info, ok := readBlob(t, c, key)
					if !ok || !bytes.Equal(got, v) {
						t.Fatalf("%s: %s: %v, %d bytes, want %d", when, key, ok, len(got), len(v))
					}
					st, err := c.Stat([]byte(key))
					if err != nil || st != info || info.Size != int64(len(v)) {
						t.Fatalf("%s: %s: Stat %+v, %v; Get's info %+v", when, key, st, err, info)
					}
					if rewritten[key] {
						continue
					}
					if info.Flags != 0 || !info.Expires.IsZero() || info.Version < 1<<63 || !info.Legacy {
						t.Fatalf("%s: %s: a legacy record read as %+v (its version must be above the counter's range)", when, key, info)
					}
					versions[key] = info.Version
					// ReadAt, from the start (one vectored read planned for the new header)
					// and from inside the value.
					for _, off := range []int64{0, 5} {
						p := make([]byte, len(v)+3)
						n, err := c.ReadAt([]byte(key), p, off)
						wantN := max(len(v)-int(off), 0)
						if n != wantN || !bytes.Equal(p[:n], v[min(int(off), len(v)):]) || (err != io.EOF && !(err == nil && wantN == len(p))) {
							t.Fatalf("%s: %s: ReadAt at %d = %d, %v; want %d bytes", when, key, off, n, err, wantN)
						}
					}
					if r, ok := c.GetRange([]byte(key), 3, 10); ok {
						got, err := io.ReadAll(r)
						if err != nil || !bytes.Equal(got, v[min(3, len(v)):min(13, len(v))]) {
							t.Fatalf("%s: %s: GetRange = %q, %v", when, key, got, err)
						}
					} else {
						t.Fatalf("%s: %s: GetRange missed", when, key)
					}
				}
				if _, ok := c.Get([]byte("deleted")); ok {
					t.Fatalf("%s: the deleted key is back", when)
				}
				return versions
			}
			c := open(t, dir, small(WithCompression(run.comp))...)
			before := check(c, "opened")
			// New records beside the old ones, one overwriting an old key, one that compresses.
			if _, err := c.PutWith([]byte("key-00"), []byte("rewritten"), PutOptions{Flags: 5}); err != nil {
				t.Fatal(err)
			}
			c.Put([]byte("new"), []byte("new blob"))
			text := goSource(t, 0, 20000)
			c.Put([]byte("text"), text)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			wantVersion := uint32(identityVersion)
			if run.comp != CompressionNone {
				wantVersion = identityCompressedVersion
				if st := c.Stats(); st.CompressedPuts != 1 {
					t.Fatalf("%d compressed puts", st.CompressedPuts)
				}
			}
			id, err := readIdentityFile(dir)
			if err != nil || id.Version != wantVersion {
				t.Fatalf("identity after the upgrade: %+v, %v", id, err)
			}
			if _, err := os.Stat(filepath.Join(dir, stateFile)); err != nil {
				t.Fatal(err)
			}
			want["key-00"] = []byte("rewritten")
			want["new"] = []byte("new blob")
			want["text"] = text
			rewritten["key-00"], rewritten["new"], rewritten["text"] = true, true, true
			c = open(t, dir, small()...)
			defer c.Close()
			after := check(c, "reopened")
			for key, v := range before {
				if key != "key-00" && after[key] != v {
					t.Fatalf("%s: version %d became %d", key, v, after[key])
				}
			}
			if res, err := Verify(dir, nil); err != nil || len(res.Corrupt) != 0 {
				t.Fatalf("Verify: %+v, %v", res, err)
			}
		})
	}
}

func readIdentityFile(dir string) (identity, error) {
	b, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil {
		return identity{}, err
	}
	return decodeIdentity(b)
}

// TestRefusesNewerIdentity: a directory of a format this build does not know is refused, not
// misread.
func TestRefusesNewerIdentity(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, small()...)
	c.Close()
	id, _ := readIdentityFile(dir)
	id.Version = identityCompressedVersion + 1
	os.WriteFile(filepath.Join(dir, identityFile), id.encode(), 0o644)
	if c, err := New(dir, small()...); err == nil || !errors.Is(err, ErrCorrupt) {
		c.Close()
		t.Fatalf("New of a version-%d directory: %v", id.Version, err)
	}
}
