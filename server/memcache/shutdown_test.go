package memcache

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// TestShutdownUnderLoad shuts servers down while their connections finish command after
// command. Shutdown holds the server's lock while it wakes each idle connection under that
// connection's lock; a connection that held its own lock while asking whether the server
// was closing deadlocked against it, and the process hung until the test binary timed out.
func TestShutdownUnderLoad(t *testing.T) {
	c, err := blobcache.New(t.TempDir(), testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, _ := store.New(c, store.Config{})
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	for round := range rounds {
		srv := New(st, Config{Loops: testLoops})
		ln, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		var clients sync.WaitGroup
		for i := range 8 {
			nc, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			clients.Go(func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					if _, err := fmt.Fprintf(nc, "get k%d\r\n", i); err != nil {
						return
					}
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
				}
			})
		}
		time.Sleep(time.Duration(1+round%5) * time.Millisecond)
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- srv.Shutdown(ctx)
		}()
		select {
		case err := <-shut:
			if err != nil {
				t.Fatalf("round %d: Shutdown: %v", round, err)
			}
		case <-time.After(60 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("round %d: Shutdown hangs\n%s", round, buf[:runtime.Stack(buf, true)])
		}
		if err := <-served; err != ErrServerClosed {
			t.Fatalf("Serve: %v", err)
		}
		clients.Wait()
	}
}
