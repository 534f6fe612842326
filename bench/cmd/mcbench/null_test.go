package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestNullServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newNullServer(5)
	done := make(chan error, 1)
	go func() { done <- s.serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// A pipeline: every reply comes back in order.
	req := "set k 0 0 3\r\nabc\r\n" +
		"set q 0 0 2 noreply\r\nxy\r\n" +
		"get a b\r\n" +
		"gets a\r\n" +
		"delete a\r\n" +
		"version\r\n" +
		"bogus\r\n" +
		"set short\r\n" +
		"quit\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	want := "STORED\r\n" +
		"VALUE a 0 5\r\nabcde\r\nVALUE b 0 5\r\nabcde\r\nEND\r\n" +
		"VALUE a 0 5 1\r\nabcde\r\nEND\r\n" +
		"DELETED\r\n" +
		"VERSION null\r\n" +
		"ERROR\r\n" +
		"CLIENT_ERROR bad command line format\r\n"
	if string(got) != want {
		t.Fatalf("replies:\n%q\nwant:\n%q", got, want)
	}
	ln.Close()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("serve after the listener closed = %v", err)
	}
}

// FuzzNullServer feeds the null server arbitrary bytes: it must answer or hang up, never panic or
// wait for more than the client sent.
func FuzzNullServer(f *testing.F) {
	for _, seed := range []string{
		"get a b\r\n", "gets a\r\nquit\r\n", "set k 0 0 3\r\nabc\r\n", "set k 0 0 -1\r\n",
		"cas k 0 0 2 7 noreply\r\nxy\r\n", "set k 0 0 99999999\r\nab", "\r\n", "bogus", "delete\r\n",
	} {
		f.Add([]byte(seed))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	go newNullServer(3).serve(ln)
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			c.Write(in)
			c.(*net.TCPConn).CloseWrite()
		}()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("reading the replies: %v", err)
		}
	})
}
