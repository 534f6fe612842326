package blobcache

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Progress watchdogs and CPU hogs for the long randomized tests (stress, model, torture).
//
// A hung test cannot be failed from another goroutine: t.Fatal must run on the test's own
// goroutine, and that goroutine is the one that is stuck. Go's -timeout does end it, but only
// after ten minutes by default, and for the whole package. So a watchdog that sees no progress
// for its stall time prints every goroutine's stack to stderr and ends the process at once with
// os.Exit(watchdogExit). os.Exit, not panic: a panic prints only the panicking goroutine's stack
// (unless GOTRACEBACK=all), and the watchdog's own stack is the one stack that does not matter.
// The distinctive code lets the torture test tell its writer process's watchdog from the kill
// it sends.

var watchdogStall = flag.Duration("watchdog.stall", 20*time.Second,
	"how long a stress, model or torture test may make no progress before its watchdog dumps every goroutine's stack and ends the process")

// watchdogExit is the exit code of a process ended by its watchdog.
const watchdogExit = 97

// watchdog watches one lane of work: a goroutine that calls tick after each operation. If the
// lane does not tick for stall, the watchdog fires: it writes every goroutine's stack to stderr
// and exits the process with watchdogExit. A test with several goroutines gives each its own
// watchdog, so that one goroutine stuck while the others go on is caught too.
type watchdog struct {
	name  string
	stall time.Duration
	ticks atomic.Uint64
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// startWatchdog starts a watchdog of t's named lane; stall 0 means -watchdog.stall. It is
// stopped when t ends, or earlier by stop.
func startWatchdog(t testing.TB, lane string, stall time.Duration) *watchdog {
	t.Helper()
	w := newWatchdog(t.Name()+": "+lane, stall)
	t.Cleanup(w.stop)
	return w
}

// newWatchdog starts a watchdog of a lane named name; stall 0 means -watchdog.stall. The
// caller must stop it.
func newWatchdog(name string, stall time.Duration) *watchdog {
	if stall <= 0 {
		stall = *watchdogStall
	}
	w := &watchdog{name: name, stall: stall, quit: make(chan struct{}), done: make(chan struct{})}
	go w.watch()
	return w
}

// tick records one operation of progress.
func (w *watchdog) tick() { w.ticks.Add(1) }

// stop ends the watchdog and waits for it; it may be called more than once.
func (w *watchdog) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

func (w *watchdog) watch() {
	defer close(w.done)
	every := max(w.stall/20, 10*time.Millisecond)
	tk := time.NewTicker(every)
	defer tk.Stop()
	last, since := w.ticks.Load(), time.Now()
	for {
		select {
		case <-w.quit:
			return
		case now := <-tk.C:
			if n := w.ticks.Load(); n != last {
				last, since = n, now
			} else if now.Sub(since) >= w.stall {
				w.fire(last, now.Sub(since))
			}
		}
	}
}

// fireMu lets one watchdog report: the first to fire holds it until the process ends.
var fireMu sync.Mutex

// fire reports the stall with every goroutine's stack and ends the process.
func (w *watchdog) fire(ticks uint64, idle time.Duration) {
	fireMu.Lock()
	fmt.Fprintf(os.Stderr, "\nwatchdog: %s: no progress for %v after %d operations: deadlock? goroutines:\n\n%s\n",
		w.name, idle.Round(time.Millisecond), ticks, allStacks())
	fmt.Fprintf(os.Stderr, "watchdog: %s: FAIL: no progress for %v (exit %d)\n", w.name, idle.Round(time.Millisecond), watchdogExit)
	os.Exit(watchdogExit)
}

// allStacks returns the stacks of every goroutine, growing the buffer until they fit.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) || len(buf) >= 256<<20 {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// startCPUHog starts n goroutines that spin without pause, so that the cache's own goroutines
// (flush workers, the commit loop, sealers) get the processor late and out of their usual
// order: a background step that always finishes "soon enough" in a quiet test may then not.
// The Go scheduler preempts the spinners, so they slow the rest down, never stop it. stop ends
// them and waits for them.
func startCPUHog(n int) (stop func()) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(i) + 1
			for !quit.Load() {
				// Busy work the compiler cannot drop (xorshift), between checks of quit.
				for range 1 << 12 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
				cpuHogSink.Store(x)
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			quit.Store(true)
			wg.Wait()
		})
	}
}

// cpuHogSink keeps the hogs' work observable.
var cpuHogSink atomic.Uint64
