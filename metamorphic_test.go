package blobcache

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	metamorphicSeed  = flag.Uint64("metamorphic.seed", 0, "seed of TestMetamorphic (0: time based)")
	metamorphicSteps = flag.Int("metamorphic.steps", 2500,
		"operations of TestMetamorphic, each applied to every variant (by default a fifth with -short, half with -race)")
)

// TestMetamorphic draws one seeded sequence of model ops (genModelOps: Put, UnsafePut, PutFrom,
// Delete, Get, ReadAt, Drain, Close and reopen, crash and reopen), ends it by reading every key,
// closing and reopening, and reading every key again, and applies it to every option variant of
// TestModel, each in its own directory and on its own goroutine. The variants store differently
// (index kind, DirectIO, checksums, one file per blob) but mean the same, so at every step those
// that do not evict must all see what the map model sees: a miss, the same bytes, the same error
// class. The first step where one does not is reported with every variant's outcome and the
// steps before it on its key. A variant that evicts may miss where the others hit, but a hit must
// be the bytes they read, and a key deleted (or never put) must miss.
//
// A crash drains first, as in TestModel. Without the Drain a crash loses the writes still
// buffered, and which ones depends on how the variant batches them (one file per blob, or
// segments), so that the outcomes after it could rightly differ; drained, a crash loses nothing
// and the variants must agree, while recovery still runs on an unsealed segment with no bloom
// filter saved.
//
// The one-file-per-blob variants get a 256 KiB write buffer: their largest value is one buffer,
// and with 64 KiB they would refuse the streamed values (up to 200 KiB) that the others take.
// Replay a failure with -metamorphic.seed and the -metamorphic.steps it prints.
func TestMetamorphic(t *testing.T) {
	seed := *metamorphicSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	steps := *metamorphicSteps
	if !metamorphicStepsSet() {
		if testing.Short() {
			steps /= 5
		}
		if raceEnabled {
			steps /= 2
		}
	}
	replay := fmt.Sprintf("go test -run '^TestMetamorphic$' -metamorphic.seed=%d -metamorphic.steps=%d .", seed, steps)
	t.Logf("seed %d, %d steps (replay with %s)", seed, steps, replay)

	variants := optionVariants()
	runs := make([]*modelRun, len(variants))
	for i, v := range variants {
		// PutFrom streams values past 4 KiB, through 4 KiB chunks, as in TestModel.
		opts := append(slices.Clip(v.opts), withPutChunk(4096))
		if optionsOf(opts).PerBlobFiles {
			opts = append(opts, WithWriteBufferSize(256<<10))
		}
		runs[i] = newModelRun(t, v.name, t.TempDir(), opts)
	}
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	limit := func(keyLen int) int64 {
		n := int64(math.MaxInt64)
		for _, r := range runs {
			n = min(n, r.c.MaxValueSize(keyLen))
		}
		return n
	}
	const keys = 200
	rng := rand.New(rand.NewPCG(seed, seed))
	ops := genModelOps(rng, steps, keys, runs[0].c.opts.WriteBufferSize, limit)
	// The end state: every key, then again after a Close and reopen.
	for i := range keys {
		ops = append(ops, modelOp{kind: modelGet, key: modelKey(i)})
	}
	ops = append(ops, modelOp{kind: modelReopen})
	for i := range keys {
		ops = append(ops, modelOp{kind: modelGet, key: modelKey(i)})
	}
	where := func(i int) string {
		switch {
		case i < steps:
			return fmt.Sprintf("step %d of %d", i, steps)
		case i < steps+keys:
			return fmt.Sprintf("step %d, in the end state", i)
		case i == steps+keys:
			return fmt.Sprintf("step %d, the last reopen", i)
		}
		return fmt.Sprintf("step %d, in the end state after the last reopen", i)
	}

	// Every variant runs the whole sequence on its own goroutine, so that one's Close waits for
	// the disk while the others work; the map model runs meanwhile.
	got := make([][]modelOutcome, len(runs)) // by variant, then step
	failed := make([]error, len(runs))
	spent := make([]time.Duration, len(runs))
	start := time.Now()
	var wg sync.WaitGroup
	for j, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wd := newWatchdog(t.Name()+": "+r.name, 0)
			defer wd.stop()
			got[j] = make([]modelOutcome, 0, len(ops))
			for i, op := range ops {
				wd.tick()
				o, err := r.do(op, op.value())
				if err != nil {
					failed[j] = fmt.Errorf("%s: %w", where(i), err)
					break
				}
				got[j] = append(got[j], o)
			}
			spent[j] = time.Since(start)
		}()
	}
	model := newModelState()
	want := make([]modelOutcome, len(ops))
	for i, op := range ops {
		want[i] = model.apply(op, op.value())
	}
	wg.Wait()
	var done []string
	for j, v := range variants {
		done = append(done, fmt.Sprintf("%s %v", v.name, spent[j].Round(time.Millisecond)))
	}
	t.Logf("%d steps on %d variants, done after %s", len(ops), len(runs), strings.Join(done, ", "))
	for _, err := range failed {
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", seed, err, replay)
		}
	}

	table := func(i int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "  %-27s %s\n", "map model", model.describe(ops[i], want[i]))
		for j, v := range variants {
			name, mark := v.name, ""
			if v.evicts {
				name += " (evicts)"
			}
			if !modelAllows(want[i], got[j][i], v.evicts) {
				mark = "   <- wrong"
			}
			fmt.Fprintf(&b, "  %-27s %s%s\n", name, model.describe(ops[i], got[j][i]), mark)
		}
		return b.String()
	}
	history := func(i int) string {
		return fmt.Sprintf("the steps before on %s, back to its last put or delete, with the Drains, Closes and crashes among them:\n%s",
			ops[i].key, metamorphicHistory(ops, i, ops[i].key))
	}

	// The variants that do not evict: the same outcome as each other and as the map, at every step.
	first, more := -1, 0
	for i := range ops {
		for j, v := range variants {
			if !v.evicts && !got[j][i].same(want[i]) {
				if first < 0 {
					first = i
				} else if i != first {
					more++
				}
				break
			}
		}
	}
	if i := first; i >= 0 {
		a, b := -1, -1 // two variants that do not evict and see different outcomes
		for j, v := range variants {
			if v.evicts {
				continue
			}
			if a < 0 {
				a = j
			} else if b < 0 && !got[j][i].same(got[a][i]) {
				b = j
			}
		}
		var head string
		if b >= 0 {
			head = fmt.Sprintf("the variants diverge at %s: %v\n  %s: %s\n  %s: %s",
				where(i), ops[i], variants[a].name, model.describe(ops[i], got[a][i]),
				variants[b].name, model.describe(ops[i], got[b][i]))
		} else {
			head = fmt.Sprintf("every variant differs from the map model at %s: %v", where(i), ops[i])
		}
		t.Errorf("seed %d: %s\nevery outcome of the step:\n%s%s%d later steps differ too\nreplay: %s",
			seed, head, table(i), history(i), more, replay)
	}

	// The variants that evict: a hit is what the map holds, a key the map does not hold misses.
	for j, v := range variants {
		if !v.evicts {
			continue
		}
		hits, misses, wrong := 0, 0, 0 // reads of keys the map holds; wrong outcomes
		for i := range ops {
			if !modelAllows(want[i], got[j][i], true) {
				if wrong == 0 {
					t.Errorf("seed %d: variant %s (evicts) is wrong at %s: %v\nevery outcome of the step:\n%s%sreplay: %s",
						seed, v.name, where(i), ops[i], table(i), history(i), replay)
				}
				wrong++
			}
			if want[i].hit {
				if got[j][i].hit {
					hits++
				} else {
					misses++
				}
			}
		}
		t.Logf("%s: %d reads of held keys hit, %d missed; %d evictions; %d steps wrong", v.name, hits, misses, runs[j].evictions(), wrong)
		// Fewer steps (-short, -race) may write less than an evicting variant's MaxSize: 1,250
		// steps left three of them without an eviction for seed 1795747614683412754.
		if steps >= 2000 && !v.declines && runs[j].evictions() == 0 {
			t.Errorf("variant %s evicted nothing", v.name)
		}
	}
}

// metamorphicHistory lists the steps before step i on key, back to its last put or delete, and
// the Drains, Closes and crashes among them: at most 40 lines.
func metamorphicHistory(ops []modelOp, i int, key string) string {
	var lines []string
	for j := i - 1; j >= 0 && len(lines) < 40; j-- {
		op := ops[j]
		if op.key != key && op.key != "" {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %d: %v", j, op))
		if op.key == key && op.kind <= modelDelete {
			break
		}
	}
	if len(lines) == 0 {
		return "  (none)\n"
	}
	slices.Reverse(lines)
	return strings.Join(lines, "\n") + "\n"
}

// metamorphicStepsSet reports whether -metamorphic.steps was given: only its default is scaled
// down for -short and -race, so that a replay runs the steps it is given.
func metamorphicStepsSet() (set bool) {
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "metamorphic.steps" })
	return set
}

// optionsOf returns the options that opts set, with their defaults.
func optionsOf(opts []Option) Options {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	return o.withDefaults()
}
