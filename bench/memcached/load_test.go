package memcached

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/memcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// TestRunAgainstServer runs a short workload against an in-process server.
func TestRunAgainstServer(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), blobcache.WithWriteBufferSize(8<<20), blobcache.WithSegmentSize(32<<20),
		blobcache.WithExpectedBlobs(1000), blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := store.New(c, store.Config{})
	srv := memcache.New(st, memcache.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	w := Workload{Addr: ln.Addr().String(), Keys: 200, ValueSize: 4096, GetRatio: 0.9, MissRatio: 0.5, Conns: 4, Duration: 300 * time.Millisecond, Seed: 1}
	if _, err := Preload(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops == 0 || r.Errors != 0 || r.WrongBytes != 0 || r.Hits == 0 || r.Misses == 0 || r.Sets == 0 {
		t.Fatalf("result %+v (first error %s)", r, r.FirstError)
	}
	if r.GetLatency.Count != r.Gets || r.SetLatency.Count != r.Sets || r.GetLatency.P50Us <= 0 {
		t.Fatalf("latencies: get %+v, set %+v for %d gets, %d sets", r.GetLatency, r.SetLatency, r.Gets, r.Sets)
	}
}
