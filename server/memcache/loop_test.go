package memcache

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/netloop"
	"github.com/seed57392e9e/blobcache/server/store"
)

// goroutineConns is the number of the server's connections served by goroutines: those that
// left their event loop (or were never on one).
func (e *env) goroutineConns() int {
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	return len(e.srv.mu.conns)
}

// checkOnLoops fails the test if a connection left its loop, when the server runs loops.
func (e *env) checkOnLoops(t *testing.T) {
	t.Helper()
	if n := e.goroutineConns(); testLoops > 0 && n != 0 {
		t.Fatalf("%d connections left their loop", n)
	}
}

func loopEnv(t *testing.T, cfg Config, scfg store.Config) *env {
	t.Helper()
	if !netloop.Available {
		t.Skip("no event loops on this platform")
	}
	cfg.Loops = testLoops
	e := newEnvStore(t, cfg, scfg)
	if testLoops > 0 && e.srv.EventLoops() == 0 {
		// Serve starts them; wait for it.
		for i := 0; i < 100 && e.srv.EventLoops() == 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if e.srv.EventLoops() == 0 {
			t.Fatal("the server runs no event loops")
		}
	}
	return e
}

// TestLoopServesPipelinesAndLargeBlocks: a loop serves pipelined commands and data blocks larger
// than its read buffer, sent in pieces with pauses between them, without the connection leaving
// for a goroutine, and gives back the store's memory it took for each block.
func TestLoopServesPipelinesAndLargeBlocks(t *testing.T) {
	e := loopEnv(t, Config{}, store.Config{})
	nc := e.dial()
	defer nc.Close()
	br := bufio.NewReader(nc)
	big := bytes.Repeat([]byte("0123456789"), 30_000) // 300,000 bytes, over the 16 KiB buffer
	req := fmt.Sprintf("set big 5 0 %d\r\n%s\r\nset small 0 0 3\r\nabc\r\nget big small nope\r\nmn\r\n", len(big), big)
	for i := 0; i < len(req); i += 7_000 {
		if _, err := io.WriteString(nc, req[i:min(i+7_000, len(req))]); err != nil {
			t.Fatal(err)
		}
		if i%35_000 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	want := fmt.Sprintf("STORED\r\nSTORED\r\nVALUE big 5 %d\r\n%s\r\nVALUE small 0 3\r\nabc\r\nEND\r\nMN\r\n", len(big), big)
	got := make([]byte, len(want))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %.200q, %v", got, err)
	}
	e.checkOnLoops(t)
	if n := e.st.Inflight(); n != 0 {
		t.Fatalf("%d bytes of the store's memory still held", n)
	}
}

