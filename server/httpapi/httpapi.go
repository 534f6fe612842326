package httpapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/metrics"
	"github.com/seed57392e9e/blobcache/server/store"
)

// BlobPrefix is the path under which blobs live.
const BlobPrefix = "/v1/blobs/"

// Config configures a Handler.
type Config struct {
	// MaxKeyLen is the longest key accepted, in bytes. 0 means blobcache.MaxKeyLen, the most
	// the cache stores.
	MaxKeyLen int
	// Token, if not empty, is required as "Authorization: Bearer <Token>" on every path but
	// /healthz. Compared in constant time.
	Token string
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Metrics records requests and serves /metrics; nil disables both.
	Metrics *metrics.Metrics
	// Log receives server errors; nil discards them.
	Log *slog.Logger
}

// Handler serves the HTTP interface.
type Handler struct {
	st        *store.Store
	maxKeyLen int
	tokenSum  [sha256.Size]byte
	auth      bool
	m         *metrics.Metrics
	metricsH  http.Handler
	pprof     http.Handler
	log       *slog.Logger
	draining  atomic.Bool
}

// New returns a Handler over st.
func New(st *store.Store, cfg Config) (*Handler, error) {
	if cfg.MaxKeyLen == 0 {
		cfg.MaxKeyLen = blobcache.MaxKeyLen
	}
	if cfg.MaxKeyLen < 1 || cfg.MaxKeyLen > blobcache.MaxKeyLen {
		return nil, fmt.Errorf("httpapi: MaxKeyLen %d is outside [1, %d]", cfg.MaxKeyLen, blobcache.MaxKeyLen)
	}
	h := &Handler{st: st, maxKeyLen: cfg.MaxKeyLen, m: cfg.Metrics, log: cfg.Log}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Token != "" {
		h.auth = true
		h.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	if cfg.Metrics != nil {
		h.metricsH = cfg.Metrics.Handler()
	}
	if cfg.Pprof {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		h.pprof = mux
	}
	return h, nil
}

// MarkDraining makes /healthz answer 503, so that load balancers stop sending work while the
// server shuts down.
func (h *Handler) MarkDraining() { h.draining.Store(true) }

// ServeHTTP routes a request. Paths are matched on the decoded path without cleaning, so that
// keys may hold any bytes ("//", "..", "%2F").
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/healthz":
		h.healthz(w, r)
	case !h.authorized(r):
		w.Header().Set("WWW-Authenticate", `Bearer realm="blobcache"`)
		http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
		h.m.Request("http", op(r.Method), "401", 0)
	case strings.HasPrefix(path, BlobPrefix):
		h.blob(w, r, path[len(BlobPrefix):])
	case path == "/metrics" && h.metricsH != nil:
		h.metricsH.ServeHTTP(w, r)
	case strings.HasPrefix(path, "/debug/pprof/") && h.pprof != nil:
		h.pprof.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if h.draining.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

// authorized compares the bearer token in constant time (of the token's SHA-256, so that not
// even its length leaks).
func (h *Handler) authorized(r *http.Request) bool {
	if !h.auth {
		return true
	}
	return h.authorizedValue([]byte(r.Header.Get("Authorization")))
}

// authorizedValue is authorized for the Authorization header's value v (nil or empty: none).
func (h *Handler) authorizedValue(v []byte) bool {
	if !h.auth {
		return true
	}
	const scheme = "bearer "
	if len(v) < len(scheme) || !strings.EqualFold(string(v[:len(scheme)]), scheme) {
		return false
	}
	got := sha256.Sum256(bytes.TrimSpace(v[len(scheme):]))
	return subtle.ConstantTimeCompare(got[:], h.tokenSum[:]) == 1
}

func op(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return strings.ToLower(method)
	}
	return "other"
}

