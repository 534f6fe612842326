package memcached

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed57392e9e/blobcache/bench/hist"
)

// Workload describes one load run.
type Workload struct {
	Addr      string        // server address
	Keys      int           // keys in the data set: key-00000000 ... (preloaded)
	ValueSize int           // bytes per value
	GetRatio  float64       // fraction of operations that are gets; the rest are sets of data-set keys
	MissRatio float64       // fraction of gets for keys that were never stored
	Conns     int           // concurrent connections, one worker each
	Duration  time.Duration // length of the measured run
	Seed      uint64
}

// Result is what a run measured; mcbench load prints it as JSON.
type Result struct {
	Elapsed            time.Duration
	Ops, Gets, Sets    uint64
	Hits, Misses       uint64
	Errors, WrongBytes uint64
	FirstError         string `json:",omitempty"`
	// Latencies are client-side, from the request's first byte sent to the reply's last read.
	GetLatency hist.Summary
	SetLatency hist.Summary
}

// OpsPerSec is the throughput of the run.
func (r *Result) OpsPerSec() float64 { return float64(r.Ops) / r.Elapsed.Seconds() }

func key(i int) string { return fmt.Sprintf("key-%08d", i) }

func missKey(i int) string { return fmt.Sprintf("absent-%08d", i) }

// fillValue writes a value for key index i into b: the index and a version up front, so that a
// hit can be checked against the key it was read under.
func fillValue(b []byte, i int, version uint64) {
	for j := range b {
		b[j] = byte(j*7 + i)
	}
	if len(b) >= 16 {
		binary.LittleEndian.PutUint64(b, uint64(i))
		binary.LittleEndian.PutUint64(b[8:], version)
	}
}

func checkValue(b []byte, i, size int) bool {
	if len(b) != size {
		return false
	}
	if len(b) >= 16 {
		return binary.LittleEndian.Uint64(b) == uint64(i)
	}
	return true
}

// Preload stores every key of the data set once, with w.Conns workers.
func Preload(ctx context.Context, w Workload) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, w.Conns)
	for g := range w.Conns {
		wg.Go(func() {
			c, err := Dial(w.Addr, 30*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			v := make([]byte, w.ValueSize)
			for i := g; i < w.Keys && ctx.Err() == nil; i += w.Conns {
				fillValue(v, i, 0)
				if err := c.Set(key(i), v); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// Run runs the workload for w.Duration.
func Run(ctx context.Context, w Workload) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, w.Duration)
	defer cancel()
	results := make([]Result, w.Conns)
	getLat, setLat := make([]*hist.Histogram, w.Conns), make([]*hist.Histogram, w.Conns)
	conns := make([]*Conn, w.Conns)
	for g := range conns {
		c, err := Dial(w.Addr, 30*time.Second)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[g] = c
		getLat[g], setLat[g] = hist.New(), hist.New()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := range w.Conns {
		wg.Go(func() { worker(ctx, w, conns[g], uint64(g), &results[g], getLat[g], setLat[g]) })
	}
	wg.Wait()
	total := &Result{Elapsed: time.Since(start)}
	get, set := hist.New(), hist.New()
	for i := range results {
		r := &results[i]
		total.Ops += r.Ops
		total.Gets += r.Gets
		total.Sets += r.Sets
		total.Hits += r.Hits
		total.Misses += r.Misses
		total.Errors += r.Errors
		total.WrongBytes += r.WrongBytes
		if total.FirstError == "" {
			total.FirstError = r.FirstError
		}
		get.Merge(getLat[i])
		set.Merge(setLat[i])
	}
	total.GetLatency, total.SetLatency = get.Summarize(), set.Summarize()
	return total, nil
}

// worker runs operations on c until ctx ends, counting them in res and timing them into get
// and set, all three its own.
func worker(ctx context.Context, w Workload, c *Conn, id uint64, res *Result, get, set *hist.Histogram) {
	rng := rand.New(rand.NewPCG(w.Seed, id))
	val := make([]byte, w.ValueSize)
	buf := make([]byte, w.ValueSize+2)
	fail := func(err error) {
		res.Errors++
		if res.FirstError == "" {
			res.FirstError = err.Error()
		}
	}
	for ctx.Err() == nil {
		i := rng.IntN(w.Keys)
		if rng.Float64() < w.GetRatio {
			k, miss := key(i), rng.Float64() < w.MissRatio
			if miss {
				k = missKey(i)
			}
			t := time.Now()
			v, hit, err := c.Get(k, buf)
			get.Record(time.Since(t))
			res.Gets++
			switch {
			case err != nil:
				fail(err)
			case hit:
				res.Hits++
				if miss || !checkValue(v, i, w.ValueSize) {
					res.WrongBytes++
				}
				buf = v[:cap(v)]
			default:
				res.Misses++
			}
		} else {
			fillValue(val, i, rng.Uint64())
			t := time.Now()
			err := c.Set(key(i), val)
			set.Record(time.Since(t))
			res.Sets++
			if err != nil {
				fail(err)
			}
		}
		res.Ops++
	}
}