// TestLoopLeavesForAGoroutine: what a loop does not serve moves the connection to a goroutine
// of its own (with loops; without, the same answers), which answers it and the rest of the connection's commands: a get line longer
// than the read buffer, a data block over the value limit, one the store's memory cannot take
// at once (served once the memory is free), and a malformed data block (an error, after which
// the goroutine lingers and closes).
func TestLoopLeavesForAGoroutine(t *testing.T) {
	e := loopEnv(t, Config{MaxLineBytes: 1024}, store.Config{MaxValueSize: 1 << 20, MaxInflightBytes: 3 << 20})
	roundTrip := func(nc net.Conn, br *bufio.Reader, req, want string) {
		t.Helper()
		if _, err := io.WriteString(nc, req); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("%.60q: got %.200q, %v; want %.200q", req, got, err, want)
		}
	}
	t.Run("long line", func(t *testing.T) {
		nc := e.dial()
		defer nc.Close()
		br := bufio.NewReader(nc)
		roundTrip(nc, br, "set k 0 0 1\r\nv\r\n", "STORED\r\n")
		keys := strings.Repeat("nope ", 400) + "k"
		roundTrip(nc, br, "get "+keys+"\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
		if n := e.goroutineConns(); n != 1 {
			t.Fatalf("%d goroutine connections, want 1", n)
		}
		roundTrip(nc, br, "get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n")
	})
	t.Run("over the value limit", func(t *testing.T) {
		nc := e.dial()
		defer nc.Close()
		br := bufio.NewReader(nc)
		n := 2 << 20
		roundTrip(nc, br, fmt.Sprintf("set huge 0 0 %d\r\n%s\r\nmn\r\n", n, bytes.Repeat([]byte("x"), n)),
			"SERVER_ERROR object too large for cache\r\nMN\r\n")
	})
	t.Run("memory busy", func(t *testing.T) {
		// The connections of the subtests before are closed by their clients: wait for their
		// goroutines to see it.
		for deadline := time.Now().Add(10 * time.Second); e.goroutineConns() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		before := e.goroutineConns()
		// The store's memory taken until a block of 1 MiB does not fit.
		var held []*store.Value
		for {
			v, ok := e.st.TryReserve(1 << 20)
			if !ok {
				break
			}
			held = append(held, v)
		}
		if len(held) == 0 {
			t.Fatal("the store's memory holds no 1 MiB block")
		}
		nc := e.dial()
		defer nc.Close()
		br := bufio.NewReader(nc)
		n := 1 << 20
		if _, err := fmt.Fprintf(nc, "set wait 0 0 %d\r\n%s\r\n", n, bytes.Repeat([]byte("w"), n)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for testLoops > 0 && e.goroutineConns() == before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if testLoops > 0 && e.goroutineConns() == before {
			t.Fatal("the connection did not leave its loop")
		}
		for _, v := range held {
			v.Release() // the goroutine's Reserve gets it now
		}
		roundTrip(nc, br, "", "STORED\r\n")
	})
	t.Run("bad data block", func(t *testing.T) {
		nc := e.dial()
		defer nc.Close()
		br := bufio.NewReader(nc)
		roundTrip(nc, br, "set bad 0 0 3\r\nabcde\r\n", "CLIENT_ERROR bad data chunk\r\n")
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("after a bad data block the connection is not closed: %v", err)
		}
	})
	if n := e.st.Inflight(); n != 0 {
		t.Fatalf("%d bytes of the store's memory still held", n)
	}
}

