package memcached

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"
)

// FuzzGetReply has Get read any bytes as a server's reply: it returns a value, a miss or an
// error, never panics, and a hit is exactly the bytes the VALUE line announced.
func FuzzGetReply(f *testing.F) {
	for _, seed := range []string{
		"END\r\n", "VALUE k 0 3\r\nabc\r\nEND\r\n", "VALUE k 0 3\r\nabcd\r\nEND\r\n", "VALUE x 0 1\r\na\r\nEND\r\n",
		"VALUE k 0 99999999999\r\n", "VALUE k 0 -1\r\n", "SERVER_ERROR out of memory\r\n", "VALUE k 0 2 5\r\nhi\r\nEND\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		client, server := net.Pipe()
		defer client.Close()
		go func() {
			defer server.Close()
			r := bufio.NewReader(server)
			if _, err := r.ReadSlice('\n'); err != nil {
				return
			}
			server.Write(reply)
		}()
		c := &Conn{nc: client, r: bufio.NewReader(client), w: bufio.NewWriter(client), timeout: 5 * time.Second}
		v, hit, err := c.Get("k", nil)
		if err != nil || !hit {
			return
		}
		line, rest, _ := bytes.Cut(reply, []byte("\n")) // the client ends a line at its \n, as memcached does
		f := bytes.Fields(line)
		if len(f) < 4 || string(f[0]) != "VALUE" || string(f[1]) != "k" || !bytes.HasPrefix(rest, v) {
			t.Fatalf("hit %q from reply %q", v, reply)
		}
	})
}
