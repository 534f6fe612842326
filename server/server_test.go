package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/seed57392e9e/blobcache"
)

// smallCache are cache options that set up fast under the race detector.
var smallCache = blobcache.Options{WriteBufferSize: 8 << 20, SegmentSize: 32 << 20, ExpectedBlobs: 1000, VerifyOnRead: true}

// testConfig listens on loopback, ephemeral ports only.
func testConfig(t *testing.T) Config {
	return Config{Dir: t.TempDir(), Cache: smallCache, HTTPAddr: "127.0.0.1:0", MemcacheAddr: "127.0.0.1:0"}
}

// start runs a server until the test ends (or stop is called) and checks that it stops cleanly.
func start(t *testing.T, cfg Config) (s *Server, stop func() error) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var stopped bool
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s, stop
}

func httpDo(t *testing.T, method, url string, body []byte, hdr ...string) (int, []byte, http.Header) {
	t.Helper()
	return httpDoWith(t, http.DefaultClient, method, url, body, hdr...)
}

// httpDoWith is httpDo through client.
func httpDoWith(t *testing.T, client *http.Client, method, url string, body []byte, hdr ...string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func TestBothFrontEnds(t *testing.T) {
	s, _ := start(t, testConfig(t))
	base := "http://" + s.HTTPAddr()
	mc := gomemcache.New(s.MemcacheAddr())

	if code, _, _ := httpDo(t, "PUT", base+"/v1/blobs/from-http", []byte("via http")); code != 201 {
		t.Fatalf("PUT: %d", code)
	}
	it, err := mc.Get("from-http")
	if err != nil || string(it.Value) != "via http" || it.Flags != 0 {
		t.Fatalf("memcached get of an HTTP blob: %v %v", it, err)
	}
	if err := mc.Set(&gomemcache.Item{Key: "from-mc", Value: []byte("via memcached"), Flags: 12}); err != nil {
		t.Fatal(err)
	}
	code, body, hdr := httpDo(t, "GET", base+"/v1/blobs/from-mc", nil)
	if code != 200 || string(body) != "via memcached" || hdr.Get("Blobcache-Flags") != "12" {
		t.Fatalf("HTTP get of a memcached item: %d %q %v", code, body, hdr)
	}
	if _, err := mc.Get("missing"); err != gomemcache.ErrCacheMiss {
		t.Fatalf("miss: %v", err)
	}
	if code, _, _ := httpDo(t, "GET", base+"/v1/blobs/missing", nil); code != 404 {
		t.Fatalf("miss: %d", code)
	}
	if code, body, _ := httpDo(t, "GET", base+"/healthz", nil); code != 200 || string(body) != "ok\n" {
		t.Fatalf("healthz: %d %q", code, body)
	}
	s.Cache().Drain()
	code, body, _ = httpDo(t, "GET", base+"/metrics", nil)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		"blobcache_hits_total 2", "blobcache_misses_total 2", "blobcache_bloom_rejections_total",
		"blobcache_bloom_false_positives_total", "blobcache_blobs 2", "blobcache_disk_bytes",
		"blobcache_segments 1", "blobcache_evictions_total 0", "blobcache_flush_seconds_total",
		"blobcache_corrupt_records_total 0", `blobcache_get_duration_seconds_bucket{result="hit",le=`,
		"blobcache_put_duration_seconds_bucket", `blobcache_requests_total{op="put",proto="http",result="201"} 1`,
		`blobcache_requests_total{op="gets",proto="memcache",result="hit"} 1`, `blobcache_connections{proto="memcache"} 1`,
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if t.Failed() {
		t.Log(string(body))
	}
}

func TestHugeHeader(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxHeaderBytes = 4 << 10
	s, _ := start(t, cfg)
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// Small enough to sit in the socket buffers whole: the server answers before it hangs up.
	io.WriteString(c, "GET /v1/blobs/k HTTP/1.1\r\nHost: x\r\nX-Padding: "+strings.Repeat("p", 16<<10)+"\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 431 ") {
		t.Fatalf("got %q, want 431", line)
	}
}

func TestSlowHeader(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReadHeaderTimeout = 100 * time.Millisecond
	s, _ := start(t, cfg)
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /v1/blobs/k HTTP/1.1\r\nHost: x\r\n") // and never the end of the header
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the server did not close a stalled request: %v", err)
	}
}

