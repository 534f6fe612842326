package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
)

// smallServe are flags that keep the cache small and quick to open under the race detector,
// and the listeners on ephemeral loopback ports.
func smallServe(dir string) []string {
	return []string{"--dir", dir, "--http", "127.0.0.1:0", "--memcache", "127.0.0.1:0",
		"--write-buffer-size", "8M", "--segment-size", "32M", "--expected-blobs", "1000"}
}

// startServe runs fn (serve or serveCommand) and returns the HTTP and memcached addresses
// it printed, and its result.
func startServe(t *testing.T, fn func(stdout, stderr io.Writer) error) (httpAddr, mcAddr string, done chan error, stderr *syncBuffer) {
	t.Helper()
	pr, pw := io.Pipe()
	stderr = &syncBuffer{}
	done = make(chan error, 1)
	go func() {
		err := fn(pw, stderr)
		pw.CloseWithError(fmt.Errorf("serve returned: %v", err))
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no serving line: %v\n%s", err, stderr)
	}
	go io.Copy(io.Discard, pr)
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, "http="); ok {
			httpAddr = v
		}
		if v, ok := strings.CutPrefix(f, "memcache="); ok {
			mcAddr = v
		}
	}
	if httpAddr == "" || mcAddr == "" {
		t.Fatalf("serving line %q", line)
	}
	return httpAddr, mcAddr, done, stderr
}

// syncBuffer is a bytes.Buffer the server's logger and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func httpPut(t *testing.T, addr, key, value string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", "http://"+addr+"/v1/blobs/"+key, strings.NewReader(value))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 && resp.StatusCode != 204 { // created, or overwritten
		t.Fatalf("PUT %s: %d", key, resp.StatusCode)
	}
}

func TestServe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"defaults", nil},
		// The get below reads the segment, not the write buffer: batches are cut after 1 ms.
		{"direct-reads", []string{"--direct-io-reads", "--flush-interval", "1ms"}},
		{"buffered", []string{"--buffered-writes", "--flush-interval", "1ms"}},
		{"buffered-reads", []string{"--buffered-reads", "--flush-interval", "1ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testServe(t, tc.flags) })
	}
}

func testServe(t *testing.T, flags []string) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	httpAddr, mcAddr, done, _ := startServe(t, func(stdout, stderr io.Writer) error {
		return serve(ctx, append(smallServe(dir), flags...), stdout, stderr)
	})
	httpPut(t, httpAddr, "greeting", "hello, blobcache")
	if len(flags) > 0 {
		time.Sleep(100 * time.Millisecond)
	}
	// The memcached port answers too.
	c, err := net.Dial("tcp", mcAddr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "get greeting\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	want := "VALUE greeting 0 16\r\nhello, blobcache\r\nEND\r\n"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("memcached: %q %v", got, err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	// The write is on disk.
	if got := readBack(t, dir, "greeting"); got != "hello, blobcache" {
		t.Fatalf("after serve: %q", got)
	}
}

// readBack opens the cache in dir and returns the blob under key.
func readBack(t *testing.T, dir, key string) string {
	t.Helper()
	c, err := blobcache.New(dir, blobcache.WithWriteBufferSize(8<<20), blobcache.WithSegmentSize(32<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, ok := c.Get([]byte(key))
	if !ok {
		t.Fatalf("%q was lost", key)
	}
	v, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// TestServeSIGTERM stops the real command with a signal, with the write still in the write
// buffer: it must be drained to disk.
func TestServeSIGTERM(t *testing.T) {
	dir := t.TempDir()
	args := append(smallServe(dir), "--flush-interval", "1h")
	httpAddr, _, done, _ := startServe(t, func(stdout, stderr io.Writer) error {
		return serveCommand(args, stdout, stderr)
	})
	httpPut(t, httpAddr, "k", "survives SIGTERM")
	// serveCommand printed its line after installing its signal handler, so the signal goes
	// to it, not to the test binary's default handler.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	if got := readBack(t, dir, "k"); got != "survives SIGTERM" {
		t.Fatalf("k = %q", got)
	}
}

func TestServeFlags(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"--bogus"},
		{"extra-argument"},
		{"--max-size", "lots"},
		{"--tls-cert", "cert.pem"},
		{"--log-level", "loud"},
	} {
		var out, errOut bytes.Buffer
		err := serve(ctx, args, &out, &errOut)
		var ex exitError
		if !errors.As(err, &ex) || ex != 2 {
			t.Errorf("%q: %v, want exit status 2", args, err)
		}
	}
	// Not a usage error, but a cache that cannot be opened.
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	os.WriteFile(dir+"/not-a-cache", []byte("x"), 0o644)
	if err := serve(ctx, smallServe(dir), &out, &errOut); !errors.Is(err, blobcache.ErrNotBlobCache) {
		t.Errorf("foreign directory: %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"4096", 4096, true}, {"8K", 8 << 10, true}, {"8k", 8 << 10, true},
		{"64M", 64 << 20, true}, {"64MiB", 64 << 20, true}, {"64MB", 64 << 20, true},
		{"500G", 500 << 30, true}, {"2T", 2 << 40, true}, {"", 0, false}, {"-1", 0, false},
		{"1.5G", 0, false}, {"G", 0, false}, {"99999999999T", 0, false},
	} {
		got, err := parseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:8080": true, "localhost:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "bad": false,
	} {
		if isLoopback(addr) != want {
			t.Errorf("isLoopback(%q) = %v", addr, !want)
		}
	}
}

// TestServeDiskBound: serve bounds a new cache's disk by default (MaxSizeAuto), says so on
// stderr, and the next start keeps the bound recorded, which stat shows; --max-size overrides
// it for its run and unlimited lifts it.
func TestServeDiskBound(t *testing.T) {
	dir := t.TempDir()
	run := func(flags ...string) (bound int64, said string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var st blobcache.Stats
		_, _, done, stderr := startServe(t, func(stdout, stderr io.Writer) error {
			return serve(ctx, append(smallServe(dir), flags...), stdout, stderr)
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve %q: %v", flags, err)
		}
		for line := range strings.Lines(stderr.String()) {
			if strings.Contains(line, "disk bound") || strings.Contains(line, "disk space unlimited") {
				said = line
			}
		}
		c, err := blobcache.New(dir, blobcache.WithReadOnly(true), blobcache.WithMaxSize(blobcache.MaxSizeAuto))
		if err != nil {
			t.Fatal(err)
		}
		st = c.Stats()
		c.Close()
		return st.MaxSize, said
	}
	// smallServe sets --segment-size, which a bound must hold twice over.
	first, said := run()
	if first <= 0 || !strings.Contains(said, fmt.Sprint(first)) || !strings.Contains(said, "BOUND") {
		t.Fatalf("default: recorded bound %d; serve said %q", first, said)
	}
	if again, said := run(); again != first || !strings.Contains(said, fmt.Sprint(first)) {
		t.Fatalf("restarted: bound %d (first %d); serve said %q", again, first, said)
	}
	if _, said := run("--max-size", "1G"); !strings.Contains(said, "1073741824") || !strings.Contains(said, "--max-size") {
		t.Fatalf("--max-size 1G: serve said %q", said)
	}
	if _, said := run("--max-size", "unlimited"); !strings.Contains(said, "unlimited") {
		t.Fatalf("--max-size unlimited: serve said %q", said)
	}
	out := mustCLI(t, nil, "stat", "--dir", dir)
	if !strings.Contains(out, fmt.Sprintf("disk bound        %d", first)) {
		t.Fatalf("stat does not show the recorded bound %d:\n%s", first, out)
	}
}
