package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/bench/memcached"
	"github.com/seed57392e9e/blobcache/server/memcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// childEnv makes the test binary act as mcbench when runLoad re-executes it.
const childEnv = "MCBENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := run(os.Args[1], os.Args[2:]); err != nil {
			os.Stderr.WriteString("child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLoadProcess runs `mcbench load` in a child process against an in-process server, as
// compare does, and puts the decoded result through the report.
func TestLoadProcess(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), blobcache.WithWriteBufferSize(8<<20), blobcache.WithSegmentSize(32<<20),
		blobcache.WithExpectedBlobs(1000), blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := store.New(c, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := memcache.New(st, memcache.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	t.Setenv(childEnv, "1")
	base := []string{"-addr", ln.Addr().String(), "-keys", "200", "-value-size", "4096", "-conns", "2"}
	var pre map[string]string
	if _, err := runLoad(os.Args[0], append(base, "-preload-only"), &pre); err != nil || pre["preload"] == "" {
		t.Fatalf("preload: %v, %v", pre, err)
	}
	var res memcached.Result
	cpu, err := runLoad(os.Args[0], append(base, "-duration", "300ms", "-miss-ratio", "0.5"), &res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Ops == 0 || res.Errors != 0 || res.WrongBytes != 0 || res.Hits == 0 || res.Misses == 0 || cpu <= 0 {
		t.Fatalf("result %+v, load CPU %v (first error %s)", res, cpu, res.FirstError)
	}
	if res.GetLatency.Count != res.Gets || res.SetLatency.Count != res.Sets || res.GetLatency.P99Us < res.GetLatency.P50Us {
		t.Fatalf("latencies: get %+v, set %+v", res.GetLatency, res.SetLatency)
	}

	var b bytes.Buffer
	report(&b, []row{{size: "4 KiB", mix: "hit-heavy", server: "blobcache serve", res: &res, rssMax: 64 << 20}}, time.Second, t.TempDir())
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "| 4 KiB | hit-heavy | blobcache serve | ") || !strings.HasSuffix(last, " | 64 MiB | 0 |") ||
		strings.Count(last, "|") != strings.Count(lines[len(lines)-2], "|") {
		t.Fatalf("report row %q under %q", last, lines[len(lines)-2])
	}
}

func TestUs(t *testing.T) {
	for _, tc := range []struct {
		us   float64
		want string
	}{{0, "0 µs"}, {49.279, "49 µs"}, {9999.4, "9999 µs"}, {10e3, "10.0 ms"}, {135812.5, "135.8 ms"}} {
		if got := us(tc.us); got != tc.want {
			t.Errorf("us(%v) = %q, want %q", tc.us, got, tc.want)
		}
	}
}
