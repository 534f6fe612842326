package memcache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

func (e *env) client() *gomemcache.Client {
	mc := gomemcache.New(e.addr)
	mc.Timeout = 10 * time.Second
	return mc
}

// TestClientModel drives the server with a real memcached client through a seeded random
// sequence of sets, gets, multi-gets and deletes, checked against a map.
func TestClientModel(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, Config{})
	mc := e.client()
	type entry struct {
		v     []byte
		flags uint32
	}
	model := map[string]entry{}
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d-\xff%c", i, 'a'+i%26)
	}
	value := func() []byte {
		n := r.IntN(5000)
		if r.IntN(20) == 0 {
			n = 1<<20 + r.IntN(1<<20) // a large value now and then
		}
		v := make([]byte, n)
		if n >= 8 {
			binary.LittleEndian.PutUint64(v, r.Uint64()) // differs from value to value
		}
		for i := 8; i+8 <= n; i += 8 {
			binary.LittleEndian.PutUint64(v[i:], uint64(i)*0x9e3779b97f4a7c15)
		}
		return v
	}
	for step := range 600 {
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(10); {
		case op < 4:
			en := entry{value(), r.Uint32()}
			if err := mc.Set(&gomemcache.Item{Key: k, Value: en.v, Flags: en.flags}); err != nil {
				t.Fatalf("step %d: set: %v", step, err)
			}
			model[k] = en
		case op < 7:
			it, err := mc.Get(k)
			want, ok := model[k]
			if !ok {
				if err != gomemcache.ErrCacheMiss {
					t.Fatalf("step %d: get %q: %v, want a miss", step, k, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(it.Value, want.v) || it.Flags != want.flags {
				t.Fatalf("step %d: get %q: err %v", step, k, err)
			}
		case op < 8:
			ks := []string{keys[r.IntN(len(keys))], keys[r.IntN(len(keys))], keys[r.IntN(len(keys))]}
			got, err := mc.GetMulti(ks)
			if err != nil {
				t.Fatalf("step %d: get multi: %v", step, err)
			}
			for _, k := range ks {
				want, ok := model[k]
				it, hit := got[k]
				if ok != hit || (ok && (!bytes.Equal(it.Value, want.v) || it.Flags != want.flags)) {
					t.Fatalf("step %d: get multi %q: hit %v, want %v", step, k, hit, ok)
				}
			}
		case op < 9:
			err := mc.Delete(k)
			if _, ok := model[k]; ok != (err == nil) || (!ok && err != gomemcache.ErrCacheMiss) {
				t.Fatalf("step %d: delete %q: %v (in model: %v)", step, k, err, ok)
			}
			delete(model, k)
		default:
			e.c.Drain()
		}
	}
}

// TestBinaryProtocol: a binary-protocol request (magic byte 0x80) is answered with a text error
// and the connection closed at once, whether it comes first or after text commands. Before,
// the server waited for a line end that a binary request need not contain.
func TestBinaryProtocol(t *testing.T) {
	e := newEnv(t, Config{})
	// A binary get of key "k": 24-byte header (magic, opcode, key length 1, body length 1), key.
	get := []byte{0x80, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'k'}
	for _, before := range []string{"", "version\r\n"} {
		c := e.dial()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(append([]byte(before), get...))
		got, err := io.ReadAll(c)
		c.Close()
		want := "CLIENT_ERROR binary protocol is not supported\r\n"
		if before != "" {
			want = "VERSION test\r\n" + want
		}
		if err != nil || string(got) != want {
			t.Fatalf("after %q: got %q, %v; want %q and the connection closed", before, got, err, want)
		}
	}
}

func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, Config{IdleTimeout: 50 * time.Millisecond})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "version\r\n")
	got, err := io.ReadAll(c) // ends when the server closes the idle connection
	if err != nil || string(got) != "VERSION test\r\n" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestSlowloris sends a command and part of its data, then stalls: the server closes the
// connection after ReadTimeout and stores nothing.
func TestSlowloris(t *testing.T) {
	e := newEnv(t, Config{ReadTimeout: 100 * time.Millisecond})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "set slow 0 0 10\r\nabc")
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := e.client().Get("slow"); err != gomemcache.ErrCacheMiss {
		t.Fatalf("slow: %v, want a miss", err)
	}
}

