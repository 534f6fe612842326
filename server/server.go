package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/httpapi"
	"github.com/seed57392e9e/blobcache/server/memcache"
	"github.com/seed57392e9e/blobcache/server/metrics"
	"github.com/seed57392e9e/blobcache/server/netlimit"
	"github.com/seed57392e9e/blobcache/server/netloop"
	"github.com/seed57392e9e/blobcache/server/store"
)

// Config configures a Server. Zero fields take the defaults stated.
type Config struct {
	// Dir is the cache directory.
	Dir string
	// Cache are the cache's options. The server always turns Checksum on: the blob checksum
	// is the HTTP ETag and the memcached cas value.
	Cache blobcache.Options

	// HTTPAddr and MemcacheAddr are the listen addresses ("127.0.0.1:8080",
	// "127.0.0.1:11211"); an empty address disables that front end. At least one is needed.
	HTTPAddr, MemcacheAddr string
	// Token, if set, is the HTTP bearer token and the memcached ASCII-auth password.
	Token string
	// TLS, if set, serves both front ends over TLS.
	TLS *tls.Config
	// Pprof serves /debug/pprof on the HTTP port (behind the token).
	Pprof bool

	// HTTPLoops is the number of event loops that serve HTTP connections while their requests
	// are GETs and HEADs of blobs (httpapi.FastConfig.Loops): 0 (the default) is one per P of
	// the process's GOMAXPROCS as it was when the first server was made; negative serves each
	// connection on a goroutine of its own. A request whose blob is not in memory runs on a
	// goroutine while its connection waits (netloop.Conn.Park), so that a read from the device
	// holds no loop. A loop holds its P while it waits for its sockets, so New raises GOMAXPROCS
	// to that first value plus every loop: the rest of the server keeps as many Ps as it had.
	// Linux only (elsewhere goroutines), and not with TLS, nor with values unchecked on read
	// (Cache.VerifyOnRead off), which go to the socket from their file on a goroutine.
	HTTPLoops int
	// MemcacheLoops is the number of event loops that serve memcached connections
	// (memcache.Config.Loops), as HTTPLoops: 0 (the default) is one per P the process had,
	// negative a goroutine per connection; their Ps are added to GOMAXPROCS as HTTP's are.
	MemcacheLoops int

	// MaxKeyLen bounds HTTP keys (default and maximum blobcache.MaxKeyLen); memcached keys
	// are bounded by the protocol's 250 bytes.
	MaxKeyLen int
	// MaxValueSize bounds values (default: the most the cache accepts, about WriteBufferSize).
	MaxValueSize int64
	// MaxInflightBytes bounds the memory of values between the network and the cache (default
	// 256 MiB, at least one value); past it writes wait AdmitTimeout (default 1s) and then get
	// 503 or SERVER_ERROR busy.
	MaxInflightBytes int64
	AdmitTimeout     time.Duration
	// MaxHeaderBytes bounds an HTTP request's header (default 64 KiB; past it, 431).
	MaxHeaderBytes int
	// MaxLineBytes bounds a memcached command line (default 16 KiB).
	MaxLineBytes int
	// MaxConns bounds the open connections of each listener (default 4096); past it a new
	// connection gets a 503 or SERVER_ERROR and is closed.
	MaxConns int

	// ReadHeaderTimeout bounds reading an HTTP request's header (default 10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request: an HTTP request with its body, a memcached
	// command with its data (default 60s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (default 60s).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this long (default
	// 2 min for HTTP, 5 min for memcached clients, which keep pools of idle connections).
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the wait for requests in progress at shutdown (default 30s).
	ShutdownTimeout time.Duration

	// Notify, if set, is told of the server's lifecycle in the words of sd_notify(3), so that a
	// service manager can follow it: "READY=1" with a STATUS= line naming the listeners once the
	// cache is open and both listeners accept connections, "WATCHDOG=1" every WatchdogInterval
	// while Run serves, "STOPPING=1" when the shutdown begins. Run calls it from its own
	// goroutine; it should return quickly. blobcache serve sends these to systemd.
	Notify func(state string)
	// WatchdogInterval is how often Run tells Notify "WATCHDOG=1" (0: never; half the service
	// manager's watchdog timeout is the usual choice).
	WatchdogInterval time.Duration

	// Version is reported by the memcached version command.
	Version string
	// Log receives the server's messages (default: discarded).
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ReadHeaderTimeout, 10*time.Second)
	def(&c.ReadTimeout, 60*time.Second)
	def(&c.WriteTimeout, 60*time.Second)
	def(&c.ShutdownTimeout, 30*time.Second)
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.MaxConns == 0 {
		c.MaxConns = 4096
	}
	if c.Version == "" {
		c.Version = "blobcache"
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate reports what makes the configuration unusable (the cache's options are checked by
// blobcache.Options.Validate).
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("server: invalid config: "+format, args...)
	}
	switch {
	case c.Dir == "":
		return bad("no cache directory")
	case c.HTTPAddr == "" && c.MemcacheAddr == "":
		return bad("no HTTP or memcached address: nothing to serve")
	case c.MaxKeyLen < 0 || c.MaxKeyLen > blobcache.MaxKeyLen:
		return bad("MaxKeyLen %d is outside [0, %d]", c.MaxKeyLen, blobcache.MaxKeyLen)
	case c.MaxValueSize < 0 || c.MaxInflightBytes < 0 || c.MaxHeaderBytes < 0 || c.MaxLineBytes < 0 || c.MaxConns < 0:
		return bad("negative limit")
	case c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.ShutdownTimeout < 0:
		return bad("negative timeout")
	case c.WatchdogInterval < 0:
		return bad("negative WatchdogInterval")
	}
	return c.Cache.Validate()
}

