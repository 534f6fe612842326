package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestSendFile sends ranges of a file to a socket (more than the socket buffer holds, so the
// sender must wait for the reader) and checks the bytes that arrive, and that the file's offset
// is left alone.
func TestSendFile(t *testing.T) {
	data := make([]byte, 8<<20+123)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Default.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	client, server := tcpPair(t)
	for _, rg := range [][2]int64{{0, 1}, {4095, 4097}, {12345, 3<<20 + 7}, {0, int64(len(data))}} {
		got := make(chan []byte, 1)
		go func() {
			b := make([]byte, rg[1])
			_, err := io.ReadFull(client, b)
			if err != nil {
				b = nil
			}
			got <- b
		}()
		n, err := SendFile(server, f, rg[0], rg[1])
		if runtime.GOOS != "linux" {
			if !errors.Is(err, errors.ErrUnsupported) || n != 0 {
				t.Fatalf("SendFile on %s = %d, %v; want ErrUnsupported", runtime.GOOS, n, err)
			}
			return
		}
		if err != nil || n != rg[1] {
			t.Fatalf("SendFile(%d, %d) = %d, %v", rg[0], rg[1], n, err)
		}
		if b := <-got; !bytes.Equal(b, data[rg[0]:rg[0]+rg[1]]) {
			t.Fatalf("range [%d, +%d): the bytes that arrived differ", rg[0], rg[1])
		}
	}
	if off, err := f.(*osFile).Seek(0, io.SeekCurrent); err != nil || off != 0 {
		t.Fatalf("file offset %d after the sends (%v), want 0", off, err)
	}
	// A range past the end of the file sends what there is, then fails.
	go io.Copy(io.Discard, client)
	if n, err := SendFile(server, f, int64(len(data))-10, 20); n != 10 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("SendFile past the end = %d, %v; want 10 and ErrUnexpectedEOF", n, err)
	}
}

// TestSendFileUnsupported: a file that is not the operating system's cannot be sent.
func TestSendFileUnsupported(t *testing.T) {
	_, server := tcpPair(t)
	if n, err := SendFile(server, fakeFile{}, 0, 10); n != 0 || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("SendFile of a fake file = %d, %v; want ErrUnsupported", n, err)
	}
}

// fakeFile is a File that only has a name.
type fakeFile struct{ File }

func (fakeFile) Name() string { return "fake" }
