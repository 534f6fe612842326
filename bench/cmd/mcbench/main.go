// Command mcbench compares memcached-protocol servers on one machine: `blobcache serve` and
// memcached 1.6 with extstore, the closest server to BlobCache.
//
//	mcbench compare [flags]    run every workload against both servers, print a Markdown report
//	mcbench load [flags]       run one workload against -addr, print the result as JSON
//	mcbench serve [flags]      run the BlobCache server (memcached port only) until SIGTERM
//	mcbench null [flags]       run a server that stores nothing (every get answers one fixed
//	                           value): the ceiling of a load generator on the machine
//	mcbench httpnull [flags]   the same over HTTP: a net/http server that answers every GET
//	                           with one fixed body
//
// compare starts each server as a child process, preloads it, and runs each workload from a
// load process of its own (mcbench load), sampling the server's CPU time and RSS from /proc
// meanwhile. The load generator lives in package memcached; the /proc readers in package procfs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache/bench/memcached"
	"github.com/seed57392e9e/blobcache/bench/procfs"
	"github.com/seed57392e9e/blobcache/server"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mcbench compare|load|serve|null|httpnull|httploop [flags]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "mcbench:", err)
		os.Exit(1)
	}
}

// run runs one subcommand; the tests call it in the child processes they start.
func run(cmd string, args []string) error {
	switch cmd {
	case "compare":
		return compare(args)
	case "load":
		return load(args)
	case "serve":
		return serve(args)
	case "null":
		return null(args)
	case "httpnull":
		return httpNull(args)
	case "httploop":
		return httpLoop(args)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func workloadFlags(fl *flag.FlagSet) *memcached.Workload {
	w := &memcached.Workload{}
	fl.StringVar(&w.Addr, "addr", "127.0.0.1:11211", "server address")
	fl.IntVar(&w.Keys, "keys", 100_000, "keys in the data set")
	fl.IntVar(&w.ValueSize, "value-size", 4096, "value size in bytes")
	fl.Float64Var(&w.GetRatio, "get-ratio", 0.9, "fraction of operations that are gets")
	fl.Float64Var(&w.MissRatio, "miss-ratio", 0, "fraction of gets for absent keys")
	fl.IntVar(&w.Conns, "conns", 32, "connections (one worker each)")
	fl.DurationVar(&w.Duration, "duration", 15*time.Second, "measured run length")
	fl.Uint64Var(&w.Seed, "seed", 1, "random seed")
	return w
}

// load runs one workload and prints its result as JSON.
func load(args []string) error {
	fl := flag.NewFlagSet("load", flag.ExitOnError)
	w := workloadFlags(fl)
	preloadOnly := fl.Bool("preload-only", false, "store the data set and exit")
	fl.Parse(args)
	ctx := context.Background()
	if *preloadOnly {
		d, err := memcached.Preload(ctx, *w)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"preload": d.String()})
	}
	r, err := memcached.Run(ctx, *w)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// serve runs the BlobCache server with `blobcache serve`'s defaults, memcached port only.
func serve(args []string) error {
	fl := flag.NewFlagSet("serve", flag.ExitOnError)
	var cfg server.Config
	fl.StringVar(&cfg.Dir, "dir", "", "cache directory")
	fl.StringVar(&cfg.MemcacheAddr, "addr", "127.0.0.1:11211", "memcached-protocol address")
	cpuProfile := fl.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	fl.Parse(args)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cfg.Cache.VerifyOnRead = true // as blobcache serve does by default
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return s.Run(ctx)
}

type serverKind struct {
	name  string
	start func(dir, addr string) (*exec.Cmd, error)
}

type mix struct {
	name      string
	missRatio float64
}

type size struct {
	name        string
	bytes, keys int
	conns       int
}

type row struct {
	size, mix, server string
	res               *memcached.Result
	cpu, loadCPU      float64 // cores
	rssMax, rssEnd    int64
	preload           string
}

func compare(args []string) error {
	fl := flag.NewFlagSet("compare", flag.ExitOnError)
	workdir := fl.String("workdir", "/var/tmp/mcbench", "where the servers keep their data (emptied first)")
	duration := fl.Duration("duration", 15*time.Second, "measured length of each run")
	smallKeys := fl.Int("small-keys", 250_000, "keys of 4 KiB")
	largeKeys := fl.Int("large-keys", 1000, "keys of 1 MiB")
	memcachedBin := fl.String("memcached", "memcached", "memcached binary")
	memcachedMem := fl.String("memcached-mem", "256,4096", "memcached -m values (MiB) to run, comma-separated")
	blobcacheCmd := fl.String("blobcache-cmd", "", "command line of the BlobCache server, with {dir} and {addr} (default: mcbench serve)")
	fl.Parse(args)

	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(*workdir); err != nil {
		return err
	}
	if err := os.MkdirAll(*workdir, 0o755); err != nil {
		return err
	}
	servers := []serverKind{
		{"blobcache serve", func(dir, addr string) (*exec.Cmd, error) {
			if *blobcacheCmd != "" {
				cl := strings.ReplaceAll(strings.ReplaceAll(*blobcacheCmd, "{dir}", dir), "{addr}", addr)
				f := strings.Fields(cl)
				return exec.Command(f[0], f[1:]...), nil
			}
			return exec.Command(self, "serve", "-dir", dir, "-addr", addr), nil
		}},
	}
	for _, mem := range strings.Split(*memcachedMem, ",") {
		servers = append(servers, serverKind{"memcached -m " + mem + " + extstore", func(dir, addr string) (*exec.Cmd, error) {
			host, port, _ := net.SplitHostPort(addr)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			a := []string{"-l", host, "-p", port, "-U", "0", "-m", mem, "-I", "2m", "-t", "2", "-c", "4096",
				"-o", "ext_path=" + filepath.Join(dir, "extstore") + ":16G,ext_threads=2"}
			if os.Geteuid() == 0 {
				a = append(a, "-u", "root")
			}
			return exec.Command(*memcachedBin, a...), nil
		}})
	}
	sizes := []size{{"4 KiB", 4 << 10, *smallKeys, 32}, {"1 MiB", 1 << 20, *largeKeys, 8}}
	mixes := []mix{{"hit-heavy", 0}, {"miss-heavy", 0.9}}

	loadBefore := readTrim("/proc/loadavg")
	var rows []row
	for _, sz := range sizes {
		for si, sk := range servers {
			dir := filepath.Join(*workdir, fmt.Sprintf("%d-%d", sz.bytes, si))
			addr, err := freeAddr()
			if err != nil {
				return err
			}
			cmd, err := sk.start(dir, addr)
			if err != nil {
				return err
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("%s: %w", sk.name, err)
			}
			if err := waitListening(addr, 30*time.Second); err != nil {
				cmd.Process.Kill()
				return fmt.Errorf("%s: %w", sk.name, err)
			}
			base := []string{"-addr", addr, "-keys", fmt.Sprint(sz.keys), "-value-size", fmt.Sprint(sz.bytes), "-conns", fmt.Sprint(sz.conns)}
			var pre map[string]string
			if _, err := runLoad(self, append(base, "-preload-only"), &pre); err != nil {
				cmd.Process.Kill()
				return fmt.Errorf("%s: preload: %w", sk.name, err)
			}
			fmt.Fprintf(os.Stderr, "%s, %s: preloaded %d keys in %s\n", sk.name, sz.name, sz.keys, pre["preload"])
			for _, mx := range mixes {
				r := row{size: sz.name, mix: mx.name, server: sk.name, preload: pre["preload"]}
				before, err := procfs.ReadCPUOf(cmd.Process.Pid)
				if err != nil {
					return err
				}
				stopSampling := sampleRSS(cmd.Process.Pid, &r.rssMax)
				t0 := time.Now()
				var res memcached.Result
				loadCPU, err := runLoad(self, append(base, "-duration", duration.String(), "-miss-ratio", fmt.Sprint(mx.missRatio)), &res)
				wall := time.Since(t0)
				stopSampling()
				if err != nil {
					cmd.Process.Kill()
					return fmt.Errorf("%s %s %s: %w", sk.name, sz.name, mx.name, err)
				}
				after, err := procfs.ReadCPUOf(cmd.Process.Pid)
				if err != nil {
					return err
				}
				mem, err := procfs.ReadMemoryOf(cmd.Process.Pid)
				if err != nil {
					return err
				}
				r.res = &res
				r.cpu = after.Sub(before).Seconds() / wall.Seconds()
				r.loadCPU = loadCPU.Seconds() / wall.Seconds()
				r.rssEnd = mem.RSS
				rows = append(rows, r)
				fmt.Fprintf(os.Stderr, "%s %s %s: %.0f ops/s, %d errors, %d wrong\n", sk.name, sz.name, mx.name, res.OpsPerSec(), res.Errors, res.WrongBytes)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
	}
	report(os.Stdout, rows, *duration, *workdir)
	fmt.Fprintf(os.Stdout, "\nLoad average (/proc/loadavg) before the runs: %s; after: %s.\n", loadBefore, readTrim("/proc/loadavg"))
	return nil
}

// runLoad runs `mcbench load` in a process of its own, decodes its JSON into out, and returns
// the CPU time it used.
func runLoad(self string, args []string, out any) (time.Duration, error) {
	cmd := exec.Command(self, append([]string{"load"}, args...)...)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return 0, fmt.Errorf("load output %q: %w", b, err)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// sampleRSS records the peak RSS of pid every 100ms until the returned stop is called.
func sampleRSS(pid int, peak *int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := procfs.ReadMemoryOf(pid); err == nil {
				*peak = max(*peak, m.RSS)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitListening(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("server never listened on " + addr)
}

func report(w io.Writer, rows []row, d time.Duration, workdir string) {
	fmt.Fprintf(w, "Machine: %s; %d cores; %s RAM; Linux %s; data on %s; %s; %s.\n\n",
		cpuModel(), runtime.NumCPU(), memTotal(), readTrim("/proc/sys/kernel/osrelease"), mountOf(workdir), runtime.Version(), memcachedVersion())
	fmt.Fprintf(w, "Each run: %s measured after a preload of the data set; 90%% gets and 10%% sets (overwrites); "+
		"hit-heavy gets only stored keys, miss-heavy asks for absent keys 90%% of the time. "+
		"CPU is in cores (CPU seconds per wall second); the load generator ran in its own process on the same two cores.\n\n", d)
	fmt.Fprintln(w, "| value | mix | server | ops/s | get p50 | get p99 | get p99.9 | set p50 | set p99 | hits | server CPU | load CPU | server RSS peak | errors |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		res := r.res
		hit := 0.0
		if res.Gets > 0 {
			hit = float64(res.Hits) / float64(res.Gets)
		}
		errs := fmt.Sprint(res.Errors + res.WrongBytes)
		if res.WrongBytes > 0 {
			errs += fmt.Sprintf(" (%d wrong values)", res.WrongBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %.1f%% | %.2f | %.2f | %s | %s |\n",
			r.size, r.mix, r.server, res.OpsPerSec(),
			us(res.GetLatency.P50Us), us(res.GetLatency.P99Us), us(res.GetLatency.P999Us),
			us(res.SetLatency.P50Us), us(res.SetLatency.P99Us),
			100*hit, r.cpu, r.loadCPU, mib(r.rssMax), errs)
	}
}

// us formats a latency given in microseconds (as hist.Summary holds them).
func us(v float64) string {
	if v >= 10e3 {
		return fmt.Sprintf("%.1f ms", v/1e3)
	}
	return fmt.Sprintf("%.0f µs", v)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	for line := range strings.SplitSeq(readTrim("/proc/cpuinfo"), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	for line := range strings.SplitSeq(readTrim("/proc/meminfo"), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(v), &kb)
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

// mountOf names the device and file system holding path.
func mountOf(path string) string {
	best, desc := "", "unknown file system"
	for line := range strings.SplitSeq(readTrim("/proc/mounts"), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(path, f[1]) && len(f[1]) > len(best) {
			best, desc = f[1], f[0]+" ("+f[2]+")"
		}
	}
	return desc
}

func memcachedVersion() string {
	out, err := exec.Command("memcached", "-V").Output()
	if err != nil {
		return "memcached ?"
	}
	return strings.TrimSpace(string(out))
}
