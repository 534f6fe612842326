package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/hist"
	"github.com/seed57392e9e/blobcache/bench/procfs"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

// snapshot is the counters read at a window's edges.
type snapshot struct {
	at       time.Time
	cpu      procfs.CPU
	io       procfs.IO
	disk     procfs.Disk
	counters map[string]int64
	mem      runtime.MemStats
}

func (c *child) snap() snapshot {
	s := snapshot{at: time.Now(), cpu: procfs.ReadCPU()}
	runtime.ReadMemStats(&s.mem)
	s.io, _ = procfs.ReadIO()
	if c.device != "" {
		s.disk, _ = procfs.ReadDisk(c.device)
	}
	if c.eng != nil {
		s.counters = c.eng.Counters()
	}
	return s
}

// fill sets the window's resource figures from two snapshots.
func (w *Window) fill(a, b snapshot) {
	w.Seconds = b.at.Sub(a.at).Seconds()
	w.CPU = b.cpu.Sub(a.cpu)
	w.CPUSeconds = w.CPU.Seconds()
	w.IO = b.io.Sub(a.io)
	w.Disk = b.disk.Sub(a.disk)
	if m, err := procfs.ReadMemory(); err == nil {
		w.RSS = m.RSS
	}
	w.Go = GoMemory{
		Allocated: int64(b.mem.TotalAlloc - a.mem.TotalAlloc), GCs: int64(b.mem.NumGC - a.mem.NumGC),
		HeapInuse: int64(b.mem.HeapInuse), HeapRetained: int64(b.mem.HeapSys - b.mem.HeapReleased), Sys: int64(b.mem.Sys),
	}
	if w.Seconds > 0 {
		w.OpsPerSec = float64(w.Ops) / w.Seconds
		w.WriteMBps = float64(w.BytesPut) / 1e6 / w.Seconds
	}
	if w.Gets > 0 {
		g := float64(w.Gets)
		w.DevReadsPerGet = float64(w.Disk.Reads) / g
		w.SyscallsPerGet = float64(w.IO.SyscR) / g
		w.ReadKiBPerGet = float64(w.IO.ReadBytes) / 1024 / g
		w.DevReadKiBPerGet = float64(w.Disk.SectorsRead) * 512 / 1024 / g
	}
	if b.counters != nil {
		w.Counters = make(map[string]int64, len(b.counters))
		for k, v := range b.counters {
			w.Counters[k] = v - a.counters[k]
		}
	}
}

// opFunc performs operation i of a window on behalf of worker w, with the worker's key buffer
// (workload.KeyLen bytes) and value buffer, and says what it did.
type opFunc func(w int, i int64, key, buf []byte) opResult

type opResult struct {
	op         workload.Op
	put, got   int64 // bytes
	unexpected bool
	err        error
}

// engineBufferMin is the smallest read buffer an engine that makes them (engine.ReadBufferer) is
// asked for: BlobCache aligns values of 128 KiB or more on disk, which direct reads then land in
// place; smaller ones gain nothing from its huge pages, which would cost 2 MiB of RSS.
const engineBufferMin = 128 << 10

// readBuffers returns the goroutines' read buffers, of c.bufSize bytes each, made once per child
// and used by every window. An engine that makes read buffers (engine.ReadBufferer) makes them
// when they are at least engineBufferMin, in one piece that the buffers are cut from at 4 KiB
// multiples; otherwise each is a Go slice.
func (c *child) readBuffers() [][]byte {
	if c.readBufs != nil {
		return c.readBufs
	}
	c.readBufs = make([][]byte, c.cfg.Goroutines)
	if rb, ok := c.eng.(engine.ReadBufferer); ok && c.bufSize >= engineBufferMin {
		stride := (c.bufSize + 4095) &^ 4095
		all := rb.ReadBuffer(stride * len(c.readBufs))
		for i := range c.readBufs {
			c.readBufs[i] = all[i*stride : i*stride+c.bufSize : i*stride+c.bufSize]
		}
		return c.readBufs
	}
	for i := range c.readBufs {
		c.readBufs[i] = make([]byte, c.bufSize)
	}
	return c.readBufs
}

