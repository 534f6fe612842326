package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server"
)

const serveUsage = `usage: blobcache serve [flags]

Serves the cache in --dir over HTTP (PUT/GET/HEAD/DELETE /v1/blobs/{key}, /healthz, /metrics)
and the memcached protocol, on loopback unless told otherwise. SIGTERM or SIGINT stops it
gracefully: requests in progress finish and the write buffer is drained to disk. Under systemd
(Type=notify) it reports READY=1 once it serves, STOPPING=1 when it stops, and pings the
watchdog when WatchdogSec= is set (deploy/systemd/blobcache.service).

Sizes take a K, M, G or T suffix (powers of 1024). An empty address disables that listener.

flags:
`

// serveCommand is "blobcache serve": it runs until SIGTERM or SIGINT.
func serveCommand(args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

// serve runs the server until ctx ends. It prints one line to stdout once the listeners are
// open: "serving http=ADDR memcache=ADDR dir=DIR".
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() { fmt.Fprint(stderr, serveUsage); fl.PrintDefaults() }
	var cfg server.Config
	var (
		tokenFile, tlsCert, tlsKey, logLevel string
		maxValue, maxInflight, maxHeader     = sizeFlag(0), sizeFlag(0), sizeFlag(64 << 10)
		maxLine                              = sizeFlag(16 << 10)
		maxSize                              = boundFlag(blobcache.MaxSizeAuto)
		segSize, wbufSize                    = sizeFlag(0), sizeFlag(0)
		expected                             int64
		noVerify                             bool
		policy, admission                    string
		ghostEntries                         int
		writeBudget                          = sizeFlag(0)
		memory                               = sizeFlag(0)
		memAdmission, compression            string
	)
	fl.StringVar(&cfg.Dir, "dir", defaultDir(), "cache directory (created if missing)")
	fl.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "HTTP listen address")
	fl.StringVar(&cfg.MemcacheAddr, "memcache", "127.0.0.1:11211", "memcached-protocol listen address")
	fl.StringVar(&cfg.Token, "token", os.Getenv("BLOBCACHE_TOKEN"), "bearer token (HTTP) and ASCII-auth password (memcached); default $BLOBCACHE_TOKEN")
	fl.StringVar(&tokenFile, "token-file", "", "read the token from this file (keeps it out of the process list)")
	fl.StringVar(&tlsCert, "tls-cert", "", "TLS certificate file (PEM); with --tls-key, both listeners use TLS")
	fl.StringVar(&tlsKey, "tls-key", "", "TLS private key file (PEM)")
	fl.BoolVar(&cfg.Pprof, "pprof", false, "serve /debug/pprof on the HTTP port")
	fl.IntVar(&cfg.MaxKeyLen, "max-key-size", blobcache.MaxKeyLen, "longest HTTP key in bytes (memcached keys: 250)")
	fl.Var(&maxValue, "max-value-size", "largest value (default: what one segment holds)")
	fl.Var(&maxInflight, "max-inflight-bytes", "memory for values between the network and the cache (default 256M); past it writes get 503")
	fl.DurationVar(&cfg.AdmitTimeout, "admit-timeout", time.Second, "how long a write waits for value memory before 503")
	fl.Var(&maxHeader, "max-header-size", "largest HTTP request header")
	fl.Var(&maxLine, "max-line-size", "longest memcached command line")
	fl.IntVar(&cfg.HTTPLoops, "http-loops", 0, "event loops serving HTTP GETs and HEADs (default one per CPU, GOMAXPROCS raised by as many; -1: a goroutine per connection)")
	fl.IntVar(&cfg.MemcacheLoops, "memcache-loops", 0, "event loops serving memcached connections (default one per CPU, GOMAXPROCS raised by as many; -1: a goroutine per connection)")
	fl.IntVar(&cfg.MaxConns, "max-conns", 4096, "open connections per listener")
	fl.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time to read an HTTP request header")
	fl.DurationVar(&cfg.ReadTimeout, "read-timeout", 60*time.Second, "time to read a request with its body or data block")
	fl.DurationVar(&cfg.WriteTimeout, "write-timeout", 60*time.Second, "time to write a response")
	fl.DurationVar(&cfg.IdleTimeout, "idle-timeout", 0, "close idle keep-alive connections after this long (default 2m HTTP, 5m memcached)")
	fl.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "time allowed to requests in progress at shutdown")
	fl.Var(&memory, "memory", "memory for hot values (the memory tier), like memcached's -m (default none)")
	fl.StringVar(&memAdmission, "memory-admission", "write", "which values enter the memory tier: write (as they are written, as memcached keeps what it is given) or second-hit (on their second hit from disk, the library's default)")
	fl.Var(&maxSize, "max-size", "disk space for segments; the oldest are evicted past it: a size, unlimited, or auto: 80% of the file system's size (at most what leaves 5% of it free), chosen when the cache is made and kept")
	fl.Var(&segSize, "segment-size", "segment file size (default 256M)")
	fl.Var(&wbufSize, "write-buffer-size", "write batch size (default 16M); larger values skip the batch")
	fl.BoolVar(&cfg.Cache.Fsync, "fsync", false, "sync every batch: a write is durable once the next flush returns")
	fl.BoolVar(&cfg.Cache.BufferedWrites, "buffered-writes", false, "write every batch through the page cache (default: through it while the data fits in RAM, else with O_DIRECT)")
	fl.BoolVar(&cfg.Cache.DirectWrites, "direct-writes", false, "write every batch with O_DIRECT (default: through the page cache while the data fits in RAM)")
	fl.BoolVar(&cfg.Cache.DirectIOReads, "direct-io-reads", false, "read every hit with O_DIRECT (default: each large hit picks the page cache or O_DIRECT)")
	fl.BoolVar(&cfg.Cache.BufferedReads, "buffered-reads", false, "read every hit through the page cache (default: each large hit picks the page cache or O_DIRECT)")
	fl.BoolVar(&noVerify, "no-verify", false, "do not check value checksums on reads (headers are always checked)")
	fl.Int64Var(&expected, "expected-blobs", 0, "size the index and bloom filter for this many blobs (default 1M)")
	fl.DurationVar(&cfg.Cache.FlushInterval, "flush-interval", 0, "longest wait of a partly filled write batch (default 100ms)")
	fl.StringVar(&policy, "policy", "", "what eviction keeps: probation (S3-FIFO: new blobs in a probation region, those hit there kept), reinsert (one region: blobs read since written are written again) or fifo (default probation)")
	fl.Float64Var(&cfg.Cache.ReinsertShare, "reinsert-share", 0, "most of the bytes written that reinsertion may take, in (0, 1) (default 0.8)")
	fl.StringVar(&admission, "admission", "all", "which writes go to disk: all, or second (a key's first write is declined, its second within --ghost-entries admitted)")
	fl.IntVar(&ghostEntries, "ghost-entries", 0, "keys --admission second remembers (default --expected-blobs, or 1M)")
	fl.Var(&writeBudget, "write-budget", "device write rate, bytes per second (e.g. 200M); over it writes are declined (default unlimited)")
	fl.StringVar(&compression, "compression", "none", "compress values on disk: zstd (zstd's fastest level; HTTP clients that accept zstd get the stored bytes), s2 (faster, less), or none; values that do not compress are stored as given")
	fl.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitError(2)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "blobcache serve: unexpected arguments %q\n", fl.Args())
		return exitError(2)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "blobcache serve: --log-level: %v\n", err)
		return exitError(2)
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.MaxValueSize, cfg.MaxInflightBytes = int64(maxValue), int64(maxInflight)
	cfg.MaxHeaderBytes, cfg.MaxLineBytes = int(maxHeader), int(maxLine)
	cfg.Cache.MaxSize, cfg.Cache.SegmentSize, cfg.Cache.WriteBufferSize = int64(maxSize), int64(segSize), int64(wbufSize)
	cfg.Cache.ExpectedBlobs = expected
	cfg.Cache.VerifyOnRead = !noVerify
	cfg.Cache.WriteBudget = int64(writeBudget)
	cfg.Cache.MemorySize = int64(memory)
	comp, err := blobcache.ParseCompression(compression)
	if err != nil {
		fmt.Fprintf(stderr, "blobcache serve: --compression: %v\n", err)
		return exitError(2)
	}
	cfg.Cache.Compression = comp
	cfg.Cache.MemoryAdmission, err = blobcache.ParseMemoryAdmission(memAdmission)
	if err != nil {
		fmt.Fprintf(stderr, "blobcache serve: --memory-admission: %v\n", err)
		return exitError(2)
	}
	switch policy {
	case "", "probation":
		cfg.Cache.Policy = blobcache.PolicyProbation
	case "reinsert":
		cfg.Cache.Policy = blobcache.PolicyReinsert
	case "fifo":
		cfg.Cache.Policy = blobcache.PolicyFIFO
	default:
		fmt.Fprintf(stderr, "blobcache serve: --policy %q: want probation, reinsert or fifo\n", policy)
		return exitError(2)
	}
	switch admission {
	case "all":
	case "second":
		if ghostEntries <= 0 {
			ghostEntries = int(cmp.Or(expected, blobcache.DefaultExpectedBlobs))
		}
		cfg.Cache.Admission = blobcache.AdmitOnSecondPut(ghostEntries)
	default:
		fmt.Fprintf(stderr, "blobcache serve: --admission %q: want all or second\n", admission)
		return exitError(2)
	}
	cfg.Version = "blobcache-" + version()

	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return err
		}
		cfg.Token = strings.TrimSpace(string(b))
		if cfg.Token == "" {
			return fmt.Errorf("serve: %s holds no token", tokenFile)
		}
	}
	if (tlsCert == "") != (tlsKey == "") {
		fmt.Fprintln(stderr, "blobcache serve: --tls-cert and --tls-key go together")
		return exitError(2)
	}
	if tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	for _, addr := range []string{cfg.HTTPAddr, cfg.MemcacheAddr} {
		if addr != "" && !isLoopback(addr) && (cfg.Token == "" || cfg.TLS == nil) {
			cfg.Log.Warn("listening beyond loopback without both a token and TLS: anyone who can reach it can read and write the cache", "addr", addr)
		}
	}

	if m, s := cfg.Cache.MaxSize, cfg.Cache.SegmentSize; m > 0 && s > m/16 {
		// Eviction frees a segment at a time: the cache holds about MaxSize less half a segment.
		cfg.Log.Warn("each segment is a large share of --max-size: eviction frees that much at once, and the cache holds less than it could (leave --segment-size unset to derive it)",
			"segment-share", fmt.Sprintf("%.1f%%", 100*float64(s)/float64(m)),
			"holds-on-average", fmt.Sprintf("about %.0f%%", 100*(1-float64(s)/float64(2*m))))
	}
	cfg.Notify, cfg.WatchdogInterval = systemdNotifier(cfg.Log)
	if cfg.Notify != nil {
		// Recovery after a crash can take a while: systemctl status says what it waits for.
		cfg.Notify("STATUS=opening the cache at " + cfg.Dir)
	}
	_, err = os.Stat(filepath.Join(cfg.Dir, "BLOBCACHE")) // the identity file (identity.go)
	created := errors.Is(err, os.ErrNotExist)
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(stderr, "blobcache: created a new cache at %s\n", cfg.Dir)
	}
	fmt.Fprintf(stderr, "blobcache: %s\n", describeBound(s.Cache().Stats().MaxSize, int64(maxSize), cfg.Dir))
	fmt.Fprintf(stdout, "serving http=%s memcache=%s dir=%s\n", s.HTTPAddr(), s.MemcacheAddr(), cfg.Dir)
	return s.Run(ctx)
}