// Server is a running BlobCache server.
type Server struct {
	cfg        Config
	cache      *blobcache.Cache
	closeCache func() error
	store      *store.Store
	metrics    *metrics.Metrics

	httpSrv  *http.Server
	httpH    *httpapi.Handler
	httpFast *httpapi.FastPath // nil with TLS
	httpLn   net.Listener
	mc       *memcache.Server
	mcLn     net.Listener
	loopPs   int // GOMAXPROCS given to event loops (loopProcs)

	runOnce sync.Once
}

// New opens the cache, starts its background work and opens the listeners. The caller must
// call Run (which closes everything when it returns).
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := cfg.Cache
	opts.Checksum = true
	c, err := blobcache.New(cfg.Dir, blobcache.WithOptions(opts))
	if err != nil {
		return nil, err
	}
	closer, err := c.Start()
	if err != nil {
		c.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, cache: c, closeCache: closer}
	if err := s.setup(); err != nil {
		s.closeListeners()
		closer()
		return nil, err
	}
	return s, nil
}

func (s *Server) setup() error {
	cfg := s.cfg
	s.metrics = metrics.New(s.cache)
	var err error
	s.store, err = store.New(s.cache, store.Config{
		MaxValueSize:     cfg.MaxValueSize,
		MaxInflightBytes: cfg.MaxInflightBytes,
		AdmitTimeout:     cfg.AdmitTimeout,
		Metrics:          s.metrics,
	})
	if err != nil {
		return err
	}
	if cfg.HTTPAddr != "" {
		if err := s.setupHTTP(); err != nil {
			return err
		}
	}
	if cfg.MemcacheAddr != "" {
		if err := s.setupMemcache(); err != nil {
			return err
		}
	}
	return nil
}

// httpReject is the answer to an HTTP connection past the limit.
const httpReject = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 21\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many connections\n"

func (s *Server) listen(addr, proto string, reject func(net.Conn)) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", proto, err)
	}
	if s.cfg.TLS != nil {
		reject = nil // the refusal would have to be in TLS
	}
	return netlimit.New(ln, s.cfg.MaxConns, func(c net.Conn) {
		s.metrics.ConnRejected(proto)
		if reject != nil {
			reject(c)
		}
	}), nil
}

// baseProcs is GOMAXPROCS as the first server found it, before it gave Ps to event loops.
var baseProcs = sync.OnceValue(func() int { return runtime.GOMAXPROCS(0) })

