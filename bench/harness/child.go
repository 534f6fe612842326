package harness

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/bench/engine"
	"github.com/seed57392e9e/blobcache/bench/procfs"
	"github.com/seed57392e9e/blobcache/bench/workload"
)

// child runs one phase against one engine in this process.
type child struct {
	cfg           Config
	engine, phase string
	dir           string
	device        string
	eng           engine.Engine
	payload       *workload.Payload
	bufSize       int
	readBufs      [][]byte // one per goroutine, made by readBuffers
	res           *PhaseResult
}

// RunChild opens engine name in dir, runs phase and returns the result. Errors are in
// PhaseResult.Error, with the windows measured before them.
func RunChild(cfg Config, name, phase, dir string) *PhaseResult {
	res := &PhaseResult{Engine: name, Description: engine.Describe(name), Phase: phase}
	c := &child{cfg: cfg, engine: name, phase: phase, dir: dir, res: res}
	if err := c.runPhase(); err != nil {
		res.Error = err.Error()
	}
	return res
}

func (c *child) runPhase() error {
	var maxValue int
	var expected, dataset int64
	l0Files := 0
	switch c.phase {
	case PhaseMixed:
		maxValue, expected = c.cfg.MixedValue, int64(c.cfg.MixedPreload+c.cfg.MixedOps)
		dataset, l0Files = c.cfg.MixedDatasetBytes(), c.cfg.RocksDBL0Files
	case PhaseIOPerGet:
		maxValue, expected = c.cfg.IOValue, c.cfg.IOKeys[len(c.cfg.IOKeys)-1]
	case PhaseCapacity:
		maxValue, expected = c.cfg.CapMax, c.cfg.CapKeys
	default:
		return fmt.Errorf("harness: unknown phase %q", c.phase)
	}
	c.payload = workload.NewPayload(maxValue, c.cfg.Seed)
	// One byte more than the largest value, so that an engine reading into the buffer learns in
	// one call that the value ended (BlobCache's ReadAt returns io.EOF with it).
	c.bufSize = maxValue + 1
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	if dev, err := procfs.DeviceOf(c.dir); err == nil {
		c.device = dev
		c.res.Device = dev
	}
	c.res.DropCaches = "no: not asked (-drop-caches=false)"
	if c.cfg.DropCaches {
		// Settled at the start as after any drop: the page cache the engine run before this one
		// left is freed here, and without the wait this engine's first writes would land in that
		// memory, cheaper than in memory its host has taken back (see Config.DropSettle), by how
		// much page cache the other engine left.
		if err := c.dropAndSettle(); err != nil {
			c.res.DropCaches = "no: " + err.Error()
		} else {
			c.res.DropCaches = "yes"
		}
	}
	if m, err := procfs.ReadMemory(); err == nil {
		c.res.BaselineRSS = m.RSS
	}
	start := c.snap()
	eng, err := engine.Open(c.engine, engine.Config{
		Dir: c.dir, MemoryBudget: c.cfg.MemoryBudget, ExpectedKeys: expected, DatasetBytes: dataset,
		RocksDBL0Files: l0Files, BlobcacheWriteBuffer: c.cfg.BlobcacheBuffer, BlobcacheDirectWriteBuffer: c.cfg.BlobcacheDirectBuffer, BlobcacheRead: c.cfg.BlobcacheRead,
		BlobcacheVerify: c.cfg.BlobcacheVerify, BlobcacheMemory: c.cfg.BlobcacheMemory, BlobcacheMemoryOnWrite: c.cfg.BlobcacheMemoryOnWrite, BlobcacheBuffered: c.cfg.BlobcacheBuffered,
	})
	if err != nil {
		return err
	}
	c.eng = eng
	c.res.Settings = eng.Settings()
	switch c.phase {
	case PhaseMixed:
		err = c.mixed()
	case PhaseIOPerGet:
		err = c.ioPerGet()
	case PhaseCapacity:
		err = c.capacity()
	}
	counters := eng.Counters()
	if cerr := eng.Close(); err == nil {
		err = cerr
	}
	c.eng = nil
	syscall.Sync() // so the device's counters see the writes
	end := c.snap()
	end.counters, start.counters = counters, map[string]int64{}
	total := Window{Name: "total"}
	for _, w := range c.res.Windows {
		total.Ops += w.Ops
		total.Add(w.Counts)
	}
	total.fill(start, end)
	total.Counters = counters
	c.res.Total = total
	if total.BytesPut > 0 {
		c.res.WriteAmp = float64(total.IO.WriteBytes-total.IO.Cancelled) / float64(total.BytesPut)
		c.res.DeviceWriteAmp = float64(total.Disk.SectorsWritten*512) / float64(total.BytesPut)
	}
	if m, err := procfs.ReadMemory(); err == nil {
		c.res.PeakRSS = m.PeakRSS
	}
	c.res.DiskUsed = diskUsed(c.dir)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		c.res.LoadAvg = strings.TrimSpace(string(b))
	}
	return err
}