func TestTruncatedByClose(t *testing.T) {
	closed := make(chan struct{}, 10)
	e := newEnvHooks(t, Config{}, func(s *Server) { s.testHooks.connClosed = func() { closed <- struct{}{} } })
	reqs := []string{"set k 0 0 8\r\noriginal\r\n", "set k 0 0 100\r\nshort", "set k 0 0 3\r\nabc", "set k 0 0 3\r\nabc\r", "ms k 5 F1\r\nab"}
	for _, req := range reqs {
		c := e.dial()
		io.WriteString(c, req)
		c.(interface{ CloseWrite() error }).CloseWrite()
		io.ReadAll(c) // until the server closes
		c.Close()
		<-closed
	}
	it, err := e.client().Get("k")
	if err != nil || string(it.Value) != "original" || it.Flags != 0 {
		t.Fatalf("k after truncated sets: %v %v", it, err)
	}
}

func TestBusy(t *testing.T) {
	e := newEnvStore(t, Config{}, store.Config{MaxValueSize: 64 << 10, MaxInflightBytes: 128 << 10, AdmitTimeout: 10 * time.Millisecond})
	a, _ := e.st.Reserve(context.Background(), 64<<10)
	b, _ := e.st.Reserve(context.Background(), 64<<10)
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "set k 0 0 3\r\nabc\r\n")
	if line, _ := br.ReadString('\n'); line != "SERVER_ERROR busy, try again\r\n" {
		t.Fatalf("got %q", line)
	}
	io.WriteString(c, "set k 0 0 100000\r\n"+strings.Repeat("x", 100000)+"\r\n")
	if line, _ := br.ReadString('\n'); line != "SERVER_ERROR object too large for cache\r\n" {
		t.Fatalf("got %q", line)
	}
	a.Release()
	b.Release()
	io.WriteString(c, "set k 0 0 3\r\nabc\r\nget k\r\n")
	want := "STORED\r\nVALUE k 0 3\r\nabc\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v", got, err)
	}
}

// TestShutdown checks that Shutdown closes idle connections at once and lets a command in
// progress finish.
func TestShutdown(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := store.New(c, store.Config{})
	srv := New(st, Config{})
	commands := make(chan string, 10)
	srv.testHooks.command = func(name string) { commands <- name }
	e := &env{t: t, c: c, st: st, srv: srv}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	idle := e.dial()
	defer idle.Close()
	busy := e.dial()
	defer busy.Close()
	io.WriteString(idle, "version\r\n")
	io.WriteString(busy, "version\r\n")
	br := bufio.NewReader(busy)
	bufio.NewReader(idle).ReadString('\n')
	br.ReadString('\n')
	<-commands
	<-commands
	// busy starts a set and stops half-way through its data.
	io.WriteString(busy, "set k 0 0 6\r\nabc")
	if name := <-commands; name != "set" {
		t.Fatalf("command %q", name)
	}
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(idle); err != nil || len(b) != 0 {
		t.Fatalf("idle connection: %q %v", b, err)
	}
	io.WriteString(busy, "def\r\n")
	busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := br.ReadString('\n'); line != "STORED\r\n" {
		t.Fatalf("busy connection: %q", line)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != ErrServerClosed {
		t.Fatal(err)
	}
	r, ok := c.Get([]byte("k"))
	if !ok {
		t.Fatal("the set in progress was lost")
	}
	if v, _ := io.ReadAll(r); string(v) != "abcdef" {
		t.Fatalf("k = %q", v)
	}
}

func TestCorruptValueNeverServed(t *testing.T) {
	dir := t.TempDir()
	small := bytes.Repeat([]byte("small-value-"), 100)
	large := bytes.Repeat([]byte("large-value-0123456789-"), 100_000)
	c, err := blobcache.New(dir, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	c.Put([]byte("small"), small)
	c.Put([]byte("large"), large)
	c.Put([]byte("fine"), []byte("fine"))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "segments", "*.seg"))
	seg, _ := os.ReadFile(files[0])
	seg[bytes.Index(seg, small)+500] ^= 1
	seg[bytes.Index(seg, large)+len(large)/2] ^= 1
	os.WriteFile(files[0], seg, 0o644)

	c, err = blobcache.New(dir, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := store.New(c, store.Config{})
	srv := New(st, Config{})
	ln, _ := netListen()
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	mc := gomemcache.New(ln.Addr().String())
	if it, err := mc.Get("small"); err != gomemcache.ErrCacheMiss {
		t.Fatalf("damaged small value: %v, %v; want a miss", it, err)
	}
	if it, err := mc.Get("large"); err == nil {
		t.Fatalf("damaged large value served (%d bytes)", len(it.Value))
	} else if errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Log("large: miss")
	}
	if it, err := mc.Get("fine"); err != nil || string(it.Value) != "fine" {
		t.Fatalf("fine: %v %v", it, err)
	}
}