// loopProcs gives the process n Ps more for event loops, on top of what the server's other
// front end took: GOMAXPROCS is raised to baseProcs plus every loop, once.
func (s *Server) loopProcs(n int) {
	s.loopPs += n
	if want := baseProcs() + s.loopPs; s.loopPs > 0 && runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

// memcacheLoops is the number of event loops the memcached front end runs: the configuration's,
// 0 where the loops would not serve (TLS; values sent from their files, which would block a
// loop; a platform without them).
func (s *Server) memcacheLoops() int {
	n := s.cfg.MemcacheLoops
	if n == 0 {
		n = baseProcs()
	}
	if n < 0 || s.cfg.TLS != nil || !s.cfg.Cache.VerifyOnRead || !netloop.Available {
		return 0
	}
	return n
}

func (s *Server) setupHTTP() error {
	h, err := httpapi.New(s.store, httpapi.Config{
		MaxKeyLen: s.cfg.MaxKeyLen,
		Token:     s.cfg.Token,
		Pprof:     s.cfg.Pprof,
		Metrics:   s.metrics,
		Log:       s.cfg.Log,
	})
	if err != nil {
		return err
	}
	idle := s.cfg.IdleTimeout
	if idle == 0 {
		idle = 2 * time.Minute
	}
	s.httpH = h
	s.httpSrv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       idle,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		TLSConfig:         s.cfg.TLS,
		ErrorLog:          slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelDebug),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				if !httpapi.HandedOver(c) { // counted by the fast path when it opened
					s.metrics.ConnOpened("http")
				}
			case http.StateClosed, http.StateHijacked:
				s.metrics.ConnClosed("http")
			}
		},
	}
	s.httpLn, err = s.listen(s.cfg.HTTPAddr, "http", func(c net.Conn) { io.WriteString(c, httpReject) })
	if err == nil && s.cfg.TLS == nil {
		// GETs and HEADs of blobs are served without net/http; the rest is handed to it.
		fc := httpapi.FastConfig{IdleTimeout: idle, WriteTimeout: s.cfg.WriteTimeout,
			SendFromFile: !s.cfg.Cache.VerifyOnRead, Loops: s.cfg.HTTPLoops}
		if fc.Loops == 0 {
			fc.Loops = baseProcs()
		}
		s.loopProcs(fc.EventLoops())
		s.httpFast = h.NewFastPath(s.httpLn, fc)
	}
	return err
}

func (s *Server) setupMemcache() error {
	loops := s.memcacheLoops()
	s.loopProcs(loops)
	s.mc = memcache.New(s.store, memcache.Config{
		Loops:        loops,
		MaxLineBytes: s.cfg.MaxLineBytes,
		IdleTimeout:  s.cfg.IdleTimeout,
		ReadTimeout:  s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout,
		Token:        s.cfg.Token,
		Version:      s.cfg.Version,
		MaxConns:     s.cfg.MaxConns,
		Settings:     s.settings(),
		Metrics:      s.metrics,
		Log:          s.cfg.Log,
	})
	ln, err := s.listen(s.cfg.MemcacheAddr, "memcache", s.mc.Reject)
	if err != nil {
		return err
	}
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mcLn = ln
	return nil
}

func (s *Server) closeListeners() {
	if s.httpLn != nil {
		s.httpLn.Close()
	}
	if s.mcLn != nil {
		s.mcLn.Close()
	}
}

// HTTPAddr is the HTTP listener's address, or "" without one.
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// MemcacheAddr is the memcached listener's address, or "" without one.
func (s *Server) MemcacheAddr() string {
	if s.mcLn == nil {
		return ""
	}
	return s.mcLn.Addr().String()
}

// Cache is the served cache.
func (s *Server) Cache() *blobcache.Cache { return s.cache }

// Metrics are the server's metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Run serves until ctx ends or a listener fails, then shuts down gracefully (see the package
// comment) and returns the listener's error, if any, joined with the shutdown's. Run may be
// called once.
func (s *Server) Run(ctx context.Context) error {
	err := errors.New("server: Run called twice")
	s.runOnce.Do(func() { err = s.run(ctx) })
	return err
}

func (s *Server) run(ctx context.Context) error {
	serveErr := make(chan error, 2)
	n := 0
	if s.httpSrv != nil {
		n++
		go func() {
			var err error
			if s.cfg.TLS != nil {
				err = s.httpSrv.ServeTLS(s.httpLn, "", "")
			} else if s.httpFast != nil {
				err = s.httpSrv.Serve(s.httpFast)
			} else {
				err = s.httpSrv.Serve(s.httpLn)
			}
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			}
			serveErr <- err
		}()
	}
	if s.mc != nil {
		n++
		go func() {
			err := s.mc.Serve(s.mcLn)
			if errors.Is(err, memcache.ErrServerClosed) {
				err = nil
			}
			serveErr <- err
		}()
	}
	// At Debug: a command that runs the server says where it serves itself (blobcache serve
	// prints one line to standard output), and would otherwise say it twice.
	s.cfg.Log.Debug("serving", "http", s.HTTPAddr(), "memcache", s.MemcacheAddr(), "dir", s.cfg.Dir)
	// Ready: the cache is open and both sockets have listened since New, so the kernel takes
	// connections, which the goroutines just started accept. A context that ended already
	// (a signal during the cache's recovery) goes straight to the shutdown.
	if ctx.Err() == nil {
		s.notify(fmt.Sprintf("READY=1\nSTATUS=serving http=%s memcache=%s dir=%s",
			cmp.Or(s.HTTPAddr(), "off"), cmp.Or(s.MemcacheAddr(), "off"), s.cfg.Dir))
	}
	var watchdog <-chan time.Time
	if s.cfg.Notify != nil && s.cfg.WatchdogInterval > 0 {
		t := time.NewTicker(s.cfg.WatchdogInterval)
		defer t.Stop()
		watchdog = t.C
	}

	idleTick := time.NewTicker(idleCheck)
	defer idleTick.Stop()
	var idle idleWatch

	var errs []error