// run performs n operations from cfg.Goroutines workers, timing each, and returns the window.
func (c *child) run(name string, n int64, f opFunc) Window {
	win := Window{Name: name, Latency: map[string]hist.Summary{}}
	var next, done atomic.Int64
	type tally struct {
		h        [3]*hist.Histogram
		n        Counts
		firstErr error
	}
	tallies := make([]tally, c.cfg.Goroutines)
	stop := c.progress(name, n, &done)
	stopProfile := c.profile(name)
	a := c.snap()
	bufs := c.readBuffers()
	var wg sync.WaitGroup
	for w := range tallies {
		t := &tallies[w]
		for i := range t.h {
			t.h[i] = hist.New()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bufs[w]
			key := make([]byte, workload.KeyLen)
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				start := time.Now()
				r := f(w, i, key, buf)
				t.h[r.op].Record(time.Since(start))
				done.Add(1)
				if r.op == workload.OpPut {
					t.n.Puts++
				} else {
					t.n.Gets++
				}
				t.n.BytesPut += r.put
				t.n.BytesGot += r.got
				if r.unexpected {
					t.n.Unexpected++
				}
				if r.err != nil {
					if t.n.Errors == 0 {
						t.firstErr = r.err
					}
					t.n.Errors++
				}
			}
		}()
	}
	wg.Wait()
	b := c.snap()
	stopProfile()
	stop()
	var hs [3]*hist.Histogram
	for i := range hs {
		hs[i] = hist.New()
	}
	for _, t := range tallies {
		for i := range hs {
			hs[i].Merge(t.h[i])
		}
		win.Add(t.n)
		if t.firstErr != nil {
			fmt.Fprintf(os.Stderr, "%s %s %s: %d errors, first: %v\n", c.engine, c.phase, name, t.n.Errors, t.firstErr)
		}
	}
	for i, h := range hs {
		if h.Count() > 0 {
			win.Latency[workload.Op(i).String()] = h.Summarize()
		}
	}
	win.Ops = win.Puts + win.Gets
	win.fill(a, b)
	if win.Unexpected > 0 {
		fmt.Fprintf(os.Stderr, "%s %s %s: %d unexpected results\n", c.engine, c.phase, name, win.Unexpected)
	}
	return win
}

// progress shows a bar on standard error while a window runs: redrawn in place on a terminal,
// a line every 10 s otherwise. The returned function stops it.
func (c *child) progress(name string, n int64, done *atomic.Int64) func() {
	if !c.cfg.Progress || n <= 0 {
		return func() {}
	}
	tty := false
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		tty = true
	}
	every := 10 * time.Second
	if tty {
		every = 250 * time.Millisecond
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	draw := func(end string) {
		d := done.Load()
		const width = 30
		fill := int(d * width / n)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = '.'
			if i < fill {
				bar[i] = '#'
			}
		}
		el := time.Since(start).Seconds()
		fmt.Fprintf(os.Stderr, "\r%-15s %-9s %-18s [%s] %3d%% %d/%d %.0f op/s %.0fs%s",
			c.engine, c.phase, name, bar, d*100/n, d, n, float64(d)/max(el, 1e-9), el, end)
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				draw("\n")
				return
			case <-t.C:
				if tty {
					draw("")
				} else {
					draw("\n")
				}
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// profile starts a CPU profile of window name if the run asks for profiles and the window is
// measured (not a load or a warm-up); the returned function stops it and writes the heap
// profile (allocations since the child started, and what is in use) next to it.
func (c *child) profile(name string) func() {
	if c.cfg.ProfileDir == "" || name == "preload" || strings.HasPrefix(name, "load") || strings.Contains(name, "warmup") {
		return func() {}
	}
	clean := strings.NewReplacer("@", "-", "/", "-").Replace(name)
	base := filepath.Join(c.cfg.ProfileDir, filepath.Base(c.dir)+"-"+clean)
	f, err := os.Create(base + ".cpu.pprof")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: cpu profile: %v\n", c.engine, name, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: cpu profile: %v\n", c.engine, name, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		runtime.GC() // the profile is as of the last collection: make that now
		if h, err := os.Create(base + ".heap.pprof"); err == nil {
			pprof.Lookup("allocs").WriteTo(h, 0)
			h.Close()
		}
	}
}
