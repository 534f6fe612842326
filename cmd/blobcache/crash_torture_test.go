package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
)

var (
	serverTortureCycles = flag.Int("servertorture.cycles", 6, "kills of TestServerCrashTorture")
	serverTortureSeed   = flag.Uint64("servertorture.seed", 0, "seed of TestServerCrashTorture (0: time based)")
)

// TestServerCrashTorture: clients of the three write interfaces (memcached text set and delete,
// meta ms and md, HTTP PUT and DELETE) write and delete keys of their own with values that carry
// their key, a sequence number and a CRC, against `blobcache serve` at its defaults, reading
// some back at once (memcached get, HTTP GET); the server is killed with SIGKILL at a random
// moment and started again, and every key is read back (memcached get and HTTP GET in turn). A key
// must read as the last write the server acknowledged, or a write in flight at the kill, or a
// miss: never an older value, never a deleted one, never a damaged one (docs/RELIABILITY.md).
func TestServerCrashTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	seed := *serverTortureSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -servertorture.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	exe := filepath.Join(t.TempDir(), "blobcache")
	if out, err := exec.Command(goTool, "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	const clients, keysPer = 3, 200
	hist := newTortureHistory(clients * keysPer)
	var acked, older, undeleted, damaged, misses, hits int
	for cycle := range *serverTortureCycles {
		// Every other cycle with a memory tier that values enter as they are written, so that
		// reads are answered from it by reference (reply.go) while the server is killed.
		// Every third cycle compresses values, with zstd or s2 in turn.
		var flags []string
		if cycle%2 == 1 {
			flags = []string{"--memory", "64M"}
		}
		if cycle%3 == 2 {
			flags = append(flags, "--compression", []string{"zstd", "s2"}[cycle/3%2])
		}
		// Every fourth cycle with write buffers of tortureSmallBuffer, which the values lie
		// below, at and above (values past a write buffer are streamed to their segment).
		if cycle%4 == 3 {
			flags = append(flags, "--write-buffer-size", fmt.Sprint(tortureSmallBuffer))
		}
		srv := startServeProcess(t, exe, nil, dir, flags...)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runTortureClient(c, keysPer, srv, hist, seed+uint64(cycle*clients+c), stop)
			}()
		}
		time.Sleep(time.Duration(300+rng.IntN(1200)) * time.Millisecond)
		srv.cmd.Process.Signal(syscall.SIGKILL)
		srv.cmd.Wait()
		close(stop)
		wg.Wait()

		for _, m := range hist.takeLive() {
			t.Errorf("cycle %d, while the server ran: %s", cycle, m)
		}

		// Restart and read every key back: even keys through memcached, odd ones with an HTTP
		// GET (the HTTP fast path). A read that hangs fails the test at its client's timeout.
		srv = startServeProcess(t, exe, nil, dir, flags...)
		mc := memcache.New(srv.mc)
		mc.Timeout = 5 * time.Second
		hc := &http.Client{Timeout: 5 * time.Second}
		for k := range clients * keysPer {
			key := tortureKey(k)
			var value []byte
			var found bool
			var err error
			if k%2 == 0 {
				var it *memcache.Item
				it, err = mc.Get(key)
				if found = err == nil; found {
					value = it.Value
				} else if errors.Is(err, memcache.ErrCacheMiss) {
					err = nil
				}
			} else {
				value, found, err = httpGetTorture(hc, srv, key)
			}
			var got tortureState
			switch {
			case err != nil:
				t.Fatalf("cycle %d: get %s: %v", cycle, key, err)
			case !found:
				misses++
			default:
				hits++
				seq, ok := decodeTortureValue(key, value)
				if !ok {
					damaged++
					t.Errorf("cycle %d: %s: a value that is not one written for it (%d bytes)", cycle, key, len(value))
					continue
				}
				got = tortureState{present: true, seq: seq}
			}
			if err := hist.check(k, got); err != nil {
				if hist.deleted(k) {
					undeleted++
				} else {
					older++
				}
				t.Errorf("cycle %d: %s: %v", cycle, key, err)
			}
			hist.settle(k, got)
		}
		acked += hist.takeAcked()
		srv.cmd.Process.Signal(syscall.SIGTERM)
		srv.cmd.Wait()
	}
	t.Logf("%d cycles: %d writes acknowledged; %d keys read back: %d hits, %d misses; %d older values, %d undeleted, %d damaged",
		*serverTortureCycles, acked, hits+misses, hits, misses, older, undeleted, damaged)
}