// dropCaches drops the page cache if the run asks for it; it reports whether it did.
func (c *child) dropCaches() bool { return c.cfg.DropCaches && c.dropAndSettle() == nil }

// dropAndSettle drops the page cache and, once it is dropped, waits Config.DropSettle.
func (c *child) dropAndSettle() error {
	if err := procfs.DropCaches(); err != nil {
		return err
	}
	time.Sleep(c.cfg.DropSettle)
	return nil
}

func (c *child) add(w Window) { c.res.Windows = append(c.res.Windows, w) }

// put writes value index i of space Present with size n.
func (c *child) put(i uint64, n int, key []byte) opResult {
	k := workload.Key(key, workload.Present, i)
	err := c.eng.Put(k, c.payload.Value(i, n))
	return opResult{op: workload.OpPut, put: int64(n), err: err}
}

// get reads key index i of space and checks the answer: a present key must be found with size
// want, an absent key must not be found.
func (c *child) get(space byte, i uint64, want int, key, buf []byte) opResult {
	k := workload.Key(key, space, i)
	n, found, err := c.eng.Get(k, buf)
	r := opResult{op: workload.OpGetHit, got: int64(n), err: err}
	if space == workload.Absent {
		r.op = workload.OpGetMiss
		r.unexpected = found
	} else {
		r.unexpected = !found || n != want
	}
	return r
}

// load writes keys [from, to) with sizes from sizes.
func (c *child) load(name string, from, to int64, sizes workload.Sizes) Window {
	w := c.run(name, to-from, func(_ int, i int64, key, _ []byte) opResult {
		idx := uint64(from + i)
		return c.put(idx, sizes.Size(idx), key)
	})
	w.DatasetKeys = to
	return w
}

// mixed is seed 000's workload: preload, then 10% writes of new blobs, 45% Gets of present
// keys (read to the end), 45% Gets of absent keys, from every worker.
func (c *child) mixed() error {
	sizes := workload.Fixed(c.cfg.MixedValue)
	pre := int64(c.cfg.MixedPreload)
	if pre > 0 {
		w := c.load("preload", 0, pre, sizes)
		c.add(w)
		if err := c.eng.Flush(); err != nil {
			return err
		}
	}
	dropped := c.dropCaches()
	// Keys written in the window: worker w writes indexes pre + w + k*G for k = 0, 1, ...; a hit
	// picks among the preloaded keys and those written so far.
	g := int64(c.cfg.Goroutines)
	written := make([]atomic.Int64, g)
	var total atomic.Int64
	pickers := make([]*workload.Picker, g)
	for i := range pickers {
		pickers[i] = workload.NewPicker(workload.SeedMix, c.cfg.Seed*1000+uint64(i))
	}
	w := c.run("mixed", int64(c.cfg.MixedOps), func(wk int, _ int64, kb, buf []byte) opResult {
		p := pickers[wk]
		switch p.Op() {
		case workload.OpPut:
			k := written[wk].Load()
			idx := uint64(pre + int64(wk) + k*g)
			r := c.put(idx, c.cfg.MixedValue, kb)
			written[wk].Add(1)
			total.Add(1)
			return r
		case workload.OpGetHit:
			n := pre + total.Load()
			if n == 0 {
				return c.get(workload.Absent, p.Index(1<<40), 0, kb, buf)
			}
			r := p.Index(uint64(n))
			var idx uint64
			if int64(r) < pre {
				idx = r
			} else {
				o := int(p.Index(uint64(g)))
				cnt := written[o].Load()
				if cnt == 0 {
					idx = p.Index(uint64(max(pre, 1)))
				} else {
					idx = uint64(pre + int64(o) + int64(p.Index(uint64(cnt)))*g)
				}
			}
			return c.get(workload.Present, idx, c.cfg.MixedValue, kb, buf)
		default:
			return c.get(workload.Absent, p.Index(1<<40), 0, kb, buf)
		}
	})
	w.CacheDropped = dropped
	w.DatasetKeys = pre + total.Load()
	w.DatasetBytes = w.DatasetKeys * int64(c.cfg.MixedValue)
	c.add(w)
	return nil
}