// TestLoopSlowReader: answers a client does not read wait in the connection, the values by
// reference, while the loop serves its other connections; once read they are whole and in order.
func TestLoopSlowReader(t *testing.T) {
	e := loopEnv(t, Config{}, store.Config{})
	val := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 200_000+i) }
	setup := e.dial()
	defer setup.Close()
	sbr := bufio.NewReader(setup)
	for i := range 8 {
		fmt.Fprintf(setup, "set v%d 0 0 %d\r\n%s\r\n", i, len(val(i)), val(i))
		if line, err := sbr.ReadString('\n'); line != "STORED\r\n" {
			t.Fatalf("set v%d: %q %v", i, line, err)
		}
	}
	slow := e.dial()
	defer slow.Close()
	const rounds = 20 // 32 MB of answers: more than the sockets' buffers hold
	var want bytes.Buffer
	for range rounds {
		io.WriteString(slow, "get v0 v1 v2 v3 v4 v5 v6 v7\r\n")
		for i := range 8 {
			fmt.Fprintf(&want, "VALUE v%d 0 %d\r\n%s\r\n", i, len(val(i)), val(i))
		}
		want.WriteString("END\r\n")
	}
	// Others are served meanwhile.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			nc := e.dial()
			defer nc.Close()
			br := bufio.NewReader(nc)
			for range 50 {
				io.WriteString(nc, "mn\r\n")
				nc.SetReadDeadline(time.Now().Add(5 * time.Second))
				if line, err := br.ReadString('\n'); line != "MN\r\n" {
					t.Errorf("beside a slow reader: %q %v", line, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := make([]byte, want.Len())
	slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(bufio.NewReader(slow), got); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the slow reader's answers: %v, equal %v", err, bytes.Equal(got, want.Bytes()))
	}
	e.checkOnLoops(t)
}

// TestLoopClosedMidBlock: a client that goes away in the middle of a data block leaves nothing
// stored and the store's memory given back.
func TestLoopClosedMidBlock(t *testing.T) {
	e := loopEnv(t, Config{}, store.Config{})
	nc := e.dial()
	fmt.Fprintf(nc, "set gone 0 0 100000\r\n%s", bytes.Repeat([]byte("g"), 50_000))
	time.Sleep(50 * time.Millisecond)
	nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for e.st.Inflight() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := e.st.Inflight(); n != 0 {
		t.Fatalf("%d bytes of the store's memory still held", n)
	}
	c2 := e.dial()
	defer c2.Close()
	io.WriteString(c2, "get gone\r\n")
	if line, _ := bufio.NewReader(c2).ReadString('\n'); line != "END\r\n" {
		t.Fatalf("a block cut short was stored: %q", line)
	}
}

// TestLoopParksDeviceReads: a get whose values are not in memory runs on a goroutine while its
// connection is parked, and its answer comes in order with those of the commands around it; a
// get of values the memory tier holds runs on the loop. Either way each get is counted once.
func TestLoopParksDeviceReads(t *testing.T) {
	var counts [2][5]uint64 // cmd_get, get_hits, get_misses, cmd_touch, touch_hits, without and with the tier
	for i, tier := range []bool{false, true} {
		opts := testOptions()
		if tier {
			opts = append(opts, blobcache.WithMemorySize(64<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
		}
		e := newEnvWith(t, Config{Loops: 2}, store.Config{}, opts)
		nc := e.dial()
		defer nc.Close()
		br := bufio.NewReader(nc)
		big := bytes.Repeat([]byte("b"), 200_000)
		setDrained(t, e, nc, br, []string{"a", "big"}, []byte("a"), big)
		before := e.srv.parks.Load()
		io.WriteString(nc, "get a\r\nmn\r\nget nope big a\r\nmg a v\r\nmg YQ== b v\r\ngat 0 big\r\nmn\r\n")
		want := fmt.Sprintf("VALUE a 1 1\r\na\r\nEND\r\nMN\r\nVALUE big 2 %d\r\n%s\r\nVALUE a 1 1\r\na\r\nEND\r\nVA 1\r\na\r\nVA 1\r\na\r\nVALUE big 2 %d\r\n%s\r\nEND\r\nMN\r\n", len(big), big, len(big), big)
		got := make([]byte, len(want))
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
			t.Fatalf("tier %v: got %.300q, %v", tier, got, err)
		}
		parks := e.srv.parks.Load() - before
		switch {
		case !netloop.Available:
		case !tier && parks != 5:
			t.Fatalf("%d commands parked, want the 5 retrievals", parks)
		case tier && parks != 0:
			t.Fatalf("%d commands parked with the values in memory", parks)
		}
		st := &e.srv.stats
		counts[i] = [5]uint64{st.cmdGet.Load(), st.getHits.Load(), st.getMisses.Load(), st.cmdTouch.Load(), st.touchHits.Load()}
		if i == 1 && counts[0] != counts[1] {
			t.Fatalf("gets counted %v parked and %v on the loop", counts[0], counts[1])
		}
		// A client gone while its get is parked: nothing leaks, the server goes on.
		gone := e.dial()
		io.WriteString(gone, "get big\r\n")
		gone.Close()
		io.WriteString(nc, "get a\r\n")
		if l, err := br.ReadString('\n'); l != "VALUE a 1 1\r\n" {
			t.Fatalf("after a client left mid-get: %q %v", l, err)
		}
		br.ReadString('\n')
		br.ReadString('\n')
	}
}

// setDrained stores values[i] under keys[i] with flags i+1 through nc, checks each STORED, and
// drains the cache: the values are on disk, none in the write buffer.
func setDrained(t *testing.T, e *env, nc net.Conn, br *bufio.Reader, keys []string, values ...[]byte) {
	t.Helper()
	for i, k := range keys {
		fmt.Fprintf(nc, "set %s %d 0 %d\r\n%s\r\n", k, i+1, len(values[i]), values[i])
	}
	for range keys {
		if l, err := br.ReadString('\n'); l != "STORED\r\n" {
			t.Fatalf("set: %q %v", l, err)
		}
	}
	e.c.Drain()
}

// TestLoopResumesAMultiGet: a get of several keys answers on its loop the keys before the first
// whose value is not in memory, and the parked get resumes at that key: the answer is whole and
// in order, each key is counted once (by the server and by the cache's filter), and the command
// parks once.
func TestLoopResumesAMultiGet(t *testing.T) {
	if !netloop.Available {
		t.Skip("no event loops here")
	}
	// A 1 MiB tier holds values up to 64 KiB: "small" is in memory, "large" only on disk.
	opts := append(testOptions(), blobcache.WithMemorySize(1<<20), blobcache.WithMemoryAdmission(blobcache.MemoryOnWrite))
	e := newEnvWith(t, Config{Loops: 1}, store.Config{}, opts)
	nc := e.dial()
	defer nc.Close()
	br := bufio.NewReader(nc)
	large := bytes.Repeat([]byte("L"), 100_000)
	setDrained(t, e, nc, br, []string{"small", "large"}, []byte("small"), large)
	if !e.c.Resident([]byte("small")) || e.c.Resident([]byte("large")) {
		t.Fatalf("small resident %v, large resident %v: want true, false", e.c.Resident([]byte("small")), e.c.Resident([]byte("large")))
	}
	st := &e.srv.stats
	parks, gets, hits, misses := e.srv.parks.Load(), st.cmdGet.Load(), st.getHits.Load(), st.getMisses.Load()
	cacheMisses := e.c.Stats().Misses
	io.WriteString(nc, "get small nope large nope2 small large\r\nmn\r\n")
	want := fmt.Sprintf("VALUE small 1 5\r\nsmall\r\nVALUE large 2 %d\r\n%s\r\nVALUE small 1 5\r\nsmall\r\nVALUE large 2 %d\r\n%s\r\nEND\r\nMN\r\n",
		len(large), large, len(large), large)
	got := make([]byte, len(want))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %.200q, %v", got, err)
	}
	if n := e.srv.parks.Load() - parks; n != 1 {
		t.Errorf("%d parks, want 1", n)
	}
	if g, h, m := st.cmdGet.Load()-gets, st.getHits.Load()-hits, st.getMisses.Load()-misses; g != 6 || h != 4 || m != 2 {
		t.Errorf("cmd_get %d, get_hits %d, get_misses %d: want 6, 4, 2", g, h, m)
	}
	if m := e.c.Stats().Misses - cacheMisses; m != 2 {
		t.Errorf("the cache counted %d misses, want 2", m)
	}
}

// TestBlockHold: a data block whose bytes and "\r\n" are all in the connection's buffer (a
// loop's, or a goroutine's bufio.Reader) is handed to the store from there
// (blobcache.ValueHolder) and consumed with its "\r\n"; a length other than what is left of it,
// one not all buffered, and one without its "\r\n" are declined, for Read to read and report
// as before.
func TestBlockHold(t *testing.T) {
	readers := map[string]func(in string) cmdReader{
		"loop": func(in string) cmdReader { return &inputReader{b: []byte(in)} },
		"goroutine": func(in string) cmdReader {
			br := bufio.NewReaderSize(strings.NewReader(in), 64)
			br.Peek(len(in))
			return br
		},
	}
	for name, newReader := range readers {
		c := &conn{r: newReader("hello\r\nnext")}
		block := c.dataBlock(5)
		h, ok := block.(blobcache.ValueHolder)
		if !ok {
			t.Fatal("a data block is not a ValueHolder")
		}
		b, ok, err := h.Hold(5)
		if !ok || err != nil || string(b) != "hello" {
			t.Fatalf("%s: Hold = %q, %v, %v", name, b, ok, err)
		}
		if rest, _ := io.ReadAll(c.r); string(rest) != "next" {
			t.Fatalf("%s: %q left after the block", name, rest)
		}
		if n, err := block.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("%s: Read after Hold: %d, %v", name, n, err)
		}

		for _, tc := range []struct{ in, why string }{
			{"hello!!", "no \\r\\n behind the block"},
			{"hel", "not all buffered"},
			{"hello\r", "its \\r\\n not all buffered"},
		} {
			c := &conn{r: newReader(tc.in)}
			if _, ok, err := c.dataBlock(5).(blobcache.ValueHolder).Hold(5); ok || err != nil {
				t.Fatalf("%s, %s: held (%v, %v)", name, tc.why, ok, err)
			}
			if c.r.Buffered() != len(tc.in) {
				t.Fatalf("%s, %s: a declined Hold consumed bytes", name, tc.why)
			}
		}
		c = &conn{r: newReader("hello\r\n")}
		block = c.dataBlock(5)
		if _, err := block.Read(make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := block.(blobcache.ValueHolder).Hold(5); ok {
			t.Fatalf("%s: more than what is left of a block was held", name)
		}
		if b, ok, err := block.(blobcache.ValueHolder).Hold(3); !ok || err != nil || string(b) != "llo" {
			t.Fatalf("%s: the rest of a block read in part: %q, %v, %v", name, b, ok, err)
		}
	}
}