serving:
	for {
		select {
		case now := <-idleTick.C:
			if idle.tick(now, s.activity()) {
				debug.FreeOSMemory()
				s.cfg.Log.Debug("idle: gave the heap's free memory back to the system")
			}
		case <-ctx.Done():
			break serving
		case err := <-serveErr:
			n--
			if err != nil {
				errs = append(errs, err)
			}
			break serving
		case <-watchdog:
			// Sent from this loop, so a server whose listener failed stops sending it.
			s.notify("WATCHDOG=1")
		}
	}
	s.cfg.Log.Info("shutting down")
	s.notify("STOPPING=1\nSTATUS=draining: requests in progress finish, then the write buffer goes to disk")
	errs = append(errs, s.shutdown())
	for range n {
		if err := <-serveErr; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// activity is the cache's count of reads and writes (idleWatch).
func (s *Server) activity() uint64 {
	st := s.cache.Stats()
	return st.Hits + st.Misses + st.Puts + st.Deletes
}

// notify tells Config.Notify state, if there is one to tell.
func (s *Server) notify(state string) {
	if s.cfg.Notify != nil {
		s.cfg.Notify(state)
	}
}

// shutdown stops both front ends, waiting up to ShutdownTimeout for requests in progress, then
// drains and closes the cache.
func (s *Server) shutdown() error {
	if s.httpH != nil {
		s.httpH.MarkDraining()
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var httpErr, fastErr, mcErr error
	if s.httpSrv != nil {
		wg.Go(func() {
			// net/http's Shutdown closes the fast path (its listener), after which its Serve
			// takes the listener's error for the shutdown's; only then may the fast path's own
			// Shutdown wait for its connections, which its close has told to finish.
			httpErr = s.httpSrv.Shutdown(ctx)
			if s.httpFast != nil {
				fastErr = s.httpFast.Shutdown(ctx)
			}
		})
	}
	if s.mc != nil {
		wg.Go(func() { mcErr = s.mc.Shutdown(ctx) })
	}
	wg.Wait()
	if httpErr = errors.Join(httpErr, fastErr); httpErr != nil {
		httpErr = fmt.Errorf("server: HTTP shutdown: %w", httpErr)
		s.httpSrv.Close() // whatever is still open
	}
	if mcErr != nil {
		mcErr = fmt.Errorf("server: memcached shutdown: %w", mcErr)
	}
	t := time.Now()
	cacheErr := s.closeCache() // drains the write buffer, seals the active segment
	s.cfg.Log.Info("cache closed", "took", time.Since(t), "err", cacheErr)
	return errors.Join(httpErr, mcErr, cacheErr)
}

// settings are the cache's settings for the memcached protocol's "stats settings".
func (s *Server) settings() []memcache.Setting {
	o := &s.cfg.Cache
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	return []memcache.Setting{
		{Name: "ssl_enabled", Value: yesNo(s.cfg.TLS != nil)},
		{Name: "blobcache_policy", Value: o.Policy.String()},
		{Name: "blobcache_fsync", Value: yesNo(o.Fsync)},
		{Name: "blobcache_verify_on_read", Value: yesNo(o.VerifyOnRead)},
		{Name: "blobcache_direct_writes", Value: writeRoute(o)},
	}
}

// writeRoute is how batches are written (blobcache.Options.DirectWrites): "yes" with O_DIRECT,
// "no" through the page cache, "routed" each batch as the page cache's room allows.
func writeRoute(o *blobcache.Options) string {
	switch {
	case o.BufferedWrites:
		return "no"
	case o.DirectWrites || o.Fsync:
		return "yes"
	}
	return "routed"
}
