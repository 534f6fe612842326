package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPFastPathLimitsAndCounts: through the server's own listener, a connection the HTTP fast
// path serves is closed once it has been idle for IdleTimeout; its requests are counted as
// net/http's are; and the open-connections gauge comes back to the connections still open once
// fast, handed-over and refused connections are gone.
func TestHTTPFastPathLimitsAndCounts(t *testing.T) {
	cfg := testConfig(t)
	cfg.IdleTimeout = 300 * time.Millisecond
	s, _ := start(t, cfg)
	raw := func(req string, method string) (net.Conn, *bufio.Reader, *http.Response, []byte) {
		t.Helper()
		c, err := net.Dial("tcp", s.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, req)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		return c, br, resp, body
	}

	// A PUT goes to net/http; the connection stays open there.
	put, _, resp, _ := raw("PUT /v1/blobs/k HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "PUT")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT: %d", resp.StatusCode)
	}
	// A GET and a miss on one connection, both answered by the fast path, which then closes the
	// connection once it has been idle for IdleTimeout.
	get, br, resp, _ := raw("GET /v1/blobs/k HTTP/1.1\r\nHost: x\r\n\r\n", "GET")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	io.WriteString(get, "GET /v1/blobs/missing HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("miss: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle fast-path connection: %v, want the server to close it", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
		t.Fatalf("closed after %v idle, want about %v", d, cfg.IdleTimeout)
	}
	get.Close()
	put.Close()

	// The counts, read on a connection of their own (handed over: /metrics is net/http's).
	var body string
	for i := 0; ; i++ {
		c, _, _, b := raw("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "GET")
		c.Close()
		body = string(b)
		// The metrics request's own connection is the only one open once the others are gone.
		if strings.Contains(body, `blobcache_connections{proto="http"} 1`+"\n") || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		`blobcache_connections{proto="http"} 1` + "\n",
		`blobcache_requests_total{op="put",proto="http",result="201"} 1`,
		`blobcache_requests_total{op="get",proto="http",result="200"} 1`,
		`blobcache_requests_total{op="get",proto="http",result="404"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}