// isLoopback reports whether a listen address binds only loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "devel"
}

// boundFlag is --max-size: a byte count as sizeFlag takes it, "unlimited" (0) or "auto"
// (blobcache.MaxSizeAuto).
type boundFlag int64

func (b *boundFlag) String() string {
	switch int64(*b) {
	case blobcache.MaxSizeAuto:
		return "auto"
	case 0:
		return "unlimited"
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *boundFlag) Set(v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "auto":
		*b = blobcache.MaxSizeAuto
		return nil
	case "unlimited":
		*b = 0
		return nil
	}
	n, err := parseSize(v)
	if err != nil {
		return fmt.Errorf("%w, auto or unlimited", err)
	}
	*b = boundFlag(n)
	return nil
}

// describeBound says what bounds the cache's disk space: bound (Stats.MaxSize) and where it came
// from, given the MaxSize asked for.
func describeBound(bound, asked int64, dir string) string {
	switch {
	case bound == 0:
		return "disk space unlimited (--max-size unlimited): the cache grows until the file system is full, then evicts"
	case asked == blobcache.MaxSizeAuto:
		return fmt.Sprintf("disk bound %s (%d bytes): chosen when the cache was made, %.0f%% of the file system's size at most, kept in %s; --max-size overrides it",
			human(bound), bound, 100*blobcache.AutoMaxSizeShare, filepath.Join(dir, "BOUND"))
	default:
		return fmt.Sprintf("disk bound %s (%d bytes), from --max-size", human(bound), bound)
	}
}

// sizeFlag is a byte count with an optional K, M, G or T suffix (powers of 1024, an optional
// trailing "B" or "iB").
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(v)), "B"), "I")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
	}
	if shift > 0 {
		t = t[:len(t)-1]
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("bad size %q: want a number of bytes with an optional K, M, G or T suffix", v)
	}
	return n << shift, nil
}