func (h *Handler) blob(w http.ResponseWriter, r *http.Request, key string) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		h.m.Request("http", op(r.Method), strconv.Itoa(sw.code()), time.Since(start))
	}()
	if len(key) == 0 || len(key) > h.maxKeyLen {
		http.Error(sw, fmt.Sprintf("bad key: %d bytes, want 1 to %d", len(key), h.maxKeyLen), http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.get(sw, r, []byte(key))
	case http.MethodPut:
		h.put(sw, r, []byte(key))
	case http.MethodDelete:
		h.delete(sw, r, []byte(key))
	default:
		sw.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		http.Error(sw, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// Request and response headers beyond the standard ones.
const (
	hdrFlags = "Blobcache-Flags"
	hdrTTL   = "Blobcache-Ttl"
)

func (h *Handler) put(w http.ResponseWriter, r *http.Request, key []byte) {
	n := r.ContentLength
	if n < 0 {
		// A chunked upload: read into memory (counted against the value memory) to learn
		// its length, up to the value limit.
		body, release, err := h.readBody(r)
		defer release()
		if err != nil {
			h.bodyError(w, err)
			return
		}
		n, r.Body = int64(len(body)), io.NopCloser(bytes.NewReader(body))
	}
	if max := h.st.MaxValueSize(); n > max {
		w.Header().Set("Connection", "close") // do not read a body we refuse
		http.Error(w, fmt.Sprintf("value of %d bytes, the limit is %d", n, max), http.StatusRequestEntityTooLarge)
		return
	}
	var m item.Meta
	if v := r.Header.Get(hdrFlags); v != "" {
		f, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			http.Error(w, "bad "+hdrFlags+" header", http.StatusBadRequest)
			return
		}
		m.Flags = uint32(f)
	}
	ttl, err := requestTTL(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	attrs, err := requestAttrs(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ttl > 0 {
		m.Expires = h.st.Now().Unix() + ttl
	}
	cur, err := h.look(key)
	if err != nil {
		h.error(w, err)
		return
	}
	var cond blobcache.Precondition
	if conditional(r) {
		if !writeAllowed(r, cur) {
			w.Header().Set("Connection", "close") // do not read a body we refuse
			http.Error(w, "precondition failed", http.StatusPreconditionFailed)
			return
		}
		cond = cur.precondition()
	}
	v, err := h.st.Reserve(r.Context(), n)
	if err != nil {
		if errors.Is(err, store.ErrBusy) {
			h.m.Busy("http")
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.error(w, err) // the client went away
		return
	}
	defer v.Release()
	// The body streams into the cache; a body that ends early or fails stores nothing.
	version, err := h.st.PutAttrs(key, v, r.Body, m, attrs, cond)
	switch {
	case err == nil:
	case failedPrecondition(err):
		http.Error(w, "precondition failed: the blob changed", http.StatusPreconditionFailed)
		return
	default:
		h.bodyError(w, err)
		return
	}
	w.Header().Set("ETag", etagOf(version))
	if cur.present {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
}

// bodyError answers a write that failed reading its body, or in the cache.
func (h *Handler) bodyError(w http.ResponseWriter, err error) {
	var re *store.ReadError
	var ne net.Error
	switch {
	case errors.As(err, &re) && errors.As(err, &ne) && ne.Timeout():
		http.Error(w, "timed out reading the body", http.StatusRequestTimeout)
	case errors.As(err, &re):
		http.Error(w, fmt.Sprintf("truncated body: %v", re.Err), http.StatusBadRequest)
	case errors.Is(err, store.ErrBusy):
		h.m.Busy("http")
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Connection", "close")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		h.error(w, err)
	}
}

// readBody reads a body of unknown length (chunked) whole, holding value memory for it a
// chunk at a time; release returns the memory. Past the value limit it fails with
// blobcache.ErrValueTooLarge.
func (h *Handler) readBody(r *http.Request) (body []byte, release func(), err error) {
	const step = 1 << 20
	var held []*store.Value
	release = func() {
		for _, v := range held {
			v.Release()
		}
	}
	max := h.st.MaxValueSize()
	var buf bytes.Buffer
	for {
		v, err := h.st.Reserve(r.Context(), min(step, max))
		if err != nil {
			return nil, release, err
		}
		held = append(held, v)
		n, err := io.CopyN(&buf, r.Body, step)
		if int64(buf.Len()) > max {
			return nil, release, fmt.Errorf("%w: a chunked body over %d bytes", blobcache.ErrValueTooLarge, max)
		}
		if err == io.EOF || (err == nil && n < step) {
			return buf.Bytes(), release, nil
		}
		if err != nil {
			return nil, release, &store.ReadError{Err: err}
		}
	}
}

// requestTTL is the expiry a PUT asks for, in seconds (0: none): Blobcache-Ttl, or the
// max-age of Cache-Control.
func requestTTL(r *http.Request) (int64, error) {
	if v := r.Header.Get(hdrTTL); v != "" {
		ttl, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ttl <= 0 || ttl > 1<<40 {
			return 0, fmt.Errorf("bad %s header: want seconds > 0", hdrTTL)
		}
		return ttl, nil
	}
	for d := range strings.SplitSeq(r.Header.Get("Cache-Control"), ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "max-age="); ok {
			ttl, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ttl <= 0 || ttl > 1<<40 {
				return 0, fmt.Errorf("bad Cache-Control max-age %q: want seconds > 0", v)
			}
			return ttl, nil
		}
	}
	return 0, nil
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, key []byte) {
	var err error
	if conditional(r) {
		var cur current
		if cur, err = h.look(key); err == nil {
			if !writeAllowed(r, cur) {
				http.Error(w, "precondition failed", http.StatusPreconditionFailed)
				return
			}
			if cur.present {
				err = h.st.DeleteIf(key, cur.precondition())
			}
		}
		if failedPrecondition(err) {
			http.Error(w, "precondition failed: the blob changed", http.StatusPreconditionFailed)
			return
		}
	} else {
		err = h.st.Delete(key)
	}
	if err != nil {
		h.error(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// error answers a cache error.
func (h *Handler) error(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, blobcache.ErrInvalidKey):
		code = http.StatusBadRequest
	case errors.Is(err, blobcache.ErrValueTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, blobcache.ErrClosed):
		code = http.StatusServiceUnavailable
	default:
		h.log.Error("request failed", "err", err)
	}
	http.Error(w, err.Error(), code)
}

// ETag is the strong entity tag of a stored blob: its version, unique per write of the cache
// and kept across restarts (blobcache.BlobInfo.Version), so a rewrite with the same bytes gets
// a new tag and two writes never share one. The stored zstd form of a blob (Content-Encoding
// zstd) is another representation, with its own tag: the version and zstdTagSuffix.
func ETag(info store.Info) string {
	if info.Encoding == blobcache.CompressionZstd {
		return fmt.Sprintf(`"%x%s"`, info.Version, zstdTagSuffix)
	}
	return fmt.Sprintf(`"%x"`, info.Version)
}

// zstdTagSuffix ends the entity tag of a blob's stored zstd form.
const zstdTagSuffix = ".zstd"

func (h *Handler) get(w *statusWriter, r *http.Request, key []byte) {
	lw := &lazyWriter{w: w}
	// A whole blob stored compressed with zstd goes as stored to a client that accepts zstd;
	// a range is of the value's bytes, and is always sent as they are.
	accept := blobcache.CompressionNone
	if r.Header.Get("Range") == "" && acceptsZstd(r.Header.Values("Accept-Encoding")) {
		accept = blobcache.CompressionZstd
	}
	found, err := h.st.SendEncoded(r.Context(), key, accept, func(info store.Info) (store.Plan, error) {
		lw.reset()
		hdr := lw.hdr
		etag := ETag(info)
		hdr.Set("Content-Type", contentType(info.Attrs))
		hdr.Set("Accept-Ranges", "bytes")
		hdr.Set("Vary", "Accept-Encoding")
		if info.Encoding == blobcache.CompressionZstd {
			hdr.Set("Content-Encoding", "zstd")
		}
		if etag != "" {
			hdr.Set("ETag", etag)
		}
		if info.Flags != 0 {
			hdr.Set(hdrFlags, strconv.FormatUint(uint64(info.Flags), 10))
		}
		if info.Expires != 0 {
			hdr.Set("Expires", time.Unix(info.Expires, 0).UTC().Format(http.TimeFormat))
		}
		hdr.Set("Last-Modified", lastModified(info))
		cur := current{present: true, version: info.Version, modified: info.Created}
		if !readAllowed(r, cur) {
			lw.reset()
			lw.status = http.StatusPreconditionFailed
			lw.hdr.Set("Content-Length", "0")
			return store.Plan{}, nil
		}
		if notModified(r, cur) {
			hdr.Del("Content-Type")
			lw.status = http.StatusNotModified
			return store.Plan{}, nil
		}
		off, n := int64(0), info.Size
		if rh := r.Header.Get("Range"); rh != "" && ifRange(r.Header.Get("If-Range"), etag) {
			s, l, res := parseRange(rh, info.Size)
			switch res {
			case rangeOK:
				off, n = s, l
				lw.status = http.StatusPartialContent
				hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s, s+l-1, info.Size))
			case rangeUnsatisfiable:
				lw.status = http.StatusRequestedRangeNotSatisfiable
				hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", info.Size))
				hdr.Del("Content-Type")
				hdr.Set("Content-Length", "0")
				return store.Plan{}, nil
			}
		}
		hdr.Set("Content-Length", strconv.FormatInt(n, 10))
		if r.Method == http.MethodHead || n == 0 {
			return store.Plan{}, nil
		}
		// A whole body goes through ReadFrom, which lets the connection send it from the file.
		return store.Plan{W: lw, Off: off, N: n, ReadFrom: off == 0 && n == info.Size}, nil
	})
	switch {
	case !found && err == nil:
		http.Error(w, "not found", http.StatusNotFound)
	case err == nil:
		lw.commit()
	case errors.Is(err, store.ErrBusy):
		h.m.Busy("http")
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case r.Context().Err() != nil && !lw.committed:
		// The client went away while the read waited for memory.
	case !lw.committed:
		h.log.Error("read failed", "key", fmt.Sprintf("%q", key), "err", err)
		http.Error(w, "cannot read the blob", http.StatusInternalServerError)
	default:
		// Part of the body is out: the only honest answer left is a broken response, which the
		// client sees as a body shorter than its Content-Length.
		if !isClientGone(err) {
			h.log.Error("read failed after the response started", "key", fmt.Sprintf("%q", key), "err", err)
		}
		w.failed = true
		panic(http.ErrAbortHandler)
	}
}

func isClientGone(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrHandlerTimeout)
}

// lazyWriter holds the response headers a Get's begin decides until the first body byte (or
// the end of the Get), because begin may run again when the blob changes under a ranged read.
type lazyWriter struct {
	w         http.ResponseWriter
	hdr       http.Header
	status    int
	committed bool
}

func (lw *lazyWriter) reset() {
	lw.hdr = http.Header{}
	lw.status = http.StatusOK
}

func (lw *lazyWriter) commit() {
	if lw.committed {
		return
	}
	lw.committed = true
	dst := lw.w.Header()
	for k, v := range lw.hdr {
		dst[k] = v
	}
	lw.w.WriteHeader(lw.status)
}

func (lw *lazyWriter) Write(p []byte) (int, error) {
	lw.commit()
	return lw.w.Write(p)
}

// ReadFrom commits the headers and hands r to the response's ReadFrom (net/http's, which for a
// body of known length hands it to the connection after its first bytes).
func (lw *lazyWriter) ReadFrom(r io.Reader) (int64, error) {
	lw.commit()
	if rf, ok := lw.w.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{lw.w}, r)
}

// statusWriter remembers the status code for the request metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	failed bool
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// ReadFrom is the response's, so that a body handed to it can reach the connection.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	switch {
	case w.failed:
		return 0 // aborted mid-body
	case w.status == 0:
		return http.StatusOK
	}
	return w.status
}
