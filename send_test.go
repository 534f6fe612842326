package blobcache

import (
	"bytes"
	"errors"

	"io"
	"net"
	"runtime"
	"testing"
)

// loopback returns the two ends of a loopback TCP connection.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server = <-accepted; server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// sendValue copies the reader to the server end with io.Copy (Reader.WriteTo) and returns what
// the client end received and io.Copy's error.
func sendValue(t *testing.T, client, server net.Conn, r *Reader) ([]byte, error) {
	t.Helper()
	got := make(chan []byte, 1)
	size := r.Size()
	go func() {
		b := make([]byte, size)
		n, _ := io.ReadFull(client, b)
		got <- b[:n]
	}()
	_, err := io.Copy(server, r)
	if err != nil {
		server.Close() // what a server does when a value breaks off: the client sees it
	}
	return <-got, err
}

// TestOpenSendsFromTheFile: a value Open leaves in the segment reaches a socket whole through
// Reader.WriteTo, sent by the kernel from the file (counted in SentBytes) where nothing needs
// its bytes, and read and written (not counted) where something does: a check on read, a value
// still in the write buffer, a small value read with its header.
func TestOpenSendsFromTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sendfile(2) is Linux's")
	}
	value := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*7 + n)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		opts     []Option
		size     int
		drain    bool
		wantSent bool
		pressure bool // the read route sees the data as not fitting in RAM
	}{
		{"100KiB", nil, 100 << 10, true, true, false},
		// The data fits in RAM: written through the page cache (writeback.go), or with
		// O_DIRECT and then filled into it by the hit's route, the value goes from the file.
		{"3MiB", nil, 3 << 20, true, true, false},
		{"3MiB-direct-writes", []Option{WithDirectWrites(true)}, 3 << 20, true, true, false},
		// When the data does not fit, the write goes with O_DIRECT and the route reads the value
		// from the device, which is cheaper than having the page cache fill, into memory.
		{"3MiB-pressure", nil, 3 << 20, true, false, true},
		{"3MiB-buffered-reads", []Option{WithBufferedReads(true)}, 3 << 20, true, true, true},
		{"small", nil, OpenHead, true, false, false},
		{"verify-on-read", []Option{WithVerifyOnRead(true)}, 100 << 10, true, false, false},
		{"in-the-write-buffer", nil, 100 << 10, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(t.TempDir(), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.pressure {
				c.fills.evicted.Store(evictedMin)
			}
			v := value(tc.size)
			if err := c.Put([]byte("k"), v); err != nil {
				t.Fatal(err)
			}
			if tc.drain {
				c.Drain()
			}
			r, ok := c.Open([]byte("k"))
			if !ok {
				t.Fatal("Open missed")
			}
			client, server := loopback(t)
			before := c.Stats().SentBytes
			got, err := sendValue(t, client, server, r)
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("sent %d of %d bytes (equal: %v), err %v", len(got), len(v), bytes.Equal(got, v), err)
			}
			sent := c.Stats().SentBytes - before
			if tc.wantSent != (sent > 0) || sent > uint64(len(v)) {
				t.Fatalf("%d bytes sent from the file, want some: %v", sent, tc.wantSent)
			}
		})
	}
}

// TestOpenSendReplaced: a blob replaced after Open is still sent whole and unchanged (the
// reader's segment reference keeps its bytes from being punched out), and then WriteTo fails,
// as Read does, so that a server ends the response as broken.
func TestOpenSendReplaced(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sendfile(2) is Linux's")
	}
	c, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	old := bytes.Repeat([]byte("old."), 64<<10)
	c.Put([]byte("k"), old)
	c.Drain()
	r, ok := c.Open([]byte("k"))
	if !ok {
		t.Fatal("Open missed")
	}
	c.Put([]byte("k"), bytes.Repeat([]byte("new."), 64<<10))
	c.Drain()
	client, server := loopback(t)
	got, err := sendValue(t, client, server, r)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("WriteTo of a replaced blob = %v, want ErrNotFound", err)
	}
	if !bytes.Equal(got, old[:len(got)]) {
		t.Fatal("the bytes sent are not the old blob's")
	}
	if n, err := r.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("Read after the failed send = %d, %v", n, err)
	}
}
