package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

type env struct {
	t    testing.TB
	c    *blobcache.Cache
	st   *store.Store
	h    *Handler
	fast *FastPath
	srv  *httptest.Server
	dir  string
}

func newEnv(t testing.TB, scfg store.Config, hcfg Config, opts ...blobcache.Option) *env {
	t.Helper()
	return newFastEnv(t, FastConfig{}, scfg, hcfg, opts...)
}

// transports are the fast path's two ways of serving connections, for the tests that run on
// both: a goroutine each, and two event loops.
var transports = []struct {
	name string
	cfg  FastConfig
}{
	{"goroutines", FastConfig{}},
	{"loops", FastConfig{Loops: 2}},
}

// newFastEnv is newEnv with the fast path configured by fcfg.
func newFastEnv(t testing.TB, fcfg FastConfig, scfg store.Config, hcfg Config, opts ...blobcache.Option) *env {
	t.Helper()
	dir := t.TempDir()
	opts = append([]blobcache.Option{blobcache.WithWriteBufferSize(8 << 20), blobcache.WithSegmentSize(32 << 20),
		blobcache.WithExpectedBlobs(1000), blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true)}, opts...)
	c, err := blobcache.New(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(c, scfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(st, hcfg)
	if err != nil {
		t.Fatal(err)
	}
	// 127.0.0.1, an ephemeral port; GETs and HEADs through the fast path, as the server has them.
	srv := httptest.NewUnstartedServer(h)
	fast := h.NewFastPath(srv.Listener, fcfg)
	srv.Listener = fast
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		if err := fast.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		c.Close()
	})
	return &env{t: t, c: c, st: st, h: h, fast: fast, srv: srv, dir: dir}
}

func (e *env) url(key string) string { return e.srv.URL + BlobPrefix + url.PathEscape(key) }

func (e *env) do(method, key string, body []byte, hdr ...string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url(key), rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %q: reading the body: %v", method, key, err)
	}
	return resp, b
}

func (e *env) expect(method, key string, body []byte, want int, hdr ...string) []byte {
	e.t.Helper()
	resp, b := e.do(method, key, body, hdr...)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %q: status %d (%s), want %d", method, key, resp.StatusCode, bytes.TrimSpace(b), want)
	}
	return b
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	keys := []string{"plain", "with/slashes//and/../dots", "\x00\xff binary \r\n key", "ключ", strings.Repeat("k", blobcache.MaxKeyLen)}
	for i, key := range keys {
		v := randomBytes(uint64(i), 1000*i)
		e.expect("PUT", key, v, http.StatusCreated)
		if got := e.expect("GET", key, nil, http.StatusOK); !bytes.Equal(got, v) {
			t.Fatalf("GET %q: wrong bytes", key)
		}
	}
	e.c.Drain()
	for i, key := range keys {
		resp, got := e.do("GET", key, nil)
		if resp.StatusCode != 200 || !bytes.Equal(got, randomBytes(uint64(i), 1000*i)) {
			t.Fatalf("GET %q after drain: %d", key, resp.StatusCode)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Content-Length") != fmt.Sprint(1000*i) {
			t.Fatalf("GET %q: headers %v", key, resp.Header)
		}
		head, body := e.do("HEAD", key, nil)
		if head.StatusCode != 200 || len(body) != 0 || head.ContentLength != int64(1000*i) || head.Header.Get("ETag") != resp.Header.Get("ETag") {
			t.Fatalf("HEAD %q: %d, length %d, headers %v", key, head.StatusCode, head.ContentLength, head.Header)
		}
	}
	e.expect("DELETE", keys[0], nil, http.StatusNoContent)
	e.expect("GET", keys[0], nil, http.StatusNotFound)
	e.expect("HEAD", keys[0], nil, http.StatusNotFound)
	e.expect("DELETE", keys[0], nil, http.StatusNoContent) // idempotent
}

func TestLargeStreamed(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	v := randomBytes(7, 6<<20+3)
	e.expect("PUT", "big", v, http.StatusCreated)
	for range 2 {
		if got := e.expect("GET", "big", nil, http.StatusOK); !bytes.Equal(got, v) {
			t.Fatal("wrong bytes")
		}
		e.c.Drain()
	}
	got := e.expect("GET", "big", nil, http.StatusPartialContent, "Range", "bytes=5000000-5000099")
	if !bytes.Equal(got, v[5000000:5000100]) {
		t.Fatal("wrong range bytes")
	}
}