// serveProcess is a `blobcache serve` running as a process of its own.
type serveProcess struct {
	cmd      *exec.Cmd
	http, mc string
}

// startServeProcess starts the binary exe's `serve` on dir, on free loopback ports, with env
// (nil: this process's) and any further flags, and waits for the line that names its listeners.
func startServeProcess(t *testing.T, exe string, env []string, dir string, flags ...string) serveProcess {
	t.Helper()
	args := append([]string{"serve", "--dir", dir, "--http", "127.0.0.1:0", "--memcache", "127.0.0.1:0", "--log-level", "error"}, flags...)
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("serve: %v; stderr %q", err, stderr.String())
	}
	var s serveProcess
	s.cmd = cmd
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "http="); ok {
			s.http = v
		}
		if v, ok := strings.CutPrefix(f, "memcache="); ok {
			s.mc = v
		}
	}
	if s.http == "" || s.mc == "" {
		t.Fatalf("serve said %q", line)
	}
	return s
}

func tortureKey(k int) string { return fmt.Sprintf("torture-%04d", k) }

// tortureSmallBuffer is the write buffer of the cycles run with a small one (and a value size
// the clients write now and then).
const tortureSmallBuffer = 256 << 10

// httpGetTorture reads key with an HTTP GET: its value, or found false for a 404.
func httpGetTorture(hc *http.Client, srv serveProcess, key string) (value []byte, found bool, err error) {
	resp, err := hc.Get("http://" + srv.http + "/v1/blobs/" + key)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	value, err = io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return nil, false, err
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, nil
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("GET %s: %s", key, resp.Status)
	}
	return value, true, nil
}