// getWindow times n Gets of keys drawn uniformly from [0, keys) in space.
func (c *child) getWindow(name string, space byte, keys int64, n int, sizes workload.Sizes, seed uint64, dropped bool) Window {
	pickers := c.pickers(seed)
	w := c.run(name, int64(n), func(wk int, _ int64, kb, buf []byte) opResult {
		idx := pickers[wk].Index(uint64(keys))
		if space == workload.Absent {
			idx = pickers[wk].Index(1 << 40)
		}
		return c.get(space, idx, sizes.Size(idx), kb, buf)
	})
	w.DatasetKeys = keys
	w.CacheDropped = dropped
	return w
}

func (c *child) pickers(seed uint64) []*workload.Picker {
	p := make([]*workload.Picker, c.cfg.Goroutines)
	for i := range p {
		p[i] = workload.NewPicker(workload.SeedMix, seed*7919+uint64(i))
	}
	return p
}

// ioPerGet is seed 002's measurement: for each dataset size, load up to it, flush, drop the page
// cache, warm the engine's own caches with unmeasured Gets, then count device reads per Get of
// present keys and of absent keys.
func (c *child) ioPerGet() error {
	sizes := workload.Fixed(c.cfg.IOValue)
	var loaded int64
	for si, n := range c.cfg.IOKeys {
		w := c.load(fmt.Sprintf("load@%d", n), loaded, n, sizes)
		w.DatasetBytes = n * int64(c.cfg.IOValue)
		c.add(w)
		loaded = n
		if err := c.eng.Flush(); err != nil {
			return err
		}
		dropped := c.dropCaches()
		seed := c.cfg.Seed + uint64(si)*100
		if c.cfg.IOWarmup > 0 {
			w := c.getWindow(fmt.Sprintf("warmup@%d", n), workload.Present, n, c.cfg.IOWarmup, sizes, seed+1, dropped)
			c.add(w)
		}
		for _, g := range []struct {
			name  string
			space byte
		}{{"get-hit", workload.Present}, {"get-miss", workload.Absent}} {
			w := c.getWindow(fmt.Sprintf("%s@%d", g.name, n), g.space, n, c.cfg.IOGets, sizes, seed+2, dropped)
			w.DatasetBytes = n * int64(c.cfg.IOValue)
			c.add(w)
		}
	}
	return nil
}

// capacity is seed 001's test: load millions of small values, note the memory per key, then
// time random Gets cold (page cache dropped) and hot (a small set read again and again).
func (c *child) capacity() error {
	sizes := workload.Sizes{Min: c.cfg.CapMin, Max: c.cfg.CapMax, Seed: c.cfg.Seed}
	n := c.cfg.CapKeys
	w := c.load("load", 0, n, sizes)
	w.DatasetBytes = int64(float64(n) * sizes.Mean())
	c.add(w)
	if err := c.eng.Flush(); err != nil {
		return err
	}
	if m, err := procfs.ReadMemory(); err == nil {
		c.res.LoadedRSS = m.RSS
		c.res.BytesPerKey = float64(m.RSS-c.res.BaselineRSS) / float64(n)
	}
	dropped := c.dropCaches()
	c.add(c.getWindow("cold-get", workload.Present, n, c.cfg.CapGets, sizes, c.cfg.Seed+11, dropped))
	// The hot set: CapHot keys spread over the dataset, read once unmeasured, then again and again.
	hot := make([]uint64, c.cfg.CapHot)
	p := workload.NewPicker(workload.SeedMix, c.cfg.Seed+12)
	for i := range hot {
		hot[i] = p.Index(uint64(n))
	}
	hotRun := func(name string, count int) Window {
		pickers := c.pickers(c.cfg.Seed + 13)
		return c.run(name, int64(count), func(wk int, i int64, kb, buf []byte) opResult {
			idx := hot[i%int64(len(hot))]
			if name == "hot-get" {
				idx = hot[pickers[wk].Index(uint64(len(hot)))]
			}
			return c.get(workload.Present, idx, sizes.Size(idx), kb, buf)
		})
	}
	c.add(hotRun("hot-warmup", len(hot)))
	hw := hotRun("hot-get", c.cfg.CapGets)
	hw.DatasetKeys = n
	c.add(hw)
	return nil
}

// diskUsed is the allocated size of every file under dir.
func diskUsed(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}
