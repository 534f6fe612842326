package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// TestFastPathMatchesNetHTTP sends the same raw requests to the handler served by net/http alone
// and through the fast path, and compares the raw bytes of the responses, the Date header's
// value aside: net/http is the oracle of what the fast path writes. It also checks which
// requests the fast path answered itself and which it handed to net/http.
func TestFastPathMatchesNetHTTP(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testFastPathMatchesNetHTTP(t, tr.cfg) })
	}
}

func testFastPathMatchesNetHTTP(t *testing.T, fcfg FastConfig) {
	e := newFastEnv(t, fcfg, store.Config{}, Config{})
	plain := httptest.NewServer(e.h) // net/http alone
	t.Cleanup(plain.Close)

	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10>>4)
	huge := bytes.Repeat([]byte("fedcba9876543210"), 2<<20>>4)
	e.put("a", []byte("hello"))
	e.put("ct", []byte("text"), "Content-Type", "text/plain; charset=utf-8")
	e.put("flags", []byte("f"), hdrFlags, "7")
	e.put("ttl", []byte("t"), hdrTTL, "3600")
	e.put("empty", []byte{})
	e.put("big", big)
	e.put("huge", huge)
	e.put("dir/x:y@z,w;v=1", []byte("path characters"))
	e.c.Drain()
	e.put("unflushed", []byte("still in the write buffer"))

	get := func(target string, hdr ...string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: blobcache.test\r\nUser-Agent: t\r\n" + strings.Join(hdr, "") + "\r\n"
	}
	head := func(target string, hdr ...string) string { return "HEAD" + get(target, hdr...)[3:] }
	cases := []struct {
		name      string
		raw       string
		responses int
		fast      int  // requests the fast path answers
		handed    bool // the connection goes to net/http
	}{
		{"get", get("/v1/blobs/a"), 1, 1, false},
		{"head", head("/v1/blobs/a"), 1, 1, false},
		{"miss", get("/v1/blobs/nope"), 1, 1, false},
		{"head of a miss", head("/v1/blobs/nope"), 1, 1, false},
		{"content type", get("/v1/blobs/ct"), 1, 1, false},
		{"flags", get("/v1/blobs/flags"), 1, 1, false},
		{"expiry", get("/v1/blobs/ttl"), 1, 1, false},
		{"empty", get("/v1/blobs/empty"), 1, 1, false},
		{"40 KiB", get("/v1/blobs/big"), 1, 1, false},
		{"2 MiB", get("/v1/blobs/huge"), 1, 1, false},
		{"head of 2 MiB", head("/v1/blobs/huge"), 1, 1, false},
		{"write buffer", get("/v1/blobs/unflushed"), 1, 1, false},
		{"path characters", get("/v1/blobs/dir/x:y@z,w;v=1"), 1, 1, false},
		{"connection close", get("/v1/blobs/a", "Connection: close\r\n"), 1, 1, false},
		{"keep-alive", get("/v1/blobs/a", "Connection: keep-alive\r\n"), 1, 1, false},
		{"gzip", get("/v1/blobs/a", "Accept-Encoding: gzip, deflate\r\n"), 1, 1, false},
		{"other headers", get("/v1/blobs/a", "X-Request-Id: 12\r\nCookie: a=b\r\nAccept: */*\r\n"), 1, 1, false},
		{"pipelined", get("/v1/blobs/a") + get("/v1/blobs/big") + head("/v1/blobs/nope"), 3, 3, false},
		{"then a DELETE", get("/v1/blobs/a") + "DELETE /v1/blobs/never HTTP/1.1\r\nHost: x\r\n\r\n" + get("/v1/blobs/a"), 3, 1, true},

		{"range", get("/v1/blobs/big", "Range: bytes=10-19\r\n"), 1, 1, false},
		{"range to the end", get("/v1/blobs/big", "Range: bytes=40000-\r\n"), 1, 1, false},
		{"suffix range", get("/v1/blobs/a", "Range: bytes=-3\r\n"), 1, 1, false},
		{"range past the end", get("/v1/blobs/a", "Range: bytes=2-100\r\n"), 1, 1, false},
		{"range of 2 MiB past the switch", get("/v1/blobs/huge", "Range: bytes=1000000-1000099\r\n"), 1, 1, false},
		{"range in the write buffer", get("/v1/blobs/unflushed", "Range: bytes=6-8\r\n"), 1, 1, false},
		{"range with flags and expiry", get("/v1/blobs/ttl", "Range: bytes=0-0\r\n"), 1, 1, false},
		{"head of a range", head("/v1/blobs/big", "Range: bytes=10-19\r\n"), 1, 1, false},
		{"unsatisfiable range", get("/v1/blobs/a", "Range: bytes=5-9\r\n"), 1, 1, false},
		{"range of an empty blob", get("/v1/blobs/empty", "Range: bytes=0-\r\n"), 1, 1, false},
		{"two ranges", get("/v1/blobs/big", "Range: bytes=0-1,5-6\r\n"), 1, 1, false},
		{"malformed range", get("/v1/blobs/big", "Range: bytes=x-y\r\n"), 1, 1, false},
		{"range in other units", get("/v1/blobs/big", "Range: items=0-1\r\n"), 1, 1, false},
		{"pipelined ranges", get("/v1/blobs/big", "Range: bytes=0-99\r\n") + get("/v1/blobs/big", "Range: bytes=-10\r\n"), 2, 2, false},
		{"two range headers", get("/v1/blobs/big", "Range: bytes=0-1\r\nRange: bytes=2-3\r\n"), 1, 0, true},
		{"if-range", get("/v1/blobs/big", "Range: bytes=0-1\r\nIf-Range: \"1\"\r\n"), 1, 0, true},
		{"if-none-match", get("/v1/blobs/a", "If-None-Match: *\r\n"), 1, 0, true},
		{"if-modified-since", get("/v1/blobs/a", "If-Modified-Since: Mon, 02 Jan 2006 15:04:05 GMT\r\n"), 1, 0, true},
		{"zstd", get("/v1/blobs/a", "Accept-Encoding: zstd\r\n"), 1, 0, true},
		{"any coding", get("/v1/blobs/a", "Accept-Encoding: *\r\n"), 1, 0, true},
		{"body", get("/v1/blobs/a", "Content-Length: 2\r\n") + "xy", 1, 0, true},
		{"chunked", get("/v1/blobs/a", "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n", 1, 0, true},
		{"HTTP/1.0", "GET /v1/blobs/a HTTP/1.0\r\n\r\n", 1, 0, true},
		{"percent-encoded", get("/v1/blobs/%61"), 1, 0, true},
		{"query", get("/v1/blobs/a?x=1"), 1, 0, true},
		{"no host", "GET /v1/blobs/a HTTP/1.1\r\n\r\n", 1, 0, true},
		{"two hosts", get("/v1/blobs/a", "Host: other\r\n"), 1, 0, true},
		{"empty key", get("/v1/blobs/"), 1, 0, true},
		{"key too long", get("/v1/blobs/" + strings.Repeat("k", blobcache.MaxKeyLen+1)), 1, 0, true},
		{"healthz", get("/healthz"), 1, 0, true},
		{"metrics path", get("/nothing"), 1, 0, true},
		{"POST", "POST /v1/blobs/a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 1, 0, true},
		{"bare LF", "GET /v1/blobs/a HTTP/1.1\nHost: x\n\n", 1, 0, true},
		{"folded header", get("/v1/blobs/a", "X-A: 1\r\n b\r\n"), 1, 0, true},
		{"space before colon", get("/v1/blobs/a", "X-A : 1\r\n"), 1, 0, true},
		{"upgrade", get("/v1/blobs/a", "Connection: Upgrade\r\nUpgrade: websocket\r\n"), 1, 0, true},
	}
	date := regexp.MustCompile(`(?m)^Date: [^\r]*\r$`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := exchange(t, plain.Listener.Addr().String(), tc.raw, tc.responses)
			served, handed := e.fast.served.Load(), e.fast.handed.Load()
			got := exchange(t, e.srv.Listener.Addr().String(), tc.raw, tc.responses)
			want, got = date.ReplaceAll(want, []byte("Date: -\r")), date.ReplaceAll(got, []byte("Date: -\r"))
			if !bytes.Equal(got, want) {
				t.Fatalf("the fast path answered\n%s\nnet/http\n%s", clip(got), clip(want))
			}
			if n := int(e.fast.served.Load() - served); n != tc.fast {
				t.Errorf("the fast path answered %d requests, want %d", n, tc.fast)
			}
			if h := e.fast.handed.Load() > handed; h != tc.handed {
				t.Errorf("connection handed to net/http: %v, want %v", h, tc.handed)
			}
		})
	}
}

