package netlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rejected := make(chan struct{}, 10)
	l := New(ln, 2, func(c net.Conn) { io.WriteString(c, "busy\n"); rejected <- struct{}{} })
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	s1, s2 := <-accepted, <-accepted
	if l.Open() != 2 {
		t.Fatalf("Open = %d", l.Open())
	}
	third := dial()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	msg, _ := io.ReadAll(third) // the server closes after the message
	if string(msg) != "busy\n" {
		t.Fatalf("refused connection read %q", msg)
	}
	<-rejected
	s1.Close()
	s1.Close() // a second Close does not count twice
	if l.Open() != 1 {
		t.Fatalf("Open after close = %d", l.Open())
	}
	dial()
	s3 := <-accepted
	if l.Open() != 2 {
		t.Fatalf("Open = %d", l.Open())
	}
	s2.Close()
	s3.Close()
}

// TestTakeAndHold: a connection taken from its wrapper keeps its place until the place is
// released, whether the caller closes the connection or hands it back with Hold; a place is
// given back once, however often it is released.
func TestTakeAndHold(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, 0, nil)
	defer l.Close()
	for range 2 {
		go func() {
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				defer c.Close()
				io.Copy(io.Discard, c)
			}
		}()
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	innerA, placeA := Take(a)
	innerA.Close()
	if l.Open() != 2 {
		t.Fatalf("%d open after closing a taken connection, want 2 (its place is held)", l.Open())
	}
	placeA.Release()
	placeA.Release()
	if l.Open() != 1 {
		t.Fatalf("%d open after releasing its place twice, want 1", l.Open())
	}
	innerB, placeB := Take(b)
	held := Hold(innerB, placeB)
	held.Close()
	held.Close()
	if l.Open() != 0 {
		t.Fatalf("%d open after closing the held connection, want 0", l.Open())
	}
	if c, p := Take(innerB); c != innerB || p != nil {
		t.Fatal("Take of a connection of no Listener's")
	}
	var none *Place
	none.Release()
}
