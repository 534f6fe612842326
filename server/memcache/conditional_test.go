package memcache

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/seed57392e9e/blobcache/server/store"
)

// TestConcurrentCounters runs cas loops (gets, add one, cas until stored) and incr on one key
// from several connections at once: every increment must be in the final value. And several
// connections add one key at once: exactly one is STORED.
func TestConcurrentCounters(t *testing.T) {
	e := newEnv(t, Config{})
	mc := e.client()
	mc.MaxIdleConns = 16
	if err := mc.Set(&gomemcache.Item{Key: "n", Value: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 6, 40
	var casRetries atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if w%2 == 0 {
					if _, err := mc.Increment("n", 1); err != nil {
						errs <- fmt.Errorf("incr: %w", err)
						return
					}
					continue
				}
				for {
					it, err := mc.Get("n")
					if err != nil {
						errs <- fmt.Errorf("gets: %w", err)
						return
					}
					v, err := strconv.ParseUint(strings.TrimSpace(string(it.Value)), 10, 64)
					if err != nil {
						errs <- fmt.Errorf("value %q: %w", it.Value, err)
						return
					}
					it.Value = []byte(strconv.FormatUint(v+1, 10))
					err = mc.CompareAndSwap(it)
					if err == nil {
						break
					}
					if !errors.Is(err, gomemcache.ErrCASConflict) {
						errs <- fmt.Errorf("cas: %w", err)
						return
					}
					casRetries.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	it, err := mc.Get("n")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(it.Value)); got != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %q, want %d (cas retries: %d)", got, workers*each, casRetries.Load())
	}
	t.Logf("%d increments, %d cas conflicts retried", workers*each, casRetries.Load())

	for round := range 5 {
		key := fmt.Sprintf("once-%d", round)
		var storedN, notStored atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := mc.Add(&gomemcache.Item{Key: key, Value: []byte(strconv.Itoa(w))})
				switch {
				case err == nil:
					storedN.Add(1)
				case errors.Is(err, gomemcache.ErrNotStored):
					notStored.Add(1)
				default:
					t.Errorf("add: %v", err)
				}
			}()
		}
		wg.Wait()
		if storedN.Load() != 1 || notStored.Load() != workers-1 {
			t.Fatalf("round %d: %d STORED, %d NOT_STORED; want 1 and %d", round, storedN.Load(), notStored.Load(), workers-1)
		}
	}
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestClientCommands drives every storage, counter, touch and flush command through gomemcache
// (which sends no noreply), with a clock the test moves to see expiry and delayed flushes act.
func TestClientCommands(t *testing.T) {
	clk := &clock{now: testNow}
	e := newEnvStore(t, Config{}, store.Config{Now: clk.Now})
	mc := e.client()
	get := func(key string) string {
		t.Helper()
		it, err := mc.Get(key)
		if errors.Is(err, gomemcache.ErrCacheMiss) {
			return "<miss>"
		}
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return fmt.Sprintf("%s/%d", it.Value, it.Flags)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	want := func(err, target error) {
		t.Helper()
		if !errors.Is(err, target) {
			t.Fatalf("got %v, want %v", err, target)
		}
	}
	// add, replace, append, prepend.
	must(mc.Add(&gomemcache.Item{Key: "k", Value: []byte("a"), Flags: 3}))
	want(mc.Add(&gomemcache.Item{Key: "k", Value: []byte("b")}), gomemcache.ErrNotStored)
	want(mc.Replace(&gomemcache.Item{Key: "missing", Value: []byte("b")}), gomemcache.ErrNotStored)
	must(mc.Replace(&gomemcache.Item{Key: "k", Value: []byte("b"), Flags: 4}))
	must(mc.Append(&gomemcache.Item{Key: "k", Value: []byte("c"), Flags: 9}))
	must(mc.Prepend(&gomemcache.Item{Key: "k", Value: []byte("a")}))
	want(mc.Append(&gomemcache.Item{Key: "missing", Value: []byte("c")}), gomemcache.ErrNotStored)
	if got := get("k"); got != "abc/4" {
		t.Fatalf("after append and prepend: %s, want abc/4 (the item keeps its flags)", got)
	}
	// cas: the value read, a stale one, a missing key.
	it, err := mc.Get("k")
	must(err)
	stale := *it
	it.Value = []byte("new")
	must(mc.CompareAndSwap(it))
	stale.Value = []byte("lost")
	want(mc.CompareAndSwap(&stale), gomemcache.ErrCASConflict)
	must(mc.Delete("k"))
	want(mc.CompareAndSwap(it), gomemcache.ErrCacheMiss) // NOT_FOUND
	want(mc.Delete("k"), gomemcache.ErrCacheMiss)
	// incr, decr: wrap, floor, padding, non-numbers.
	must(mc.Set(&gomemcache.Item{Key: "n", Value: []byte("18446744073709551615")}))
	if v, err := mc.Increment("n", 2); err != nil || v != 1 {
		t.Fatalf("incr past 2^64-1: %d, %v; want 1", v, err)
	}
	if got := get("n"); got != "1                   /0" {
		t.Fatalf("after the wrap: %q, want 1 padded to 20 bytes", got)
	}
	if v, err := mc.Decrement("n", 5); err != nil || v != 0 {
		t.Fatalf("decr below 0: %d, %v; want 0", v, err)
	}
	if _, err := mc.Increment("missing", 1); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("incr of a missing key: %v", err)
	}
	must(mc.Set(&gomemcache.Item{Key: "s", Value: []byte("abc")}))
	if _, err := mc.Increment("s", 1); err == nil || !strings.Contains(err.Error(), "non-numeric") {
		t.Fatalf("incr of a non-number: %v", err)
	}
	// touch and gat: expiry by the test clock.
	must(mc.Set(&gomemcache.Item{Key: "t", Value: []byte("x"), Flags: 1}))
	must(mc.Touch("t", 10))
	want(mc.Touch("missing", 10), gomemcache.ErrCacheMiss)
	clk.advance(9 * time.Second)
	if it, err := mc.GetAndTouch("t", 100); err != nil || string(it.Value) != "x" {
		t.Fatalf("gat: %v %v", it, err)
	}
	clk.advance(50 * time.Second)
	if got := get("t"); got != "x/1" {
		t.Fatalf("after gat 100 and 59 s: %s", got)
	}
	clk.advance(51 * time.Second)
	if got := get("t"); got != "<miss>" {
		t.Fatalf("past the touched expiry: %s", got)
	}
	// flush_all, at once and with a delay.
	must(mc.Set(&gomemcache.Item{Key: "f", Value: []byte("1")}))
	must(mc.FlushAll())
	if got := get("f"); got != "<miss>" {
		t.Fatalf("after flush_all: %s", got)
	}
	must(mc.Set(&gomemcache.Item{Key: "f", Value: []byte("2")}))
	if got := get("f"); got != "2/0" {
		t.Fatalf("set after flush_all: %s", got)
	}
	c := e.dial()
	defer c.Close()
	br := bufio.NewReader(c)
	send(t, c, "flush_all 10\r\n")
	if line, _ := br.ReadString('\n'); line != "OK\r\n" {
		t.Fatalf("flush_all 10: %q", line)
	}
	clk.advance(9 * time.Second)
	if got := get("f"); got != "2/0" {
		t.Fatalf("before the delayed flush: %s", got)
	}
	clk.advance(2 * time.Second)
	if got := get("f"); got != "<miss>" {
		t.Fatalf("after the delayed flush: %s", got)
	}
	must(mc.Set(&gomemcache.Item{Key: "f", Value: []byte("3")}))
	if got := get("f"); got != "3/0" {
		t.Fatalf("set after the delayed flush: %s", got)
	}
}

// TestPythonClients runs testdata/clients/pyclients.py, which drives the server with pymemcache
// and python-memcached (their default noreply settings included) and reads stats as monitoring
// agents do through pymemcache. It is skipped when python3
// or either package is missing (pip install pymemcache python-memcached); TestClientCommands
// covers the same commands through gomemcache.
func TestPythonClients(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	if out, err := exec.Command(py, "-c", "import pymemcache, memcache").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("pymemcache or python-memcached is missing (.ci/run installs them): %s", out)
		}
		t.Skipf("pymemcache or python-memcached is missing (pip install pymemcache python-memcached): %s", out)
	}
	e := newEnv(t, Config{MaxConns: 64})
	host, port, _ := net.SplitHostPort(e.addr)
	cmd := exec.Command(py, "testdata/clients/pyclients.py", host, port)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pyclients.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
