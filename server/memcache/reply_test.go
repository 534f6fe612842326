package memcache

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// closeCount is an io.Closer that counts its closes.
type closeCount struct{ n atomic.Int32 }

func (c *closeCount) Close() error { c.n.Add(1); return nil }

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
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
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestReplyBuffer: written and held bytes come out in the order given, in one flush, each holder
// closed once after its value is out; a write larger than the buffer goes out in place; a flush
// that fails, and a close before any flush, still close every holder once; writes after close
// fail. Over TCP (writev) and over a pipe (one write per piece).
func TestReplyBuffer(t *testing.T) {
	for _, kind := range []string{"tcp", "pipe"} {
		t.Run(kind, func(t *testing.T) {
			var w, r net.Conn
			if kind == "tcp" {
				w, r = tcpPair(t)
			} else {
				w, r = net.Pipe()
				defer w.Close()
				defer r.Close()
			}
			var written atomic.Uint64
			b := newReplyBuffer(&connSink{conn: w}, &written)
			p1, p2 := bytes.Repeat([]byte("x"), 5000), bytes.Repeat([]byte("y"), 70000)
			big := bytes.Repeat([]byte("z"), replyBufferSize+10)
			var c1, c2 closeCount
			want := "VALUE a\r\n" + string(p1) + "\r\nVALUE b\r\n" + string(p2) + "\r\nEND\r\n" + string(big)
			got := make(chan []byte, 1)
			go func() {
				buf := make([]byte, len(want))
				_, err := io.ReadFull(r, buf)
				if err != nil {
					buf = append(buf[:0], err.Error()...)
				}
				got <- buf
			}()
			b.WriteString("VALUE a\r\n")
			b.Hold(p1, &c1)
			b.WriteString("\r\nVALUE b\r\n")
			b.Hold(p2, &c2)
			b.Write([]byte("\r\nEND\r\n"))
			if c1.n.Load() != 0 || c2.n.Load() != 0 {
				t.Fatal("a holder was closed before its value was written")
			}
			if _, err := b.Write(big); err != nil { // flushes what is gathered, then goes out whole
				t.Fatal(err)
			}
			if err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			if g := <-got; string(g) != want {
				t.Fatalf("got %d bytes, want %d; equal prefix %d", len(g), len(want), commonPrefix(g, []byte(want)))
			}
			if c1.n.Load() != 1 || c2.n.Load() != 1 || written.Load() != uint64(len(want)) {
				t.Fatalf("closes %d, %d; bytes_written %d of %d", c1.n.Load(), c2.n.Load(), written.Load(), len(want))
			}

			var c3, c4 closeCount
			b.Hold(p1, &c3)
			b.close() // the connection ends with a value held: it is released, not written
			if c3.n.Load() != 1 {
				t.Fatalf("close released the held value %d times", c3.n.Load())
			}
			if _, err := b.Write([]byte("x")); err == nil {
				t.Fatal("a write after close succeeded")
			}
			r.Close()
			w.Close()
			b2 := newReplyBuffer(&connSink{conn: w}, &written)
			b2.Hold(p1, &c4)
			if err := b2.Flush(); err == nil {
				t.Fatal("a flush to a closed connection succeeded")
			}
			b2.close()
			if c4.n.Load() != 1 {
				t.Fatalf("a failed flush closed the holder %d times", c4.n.Load())
			}
		})
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestGetHeldValues: with values in the memory tier (written to it as they are stored), gets and
// meta gets of values around and above the size the store hands over by reference, pipelined
// with small ones and misses, answer the bytes memcached would, and count them in bytes_written.
func TestGetHeldValues(t *testing.T) {
	opts := append(testOptions(), blobcache.WithMemorySize(64<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite), blobcache.WithVerifyOnRead(false))
	e := newEnvWith(t, Config{}, store.Config{}, opts)
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	before := e.srv.stats.bytesWritten.Load()
	sizes := []int{100, 4095, 4096, 5000, 16 << 10, 70000, 300 << 10}
	vals := make([]string, len(sizes))
	for i, n := range sizes {
		vals[i] = strings.Repeat(string(rune('a'+i)), n)
		fmt.Fprintf(c, "set k%d %d 0 %d noreply\r\n%s\r\n", i, i, n, vals[i])
	}
	io.WriteString(c, "mn\r\n")
	if line, _ := br.ReadString('\n'); line != "MN\r\n" {
		t.Fatalf("mn: %q", line)
	}
	e.c.Drain()
	if st := e.c.Stats(); st.MemoryItems < int64(len(sizes)-1) {
		t.Fatalf("the memory tier holds %d values", st.MemoryItems)
	}
	var req, want strings.Builder
	want.WriteString("MN\r\n") // read above; the sets answer nothing
	for round := range 2 {
		req.WriteString("get")
		for i := range sizes {
			fmt.Fprintf(&req, " k%d", i)
		}
		req.WriteString(" missing\r\n")
		for i, n := range sizes {
			fmt.Fprintf(&want, "VALUE k%d %d %d\r\n%s\r\n", i, i, n, vals[i])
		}
		want.WriteString("END\r\n")
		for i, n := range sizes {
			fmt.Fprintf(&req, "mg k%d v f\r\n", i)
			fmt.Fprintf(&want, "VA %d f%d\r\n%s\r\n", n, i, vals[i])
		}
		_ = round
	}
	io.WriteString(c, req.String())
	got := make([]byte, want.Len()-len("MN\r\n"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want.String()[len("MN\r\n"):] {
		t.Fatalf("got %d bytes (%v), want %d; equal prefix %d", len(got), err, len(got), commonPrefix(got, []byte(want.String()[len("MN\r\n"):])))
	}
	if st := e.c.Stats(); st.MemoryHits < uint64(2*2*(len(sizes)-1)) {
		t.Fatalf("%d hits from the memory tier: the test did not read from it", st.MemoryHits)
	}
	// bytes_written counts the held values too, and the mn's answer before them (counted from
	// before it: the server counts a write once it returned, which may be after the client read
	// it, so a count taken after reading it could still miss it).
	deadline := time.Now().Add(10 * time.Second)
	for e.srv.stats.bytesWritten.Load()-before < uint64(want.Len()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := e.srv.stats.bytesWritten.Load() - before; n != uint64(want.Len()) {
		t.Fatalf("bytes_written grew by %d, the answers are %d bytes", n, want.Len())
	}
}