// exchange writes raw to a new connection to addr in one write and returns the raw bytes of the
// n responses that come back (fewer if the server closes the connection first).
func exchange(t *testing.T, addr, raw string, n int) []byte {
	t.Helper()
	c := sendRaw(t, addr, raw)
	defer c.Close()
	var rec bytes.Buffer
	br := bufio.NewReader(io.TeeReader(c, &rec))
	methods := regexp.MustCompile(`(?m)^(GET|HEAD|PUT|POST|DELETE) `).FindAllStringSubmatch(raw, -1)
	for i := range n {
		req := &http.Request{Method: http.MethodGet}
		if i < len(methods) {
			req.Method = methods[i][1]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return rec.Bytes()
}

func clip(b []byte) []byte {
	if len(b) > 600 {
		return append(b[:600:600], "..."...)
	}
	return b
}

func (e *env) put(key string, value []byte, hdr ...string) {
	e.t.Helper()
	if resp, _ := e.do("PUT", key, value, hdr...); resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("PUT %s: %d", key, resp.StatusCode)
	}
}

// TestFastPathShutdown: a connection waiting for its next request is closed at once when the
// fast path shuts down, and one in the middle of a response finishes it first.
func TestFastPathShutdown(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testFastPathShutdown(t, tr.cfg) })
	}
}

