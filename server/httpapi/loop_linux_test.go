//go:build linux

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/netlimit"
	"github.com/seed57392e9e/blobcache/server/store"
)

// slowClient dials addr with a receive buffer of a couple of loopback segments (a smaller one
// makes the kernel's window updates wait on its probe timer), so that a response of megabytes
// fills the sockets long before it is written, and sends raw without reading.
func slowClient(t *testing.T, addr, raw string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := c.(*net.TCPConn)
	tc.SetReadBuffer(128 << 10)
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	return tc
}

// getOne sends one GET of key on a new connection and returns the body.
func getOne(t *testing.T, addr, key string) []byte {
	t.Helper()
	c := sendRaw(t, addr, "GET /v1/blobs/"+key+" HTTP/1.1\r\nHost: x\r\n\r\n")
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", key, resp.StatusCode, err)
	}
	return body
}

// TestLoopSlowReader: a response the socket cannot take at once waits in its connection while
// the loop (there is one) serves the others, and then goes out whole, followed by the answer to
// the request pipelined behind it; for a value the memory tier holds (sent by reference) and
// for one read from the segments (copied).
func TestLoopSlowReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []blobcache.Option
	}{
		{"held", []blobcache.Option{blobcache.WithMemorySize(64 << 20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite)}},
		{"copied", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFastEnv(t, FastConfig{Loops: 1}, store.Config{}, Config{}, tc.opts...)
			huge := bytes.Repeat([]byte("0123456789abcdef"), 6<<20>>4)
			e.put("huge", huge)
			e.put("a", []byte("hello"))
			e.c.Drain()
			addr := e.srv.Listener.Addr().String()
			slow := slowClient(t, addr, "GET /v1/blobs/huge HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n")
			time.Sleep(50 * time.Millisecond) // the loop has written what the socket takes
			for range 3 {
				if got := getOne(t, addr, "a"); string(got) != "hello" {
					t.Fatalf("another connection got %q", got)
				}
			}
			slow.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(slow)
			for i, want := range [][]byte{huge, []byte("hello")} {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				body, err := io.ReadAll(resp.Body)
				if err != nil || !bytes.Equal(body, want) {
					t.Fatalf("response %d: %d bytes (%v), want %d", i, len(body), err, len(want))
				}
			}
			if n := e.fast.served.Load(); n != 5 {
				t.Fatalf("the fast path answered %d requests, want 5", n)
			}
			if e.fast.waited.Load() == 0 {
				t.Fatal("no response waited for its socket: the test did not test that")
			}
		})
	}
}

