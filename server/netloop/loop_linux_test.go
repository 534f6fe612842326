//go:build linux

package netloop

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestSweepPeriod: an eighth of the shortest limit set, within [10ms, 1s]; none without limits.
func TestSweepPeriod(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		lim  Limits
		want time.Duration
	}{
		{Limits{}, 0},
		{Limits{Idle: 2 * time.Minute, Write: time.Minute}, time.Second},
		{Limits{Idle: 800 * ms}, 100 * ms},
		{Limits{Write: 800 * ms}, 100 * ms},
		{Limits{Idle: 800 * ms, Write: 400 * ms}, 50 * ms},
		{Limits{Idle: time.Minute, Read: 400 * ms, Write: time.Minute}, 50 * ms},
		{Limits{Idle: 40 * ms}, 10 * ms},
	} {
		if got := sweepPeriod(tc.lim); got != tc.want {
			t.Errorf("sweepPeriod(%+v) = %v, want %v", tc.lim, got, tc.want)
		}
	}
}

// echo is a line protocol for the tests: each line comes back; "detach" moves the connection to
// a goroutine that answers each line with "g:" in front; "bye" closes after its answer.
type echo struct {
	lc     *Conn
	closed chan Reason
	parked bool // a "park" line's answer is due
}

func (e *echo) Serve(c *Conn) {
	if e.parked {
		e.parked = false
		c.Send([][]byte{[]byte("parked\n")}, nil)
	}
	for !c.Waiting() {
		in := c.Input()
		i := bytes.IndexByte(in, '\n')
		if i < 0 {
			c.Need(len(in) + 1)
			return
		}
		line := string(in[:i+1])
		c.Consume(i + 1)
		switch line {
		case "detach\n":
			nc, unread, err := c.Detach()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(unread)), nc))
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						return
					}
					io.WriteString(nc, "g:"+l)
				}
			}()
			return
		case "park\n":
			// Answered after a wait on another goroutine, the connection parked meanwhile.
			e.parked = true
			c.Park()
			go func() {
				time.Sleep(parkFor)
				c.Resume()
			}()
			return
		case "bye\n":
			c.Send([][]byte{[]byte(line)}, nil)
			c.CloseAfter()
			return
		}
		if err := c.Send([][]byte{[]byte(line)}, nil); err != nil {
			return
		}
	}
}

func (e *echo) Closed(why Reason) { e.closed <- why }

// parkFor is how long a "park" line's answer waits.
const parkFor = 300 * time.Millisecond

