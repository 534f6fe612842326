package memcache

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// BenchmarkGet is a memcached get (and a meta get, mg) of a value held in the memory tier, over one connection, the
// request written and the answer read by a client that allocates nothing: allocs/op is the
// server's (the connection's, the store's and the cache's). The "pending" case reads a value
// still in the write buffer (a set just acknowledged).
func BenchmarkGet(b *testing.B) {
	for _, tc := range []struct {
		cmd     string
		size    int
		pending bool
	}{{"get", 4 << 10, false}, {"get", 100 << 10, false}, {"mg", 4 << 10, false}, {"mg", 100 << 10, false}, {"get", 100 << 10, true}} {
		size := tc.size
		name := tc.cmd + "/" + strconv.Itoa(size>>10) + "KiB"
		if tc.pending {
			name += "/pending"
		}
		b.Run(name, func(b *testing.B) {
			e, c, set := benchSetup(b, size, 64<<20, blobcache.WithFlushInterval(time.Hour))
			buf := make([]byte, size+1024)
			if _, err := c.Write(set); err != nil {
				b.Fatal(err)
			}
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != "STORED\r\n" {
				b.Fatalf("set: %q, %v", buf[:n], err)
			}
			if !tc.pending {
				e.c.Drain()
			}
			req, head, end := "get k\r\n", "VALUE k 0 "+strconv.Itoa(size)+"\r\n", "\r\nEND\r\n"
			if tc.cmd == "mg" {
				req, head, end = "mg k v f t\r\n", "VA "+strconv.Itoa(size)+" f0 t-1\r\n", "\r\n"
			}
			want, reqb := len(head)+size+len(end), []byte(req)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(reqb); err != nil {
					b.Fatal(err)
				}
				n := 0
				for n < want {
					k, err := c.Read(buf[n:])
					if err != nil {
						b.Fatal(err)
					}
					n += k
				}
				if n != want || string(buf[:len(head)]) != head || string(buf[n-len(end):n]) != end {
					b.Fatalf("%q", buf[:min(n, 200)])
				}
			}
			switch st := e.c.Stats(); {
			case tc.pending && st.MemoryHits+st.ReadsPageCache+st.ReadsFilled+st.ReadsDirect != 0:
				b.Fatalf("a value in the write buffer read from the tier or the segments (%d, %d)", st.MemoryHits, st.ReadsPageCache+st.ReadsFilled+st.ReadsDirect)
			case !tc.pending && st.MemoryHits < uint64(b.N):
				b.Fatalf("%d of %d gets came from the memory tier", st.MemoryHits, b.N)
			}
		})
	}
}

// BenchmarkSet is a memcached set of a value that enters the memory tier as it is written, over
// one connection, the request written whole and the answer read: the server's CPU per set
// (ns/op) and allocations. On an event loop the data block is stored from the loop's buffer
// (blobcache.ValueHolder), not copied out of it first.
func BenchmarkSet(b *testing.B) {
	for _, size := range []int{4 << 10, 100 << 10, 1000000} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			_, c, set := benchSetup(b, size, 256<<20)
			const stored = "STORED\r\n"
			buf := make([]byte, len(stored))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(set); err != nil {
					b.Fatal(err)
				}
				got := buf[:len(stored)]
				if _, err := io.ReadFull(c, got); err != nil || string(got) != stored {
					b.Fatalf("%q, %v", got, err)
				}
			}
		})
	}
}

// benchSetup starts a server whose values enter a memory tier of memory bytes as they are
// written, with opts besides, and dials it (closed when b ends); set is a set of key "k" with a
// value of size bytes.
func benchSetup(b *testing.B, size int, memory int64, opts ...blobcache.Option) (e *env, c net.Conn, set []byte) {
	e = newEnvWith(b, Config{}, store.Config{}, append(append(testOptions(),
		blobcache.WithMemorySize(memory), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite)), opts...))
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	set = append([]byte("set k 0 0 "+strconv.Itoa(size)+"\r\n"), bytes.Repeat([]byte("v"), size)...)
	return e, c, append(set, "\r\n"...)
}