func TestFlagsAndTTL(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	e.expect("PUT", "k", []byte("v"), http.StatusCreated, hdrFlags, "42", hdrTTL, "3600")
	resp, b := e.do("GET", "k", nil)
	if string(b) != "v" || resp.Header.Get(hdrFlags) != "42" || resp.Header.Get("Expires") == "" {
		t.Fatalf("got %q, headers %v", b, resp.Header)
	}
	e.expect("PUT", "k", []byte("v"), http.StatusBadRequest, hdrFlags, "-1")
	e.expect("PUT", "k", []byte("v"), http.StatusBadRequest, hdrFlags, "4294967296")
	e.expect("PUT", "k", []byte("v"), http.StatusBadRequest, hdrTTL, "0")
	e.expect("PUT", "k", []byte("v"), http.StatusBadRequest, hdrTTL, "soon")
}

func TestRanges(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	v := []byte("0123456789")
	e.expect("PUT", "k", v, http.StatusCreated)
	resp, _ := e.do("GET", "k", nil)
	etag := resp.Header.Get("ETag")
	tests := []struct {
		hdr          []string
		status       int
		body         string
		contentRange string
	}{
		{[]string{"Range", "bytes=0-3"}, 206, "0123", "bytes 0-3/10"},
		{[]string{"Range", "bytes=7-"}, 206, "789", "bytes 7-9/10"},
		{[]string{"Range", "bytes=-2"}, 206, "89", "bytes 8-9/10"},
		{[]string{"Range", "bytes=-20"}, 206, "0123456789", "bytes 0-9/10"},
		{[]string{"Range", "bytes=5-100"}, 206, "56789", "bytes 5-9/10"},
		{[]string{"Range", "bytes=10-"}, 416, "", "bytes */10"},
		{[]string{"Range", "bytes=-0"}, 416, "", "bytes */10"},
		{[]string{"Range", "bytes=0-1,4-5"}, 200, "0123456789", ""},
		{[]string{"Range", "bytes=5-2"}, 200, "0123456789", ""},
		{[]string{"Range", "items=0-1"}, 200, "0123456789", ""},
		{[]string{"Range", "bytes=x-1"}, 200, "0123456789", ""},
		{[]string{"Range", "bytes=0-3", "If-Range", etag}, 206, "0123", "bytes 0-3/10"},
		{[]string{"Range", "bytes=0-3", "If-Range", `"stale"`}, 200, "0123456789", ""},
		{[]string{"If-None-Match", etag}, 304, "", ""},
		{[]string{"If-None-Match", `"other", W/` + etag}, 304, "", ""},
		{[]string{"If-None-Match", `"other"`}, 200, "0123456789", ""},
	}
	for _, tt := range tests {
		resp, b := e.do("GET", "k", nil, tt.hdr...)
		if resp.StatusCode != tt.status || string(b) != tt.body || resp.Header.Get("Content-Range") != tt.contentRange {
			t.Errorf("%v: %d %q %q; want %d %q %q", tt.hdr, resp.StatusCode, b, resp.Header.Get("Content-Range"),
				tt.status, tt.body, tt.contentRange)
		}
	}
	e.expect("PUT", "empty", nil, http.StatusCreated)
	if b := e.expect("GET", "empty", nil, 200); len(b) != 0 {
		t.Fatalf("empty blob read %q", b)
	}
	e.expect("GET", "empty", nil, 416, "Range", "bytes=0-")
}

func TestBadRequests(t *testing.T) {
	e := newEnv(t, store.Config{MaxValueSize: 1 << 20}, Config{MaxKeyLen: 100})
	e.expect("PUT", "", []byte("v"), http.StatusBadRequest)
	e.expect("GET", "", nil, http.StatusBadRequest)
	e.expect("PUT", strings.Repeat("k", 101), []byte("v"), http.StatusBadRequest)
	e.expect("PUT", "big", make([]byte, 1<<20+1), http.StatusRequestEntityTooLarge)
	e.expect("POST", "k", []byte("v"), http.StatusMethodNotAllowed)
	// No Content-Length: a chunked upload.
	req, _ := http.NewRequest("PUT", e.url("chunked"), io.MultiReader(strings.NewReader("abc")))
	req.ContentLength = -1
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("chunked PUT: %d", resp.StatusCode)
	}
	if b := e.expect("GET", "chunked", nil, 200); string(b) != "abc" {
		t.Fatalf("chunked upload stored %q", b)
	}
	// A chunked body over the limit (1 MiB here).
	req, _ = http.NewRequest("PUT", e.url("toolong"), io.MultiReader(bytes.NewReader(make([]byte, 1<<20+1))))
	req.ContentLength = -1
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked PUT over the limit: %d", resp.StatusCode)
	}
	for _, key := range []string{"", "big", "toolong"} {
		if key != "" {
			e.expect("GET", key, nil, http.StatusNotFound)
		}
	}
	if _, err := http.Get(e.srv.URL + "/nothing/here"); err != nil {
		t.Fatal(err)
	}
}

