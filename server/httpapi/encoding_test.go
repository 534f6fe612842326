package httpapi

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/internal/corpus"
	"github.com/seed57392e9e/blobcache/server/store"
)

func TestAcceptsZstd(t *testing.T) {
	for _, tc := range []struct {
		h    []string
		want bool
	}{
		{nil, false},
		{[]string{"gzip, deflate, br"}, false},
		{[]string{"gzip, zstd"}, true},
		{[]string{"ZSTD;q=0.5"}, true},
		{[]string{"zstd;q=0"}, false},
		{[]string{"zstd; q=0.000"}, false},
		{[]string{"*"}, true},
		{[]string{"*, zstd;q=0"}, false},
		{[]string{"*;q=0"}, false},
		{[]string{"gzip", "zstd"}, true},
		{[]string{"zstd;q=bad"}, false},
		{[]string{"zstd;q=2"}, false},
		{[]string{"zstdx"}, false},
	} {
		if got := acceptsZstd(tc.h); got != tc.want {
			t.Errorf("acceptsZstd(%q) = %v, want %v", tc.h, got, tc.want)
		}
	}
}

// FuzzAcceptsZstd: any header reads without panicking, and one that names neither zstd nor
// "*" never accepts zstd.
func FuzzAcceptsZstd(f *testing.F) {
	f.Add("gzip, zstd;q=0.8, *;q=0.1")
	f.Add("*;q=0")
	f.Fuzz(func(t *testing.T, h string) {
		got := acceptsZstd([]string{h})
		if got && !strings.Contains(strings.ToLower(h), "zstd") && !strings.Contains(h, "*") {
			t.Fatalf("%q accepts zstd", h)
		}
	})
}

func goText(t *testing.T, n int) []byte {
	t.Helper()
	b, err := corpus.GoSource(0, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGetZstd: with compression, a whole blob goes as stored to a client that accepts zstd,
// with Content-Encoding zstd, its own ETag and Vary; a range, and a client that does not accept
// zstd, get the value's bytes. Decoded by klauspost's decoder and by curl, clients nobody here
// wrote.
func TestGetZstd(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{}, blobcache.WithCompression(blobcache.CompressionZstd))
	text := goText(t, 400<<10)
	e.expect("PUT", "log", text, 201)
	e.c.Drain()

	resp, body := e.do("GET", "log", nil, "Accept-Encoding", "gzip, zstd")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "zstd" || !strings.HasSuffix(resp.Header.Get("ETag"), `.zstd"`) ||
		resp.Header.Get("Vary") != "Accept-Encoding" || len(body) >= len(text) {
		t.Fatalf("GET accepting zstd: %d, %v, %d bytes", resp.StatusCode, resp.Header, len(body))
	}
	d, err := zstd.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(d)
	d.Close()
	if err != nil || !bytes.Equal(plain, text) {
		t.Fatalf("the zstd body decodes to %d bytes, %v", len(plain), err)
	}
	zetag, zlen := resp.Header.Get("ETag"), int64(len(body))

	resp, body = e.do("GET", "log", nil, "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "" || strings.Contains(resp.Header.Get("ETag"), "zstd") || !bytes.Equal(body, text) {
		t.Fatalf("GET without zstd: %v, %d bytes", resp.Header, len(body))
	}
	resp, body = e.do("GET", "log", nil, "Accept-Encoding", "zstd", "Range", "bytes=1000-1999")
	if resp.StatusCode != 206 || resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, text[1000:2000]) {
		t.Fatalf("a range accepting zstd: %d, %v, %d bytes", resp.StatusCode, resp.Header, len(body))
	}
	resp, _ = e.do("HEAD", "log", nil, "Accept-Encoding", "zstd")
	if resp.Header.Get("Content-Encoding") != "zstd" || resp.ContentLength != zlen {
		t.Fatalf("HEAD accepting zstd: %v", resp.Header)
	}
	e.expect("GET", "log", nil, 304, "Accept-Encoding", "zstd", "If-None-Match", zetag)

	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed (scripts/test.sh installs it in CI)")
		}
		t.Skip("no curl")
	}
	out, err := exec.Command(curl, "-sf", "--compressed", "-H", "Accept-Encoding: zstd", e.url("log")).Output()
	if err != nil || !bytes.Equal(out, text) {
		t.Fatalf("curl --compressed: %d bytes, %v", len(out), err)
	}
}
