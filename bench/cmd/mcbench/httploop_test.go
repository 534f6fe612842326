//go:build linux

package main

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHTTPLoop: one event loop answers pipelined requests, a request split across writes, and a
// second connection, each with the fixed answer.
func TestHTTPLoop(t *testing.T) {
	sa, err := sockaddr("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := listenReusePort(sa)
	if err != nil {
		t.Fatal(err)
	}
	bound, err := unix.Getsockname(ln)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(bound.(*unix.SockaddrInet4).Port)
	head, body := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), []byte("abcde")
	go serveLoop(ln, head, body) // runs until the test binary exits
	answer := append(append([]byte(nil), head...), body...)
	req := "GET /k HTTP/1.1\r\nHost: x\r\n\r\n"
	for conn := range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, req+req); err != nil { // two pipelined
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req[:10]); err != nil { // one split in two
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := io.WriteString(c, req[10:]); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 3*len(answer))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("connection %d: %v", conn, err)
		}
		if want := bytes.Repeat(answer, 3); !bytes.Equal(got, want) {
			t.Fatalf("connection %d: %q, want %q", conn, got, want)
		}
		c.Close()
	}
}

// FuzzRequestEnd: requestEnd frames the first request of any bytes: -1 when they hold no empty
// line, else the length through the first "\r\n\r\n".
func FuzzRequestEnd(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /"))
	f.Add([]byte("\r\n\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		end := requestEnd(b)
		first := bytes.Index(b, []byte("\r\n\r\n"))
		switch {
		case first < 0 && end != -1:
			t.Fatalf("%q: end %d, want -1", b, end)
		case first >= 0 && end != first+4:
			t.Fatalf("%q: end %d, want %d", b, end, first+4)
		}
	})
}
