package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/bench/procfs"
)

// Report is everything a run measured; it is the JSON file.
type Report struct {
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Command  string        `json:"command"`
	Machine  Machine       `json:"machine"`
	Config   Config        `json:"config"`
	Engines  []string      `json:"engines"`
	Phases   []string      `json:"phases"`
	Reps     int           `json:"reps"`
	Results  []PhaseResult `json:"results"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	MemTotal   int64  `json:"mem_total"`
	Kernel     string `json:"kernel"`
	GoVersion  string `json:"go_version"`
	Device     string `json:"device"`
	FileSystem string `json:"file_system"`
	DropCaches string `json:"drop_caches"` // "yes", or why the page cache could not be dropped
}

// Driver runs children.
type Driver struct {
	Exe string // the binary to re-execute (os.Executable)
	// EngineExe names, per engine, another binary to run its children from (a key ending in
	// "*" matches engine names by prefix): one built with only that engine linked in, so that
	// a child's memory is its engine's and not the other engines' code and initializers.
	EngineExe map[string]string
	Cfg       Config
	Engines   []string
	Phases    []string
	Reps      int
	// ChildArgs are flags placed before the child flags (tests pass -test.run=...).
	ChildArgs []string
	// ChildEnv is added to the children's environment.
	ChildEnv []string
	// Log receives one line per finished child.
	Log func(format string, args ...any)
}

// Run executes every (rep, phase, engine) in that order, so the engines of one phase run back to
// back under similar machine conditions, and each child starts with an empty data directory
// that is removed after it.
func (d *Driver) Run(ctx context.Context) (*Report, error) {
	if err := d.Cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.Cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Command: strings.Join(os.Args, " "), Machine: DescribeMachine(d.Cfg.Dir, d.Cfg.DropCaches),
		Config: d.Cfg, Engines: d.Engines, Phases: d.Phases, Reps: max(d.Reps, 1)}
	for r := 1; r <= rep.Reps; r++ {
		for _, ph := range d.Phases {
			for _, e := range d.Engines {
				res := d.runChild(ctx, e, ph, r)
				rep.Results = append(rep.Results, *res)
				if d.Log != nil {
					status := "ok"
					if res.Error != "" {
						status = "error: " + res.Error
					}
					d.Log("%s %s rep %d: %.1fs wall, %.1f CPU s, peak RSS %d MiB: %s", e, ph, r, res.WallSeconds, res.CPUSeconds(), res.PeakRSS>>20, status)
				}
				if ctx.Err() != nil {
					rep.Finished = time.Now()
					return rep, ctx.Err()
				}
			}
		}
	}
	rep.Finished = time.Now()
	return rep, nil
}

// exeFor returns the binary to run engine eng's children from: EngineExe's entry for it (an
// exact name first, then the longest matching prefix), or Exe.
func (d *Driver) exeFor(eng string) string {
	if exe, ok := d.EngineExe[eng]; ok {
		return exe
	}
	best, exe := -1, d.Exe
	for k, v := range d.EngineExe {
		if p, ok := strings.CutSuffix(k, "*"); ok && strings.HasPrefix(eng, p) && len(p) > best {
			best, exe = len(p), v
		}
	}
	return exe
}

func (d *Driver) runChild(ctx context.Context, eng, phase string, rep int) *PhaseResult {
	fail := func(err error) *PhaseResult {
		return &PhaseResult{Engine: eng, Phase: phase, Rep: rep, Error: err.Error()}
	}
	data := filepath.Join(d.Cfg.Dir, fmt.Sprintf("%s-%s-%d", eng, phase, rep))
	if err := os.RemoveAll(data); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(data)
	out, err := os.CreateTemp(d.Cfg.Dir, "result-*.json")
	if err != nil {
		return fail(err)
	}
	out.Close()
	defer os.Remove(out.Name())
	cfgJSON, err := json.Marshal(d.Cfg)
	if err != nil {
		return fail(err)
	}
	if d.Cfg.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(d.Cfg.Deadline)*time.Second)
		defer cancel()
	}
	args := append(append([]string{}, d.ChildArgs...), "-child", "-engine", eng, "-phase", phase,
		"-data", data, "-result", out.Name(), "-config", string(cfgJSON))
	exe := d.exeFor(eng)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), d.ChildEnv...)
	cmd.Stdout = os.Stderr // a child's stdout is not the report
	cmd.Stderr = os.Stderr
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start).Seconds()
	res := &PhaseResult{Engine: eng, Phase: phase}
	if b, err := os.ReadFile(out.Name()); err == nil && len(b) > 0 {
		if err := json.Unmarshal(b, res); err != nil {
			res.Error = fmt.Sprintf("result file: %v", err)
		}
	} else if runErr == nil {
		res.Error = "child wrote no result"
	}
	if runErr != nil && res.Error == "" {
		res.Error = fmt.Sprintf("child: %v", runErr)
	}
	res.Rep = rep
	res.WallSeconds = wall
	res.Binary = filepath.Base(exe)
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.ChildUserSec = time.Duration(ru.Utime.Nano()).Seconds()
			res.ChildSysSec = time.Duration(ru.Stime.Nano()).Seconds()
			res.ChildMaxRSS = ru.Maxrss << 10
		}
	}
	return res
}

// ChildMain is the child's side: run the phase and write the result to resultPath.
func ChildMain(cfgJSON, eng, phase, data, resultPath string) error {
	var cfg Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		return fmt.Errorf("harness: child config: %w", err)
	}
	res := RunChild(cfg, eng, phase, data)
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(resultPath, b, 0o644)
}

// DescribeMachine gathers the machine facts the report prints.
func DescribeMachine(dir string, drop bool) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		m.MemTotal = kb << 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.Device, _ = procfs.DeviceOf(dir)
	if b, err := os.ReadFile("/proc/mounts"); err == nil {
		best := ""
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && strings.HasPrefix(dir, f[1]) && len(f[1]) >= len(best) {
				best, m.FileSystem = f[1], f[2]
			}
		}
	}
	switch {
	case !drop:
		m.DropCaches = "no: not asked"
	default:
		if f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0); err != nil {
			m.DropCaches = "no: " + err.Error()
		} else {
			f.Close()
			m.DropCaches = "yes"
		}
	}
	return m
}
