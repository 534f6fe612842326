package server

import (
	"bytes"
	"net/http"
	"runtime"
	"testing"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// TestValuesSentFromTheFile: with values not checked on read, an HTTP GET of a whole blob and a
// memcached get of a large value both reach the client byte for byte, sent from the segment
// file by the kernel (Stats.SentBytes grows by the value's size each), through the server's own
// listeners (netlimit); a ranged GET is copied as before.
func TestValuesSentFromTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sendfile(2) is Linux's")
	}
	cfg := testConfig(t)
	cfg.Cache.VerifyOnRead = false
	s, _ := start(t, cfg)
	base := "http://" + s.HTTPAddr()
	value := make([]byte, 200<<10) // under 256 KiB: read through the page cache (a larger one not in it goes to the device)
	for i := range value {
		value[i] = byte(i * 31)
	}
	if code, _, _ := httpDo(t, "PUT", base+"/v1/blobs/big", value); code != 201 {
		t.Fatalf("PUT: %d", code)
	}
	mc := gomemcache.New(s.MemcacheAddr())
	if err := mc.Set(&gomemcache.Item{Key: "big2", Value: value[:150<<10]}); err != nil {
		t.Fatal(err)
	}
	s.Cache().Drain() // into a segment
	sent := func() uint64 { return s.Cache().Stats().SentBytes }
	// The client has the whole body as soon as the kernel sent it, which may be before the
	// handler counts it. One connection serves one request at a time: the next answer on it
	// says the handler before returned, its count made.
	one := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	defer one.CloseIdleConnections()
	get := func(hdr ...string) (int, []byte) {
		t.Helper()
		code, body, _ := httpDoWith(t, one, "GET", base+"/v1/blobs/big", nil, hdr...)
		if c, _, _ := httpDoWith(t, one, "GET", base+"/healthz", nil); c != 200 {
			t.Fatalf("healthz: %d", c)
		}
		return code, body
	}

	before := sent()
	code, body := get()
	if code != 200 || !bytes.Equal(body, value) {
		t.Fatalf("GET: %d, %d bytes, equal %v", code, len(body), bytes.Equal(body, value))
	}
	// net/http writes the first bytes itself (up to 512, to sniff), the connection the rest.
	if n := sent() - before; n < uint64(len(value))-512 || n > uint64(len(value)) {
		t.Fatalf("GET: %d bytes sent from the file, want about %d", n, len(value))
	}

	before = sent()
	code, body = get("Range", "bytes=1000-99999")
	if code != 206 || !bytes.Equal(body, value[1000:100000]) {
		t.Fatalf("ranged GET: %d, %d bytes", code, len(body))
	}
	if n := sent() - before; n != 0 {
		t.Fatalf("ranged GET: %d bytes sent from the file, want it copied", n)
	}

	before = sent()
	it, err := mc.Get("big2")
	if err != nil || !bytes.Equal(it.Value, value[:150<<10]) {
		t.Fatalf("memcached get: %v", err)
	}
	if n := sent() - before; n != 150<<10 {
		t.Fatalf("memcached get: %d bytes sent from the file, want %d", n, 150<<10)
	}
}
