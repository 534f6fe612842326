package memcache

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// testNow is the fixed clock of the test servers, so expiry times in scripts are exact.
var testNow = time.Unix(1_700_000_000, 0)

// testLoops is Config.Loops of the test servers whose test does not set it: two event loops,
// as the server runs them, or what BLOBCACHE_TEST_LOOPS says (-1: a goroutine per connection;
// scripts/test.sh runs the package both ways).
var testLoops = func() int {
	if n, err := strconv.Atoi(os.Getenv("BLOBCACHE_TEST_LOOPS")); err == nil {
		return n
	}
	return 2
}()

type env struct {
	t    testing.TB
	c    *blobcache.Cache
	st   *store.Store
	srv  *Server
	addr string
	done chan error
}

func newEnv(t testing.TB, cfg Config) *env {
	return newEnvStore(t, cfg, store.Config{})
}

func newEnvStore(t testing.TB, cfg Config, scfg store.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, scfg, testOptions())
}

// newEnvHooks is newEnv with the server's test hooks set by hooks before it serves (a loop
// reads them from its own goroutine).
func newEnvHooks(t testing.TB, cfg Config, hooks func(*Server)) *env {
	t.Helper()
	return newEnvFull(t, cfg, store.Config{}, testOptions(), hooks)
}

// newEnvWith is newEnvStore with the cache's options.
func newEnvWith(t testing.TB, cfg Config, scfg store.Config, opts []blobcache.Option) *env {
	t.Helper()
	return newEnvFull(t, cfg, scfg, opts, nil)
}

func newEnvFull(t testing.TB, cfg Config, scfg store.Config, opts []blobcache.Option, hooks func(*Server)) *env {
	t.Helper()
	if scfg.Now == nil {
		scfg.Now = func() time.Time { return testNow }
	}
	c, err := blobcache.New(t.TempDir(), append(opts, blobcache.WithClock(scfg.Now))...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(c, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Version == "" {
		cfg.Version = "test"
	}
	if cfg.Loops == 0 {
		cfg.Loops = testLoops
	}
	srv := New(st, cfg)
	if hooks != nil {
		hooks(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, st: st, srv: srv, addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-e.done; err != ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
		c.Close()
	})
	return e
}

func (e *env) dial() net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// testOptions are small cache options: the defaults size the index and bloom filter for a
// million blobs, which is slow to set up under the race detector.
func testOptions() []blobcache.Option {
	return []blobcache.Option{blobcache.WithWriteBufferSize(8 << 20), blobcache.WithSegmentSize(32 << 20),
		blobcache.WithExpectedBlobs(1000), blobcache.WithChecksum(true), blobcache.WithVerifyOnRead(true)}
}