// sendRaw dials addr and writes raw in one write; the connection has 10 s to live.
func sendRaw(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// rawRequest sends raw bytes, half-closes, and returns the status line of the answer.
func rawRequest(t *testing.T, addr, req string) string {
	t.Helper()
	c := sendRaw(t, addr, req)
	defer c.Close()
	c.(*net.TCPConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer to %q: %v", req, err)
	}
	return strings.TrimSpace(line)
}

func TestMalformed(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	e.expect("PUT", "kept", []byte("original"), http.StatusCreated)
	addr := e.srv.Listener.Addr().String()
	tests := []struct{ name, req, status string }{
		{"truncated body", "PUT /v1/blobs/kept HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", "400"},
		{"truncated new key", "PUT /v1/blobs/new HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n", "400"},
		{"bad length", "PUT /v1/blobs/kept HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n0123456789", "400"},
		{"negative length", "PUT /v1/blobs/kept HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\nabc", "400"},
		{"two lengths", "PUT /v1/blobs/kept HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "400"},
		{"bad escape", "GET /v1/blobs/%zz HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"bad escape put", "PUT /v1/blobs/kept%g HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx", "400"},
		{"control byte", "GET /v1/blobs/a\x01b HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"no host", "GET /v1/blobs/kept HTTP/1.1\r\n\r\n", "400"},
	}
	for _, tt := range tests {
		if got := rawRequest(t, addr, tt.req); !strings.Contains(got, " "+tt.status+" ") {
			t.Errorf("%s: %q, want %s", tt.name, got, tt.status)
		}
	}
	if b := e.expect("GET", "kept", nil, 200); string(b) != "original" {
		t.Fatalf("kept = %q after malformed requests", b)
	}
	e.expect("GET", "new", nil, 404)
	// Non-UTF-8 bytes sent unescaped are just key bytes.
	if got := rawRequest(t, addr, "PUT /v1/blobs/\xff\xfe HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"); !strings.Contains(got, " 201 ") {
		t.Fatalf("raw binary key: %q", got)
	}
	if b := e.expect("GET", "\xff\xfe", nil, 200); string(b) != "hi" {
		t.Fatalf("raw binary key read %q", b)
	}
}

func TestPipelined(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var req strings.Builder
	for i := range 20 {
		fmt.Fprintf(&req, "PUT /v1/blobs/p%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nvalue-%d", i, len(fmt.Sprint("value-", i)), i)
		fmt.Fprintf(&req, "GET /v1/blobs/p%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	io.WriteString(c, req.String())
	br := bufio.NewReader(c)
	for i := range 20 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("put %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != fmt.Sprint("value-", i) {
			t.Fatalf("get %d: %d %q", i, resp.StatusCode, b)
		}
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{Token: "s3cret"})
	e.expect("PUT", "k", []byte("v"), http.StatusUnauthorized)
	e.expect("PUT", "k", []byte("v"), http.StatusUnauthorized, "Authorization", "Bearer wrong")
	e.expect("PUT", "k", []byte("v"), http.StatusUnauthorized, "Authorization", "Basic s3cret")
	e.expect("PUT", "k", []byte("v"), http.StatusCreated, "Authorization", "Bearer s3cret")
	e.expect("GET", "k", nil, http.StatusUnauthorized)
	if b := e.expect("GET", "k", nil, http.StatusOK, "Authorization", "bearer s3cret"); string(b) != "v" {
		t.Fatalf("got %q", b)
	}
	resp, err := http.Get(e.srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz without a token: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestBusy(t *testing.T) {
	e := newEnv(t, store.Config{MaxValueSize: 64 << 10, MaxInflightBytes: 128 << 10, AdmitTimeout: 10 * time.Millisecond}, Config{})
	e.expect("PUT", "stored", []byte("before the pressure"), http.StatusCreated)
	// Hold the whole budget, as slow uploads would.
	a, err := e.st.Reserve(context.Background(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.st.Reserve(context.Background(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := e.do("PUT", "k", []byte("v"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("PUT under pressure: %d %v", resp.StatusCode, resp.Header)
	}
	// Reads need memory for their buffers too.
	if resp, _ := e.do("GET", "stored", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET under pressure: %d", resp.StatusCode)
	}
	a.Release()
	b.Release()
	e.expect("PUT", "k", []byte("v"), http.StatusCreated)
	e.expect("GET", "stored", nil, http.StatusOK)
}

func TestHealthzDraining(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	h := e.srv.Config.Handler.(*Handler)
	get := func() int {
		resp, err := http.Get(e.srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if get() != 200 {
		t.Fatal("not healthy")
	}
	h.MarkDraining()
	if get() != 503 {
		t.Fatal("healthy while draining")
	}
}

func TestPprofOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{false, true} {
		e := newEnv(t, store.Config{}, Config{Pprof: on})
		resp, err := http.Get(e.srv.URL + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode == 200) != on {
			t.Errorf("pprof=%v: status %d", on, resp.StatusCode)
		}
	}
}

// corrupt flips a byte of the first occurrence of marker in the segment files.
func corrupt(t *testing.T, dir string, marker []byte) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(b, marker); i >= 0 {
			b[i+len(marker)/2] ^= 0x40
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("marker not found")
}

func TestCorruptValueNeverServed(t *testing.T) {
	dir := t.TempDir()
	small := bytes.Repeat([]byte("small-value-"), 100)
	large := randomBytes(9, 3<<20)
	c, err := blobcache.New(dir, blobcache.WithChecksum(true))
	if err != nil {
		t.Fatal(err)
	}
	c.Put([]byte("small"), small)
	c.Put([]byte("large"), large)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt(t, dir, small[:600])
	corrupt(t, dir, large[2<<20:2<<20+64])

	c, err = blobcache.New(dir, blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := store.New(c, store.Config{})
	h, _ := New(st, Config{})
	srv := httptest.NewServer(h)
	defer func() { srv.Close(); c.Close() }()

	resp, err := http.Get(srv.URL + BlobPrefix + "small")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("damaged small blob: status %d, want 500", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL + BlobPrefix + "large")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("damaged large blob read whole (%d bytes, status %d); want a broken body", len(got), resp.StatusCode)
	}
	if c.Stats().CorruptRecord < 2 {
		t.Fatalf("corruption not counted: %+v", c.Stats())
	}
}

// TestAwkwardBodies uploads through readers that deliver one byte at a time, or fail: the
// first is stored whole, the others are refused and store nothing.
func TestAwkwardBodies(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	h := e.srv.Config.Handler
	v := randomBytes(11, 10_000)
	for _, tc := range []struct {
		name   string
		body   io.Reader
		status int
	}{
		{"one byte", iotest.OneByteReader(bytes.NewReader(v)), http.StatusCreated},
		{"half then error", iotest.TimeoutReader(iotest.HalfReader(bytes.NewReader(v))), http.StatusBadRequest},
		{"error with data", io.MultiReader(bytes.NewReader(v[:100]), iotest.ErrReader(io.ErrUnexpectedEOF)), http.StatusBadRequest},
	} {
		req := httptest.NewRequest("PUT", BlobPrefix+url.PathEscape(tc.name), tc.body)
		req.ContentLength = int64(len(v))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, rec.Code, tc.status)
		}
		resp, got := e.do("GET", tc.name, nil)
		if stored := resp.StatusCode == 200; stored != (tc.status == http.StatusCreated) || (stored && !bytes.Equal(got, v)) {
			t.Errorf("%s: after the upload GET says %d", tc.name, resp.StatusCode)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-1", "bytes=-5", "bytes=3-", "bytes=0-1,2-3", "bytes=9-2", "bytes=--1", "bytes=99999999999999999999-"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			t.Skip("sizes are never negative")
		}
		off, n, res := parseRange(h, size)
		if res == rangeOK && (off < 0 || n < 1 || off+n > size) {
			t.Fatalf("parseRange(%q, %d) = [%d, +%d)", h, size, off, n)
		}
	})
}

// gatedBody yields the bytes of v, stopping at `at` until gate is closed.
type gatedBody struct {
	v       []byte
	off, at int
	gate    chan struct{}
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if g.off == g.at {
		<-g.gate
	}
	end := len(g.v)
	if g.off < g.at {
		end = g.at
	}
	if g.off == len(g.v) {
		return 0, io.EOF
	}
	n := copy(p, g.v[g.off:end])
	g.off += n
	return n, nil
}

// TestPutBodyNeverWhole: a multi-MB PUT streams from the network into the cache. While the
// client still holds back the end of the body, its first megabytes are already in a segment
// file: the server did not wait for the whole body (it used to read it into a buffer first).
func TestPutBodyNeverWhole(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	const size = 7 << 20 // the env's write buffer is 8 MiB
	v := randomBytes(3, size)
	marker := v[1<<20 : 1<<20+64]
	body := &gatedBody{v: v, at: 6 << 20, gate: make(chan struct{})}
	req, err := http.NewRequest("PUT", e.url("big"), body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	onDisk := func() bool {
		files, _ := filepath.Glob(filepath.Join(e.dir, "segments", "*.seg"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, marker) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !onDisk() {
		if time.Now().After(deadline) {
			close(body.gate)
			t.Fatal("the first MiB of a body held back at 6 MiB never reached a segment")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.st.Inflight() > 1<<20 {
		t.Fatalf("%d bytes of value memory held by one streaming PUT", e.st.Inflight())
	}
	close(body.gate)
	resp := <-done
	if resp == nil {
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %s", resp.Status)
	}
	if got := e.expect("GET", "big", nil, http.StatusOK); !bytes.Equal(got, v) {
		t.Fatal("wrong bytes")
	}
}

// TestPutBodyCut: a large body cut short by the client stores nothing: the key keeps its value.
func TestPutBodyCut(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	old := randomBytes(1, 3<<20)
	e.expect("PUT", "k", old, http.StatusCreated)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "PUT %sk HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", BlobPrefix, 4<<20)
	c.Write(randomBytes(2, 3<<20)) // past the first chunks, which reach the disk
	c.(*net.TCPConn).CloseWrite()
	io.ReadAll(c)
	c.Close()
	for range 2 {
		if got := e.expect("GET", "k", nil, http.StatusOK); !bytes.Equal(got, old) {
			t.Fatal("the cut body replaced the value")
		}
		e.c.Drain()
	}
}

// TestETagPerWrite: the ETag is the write's version, so storing the same body again gives a new
// one, and If-None-Match with the old tag no longer answers 304.
func TestETagPerWrite(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	body := []byte("same bytes")
	e.expect("PUT", "k", body, http.StatusCreated)
	first, _ := e.do("GET", "k", nil)
	e.expect("PUT", "k", body, http.StatusNoContent)
	second, _ := e.do("GET", "k", nil)
	t1, t2 := first.Header.Get("ETag"), second.Header.Get("ETag")
	if t1 == "" || t1 == t2 {
		t.Fatalf("ETags %q then %q for two writes of the same body", t1, t2)
	}
	if resp, _ := e.do("GET", "k", nil, "If-None-Match", t1); resp.StatusCode != 200 {
		t.Fatalf("If-None-Match with the first write's tag: %d, want 200", resp.StatusCode)
	}
	if resp, _ := e.do("GET", "k", nil, "If-None-Match", t2); resp.StatusCode != 304 {
		t.Fatalf("If-None-Match with the current tag: %d, want 304", resp.StatusCode)
	}
}

// TestConditionalRequests: PUT answers 201 and an ETag for a new key, 204 and a new ETag for an
// overwrite; If-Match, If-None-Match, If-Unmodified-Since and If-Modified-Since on PUT, DELETE
// and GET answer as RFC 9110 section 13 says; Cache-Control: max-age sets an expiry.
func TestConditionalRequests(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	resp, _ := e.do("PUT", "k", []byte("one"))
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("ETag") == "" {
		t.Fatalf("first PUT: %d, ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	tag1 := resp.Header.Get("ETag")
	get, _ := e.do("GET", "k", nil)
	if get.Header.Get("ETag") != tag1 || get.Header.Get("Last-Modified") == "" {
		t.Fatalf("GET: ETag %q (PUT said %q), Last-Modified %q", get.Header.Get("ETag"), tag1, get.Header.Get("Last-Modified"))
	}
	// If-None-Match: * is put-if-absent.
	e.expect("PUT", "k", []byte("x"), http.StatusPreconditionFailed, "If-None-Match", "*")
	e.expect("PUT", "fresh", []byte("x"), http.StatusCreated, "If-None-Match", "*")
	// If-Match: the current tag only.
	e.expect("PUT", "k", []byte("x"), http.StatusPreconditionFailed, "If-Match", `"1234"`)
	e.expect("PUT", "k", []byte("x"), http.StatusPreconditionFailed, "If-Match", "W/"+tag1)
	e.expect("PUT", "missing", []byte("x"), http.StatusPreconditionFailed, "If-Match", "*")
	resp, _ = e.do("PUT", "k", []byte("two"), "If-Match", `"0", `+tag1)
	tag2 := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusNoContent || tag2 == "" || tag2 == tag1 {
		t.Fatalf("PUT If-Match the current tag: %d, ETag %q (was %q)", resp.StatusCode, tag2, tag1)
	}
	e.expect("PUT", "k", []byte("x"), http.StatusPreconditionFailed, "If-Match", tag1) // stale now
	// The current version's date: the first one's, when both writes fell in one second, and a
	// later one otherwise, before which "two" was modified (412, as RFC 9110 says).
	get, _ = e.do("GET", "k", nil)
	lastMod := get.Header.Get("Last-Modified")
	// GET.
	e.expect("GET", "k", nil, http.StatusNotModified, "If-None-Match", tag2)
	e.expect("GET", "k", nil, http.StatusOK, "If-None-Match", tag1)
	e.expect("GET", "k", nil, http.StatusPreconditionFailed, "If-Match", tag1)
	e.expect("GET", "k", nil, http.StatusOK, "If-Match", tag2)
	e.expect("GET", "k", nil, http.StatusNotModified, "If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
	e.expect("GET", "k", nil, http.StatusOK, "If-Modified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")
	e.expect("GET", "k", nil, http.StatusPreconditionFailed, "If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")
	e.expect("GET", "k", nil, http.StatusOK, "If-Unmodified-Since", lastMod)
	// PUT and DELETE with dates.
	e.expect("PUT", "k", []byte("x"), http.StatusPreconditionFailed, "If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")
	e.expect("DELETE", "k", nil, http.StatusPreconditionFailed, "If-Match", tag1)
	e.expect("DELETE", "k", nil, http.StatusPreconditionFailed, "If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT")
	if b := e.expect("GET", "k", nil, 200); string(b) != "two" {
		t.Fatalf("k = %q after refused writes", b)
	}
	e.expect("DELETE", "k", nil, http.StatusNoContent, "If-Match", tag2)
	e.expect("GET", "k", nil, http.StatusNotFound)
	// Cache-Control: max-age.
	e.expect("PUT", "ttl", []byte("v"), http.StatusCreated, "Cache-Control", "public, max-age=3600")
	if resp, _ := e.do("GET", "ttl", nil); resp.Header.Get("Expires") == "" {
		t.Fatal("no Expires for a max-age PUT")
	}
	e.expect("PUT", "ttl", []byte("v"), http.StatusBadRequest, "Cache-Control", "max-age=soon")
}

// TestConditionalPutRace: of many If-None-Match: * PUTs of one key at once, exactly one wins.
func TestConditionalPutRace(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	var wg sync.WaitGroup
	var created, refused atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			req, _ := http.NewRequest("PUT", e.url("once"), bytes.NewReader(fmt.Appendf(nil, "writer %d", i)))
			req.Header.Set("If-None-Match", "*")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusCreated:
				created.Add(1)
			case http.StatusPreconditionFailed:
				refused.Add(1)
			default:
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 || refused.Load() != 7 {
		t.Fatalf("%d created, %d refused", created.Load(), refused.Load())
	}
}

// TestContentType: a PUT's Content-Type is stored with the blob and served back, for a small
// blob and a streamed one; a blob stored without one is application/octet-stream.
func TestContentType(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	for _, size := range []int{5, 3 << 20} {
		key := fmt.Sprint("typed", size)
		body := randomBytes(uint64(size), size)
		e.expect("PUT", key, body, http.StatusCreated, "Content-Type", "image/png")
		for _, method := range []string{"GET", "HEAD"} {
			resp, got := e.do(method, key, nil)
			if resp.Header.Get("Content-Type") != "image/png" || (method == "GET" && !bytes.Equal(got, body)) {
				t.Fatalf("%s %s: Content-Type %q, %d bytes", method, key, resp.Header.Get("Content-Type"), len(got))
			}
		}
		e.expect("PUT", key, body, http.StatusNoContent)
		if resp, _ := e.do("GET", key, nil); resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("%s rewritten without a type: %q", key, resp.Header.Get("Content-Type"))
		}
	}
	e.expect("PUT", "k", []byte("v"), http.StatusBadRequest, "Content-Type", strings.Repeat("x", 5000))
}