// TestLoopTimeouts: a connection that does not read its response is closed WriteTimeout after
// its request, and one that sends no request IdleTimeout after its last.
func TestLoopTimeouts(t *testing.T) {
	e := newFastEnv(t, FastConfig{Loops: 1, WriteTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond},
		store.Config{}, Config{})
	huge := bytes.Repeat([]byte("x"), 16<<20)
	e.put("huge", huge)
	e.put("a", []byte("hello"))
	e.c.Drain()
	addr := e.srv.Listener.Addr().String()

	slow := slowClient(t, addr, "GET /v1/blobs/huge HTTP/1.1\r\nHost: x\r\n\r\n")
	idle := sendRaw(t, addr, "GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n")
	defer idle.Close()
	idleR := bufio.NewReader(idle)
	resp, err := http.ReadResponse(idleR, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	time.Sleep(time.Second)
	slow.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := io.Copy(io.Discard, slow)
	if n >= int64(len(huge)) {
		t.Fatalf("the slow reader got the whole response (%d bytes, %v) past the write timeout", n, err)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the slow reader's connection is still open after the write timeout (%d bytes read)", n)
	}
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(idleR); err != nil || len(b) != 0 {
		t.Fatalf("the idle connection: %q %v, want it closed", b, err)
	}
}

// TestLoopShutdown: at shutdown a loop closes its idle connections at once and writes a waiting
// response to its end before it closes that connection.
func TestLoopShutdown(t *testing.T) {
	e := newFastEnv(t, FastConfig{Loops: 1}, store.Config{}, Config{})
	huge := bytes.Repeat([]byte("y"), 6<<20)
	e.put("huge", huge)
	e.c.Drain()
	slow := slowClient(t, e.srv.Listener.Addr().String(), "GET /v1/blobs/huge HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- e.fast.Shutdown(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("shutdown returned (%v) with a response half written", err)
	default:
	}
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(body, huge) {
		t.Fatalf("%d bytes (%v), want %d", len(body), err, len(huge))
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestLoopConnectionPlaces: a connection served by a loop keeps its place in the listener's
// limit until it is closed, by the client or after it went to net/http.
func TestLoopConnectionPlaces(t *testing.T) {
	e := newEnv(t, store.Config{}, Config{})
	e.put("a", []byte("hello"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := netlimit.New(ln, 100, nil)
	fast := e.h.NewFastPath(lim, FastConfig{Loops: 2})
	srv := &http.Server{Handler: e.h}
	go srv.Serve(fast)
	defer func() {
		srv.Close()
		fast.Shutdown(context.Background())
	}()
	addr := ln.Addr().String()
	var conns []net.Conn
	for i := range 6 {
		raw := "GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n"
		if i%2 == 1 { // to net/http, and back to the fast path's answer
			raw = "DELETE /v1/blobs/none HTTP/1.1\r\nHost: x\r\n\r\n" + raw
		}
		c := sendRaw(t, addr, raw)
		br := bufio.NewReader(c)
		for range 1 + i%2 {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
		}
		conns = append(conns, c)
	}
	waitFor := func(want int) {
		t.Helper()
		for start := time.Now(); lim.Open() != want; time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%d connections hold a place, want %d", lim.Open(), want)
			}
		}
	}
	waitFor(6)
	if fast.handed.Load() != 3 {
		t.Fatalf("%d connections handed to net/http, want 3", fast.handed.Load())
	}
	for _, c := range conns {
		c.Close()
	}
	waitFor(0)
}

// TestLoopPipelinedTail: the part of a request read behind answered ones waits for the next read
// instead of sending the connection to net/http; a request incomplete on its own first read
// goes to net/http, which answers it the same.
func TestLoopPipelinedTail(t *testing.T) {
	e := newFastEnv(t, FastConfig{Loops: 1}, store.Config{}, Config{})
	e.put("a", []byte("hello"))
	req := "GET /v1/blobs/a HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name         string
		first        string
		fast, handed uint64
	}{
		{"tail behind an answered request", req + req[:20], 2, 0},
		{"a request in two reads", req[:20], 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			served, handed := e.fast.served.Load(), e.fast.handed.Load()
			c := sendRaw(t, e.srv.Listener.Addr().String(), tc.first)
			defer c.Close()
			time.Sleep(50 * time.Millisecond) // the loop has read the first part
			if _, err := io.WriteString(c, req[20:]); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			for i := range strings.Count(tc.first+req[20:], "GET ") {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || string(body) != "hello" {
					t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
				}
			}
			if got := e.fast.served.Load() - served; got != tc.fast {
				t.Errorf("the fast path answered %d, want %d", got, tc.fast)
			}
			if got := e.fast.handed.Load() - handed; got != tc.handed {
				t.Errorf("%d connections handed to net/http, want %d", got, tc.handed)
			}
		})
	}
}

// TestLoopManyClients: clients at once on two loops, each sending bursts of pipelined GETs and
// HEADs (hits of values from 1 byte to 6 MiB, misses, ranges), half of them reading through a
// small receive buffer, the other half moving to net/http with a DELETE in the middle; every
// response is the right one, whole, in order.
func TestLoopManyClients(t *testing.T) {
	e := newFastEnv(t, FastConfig{Loops: 2}, store.Config{}, Config{},
		blobcache.WithMemorySize(16<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
	sizes := []int{1, 100, 4 << 10, 100 << 10, 6 << 20}
	values := make([][]byte, len(sizes))
	for i, n := range sizes {
		values[i] = bytes.Repeat([]byte{byte('a' + i)}, n)
		e.put(fmt.Sprint("k", i), values[i])
	}
	e.c.Drain()
	addr := e.srv.Listener.Addr().String()
	clients, rounds := 8, 20
	if testing.Short() {
		rounds = 10
	}
	var wg sync.WaitGroup
	for cl := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(cl), 7))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			if cl%2 == 0 { // a slow reader: megabyte responses wait for its socket
				c.(*net.TCPConn).SetReadBuffer(128 << 10)
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			br := bufio.NewReader(c)
			for range rounds {
				type want struct {
					method string
					status int
					body   []byte
				}
				var raw strings.Builder
				var wants []want
				for range 1 + rng.IntN(4) {
					k := rng.IntN(len(sizes) + 1) // len(sizes): a miss
					key := fmt.Sprint("k", k)
					switch r := rng.IntN(10); {
					case r == 0 && cl%2 == 1: // to net/http for the rest of the connection
						fmt.Fprintf(&raw, "DELETE /v1/blobs/none-%d HTTP/1.1\r\nHost: x\r\n\r\n", cl)
						wants = append(wants, want{"DELETE", http.StatusNoContent, nil})
					case k == len(sizes):
						fmt.Fprintf(&raw, "GET /v1/blobs/miss HTTP/1.1\r\nHost: x\r\n\r\n")
						wants = append(wants, want{"GET", http.StatusNotFound, []byte("not found\n")})
					case r < 3:
						fmt.Fprintf(&raw, "HEAD /v1/blobs/%s HTTP/1.1\r\nHost: x\r\n\r\n", key)
						wants = append(wants, want{"HEAD", http.StatusOK, nil})
					case r < 5 && sizes[k] > 10:
						off := rng.IntN(sizes[k] - 10)
						fmt.Fprintf(&raw, "GET /v1/blobs/%s HTTP/1.1\r\nHost: x\r\nRange: bytes=%d-%d\r\n\r\n", key, off, off+9)
						wants = append(wants, want{"GET", http.StatusPartialContent, values[k][off : off+10]})
					default:
						fmt.Fprintf(&raw, "GET /v1/blobs/%s HTTP/1.1\r\nHost: x\r\n\r\n", key)
						wants = append(wants, want{"GET", http.StatusOK, values[k]})
					}
				}
				if _, err := io.WriteString(c, raw.String()); err != nil {
					t.Error(err)
					return
				}
				for i, w := range wants {
					resp, err := http.ReadResponse(br, &http.Request{Method: w.method})
					if err != nil {
						t.Errorf("client %d: response %d of %q: %v", cl, i, raw.String(), err)
						return
					}
					body, err := io.ReadAll(resp.Body)
					if err != nil || resp.StatusCode != w.status || !bytes.Equal(body, w.body) {
						t.Errorf("client %d: response %d of %q: %d, %d bytes (%v), want %d, %d bytes",
							cl, i, raw.String(), resp.StatusCode, len(body), err, w.status, len(w.body))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if e.fast.waited.Load() == 0 || e.fast.handed.Load() == 0 {
		t.Errorf("%d responses waited for their socket, %d connections went to net/http: want both",
			e.fast.waited.Load(), e.fast.handed.Load())
	}
}

// TestLoopParksDeviceReads: a GET of a blob not in memory is answered on a goroutine while its
// connection is parked, in order with the requests pipelined around it; a blob the memory tier
// holds is answered on the loop. A request parked is counted served once, as one answered on the
// loop is: the loop's lookup that stops counts nothing.
func TestLoopParksDeviceReads(t *testing.T) {
	for _, tier := range []bool{false, true} {
		var opts []blobcache.Option
		if tier {
			opts = append(opts, blobcache.WithMemorySize(64<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
		}
		e := newFastEnv(t, FastConfig{Loops: 1}, store.Config{}, Config{}, opts...)
		big := bytes.Repeat([]byte("p"), 300_000)
		e.put("a", []byte("hello"))
		e.put("big", big)
		e.c.Drain() // on disk: out of the write buffer
		before, servedBefore := e.fast.parks.Load(), e.fast.served.Load()
		req := func(k string) string { return "GET /v1/blobs/" + k + " HTTP/1.1\r\nHost: x\r\n\r\n" }
		c := sendRaw(t, e.srv.Listener.Addr().String(), req("a")+req("none")+req("big")+req("a"))
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for i, want := range []struct {
			code int
			body []byte
		}{{200, []byte("hello")}, {404, nil}, {200, big}, {200, []byte("hello")}} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("tier %v, response %d: %v", tier, i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != want.code || (want.body != nil && !bytes.Equal(body, want.body)) {
				t.Fatalf("tier %v, response %d: %d, %d bytes", tier, i, resp.StatusCode, len(body))
			}
		}
		parks := e.fast.parks.Load() - before
		if !tier && parks != 3 {
			t.Fatalf("%d requests parked, want the 3 of blobs on disk", parks)
		}
		if tier && parks != 0 {
			t.Fatalf("%d requests parked with the blobs in memory", parks)
		}
		if served := e.fast.served.Load() - servedBefore; served != 4 {
			t.Fatalf("tier %v: %d requests counted served, want 4", tier, served)
		}
	}
}
