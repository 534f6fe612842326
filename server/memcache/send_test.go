package memcache

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// TestGetSendsFromTheFile: with nothing checking values on read, a get of values over
// blobcache.OpenHead sends them from the segment file (the cache counts them in SentBytes),
// and the reply is byte for byte what it would be otherwise: VALUE lines, values and END in
// order, small values and misses between them, and bytes_written counts all of it. Values go
// from their file on a goroutine's connection: the server runs no event loops for such a store
// (a send from a file would block a loop).
func TestGetSendsFromTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sendfile(2) is Linux's")
	}
	e := newEnvWith(t, Config{Loops: -1}, store.Config{}, []blobcache.Option{blobcache.WithWriteBufferSize(8 << 20),
		blobcache.WithSegmentSize(32 << 20), blobcache.WithExpectedBlobs(1000)})
	big := bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16)
	small := []byte("small value")
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for _, kv := range []struct {
		k string
		v []byte
	}{{"big", big}, {"small", small}, {"big2", append(big[:len(big):len(big)], 'x')}} {
		fmt.Fprintf(nc, "set %s 7 0 %d\r\n%s\r\n", kv.k, len(kv.v), kv.v)
		if line, _ := r.ReadString('\n'); line != "STORED\r\n" {
			t.Fatalf("set %s: %q", kv.k, line)
		}
	}
	e.c.Drain() // into a segment
	before := e.c.Stats().SentBytes
	fmt.Fprintf(nc, "get big small missing big2 big\r\nstats\r\n")
	var want bytes.Buffer
	for _, kv := range []struct {
		k string
		v []byte
	}{{"big", big}, {"small", small}, {"big2", append(big[:len(big):len(big)], 'x')}, {"big", big}} {
		fmt.Fprintf(&want, "VALUE %s 7 %d\r\n%s\r\n", kv.k, len(kv.v), kv.v)
	}
	want.WriteString("END\r\n")
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the reply differs from what was stored (%d bytes)", len(got))
	}
	if sent := e.c.Stats().SentBytes - before; sent != uint64(3*len(big)+1) {
		t.Fatalf("%d bytes sent from the file, want the three large values' %d", sent, 3*len(big)+1)
	}
	// bytes_written counts the sent values with the rest.
	stats := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil || line == "END\r\n" {
			break
		}
		var k, v string
		fmt.Sscanf(line, "STAT %s %s", &k, &v)
		stats[k] = v
	}
	var n int
	fmt.Sscan(stats["bytes_written"], &n)
	// The sets' three STORED lines and the get reply, but for what is still buffered when
	// stats runs (the reply's last "\r\nEND\r\n": the stats command was read with the get).
	if wantN := 3*len("STORED\r\n") + want.Len() - len("\r\nEND\r\n"); n != wantN {
		t.Fatalf("bytes_written %d, want %d: the values sent from the file are not counted", n, wantN)
	}
}