// echoServer serves echo on a group with limits lim; closed receives each connection's Reason.
func echoServer(t *testing.T, lim Limits) (addr string, g *Group, closed chan Reason) {
	t.Helper()
	g, err := NewGroup(2, lim, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed = make(chan Reason, 16)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if err := g.Add(nc, 64, func(c *Conn) Protocol { return &echo{lc: c, closed: closed} }); err != nil {
				t.Error(err)
				nc.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return ln.Addr().String(), g, closed
}

// dialEcho connects to an echoServer, closed when the test ends.
func dialEcho(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc, bufio.NewReader(nc)
}

func expectReason(t *testing.T, closed chan Reason, want Reason) {
	t.Helper()
	select {
	case got := <-closed:
		if got != want {
			t.Fatalf("closed for reason %d, want %d", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("not closed (want reason %d)", want)
	}
}

// TestAnswersWaitForTheBatch: the answers to the requests a loop reads in one batch go out at its
// end, one writev a connection, in order; once they pass deferMax bytes they go at once, and what
// follows waits behind them.
func TestAnswersWaitForTheBatch(t *testing.T) {
	addr, g, _ := echoServer(t, Limits{})
	nc, br := dialEcho(t, addr)
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("l%02d\n", i))
	}
	big := strings.Repeat("x", deferMax+100) + "\n"
	want := append(append(append([]string{}, lines[:20]...), big), lines[20:]...)
	writevs := func() (n int64) {
		for _, l := range g.loops {
			n += l.writevs.Load()
		}
		return n
	}
	before := writevs()
	if _, err := io.WriteString(nc, strings.Join(want, "")); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		got, err := br.ReadString('\n')
		if err != nil || got != w {
			t.Fatalf("answer %d: %d bytes, %v; want %d bytes", i, len(got), err, len(w))
		}
	}
	// One writev a line would be 41; a batch reads at most the 64 bytes of the input buffer.
	if n := writevs() - before; n > 20 {
		t.Errorf("%d writevs for %d answers", n, len(want))
	}
}

// TestPhases: each phase's limit closes a connection past it, measured from the phase's start,
// and a connection that keeps sending is not idle.
func TestPhases(t *testing.T) {
	ms := time.Millisecond
	addr, _, closed := echoServer(t, Limits{Idle: 300 * ms, Read: 150 * ms, Write: 5 * time.Second})
	dial := func() (net.Conn, *bufio.Reader) { return dialEcho(t, addr) }
	// Busy for longer than the idle limit: kept.
	busy, br := dial()
	for range 10 {
		io.WriteString(busy, "ping\n")
		if l, err := br.ReadString('\n'); l != "ping\n" {
			t.Fatalf("echo: %q %v", l, err)
		}
		time.Sleep(60 * ms)
	}
	select {
	case why := <-closed:
		t.Fatalf("a busy connection closed (reason %d)", why)
	default:
	}
	// The client closes: ReasonPeer.
	busy.Close()
	expectReason(t, closed, ReasonPeer)
	// A line begun and not ended: the read limit.
	part, _ := dial()
	io.WriteString(part, "half a li")
	expectReason(t, closed, ReasonReadTimeout)
	// Nothing sent: the idle limit.
	start := time.Now()
	dial()
	expectReason(t, closed, ReasonIdleTimeout)
	if el := time.Since(start); el < 300*ms {
		t.Fatalf("closed idle after %v, before the limit", el)
	}
	// The protocol closes: ReasonClosed.
	bye, br := dial()
	io.WriteString(bye, "bye\n")
	if l, _ := br.ReadString('\n'); l != "bye\n" {
		t.Fatalf("bye: %q", l)
	}
	expectReason(t, closed, ReasonClosed)
}

// TestDetach: a detached connection keeps its order: what was read and not consumed comes first,
// and Closed is not called for it.
func TestDetach(t *testing.T) {
	addr, _, closed := echoServer(t, Limits{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReader(nc)
	io.WriteString(nc, "a\ndetach\nb\nc\n")
	io.WriteString(nc, "d\n")
	want := "a\ng:b\ng:c\ng:d\n"
	got := make([]byte, len(want))
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	select {
	case why := <-closed:
		t.Fatalf("Closed called for a detached connection (reason %d)", why)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestShutdownFinishesRequests: Shutdown closes idle connections at once and lets one reading a
// request finish it (its answer written) before it closes.
func TestShutdownFinishesRequests(t *testing.T) {
	addr, g, closed := echoServer(t, Limits{})
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	part, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	io.WriteString(part, "unfinish")
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- g.Shutdown(context.Background()) }()
	expectReason(t, closed, ReasonShutdown) // the idle one
	io.WriteString(part, "ed\n")
	br := bufio.NewReader(part)
	part.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := br.ReadString('\n'); l != "unfinished\n" {
		t.Fatalf("the request begun before Shutdown: %q %v", l, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not return")
	}
}

// TestPark: a parked connection is answered once resumed, in order, while the loop serves its
// other connections; no limit closes it meanwhile; one closed while parked (Shutdown's deadline)
// is reported Closed once, by Resume.
func TestPark(t *testing.T) {
	addr, g, closed := echoServer(t, Limits{Idle: 100 * time.Millisecond})
	dial := func() (net.Conn, *bufio.Reader) { return dialEcho(t, addr) }
	p, pbr := dial()
	start := time.Now()
	io.WriteString(p, "park\nafter\n")
	o, obr := dial()
	for range 5 {
		io.WriteString(o, "other\n")
		if l, err := obr.ReadString('\n'); l != "other\n" {
			t.Fatalf("beside a parked connection: %q %v", l, err)
		}
	}
	if time.Since(start) >= parkFor {
		t.Fatal("the other connection waited for the parked one")
	}
	p.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, want := range []string{"parked\n", "after\n"} {
		if l, err := pbr.ReadString('\n'); l != want {
			t.Fatalf("parked connection: %q %v, want %q", l, err, want)
		}
	}
	// Parked longer than the idle limit, the connection was not closed (it answered); the limit
	// applies again once it is resumed, as to the other.
	expectReason(t, closed, ReasonIdleTimeout)
	expectReason(t, closed, ReasonIdleTimeout)

	q, _ := dial()
	io.WriteString(q, "park\n")
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown with a parked connection and no time left returned nil")
	}
	select {
	case why := <-closed:
		t.Fatalf("Closed (reason %d) before the parked request was done", why)
	default:
	}
	expectReason(t, closed, ReasonShutdown) // from Resume
}
