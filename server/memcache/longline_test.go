package memcache

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestLongMultiGet sends multi-gets far over the line limit, as memcached clients do: 10,000
// keys through a real client (one "gets" line of about 100 KB), and 70 keys of 250 bytes. Every
// value comes back, and the connection goes on.
func TestLongMultiGet(t *testing.T) {
	e := newEnv(t, Config{})
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%05d", i)
		if i%3 != 0 { // every third key is a miss
			if err := e.c.Put([]byte(keys[i]), []byte("value of "+keys[i])); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := e.client().GetMulti(keys)
	if err != nil {
		t.Fatalf("GetMulti of %d keys: %v", len(keys), err)
	}
	for i, k := range keys {
		it, ok := got[k]
		if ok != (i%3 != 0) || (ok && string(it.Value) != "value of "+k) {
			t.Fatalf("%s: hit %v, want %v", k, ok, i%3 != 0)
		}
	}

	long := make([]string, 70)
	for i := range long {
		long[i] = fmt.Sprintf("%03d", i) + strings.Repeat("k", MaxKeyLen-3)
		if err := e.c.Put([]byte(long[i]), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for _, cmd := range []string{"get", "gets"} {
		send(t, c, cmd+" "+strings.Join(long, " ")+"\r\nversion\r\n")
		for i, k := range long {
			line, _ := br.ReadString('\n')
			want := fmt.Sprintf("VALUE %s 0 %d", k, len(fmt.Sprint(i)))
			if !strings.HasPrefix(line, want) {
				t.Fatalf("%s: key %d: got %q, want %q", cmd, i, line, want)
			}
			if v, _ := br.ReadString('\n'); v != fmt.Sprint(i)+"\r\n" {
				t.Fatalf("%s: key %d: value %q", cmd, i, v)
			}
		}
		for _, want := range []string{"END\r\n", "VERSION test\r\n"} {
			if line, err := br.ReadString('\n'); line != want {
				t.Fatalf("%s: got %q (%v), want %q", cmd, line, err, want)
			}
		}
	}
}

// TestLongLineBoundaries moves a long get line across the read buffer's boundaries one byte at
// a time, so that every key, space and line ending is cut by a boundary somewhere; each answer
// must be the same. A bad key in the part past the buffer ends the answer with CLIENT_ERROR,
// and the connection stays in step.
func TestLongLineBoundaries(t *testing.T) {
	const limit = 1024
	e := newEnv(t, Config{MaxLineBytes: limit})
	var keys []string
	for i := range 8 {
		k := fmt.Sprintf("%d", i) + strings.Repeat("b", 200+i)
		keys = append(keys, k)
		if err := e.c.Put([]byte(k), []byte(k[:1])); err != nil {
			t.Fatal(err)
		}
	}
	line := strings.Join(keys, " ")
	want := ""
	for _, k := range keys {
		want += fmt.Sprintf("VALUE %s 0 1\r\n%s\r\n", k, k[:1])
	}
	want += "END\r\n"
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	expect := func(what, want string) {
		t.Helper()
		got := make([]byte, len(want))
		if n, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("%s: got %q (%v), want %q", what, got[:n], err, want)
		}
	}
	for pad := range 600 {
		// Spaces between the name and the first key are allowed, as in memcached.
		req := "get" + strings.Repeat(" ", 1+pad) + line
		for _, end := range []string{"\r\n", " \r\n", "\n"} {
			send(t, c, req+end)
			expect(fmt.Sprintf("pad %d, end %q", pad, end), want)
		}
	}
	// A key over 250 bytes past the buffer: the values before it, then the error.
	bad := strings.Repeat("x", MaxKeyLen+1)
	send(t, c, "get "+strings.Join(keys[:5], " ")+" "+bad+" "+keys[5]+"\r\nversion\r\n")
	prefix := want[:strings.Index(want, "VALUE "+keys[5])]
	expect("bad key", prefix+"CLIENT_ERROR bad command line format\r\nVERSION test\r\n")
}

// TestLongLineRefused: a line over the limit for any command but a retrieval is answered with
// CLIENT_ERROR and the connection closed (its data block, if any, cannot be found).
func TestLongLineRefused(t *testing.T) {
	e := newEnv(t, Config{MaxLineBytes: 1024})
	for _, req := range []string{
		"delete " + strings.Repeat("k", 2000) + "\r\n",
		"set " + strings.Repeat("k ", 1000) + "\r\n",
		strings.Repeat("g", 2000) + " k\r\n",
	} {
		c := e.dial()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != "CLIENT_ERROR line too long\r\n" {
			t.Fatalf("%.20q...: got %q", req, got)
		}
	}
}

// TestLongGat: gat and gats are not supported yet, but a long line of them is read to its end
// and answered, and the connection stays in step.
func TestLongGat(t *testing.T) {
	e := newEnv(t, Config{MaxLineBytes: 1024})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	send(t, c, "set key 7 0 1\r\nv\r\n")
	if line, err := br.ReadString('\n'); line != "STORED\r\n" {
		t.Fatalf("set: %q (%v)", line, err)
	}
	// A hit per key on the line; a bad exptime is refused once the line is read.
	for _, cmd := range []string{"gat", "gats", "gat x"} {
		send(t, c, cmd+" 100 "+strings.Repeat("key ", 1000)+"\r\nversion\r\n")
		var want []string
		if cmd == "gat x" {
			want = []string{"CLIENT_ERROR invalid exptime argument\r\n"}
		} else {
			for range 1000 {
				want = append(want, "VALUE key 7 1*", "v\r\n")
			}
			want = append(want, "END\r\n")
		}
		for _, w := range append(want, "VERSION test\r\n") {
			line, err := br.ReadString('\n')
			if prefix, ok := strings.CutSuffix(w, "*"); ok && strings.HasPrefix(line, prefix) {
				continue
			}
			if line != w {
				t.Fatalf("%s: got %q (%v), want %q", cmd, line, err, w)
			}
		}
	}
}