func testFastPathShutdown(t *testing.T, fcfg FastConfig) {
	e := newFastEnv(t, fcfg, store.Config{}, Config{})
	e.put("a", []byte("hello"))
	c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.fast.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an idle connection: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the idle connection is still open after shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", e.srv.Listener.Addr().String(), time.Second); err == nil {
		t.Fatal("the listener still accepts after shutdown")
	}
}

// FuzzParseRequest: whatever the bytes, the parser does not panic, and a request it takes is
// one net/http reads the same way: the same method, path, close, Authorization and Range,
// HTTP/1.1, no query, no body, no other header that changes the answer.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /v1/blobs/a/b:c HTTP/1.1\r\nHost: x:80\r\nConnection: close\r\nAuthorization: Bearer t\r\n\r\n",
		"GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nX-Y: z\r\n\r\nGET /v1/blobs/b HTTP/1.1\r\n",
		"GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n",
		"GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\nRange:  bytes=-5 \r\nIf-Range: \"a\"\r\n\r\n",
		"GET /v1/blobs/%20 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n y\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, n, res := parseRequest(b, 250)
		if res != parsed {
			return
		}
		if n <= 0 || n > len(b) || len(req.key) == 0 || len(req.key) > 250 {
			t.Fatalf("parsed %q: n %d, key %q", b, n, req.key)
		}
		r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b[:n])))
		if err != nil {
			t.Fatalf("the fast path takes %q, net/http refuses it: %v", b[:n], err)
		}
		method := http.MethodGet
		if req.head {
			method = http.MethodHead
		}
		switch {
		case r.Method != method, r.URL.Path != BlobPrefix+string(req.key), r.URL.RawQuery != "",
			r.ProtoMajor != 1 || r.ProtoMinor != 1, r.Close != req.close,
			r.ContentLength > 0, len(r.TransferEncoding) > 0, r.Host == "":
			t.Fatalf("%q: the fast path reads %+v, net/http %s %q query %q HTTP/%d.%d close %v length %d host %q",
				b[:n], req, r.Method, r.URL.Path, r.URL.RawQuery, r.ProtoMajor, r.ProtoMinor, r.Close, r.ContentLength, r.Host)
		}
		if got := r.Header.Get("Authorization"); got != string(req.auth) {
			t.Fatalf("%q: Authorization %q, net/http %q", b[:n], req.auth, got)
		}
		for _, h := range handOffHeaders {
			if len(r.Header.Values(h)) > 0 {
				t.Fatalf("%q: the fast path takes a request with %s", b[:n], h)
			}
		}
		if v := r.Header.Values("Range"); len(v) > 1 || (len(v) == 1) != (req.ranges != nil) || len(v) == 1 && v[0] != string(req.ranges) {
			t.Fatalf("%q: Range %q, net/http %q", b[:n], req.ranges, v)
		}
		if acceptsZstd(r.Header.Values("Accept-Encoding")) {
			t.Fatalf("%q: the fast path takes a request that accepts zstd", b[:n])
		}
	})
}

