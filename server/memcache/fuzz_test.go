package memcache

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// FuzzConn feeds arbitrary bytes to a connection. The server must answer without panicking or
// hanging, and a key the input never names keeps its value.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"set k 0 0 3\r\nabc\r\nget k\r\n",
		"get a b c\r\ngets a\r\ndelete a\r\n",
		"ms k 2 F1 T10 q k Oab\r\nhi\r\nmg k v f s t c k b\r\nmd k q\r\nmn\r\n",
		"ms AP8K 2 b\r\nhi\r\nmg AP8K b v\r\n",
		"set k 0 0 -1\r\n", "set k 0 0 3\r\nabcdef\r\n", "stats\r\nversion\r\nquit\r\n",
		"add k 0 0 1\r\nx\r\ncas k 0 0 1 1\r\ny\r\n",
		"set k 0 0 1 noreply\r\nx\r\nverbosity 1 noreply\r\nincr k 1 noreply\r\nstats settings\r\n",
		"\x80\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00k",
		"gets " + strings.Repeat("guard ", 3000) + "\r\nversion\r\n",
		"gat 10 " + strings.Repeat("k ", 9000) + "\r\n",
	} {
		f.Add([]byte(s))
	}
	c, err := blobcache.New(f.TempDir(), testOptions()...)
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	st, err := store.New(c, store.Config{})
	if err != nil {
		f.Fatal(err)
	}
	srv := New(st, Config{ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second})
	if err := c.Put([]byte("guard"), []byte("guarded value")); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		client, server := net.Pipe()
		conn := srv.newConn(server)
		srv.mu.Lock()
		srv.mu.conns[conn] = struct{}{}
		srv.wg.Add(1)
		srv.mu.Unlock()
		done := make(chan struct{})
		go func() { conn.serve(); close(done) }()
		go io.Copy(io.Discard, client)
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(in)
		client.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("connection never ended")
		}
		if !bytes.Contains(in, []byte("guard")) && !bytes.Contains(in, []byte("Z3VhcmQ")) {
			r, ok := c.Get([]byte("guard"))
			if !ok {
				t.Fatal("guard lost")
			}
			if v, _ := io.ReadAll(r); string(v) != "guarded value" {
				t.Fatalf("guard = %q", v)
			}
		}
	})
}
