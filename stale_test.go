package blobcache

import (
	"fmt"
	"sync"
	"testing"
)

// TestStaleQueue: keys come out oldest first, copied, and a full queue drops what is pushed.
func TestStaleQueue(t *testing.T) {
	var q staleQueue
	if _, ok := q.pop(); ok {
		t.Fatal("pop of an empty queue")
	}
	key := []byte("k0")
	q.push(key, observation{inIndex: true})
	key[1] = 'x' // the queue has its own copy
	for i := 1; i < maxStale+10; i++ {
		q.push(fmt.Appendf(nil, "k%d", i), observation{})
	}
	for i := range maxStale {
		sk, ok := q.pop()
		if want := fmt.Sprintf("k%d", i); !ok || string(sk.key) != want {
			t.Fatalf("pop %d: %q %v, want %q", i, sk.key, ok, want)
		}
		if i == 0 && !sk.obs.inIndex {
			t.Fatal("the observation was not kept")
		}
	}
	if sk, ok := q.pop(); ok {
		t.Fatalf("a key past maxStale was queued: %q", sk.key)
	}
	q.push([]byte("again"), observation{})
	if sk, ok := q.pop(); !ok || string(sk.key) != "again" {
		t.Fatalf("pop after emptying: %q %v", sk.key, ok)
	}
}

// TestStaleQueueConcurrent pushes from many readers while one taker pops (run under -race).
func TestStaleQueueConcurrent(t *testing.T) {
	var q staleQueue
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				q.push(fmt.Appendf(nil, "g%d-%d", g, i), observation{})
			}
		})
	}
	taken := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		for {
			if _, ok := q.pop(); !ok {
				break
			}
			taken++
		}
	}
	if taken == 0 || taken > 4*500 {
		t.Fatalf("took %d keys", taken)
	}
	if n := q.n.Load(); n != 0 {
		t.Fatalf("n = %d after the queue was emptied", n)
	}
}
