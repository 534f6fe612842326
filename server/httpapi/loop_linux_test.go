//go:build linux

package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
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