// BenchmarkFastPathGet is a GET of a blob held in the memory tier, over one keep-alive
// connection, the request written and the response read by a client that allocates nothing:
// allocs/op is the server's (the fast path's, the store's and the cache's).
func BenchmarkFastPathGet(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) { benchmarkFastPathGet(b, tr.cfg) })
	}
}

func benchmarkFastPathGet(b *testing.B, fcfg FastConfig) {
	for _, tc := range []struct {
		name       string
		size, want int    // the blob's size, the payload's
		rng        string // a Range header's value, if any
	}{
		{"4KiB", 4 << 10, 4 << 10, ""},
		{"100KiB", 100 << 10, 100 << 10, ""},
		{"100KiB-of-1MiB-at-512KiB", 1 << 20, 100 << 10, "bytes=524288-626687"},
	} {
		size := tc.want
		b.Run(tc.name, func(b *testing.B) {
			e := newFastEnv(b, fcfg, store.Config{}, Config{}, blobcache.WithMemorySize(64<<20),
				blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
			e.put("k", bytes.Repeat([]byte("v"), tc.size))
			e.c.Drain()
			c, err := net.Dial("tcp", e.srv.Listener.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte("GET /v1/blobs/k HTTP/1.1\r\nHost: x\r\n\r\n")
			status := []byte("HTTP/1.1 200 OK\r\n")
			if tc.rng != "" {
				req = []byte("GET /v1/blobs/k HTTP/1.1\r\nHost: x\r\nRange: " + tc.rng + "\r\n\r\n")
				status = []byte("HTTP/1.1 206 Partial Content\r\n")
			}
			buf := make([]byte, size+1024)
			want := -1 // the response's length, learnt from the first
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				n := 0
				for want < 0 || n < want {
					k, err := c.Read(buf[n:])
					if err != nil {
						b.Fatal(err)
					}
					n += k
					if want < 0 {
						if end := bytes.Index(buf[:n], crlfcrlf); end >= 0 {
							want = end + len(crlfcrlf) + size
						}
					}
				}
				if !bytes.HasPrefix(buf, status) {
					b.Fatalf("%q", buf[:min(n, 200)])
				}
			}
			if e.fast.served.Load() < uint64(b.N) {
				b.Fatalf("the fast path answered %d of %d", e.fast.served.Load(), b.N)
			}
		})
	}
}

// TestFastPathRetriesTemporaryAcceptErrors: an accept that fails for a while (out of
// descriptors) does not stop the listener, as it does not stop net/http's.
func TestFastPathRetriesTemporaryAcceptErrors(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln}
	fl.fails.Store(3)
	fast := e.h.NewFastPath(fl, FastConfig{})
	srv := &http.Server{Handler: e.h}
	go srv.Serve(fast)
	defer func() {
		srv.Close()
		fast.Shutdown(context.Background())
	}()
	c := sendRaw(t, ln.Addr().String(), "GET /v1/blobs/nothing HTTP/1.1\r\nHost: x\r\n\r\n")
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after %d failed accepts: %v %v", 3, resp, err)
	}
	if n := fl.fails.Load(); n != 0 {
		t.Fatalf("%d failures left", n)
	}
}

// flakyListener fails its first accepts with a temporary error.
type flakyListener struct {
	net.Listener
	fails atomic.Int32 // the race detector sees no order in a response read from a socket
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Load() > 0 {
		l.fails.Add(-1)
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// TestSlackDeadline: after each request the deadline lies between limit and limit and an eighth
// from now, and a steady stream of requests moves it once every eighth of the limit, not once a
// request; no limit sets no deadline.
func TestSlackDeadline(t *testing.T) {
	const d = 8 * time.Second
	var s slackDeadline
	sets := 0
	set := func(time.Time) error { sets++; return nil }
	t0 := time.Unix(1000, 0)
	for i := range 1000 { // 10 s of requests, 10 ms apart
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		s.extend(now, d, set)
		if s.at.Before(now.Add(d)) || s.at.After(now.Add(d+d/8)) {
			t.Fatalf("request %d: deadline %v after now, want [%v, %v]", i, s.at.Sub(now), d, d+d/8)
		}
	}
	if sets < 9 || sets > 11 {
		t.Fatalf("%d timer changes in 10 s of requests, want about one a second (d/8)", sets)
	}
	var none slackDeadline
	none.extend(t0, 0, func(time.Time) error { t.Fatal("a deadline set with no limit"); return nil })
}