// tortureValue is the value of write seq of key: key, seq, size, payload, and a CRC of it all.
func tortureValue(key string, seq uint64, size int) []byte {
	b := make([]byte, 0, size+len(key)+20)
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	r := rand.New(rand.NewPCG(seq, uint64(size)))
	var pattern [64]byte
	for i := range pattern {
		pattern[i] = byte(r.Uint32())
	}
	for i := range size {
		if seq%2 == 0 {
			// Every other write compresses (the cycles run with --compression do).
			b = append(b, pattern[i%len(pattern)]^byte(i>>12))
		} else {
			b = append(b, byte(r.Uint32()))
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func decodeTortureValue(key string, b []byte) (uint64, bool) {
	if len(b) < len(key)+16 || string(b[:len(key)]) != key {
		return 0, false
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return 0, false
	}
	seq := binary.LittleEndian.Uint64(b[len(key):])
	size := binary.LittleEndian.Uint32(b[len(key)+8:])
	return seq, int(size) == len(body)-len(key)-12
}

// tortureState is what a key holds: a write's value (by its sequence number), or nothing.
type tortureState struct {
	present bool
	seq     uint64
}

// tortureHistory is, per key, the state the server last acknowledged and the writes in flight
// since (sent, not acknowledged). Each key has one writer.
type tortureHistory struct {
	mu       sync.Mutex
	last     []tortureState   // acknowledged (or read back after the last kill)
	inFlight [][]tortureState // sent since, without an acknowledgement
	acked    int
	live     []string // reads while the server ran that did not give the acknowledged state
}

// liveRead checks a read of key k made right after its writer's acknowledgement, with no
// restart between: it must give exactly the acknowledged state.
func (h *tortureHistory) liveRead(k int, key string, got tortureState, damaged bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if damaged || got != h.last[k] {
		h.live = append(h.live, fmt.Sprintf("%s read as %+v (damaged: %v) right after %+v was acknowledged", key, got, damaged, h.last[k]))
	}
}

func (h *tortureHistory) takeLive() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.live
	h.live = nil
	return l
}

func newTortureHistory(n int) *tortureHistory {
	return &tortureHistory{last: make([]tortureState, n), inFlight: make([][]tortureState, n)}
}

func (h *tortureHistory) begin(k int, s tortureState) {
	h.mu.Lock()
	h.inFlight[k] = append(h.inFlight[k], s)
	h.mu.Unlock()
}

func (h *tortureHistory) ack(k int, s tortureState) {
	h.mu.Lock()
	h.last[k], h.inFlight[k] = s, nil
	h.acked++
	h.mu.Unlock()
}

// check: got must be the last acknowledged state, a state in flight, or a miss.
func (h *tortureHistory) check(k int, got tortureState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !got.present || got == h.last[k] {
		return nil
	}
	for _, s := range h.inFlight[k] {
		if s == got {
			return nil
		}
	}
	return fmt.Errorf("reads as write %d; the server acknowledged %v last, and %d writes were in flight", got.seq, h.last[k], len(h.inFlight[k]))
}

// deleted reports whether the last state acknowledged for key k is a delete's.
func (h *tortureHistory) deleted(k int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.last[k].present
}

// settle makes what a key read back after a restart the state the next cycle starts from.
func (h *tortureHistory) settle(k int, got tortureState) {
	h.mu.Lock()
	h.last[k], h.inFlight[k] = got, nil
	h.mu.Unlock()
}

func (h *tortureHistory) takeAcked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.acked
	h.acked = 0
	return n
}

// runTortureClient writes and deletes keys [c*n, (c+1)*n) through one interface (c mod 3:
// memcached text, meta, HTTP) until the server dies or stop closes.
func runTortureClient(c, n int, srv serveProcess, h *tortureHistory, seed uint64, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 2))
	seq := seed << 20 // sequence numbers of this client, cycle and write
	var mc *memcache.Client
	var meta net.Conn
	var metaR *bufio.Reader
	hc := &http.Client{Timeout: 5 * time.Second}
	switch c % 3 {
	case 0:
		mc = memcache.New(srv.mc)
		mc.Timeout = 5 * time.Second
	case 1:
		var err error
		if meta, err = net.DialTimeout("tcp", srv.mc, time.Second); err != nil {
			return
		}
		defer meta.Close()
		metaR = bufio.NewReader(meta)
	}
	for {
		select {
		case <-stop:
			return
		default:
		}
		k := c*n + rng.IntN(n)
		key := tortureKey(k)
		seq++
		del := rng.IntN(8) == 0
		var value []byte
		state := tortureState{}
		if !del {
			size := 1 + rng.IntN(64<<10)
			switch rng.IntN(16) {
			case 0, 1, 2:
				size = 1 + rng.IntN(300<<10)
			case 3:
				size = tortureSmallBuffer // exactly a small write buffer
			}
			value = tortureValue(key, seq, size)
			state = tortureState{present: true, seq: seq}
		}
		h.begin(k, state)
		var err error
		switch c % 3 {
		case 0:
			if del {
				err = mc.Delete(key)
				if errors.Is(err, memcache.ErrCacheMiss) {
					err = nil
				}
			} else {
				err = mc.Set(&memcache.Item{Key: key, Value: value})
			}
		case 1:
			if del {
				fmt.Fprintf(meta, "md %s\r\n", key)
			} else {
				fmt.Fprintf(meta, "ms %s %d\r\n", key, len(value))
				meta.Write(value)
				io.WriteString(meta, "\r\n")
			}
			var line string
			line, err = metaR.ReadString('\n')
			if err == nil && line != "HD\r\n" && !(del && line == "NF\r\n") {
				err = fmt.Errorf("meta: %q", line)
			}
		case 2:
			u := "http://" + srv.http + "/v1/blobs/" + key
			var req *http.Request
			if del {
				req, _ = http.NewRequest(http.MethodDelete, u, nil)
			} else {
				req, _ = http.NewRequest(http.MethodPut, u, bytes.NewReader(value))
			}
			var resp *http.Response
			if resp, err = hc.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 && !(del && resp.StatusCode == http.StatusNotFound) {
					err = fmt.Errorf("http: %s", resp.Status)
				}
			}
		}
		if err != nil {
			return // the server is dead (or refused: not acknowledged either way)
		}
		h.ack(k, state)
		if (mc != nil || c%3 == 2) && rng.IntN(2) == 0 {
			// Read it back at once, through the memcached protocol or an HTTP GET (the fast
			// path): the key has no other writer.
			var value []byte
			var found bool
			var err error
			if mc != nil {
				var it *memcache.Item
				if it, err = mc.Get(key); err == nil {
					value, found = it.Value, true
				} else if errors.Is(err, memcache.ErrCacheMiss) {
					err = nil
				}
			} else {
				value, found, err = httpGetTorture(hc, srv, key)
			}
			var got tortureState
			damaged := false
			switch {
			case err != nil:
				var ne net.Error
				if !errors.As(err, &ne) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.ECONNREFUSED) {
					h.liveRead(k, key+" ("+err.Error()+")", tortureState{present: true}, true)
				}
				return // the server is dead, or its answer was not the protocol's
			case found:
				s, ok := decodeTortureValue(key, value)
				got, damaged = tortureState{present: true, seq: s}, !ok
			}
			h.liveRead(k, key, got, damaged)
		}
	}
}