// TestTimeoutsPerCommand: the timeout sweep measures ReadTimeout from each command's start, not
// the connection's: commands that each take little keep a connection alive for many times the
// limit; a command whose answer takes longer than ReadTimeout to write (but not WriteTimeout)
// leaves the connection usable; an answer its client does not read is cut off after
// WriteTimeout and the connection closed.
func TestTimeoutsPerCommand(t *testing.T) {
	// Limits wide enough that a loaded machine under the race detector keeps them.
	const readTimeout = 300 * time.Millisecond
	e := newEnv(t, Config{ReadTimeout: readTimeout, WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute})
	big := strings.Repeat("v", 8<<20)
	if err := e.client().Set(&gomemcache.Item{Key: "big", Value: []byte(big)}); err != nil {
		t.Fatal(err)
	}
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	br := bufio.NewReader(c)
	end := time.Now().Add(5 * readTimeout)
	for time.Now().Before(end) {
		io.WriteString(c, "version\r\n")
		if line, err := br.ReadString('\n'); line != "VERSION test\r\n" {
			t.Fatalf("after %v of quick commands: %q, %v", 5*readTimeout-time.Until(end), line, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A command after an idle wait longer than ReadTimeout: its time counts from its first byte.
	for range 3 {
		time.Sleep(2 * readTimeout)
		io.WriteString(c, "set k 0 0 5\r\n")
		time.Sleep(readTimeout / 6)
		io.WriteString(c, "hello\r\n")
		if line, err := br.ReadString('\n'); line != "STORED\r\n" {
			t.Fatalf("a set sent after an idle wait: %q, %v", line, err)
		}
	}
	// A slow reader of a large answer: the write outlasts ReadTimeout.
	io.WriteString(c, "get big\r\n")
	time.Sleep(3 * readTimeout)
	want := "VALUE big 0 8388608\r\n" + big + "\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("the slow reader's answer: %v, equal %v", err, string(got) == want)
	}
	io.WriteString(c, "version\r\n")
	if line, err := br.ReadString('\n'); line != "VERSION test\r\n" {
		t.Fatalf("after an answer that took longer than ReadTimeout to write: %q, %v", line, err)
	}

	// A client that never reads: cut off after WriteTimeout.
	closed := make(chan struct{}, 2)
	e2 := newEnvHooks(t, Config{WriteTimeout: 150 * time.Millisecond}, func(s *Server) {
		s.testHooks.connClosed = func() {
			select {
			case closed <- struct{}{}:
			default:
			}
		}
	})
	if err := e2.client().Set(&gomemcache.Item{Key: "big", Value: []byte(big)}); err != nil {
		t.Fatal(err)
	}
	c2 := e2.dial()
	defer c2.Close()
	if tc, ok := c2.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 10)
	}
	for range 4 {
		io.WriteString(c2, "get big\r\n")
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("a connection whose client reads nothing was not closed after WriteTimeout")
	}
}

// TestTimeoutsPipelined: a command pipelined behind one that ran longer than ReadTimeout still
// gets its own ReadTimeout, as one sent after a wait does.
func TestTimeoutsPipelined(t *testing.T) {
	const readTimeout = 200 * time.Millisecond
	e := newEnvHooks(t, Config{ReadTimeout: readTimeout, WriteTimeout: 10 * time.Second}, func(s *Server) {
		s.testHooks.command = func(name string) {
			if name == "version" {
				time.Sleep(2 * readTimeout) // a command that outruns ReadTimeout without reading
			}
		}
	})
	c := e.dial()
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	// The set is in the server's buffer behind the slow command; its data block comes later.
	// (The server answers both once its input runs dry, so the data goes first.)
	io.WriteString(c, "version\r\nset k 0 0 5\r\n")
	time.Sleep(2*readTimeout + readTimeout/4) // the set has begun, a little while ago
	io.WriteString(c, "hello\r\n")
	want := "VERSION test\r\nSTORED\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("a set pipelined behind a slow command: %q, %v", got, err)
	}
}