func TestConnectionLimit(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxConns = 1
	s, _ := start(t, cfg)
	for _, tc := range []struct{ addr, hello, want string }{
		{s.HTTPAddr(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 503 Service Unavailable\r\n"},
		{s.MemcacheAddr(), "version\r\n", "SERVER_ERROR too many open connections\r\n"},
	} {
		first, err := net.Dial("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		// The first connection is served (so it is accepted and counted) ...
		io.WriteString(first, tc.hello)
		first.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := bufio.NewReader(first).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		// ... and the second is refused.
		second, err := net.Dial("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		second.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(second).ReadString('\n')
		if line != tc.want {
			t.Errorf("%s: second connection read %q, want %q", tc.addr, line, tc.want)
		}
		second.Close()
		first.Close()
	}
}

func TestToken(t *testing.T) {
	cfg := testConfig(t)
	cfg.Token = "t0ken"
	s, _ := start(t, cfg)
	base := "http://" + s.HTTPAddr()
	if code, _, _ := httpDo(t, "PUT", base+"/v1/blobs/k", []byte("v")); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _, _ := httpDo(t, "GET", base+"/metrics", nil); code != 401 {
		t.Fatalf("metrics without a token: %d", code)
	}
	if code, _, _ := httpDo(t, "PUT", base+"/v1/blobs/k", []byte("v"), "Authorization", "Bearer t0ken"); code != 201 {
		t.Fatalf("with the token: %d", code)
	}
	c, err := net.Dial("tcp", s.MemcacheAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "set u 0 0 7\r\nx t0ken\r\nget k\r\n")
	want := "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("memcached with auth: %q %v", got, err)
	}
}

// selfSigned makes a certificate for 127.0.0.1.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "blobcache test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	cfg := testConfig(t)
	cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s, _ := start(t, cfg)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest("PUT", "https://"+s.HTTPAddr()+"/v1/blobs/k", strings.NewReader("secret value"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("PUT over TLS: %d", resp.StatusCode)
	}
	c, err := tls.Dial("tcp", s.MemcacheAddr(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "get k\r\n")
	want := "VALUE k 0 12\r\nsecret value\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("memcached over TLS: %q %v", got, err)
	}
	// Plain HTTP to the TLS port is refused.
	if _, err := http.Get("http://" + s.HTTPAddr() + "/healthz"); err == nil {
		t.Log("plain HTTP got an answer (Go's TLS server answers 400 to plain HTTP)")
	}
}

// TestGracefulShutdown stops the server with writes still in the write buffer and an upload in
// progress: the upload completes, and every acknowledged write is in the cache after reopening.
func TestGracefulShutdown(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cache.FlushInterval = time.Hour // nothing reaches a segment before the shutdown
	s, stop := start(t, cfg)
	base := "http://" + s.HTTPAddr()
	mc := gomemcache.New(s.MemcacheAddr())
	for i := range 50 {
		if code, _, _ := httpDo(t, "PUT", fmt.Sprintf("%s/v1/blobs/h%d", base, i), []byte(fmt.Sprint("http value ", i))); code != 201 {
			t.Fatalf("PUT %d: %d", i, code)
		}
		if err := mc.Set(&gomemcache.Item{Key: fmt.Sprint("m", i), Value: []byte(fmt.Sprint("mc value ", i)), Flags: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if p := s.Cache().Stats().PendingBytes; p == 0 {
		t.Fatal("the writes were flushed already; the test would prove nothing")
	}
	// An upload that has sent its header and half its body.
	c, err := net.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "PUT /v1/blobs/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234")
	// Wait until the server holds the upload's value memory: the request is being served.
	for i := 0; s.store.Inflight() == 0; i++ {
		if i > 10000 {
			t.Fatal("the upload never started")
		}
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// /healthz turns 503 while draining? The listener is closed at once, so it cannot be asked;
	// finish the upload instead.
	io.WriteString(c, "56789")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 201") {
		t.Fatalf("upload during shutdown: %q", line)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}

	cache, err := blobcache.New(cfg.Dir, blobcache.WithOptions(smallCache))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	check := func(key, want string) {
		r, ok := cache.Get([]byte(key))
		if !ok {
			t.Fatalf("%q lost in the shutdown", key)
		}
		if v, _ := io.ReadAll(r); !strings.HasSuffix(string(v), want) {
			t.Fatalf("%q = %q, want %q", key, v, want)
		}
	}
	for i := range 50 {
		check(fmt.Sprint("h", i), fmt.Sprint("http value ", i))
		check(fmt.Sprint("m", i), fmt.Sprint("mc value ", i))
	}
	check("upload", "0123456789")
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"no listener", func(c *Config) { c.HTTPAddr, c.MemcacheAddr = "", "" }},
		{"key too long", func(c *Config) { c.MaxKeyLen = blobcache.MaxKeyLen + 1 }},
		{"negative", func(c *Config) { c.MaxConns = -1 }},
		{"negative watchdog", func(c *Config) { c.WatchdogInterval = -time.Second }},
		{"cache options", func(c *Config) { c.Cache.SegmentSize = 1 }},
	} {
		cfg := testConfig(t)
		tc.mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	cfg := testConfig(t)
	cfg.HTTPAddr = "127.0.0.1:bad"
	if _, err := New(cfg); err == nil {
		t.Error("bad address accepted")
	}
	// The failed New released the directory.
	c, err := blobcache.New(cfg.Dir, blobcache.WithOptions(smallCache))
	if err != nil {
		t.Fatalf("directory still locked after a failed New: %v", err)
	}
	c.Close()
}

// TestNotify: Config.Notify hears READY=1 once both listeners answer, WATCHDOG=1 while the server
// runs, and STOPPING=1 last, when the shutdown begins.
func TestNotify(t *testing.T) {
	cfg := testConfig(t)
	states := make(chan string, 1000)
	cfg.Notify = func(state string) { states <- state }
	cfg.WatchdogInterval = 10 * time.Millisecond
	s, stop := start(t, cfg)
	next := func() string {
		t.Helper()
		select {
		case st := <-states:
			return st
		case <-time.After(10 * time.Second):
			t.Fatal("nothing notified for 10 s")
			return ""
		}
	}
	ready := next()
	want := fmt.Sprintf("READY=1\nSTATUS=serving http=%s memcache=%s dir=%s", s.HTTPAddr(), s.MemcacheAddr(), cfg.Dir)
	if ready != want {
		t.Fatalf("first notification %q, want %q", ready, want)
	}
	c, err := net.DialTimeout("tcp", s.MemcacheAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "version\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "VERSION ") {
		t.Fatalf("version once ready: %q, %v", line, err)
	}
	if code, _, _ := httpDo(t, "GET", "http://"+s.HTTPAddr()+"/healthz", nil); code != 200 {
		t.Fatalf("/healthz once ready: %d", code)
	}
	for range 3 {
		if st := next(); st != "WATCHDOG=1" {
			t.Fatalf("while serving: %q, want WATCHDOG=1", st)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var last string
	for len(states) > 0 {
		last = <-states
	}
	if !strings.HasPrefix(last, "STOPPING=1\n") {
		t.Fatalf("last notification %q, want STOPPING=1", last)
	}
}

// TestLoopsByDefault: on Linux the HTTP fast path and the memcached front end run on event
// loops, each one per P the process had, and GOMAXPROCS gains as many Ps once, however many
// servers are made; -1 asks for none.
func TestLoopsByDefault(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("event loops are Linux's")
	}
	base := baseProcs()
	loops := func(s *Server) (h, m int) {
		t.Helper()
		if code, _, _ := httpDo(t, "GET", "http://"+s.HTTPAddr()+"/v1/blobs/none", nil); code != http.StatusNotFound {
			t.Fatalf("GET: %d", code)
		}
		if _, err := gomemcache.New(s.MemcacheAddr()).Get("none"); err != gomemcache.ErrCacheMiss {
			t.Fatalf("memcached get: %v", err)
		}
		// Both started before their first answer: by the first Accept, by Serve.
		return s.httpFast.Loops(), s.mc.EventLoops()
	}
	for range 2 {
		s, _ := start(t, testConfig(t))
		if h, m := loops(s); h != base || m != base {
			t.Fatalf("%d HTTP and %d memcached event loops, want %d each", h, m, base)
		}
	}
	if got := runtime.GOMAXPROCS(0); got != 3*base {
		t.Fatalf("GOMAXPROCS %d, want %d", got, 3*base)
	}
	cfg := testConfig(t)
	cfg.HTTPLoops, cfg.MemcacheLoops = -1, -1
	s, _ := start(t, cfg)
	if h, m := loops(s); h != 0 || m != 0 {
		t.Fatalf("%d HTTP and %d memcached event loops with -1, want none", h, m)
	}
}
