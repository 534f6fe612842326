package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/metrics"
)

// ErrBusy is returned by Reserve when the value memory stayed full for the admission timeout.
var ErrBusy = errors.New("store: busy: value memory is full, try again")

// Config configures a Store.
type Config struct {
	// MaxValueSize is the largest payload accepted. 0 means the most the cache accepts for a
	// key of blobcache.MaxKeyLen bytes, less the item header.
	MaxValueSize int64
	// MaxInflightBytes bounds the memory requests hold between the network and the cache, as
	// the library counts it: a write what PutFrom holds (blobcache.Cache.PutFromMemory), a read
	// its copy buffer and, for a blob streamed to the client, the library's Reader's buffers
	// (see readMemory). 0 means 256 MiB. Larger lets more requests proceed at once.
	MaxInflightBytes int64
	// AdmitTimeout is how long a write waits for value memory before ErrBusy. 0 means 1s;
	// negative means not at all.
	AdmitTimeout time.Duration
	// Metrics receives Get and Put latencies and the in-flight bytes; nil records nothing.
	Metrics *metrics.Metrics
	// Now is the clock for expiry; nil means the cache's (blobcache.Options.Clock). Expiry is
	// the cache's to enforce, by its clock: a test that fixes this one fixes the cache's too.
	Now func() time.Time
}

// Store wraps a cache for the front ends.
type Store struct {
	c        *blobcache.Cache
	maxValue int64
	admit    time.Duration
	gate     *semaphore.Weighted
	inflight atomic.Int64
	m        *metrics.Metrics
	now      func() time.Time
}

// New returns a Store over c.
func New(c *blobcache.Cache, cfg Config) (*Store, error) {
	limit := c.MaxValueSize(blobcache.MaxKeyLen) - item.HeaderSize
	if cfg.MaxValueSize == 0 {
		cfg.MaxValueSize = limit
	}
	if cfg.MaxValueSize < 0 || cfg.MaxValueSize > limit {
		return nil, fmt.Errorf("store: MaxValueSize %d is outside [1, %d], the cache's limit for a key of %d bytes",
			cfg.MaxValueSize, limit, blobcache.MaxKeyLen)
	}
	// The largest stored blob is a legacy item's: the payload behind an item header. A value of
	// a write buffer's size may hold more than the largest (blobcache.Cache.WriteBufferSize).
	var biggest int64
	for _, n := range []int64{cfg.MaxValueSize, min(cfg.MaxValueSize, c.WriteBufferSize())} {
		biggest = max(biggest, c.PutFromMemory(n),
			readMemory(c, blobcache.MaxKeyLen, blobcache.MaxAttrLen, n+item.HeaderSize))
	}
	if cfg.MaxInflightBytes == 0 {
		cfg.MaxInflightBytes = 256 << 20
	}
	if cfg.MaxInflightBytes < biggest {
		return nil, fmt.Errorf("store: MaxInflightBytes %d cannot hold the %d bytes one request for a value of MaxValueSize %d holds",
			cfg.MaxInflightBytes, biggest, cfg.MaxValueSize)
	}
	if cfg.AdmitTimeout == 0 {
		cfg.AdmitTimeout = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	return &Store{
		c:        c,
		maxValue: cfg.MaxValueSize,
		admit:    cfg.AdmitTimeout,
		gate:     semaphore.NewWeighted(cfg.MaxInflightBytes),
		m:        cfg.Metrics,
		now:      cfg.Now,
	}, nil
}

// Cache is the cache the store wraps.
func (s *Store) Cache() *blobcache.Cache { return s.c }

// MaxValueSize is the largest payload Reserve accepts.
func (s *Store) MaxValueSize() int64 { return s.maxValue }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Value is the memory budget reserved for one incoming payload: not a buffer, the bytes the
// write will hold while it streams. Pass it to Put; Release it in every case.
type Value struct {
	s    *Store
	n    int64
	held int64
}

// Reserve waits (up to the admission timeout, or until ctx is done) for the memory a write of a
// payload of n bytes holds: what the library's PutFrom holds for n bytes
// (blobcache.Cache.PutFromMemory), the payload being stored as it is, with the item's meta in
// the record. It fails with an error wrapping blobcache.ErrValueTooLarge past the value limit,
// ErrBusy when the memory stayed full, or ctx's error.
func (s *Store) Reserve(ctx context.Context, n int64) (*Value, error) {
	return s.reserve(ctx, n, true)
}

// TryReserve is Reserve without the wait: false when the memory is not free at once (or n is
// over the value limit).
func (s *Store) TryReserve(n int64) (*Value, bool) {
	v, err := s.reserve(context.Background(), n, false)
	return v, err == nil
}

func (s *Store) reserve(ctx context.Context, n int64, wait bool) (*Value, error) {
	if n < 0 || n > s.maxValue {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", blobcache.ErrValueTooLarge, n, s.maxValue)
	}
	held := s.c.PutFromMemory(n)
	if err := s.acquire(ctx, held, wait); err != nil {
		return nil, err
	}
	return &Value{s: s, n: n, held: held}, nil
}

// acquire takes n bytes of the memory budget, waiting for them up to the admission timeout if
// wait says so, else ErrBusy when they are not free at once.
func (s *Store) acquire(ctx context.Context, n int64, wait bool) error {
	// The gate is rarely full: it is taken without a timer when it can be at once (TryAcquire
	// fails while others wait, so waiters keep their turn).
	if !s.gate.TryAcquire(n) {
		if !wait || s.admit < 0 {
			return ErrBusy
		}
		actx, cancel := context.WithTimeout(ctx, s.admit)
		err := s.gate.Acquire(actx, n)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return ErrBusy
		}
	}
	s.inflight.Add(n)
	s.m.InflightBytes(n)
	return nil
}

func (s *Store) release(n int64) {
	s.gate.Release(n)
	s.inflight.Add(-n)
	s.m.InflightBytes(-n)
}

// Release returns the memory. The Value must not be used afterwards; a second Release does
// nothing.
func (v *Value) Release() {
	if v.s == nil {
		return
	}
	v.s.release(v.held)
	v.s = nil
}

// ReadError is an error of the payload's reader (the client's side: a body cut short, a
// timeout, a bad data block terminator), as opposed to an error of the cache.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "store: read payload: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Put stores the payload of the size v reserved, read from r, under key with meta m, if cond
// holds (blobcache.PutOptions.If; the zero Precondition always does), and returns the version
// stored. The payload streams into the cache (blobcache.PutFromWith): a large one is never whole
// in memory. An error of r abandons the write, nothing of it is stored, and comes back as a
// *ReadError. A failed precondition returns blobcache.ErrExists or blobcache.ErrNotFound (or
// blobcache.ErrConflict, for a payload that streamed while another write of the key landed).
func (s *Store) Put(key []byte, v *Value, r io.Reader, m item.Meta, cond blobcache.Precondition) (uint64, error) {
	return s.PutAttrs(key, v, r, m, "", cond)
}

// PutAttrs is Put with attributes stored beside the payload (blobcache.PutOptions.Attrs; the
// HTTP front end keeps the Content-Type there), returned in Info.Attrs.
func (s *Store) PutAttrs(key []byte, v *Value, r io.Reader, m item.Meta, attrs string, cond blobcache.Precondition) (uint64, error) {
	t := time.Now()
	defer func() { s.m.ObservePut(time.Since(t)) }()
	cr := &clientReader{r: r}
	if v.n == 0 {
		// Nothing for PutFrom to read: read the end here, so that a reader that checks what
		// follows the payload (a memcached data block's "\r\n") has its say.
		var none [0]byte
		if _, err := cr.Read(none[:]); err != nil && err != io.EOF {
			return 0, &ReadError{err}
		}
	}
	o := putOptions(m, cond)
	o.Attrs = attrs
	version, err := s.c.PutFromWith(key, cr, v.n, o)
	if cr.err != nil {
		return 0, &ReadError{cr.err}
	}
	return version, err
}

// putOptions are the library's options for meta m and precondition cond.
func putOptions(m item.Meta, cond blobcache.Precondition) blobcache.PutOptions {
	o := blobcache.PutOptions{Flags: m.Flags, If: cond}
	if m.Expires != 0 {
		o.Expires = time.Unix(m.Expires, 0)
	}
	return o
}

// clientReader remembers the first error of r other than io.EOF.
type clientReader struct {
	r   io.Reader
	err error
}

func (c *clientReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// Hold is r's Hold (blobcache.ValueHolder: a payload already in the front end's read buffer is
// stored from there, not copied out first); ok is false when r is not a ValueHolder.
func (c *clientReader) Hold(n int) ([]byte, bool, error) {
	h, ok := c.r.(blobcache.ValueHolder)
	if !ok {
		return nil, false, nil
	}
	b, ok, err := h.Hold(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return b, ok, err
}

// Delete removes key (whether or not it was there).
func (s *Store) Delete(key []byte) error { return s.c.Delete(key) }

// MayHold sets out[i] to whether keys[i] may have an item: false is certain, at the cost of a
// filter probe (blobcache.MayContain; a batch of keys is probed at once).
func (s *Store) MayHold(keys [][]byte, out []bool) { s.c.MayContain(keys, out) }

// DeleteIf removes key if cond holds (blobcache.DeleteIf).
func (s *Store) DeleteIf(key []byte, cond blobcache.Precondition) error {
	return s.c.DeleteIf(key, cond)
}

// FlushAll makes every item stored before at a miss from at on (blobcache.InvalidateAll).
func (s *Store) FlushAll(at time.Time) error { return s.c.InvalidateAll(at) }

// Touch sets key's expiry (Unix seconds; 0: never) and reports whether it held an item. The
// item keeps its payload, flags and version; an item written before records carried metadata
// is written again in the current form, with a new version.
func (s *Store) Touch(ctx context.Context, key []byte, expires int64) (found bool, err error) {
	info, err := s.c.Stat(key)
	if errors.Is(err, blobcache.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !info.Legacy {
		var at time.Time
		if expires != 0 {
			at = time.Unix(expires, 0)
		}
		err := s.c.Touch(key, at)
		if errors.Is(err, blobcache.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	_, err = s.Update(ctx, key, func(payload []byte, info Info) ([]byte, item.Meta, error) {
		m := info.Meta
		m.Expires = expires
		return payload, m, nil
	})
	if errors.Is(err, blobcache.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Update replaces key's payload and meta with what fn makes of the current ones, atomically:
// the write happens only if the item is still the one fn saw (its version), else fn runs again
// on the newer item. It returns the Info of the item written, or blobcache.ErrNotFound for a
// missing key, or fn's error. The payload is read whole into memory (it is at most
// MaxValueSize, counted against the memory budget).
func (s *Store) Update(ctx context.Context, key []byte, fn func(payload []byte, info Info) ([]byte, item.Meta, error)) (Info, error) {
	for {
		var buf bytes.Buffer
		var cur Info
		found, err := s.Get(ctx, key, func(info Info) (Plan, error) {
			cur = info
			buf.Reset()
			return Plan{W: &buf, N: -1}, nil
		})
		if err != nil {
			return Info{}, err
		}
		if !found {
			return Info{}, blobcache.ErrNotFound
		}
		payload, m, err := fn(buf.Bytes(), cur)
		if err != nil {
			return Info{}, err
		}
		v, err := s.Reserve(ctx, int64(len(payload)))
		if err != nil {
			return Info{}, err
		}
		version, err := s.PutAttrs(key, v, bytes.NewReader(payload), m, cur.Attrs, blobcache.IfVersion(cur.Version))
		v.Release()
		switch {
		case err == nil:
			return Info{Meta: m, Size: int64(len(payload)), BlobSize: int64(len(payload)), Version: version, Attrs: cur.Attrs}, nil
		case errors.Is(err, blobcache.ErrExists), errors.Is(err, blobcache.ErrConflict):
			continue // written meanwhile: again, on the newer item
		}
		return Info{}, err
	}
}

// Remove removes key and reports whether it held an unexpired item. Knowing costs a read of the
// blob (see the report on a Stat call for the library).
func (s *Store) Remove(key []byte) (bool, error) {
	found, err := s.Get(context.Background(), key, func(Info) (Plan, error) { return Plan{}, nil })
	if err != nil && !found {
		// The blob could not be read; delete it anyway, and say it was there.
		found = true
	}
	if !found {
		return false, nil
	}
	return true, s.c.Delete(key)
}

// Info describes a stored item.
type Info struct {
	item.Meta
	Size     int64  // payload bytes
	BlobSize int64  // bytes stored (payload, and the item header of a legacy item)
	Sum      uint32 // checksum of the stored blob, when HasSum
	HasSum   bool
	// Version identifies this write of the item (blobcache.BlobInfo.Version): the cas value
	// and the ETag.
	Version uint64
	Created time.Time // when it was stored
	Attrs   string    // as given to PutAttrs
	// Encoding is how the payload bytes are encoded: CompressionNone, or the codec of a payload
	// SendEncoded delivers as stored (Size is then the stored size).
	Encoding blobcache.Compression
}

// Plan is what a Get does once it knows the item: write the payload bytes [Off, Off+N) to W.
type Plan struct {
	W   io.Writer // nil: read nothing more
	Off int64     // first payload byte, clamped to the payload
	N   int64     // bytes; negative means to the end
	// ReadFrom says W takes a whole payload left in its segment file through its ReadFrom
	// method (net/http's ResponseWriter hands the reader to its connection, which can have it
	// sent from the file: see netlimit). Used when Sock is not set.
	ReadFrom bool
	// Sock, if set, is the connection W writes to. A whole payload left in its segment file
	// (blobcache.Cache.Open: a value over blobcache.OpenHead, nothing checking its bytes) then
	// goes to Sock from the file, without a copy through user space: W is flushed first (it
	// must have a Flush method, as a bufio.Writer does), and what the kernel sent is reported
	// to Sock.Sent.
	Sock Socket
}

// Holder is a Plan.W that can take a whole payload by reference instead of a copy: it writes p
// in its place at its next flush and closes c once p is written (or never will be). Get hands it
// a payload that lies in memory already checked (blobcache.Reader.Buffered) of at least holdMin
// bytes.
type Holder interface {
	Hold(p []byte, c io.Closer)
}

// holdMin is the smallest payload handed to a Holder: below it, a copy costs less than a piece
// more of the vectored write.
const holdMin = 4 << 10

// Socket is a connection a payload can be sent to from a file (Plan.Sock).
type Socket interface {
	io.Writer
	syscall.Conn
	// Sent counts n bytes the kernel sent to the socket without a Write.
	Sent(n int64)
}

// Get looks key up. On a hit it calls begin with the item's Info, then writes what begin's Plan
// asks for. found reports whether begin was called: false for a miss or an expired item. err is
// begin's error, W's, or the read's (an I/O error, or a checksum mismatch found at the end of
// the blob, after its bytes were written: the caller must then make the client drop them). An
// error before begin with found false means the blob could not be read at all.
//
// The buffers a Get holds count against the memory budget like values do: past it, Get fails
// with ErrBusy (or ctx's error) before begin.
//
// begin may be called more than once, when the blob changes under a ranged read before
// anything was written; it must not write to the client itself.
func (s *Store) Get(ctx context.Context, key []byte, begin func(Info) (Plan, error)) (found bool, err error) {
	return s.lookup(ctx, key, begin, readGet, blobcache.CompressionNone)
}

// Send is Get for a caller whose plans name the socket W writes to (Plan.Sock): the lookup
// leaves a large value in its segment file (blobcache.Cache.Open), from where a whole payload
// goes to the socket without a copy through user space. A plan without a socket, or for part of
// the payload, is served as Get serves it, with one more positioned read.
func (s *Store) Send(ctx context.Context, key []byte, begin func(Info) (Plan, error)) (found bool, err error) {
	return s.lookup(ctx, key, begin, readOpen, blobcache.CompressionNone)
}

// SendEncoded is Send for a client that takes a payload compressed with accept as it is stored
// (blobcache.Cache.OpenEncoded): Info.Encoding says which a Get delivers.
func (s *Store) SendEncoded(ctx context.Context, key []byte, accept blobcache.Compression, begin func(Info) (Plan, error)) (found bool, err error) {
	return s.lookup(ctx, key, begin, readOpen, accept)
}

// SendResident is Send for a caller that must not wait for the device, such as an event loop: a
// blob that lies in a segment file and not in the memory tier is not read, and SendResident
// returns ErrNotResident without calling begin (blobcache.Cache.OpenResidentInto); the caller
// then calls Send where a read may wait.
func (s *Store) SendResident(ctx context.Context, key []byte, begin func(Info) (Plan, error)) (found bool, err error) {
	return s.lookup(ctx, key, begin, readResident, blobcache.CompressionNone)
}

// ErrNotResident is SendResident's answer for a blob it would have to read from a file.
var ErrNotResident = errors.New("store: blob not in memory")

// readMode is how a lookup reads a blob.
type readMode uint8

const (
	readGet      readMode = iota // Get: the value into memory
	readOpen                     // Send: a large value left in its segment file
	readResident                 // SendResident: Send, or ErrNotResident
)

func (s *Store) lookup(ctx context.Context, key []byte, begin func(Info) (Plan, error), mode readMode, accept blobcache.Compression) (found bool, err error) {
	for range 3 {
		found, retry, err := s.get(ctx, key, begin, mode, accept)
		if !retry {
			return found, err
		}
	}
	return false, nil // the blob kept changing: as good as a miss
}

// errStop ends a Get's read early; it never reaches the caller.
var (
	errStop    = errors.New("store: stop")
	errExpired = errors.New("store: expired")
	errSwitch  = errors.New("store: switch to a ranged read")
)

// switchOffset is where a range read stops reading through the blob from its start and opens a
// ranged read instead: past the bytes the library's first read of a large blob brings in.
const switchOffset = 256 << 10

func (s *Store) get(ctx context.Context, key []byte, begin func(Info) (Plan, error), mode readMode, accept blobcache.Compression) (found, retry bool, err error) {
	t := time.Now()
	slot := readSlots.Get().(*readSlot)
	br := &slot.r
	open := mode != readGet
	var ok bool
	switch {
	case open && accept != blobcache.CompressionNone:
		ok = s.c.OpenEncodedInto(br, key, accept)
	case mode == readResident:
		var resident bool
		if ok, resident = s.c.OpenResidentInto(br, key); !resident {
			readSlots.Put(slot)
			return false, false, ErrNotResident
		}
	case open:
		ok = s.c.OpenInto(br, key)
	default:
		ok = s.c.GetInto(br, key)
	}
	s.m.ObserveGet(time.Since(t), ok)
	if !ok {
		readSlots.Put(slot)
		return false, false, nil
	}
	handed := false // the slot went to a Holder, which closes it
	defer func() {
		if !handed {
			slot.Close()
		}
	}()
	info := br.Info()
	// The copy buffer, and the library's own buffers for a streamed blob, count against the
	// memory budget: a slow client holds them for as long as it takes to read.
	held := readMemory(s.c, len(key), len(info.Attrs), br.Size())
	if err := s.acquire(ctx, held, true); err != nil {
		return false, false, err
	}
	defer s.release(held)
	d := decoders.Get().(*decoder)
	defer func() {
		*d = decoder{} // no reference to the plan's writer or the caller's begin is kept
		decoders.Put(d)
	}()
	*d = decoder{s: s, begin: begin, blobSize: br.Size(), info: info, enc: br.Encoding()}
	d.sum, d.hasSum = br.Checksum()
	if b, ok := br.Buffered(); ok && !d.info.Legacy && int64(len(b)) == d.blobSize && len(b) >= holdMin {
		// The value lies in memory, checked: a plan whose writer can hold it takes it by
		// reference, and writes it with the answer around it at its next flush.
		if _, err = d.Write(nil); err == nil {
			if h, ok := d.w.(Holder); ok && d.skip == 0 && d.left == d.blobSize {
				h.Hold(b, slot)
				handed = true
				return true, false, nil
			}
		}
	}
	if err == nil && open && !d.info.Legacy && d.blobSize > blobcache.OpenHead && !br.Verifies() {
		// The value is in the segment file (Open): ask for the plan now, and send a whole
		// payload to the plan's socket from the file, or hand it to W's ReadFrom.
		if _, err = d.Write(nil); err == nil && d.sock != nil {
			sent, err := sendOut(d.w, d.sock, br)
			return true, false, wrapSend(sent, err)
		}
		if err == nil && d.from {
			sent, err := d.w.(io.ReaderFrom).ReadFrom(br)
			return true, false, wrapSend(sent, err)
		}
	}
	if err == nil {
		err = copyOut(d, br)
	}
	br.Close()
	if err == nil && d.held {
		// The reader finished without error, so its checks passed: release the last byte.
		_, err = d.w.Write(d.last[:])
	}
	switch {
	case err == nil && !d.began && d.blobSize == 0:
		// An empty blob: WriteTo wrote nothing, so begin was not called yet.
		if _, err := d.Write(nil); err != nil && err != errStop {
			return true, false, err
		}
		return true, false, nil
	case err == errExpired:
		return false, false, nil
	case err == errStop:
		return true, false, nil
	case err == errSwitch:
		return s.getRange(key, d)
	}
	return d.began, false, err
}

// getRange serves a range that starts past switchOffset with a ranged read, after checking that
// the blob is still the one whose Info began the Get.
func (s *Store) getRange(key []byte, d *decoder) (found, retry bool, err error) {
	slot := readSlots.Get().(*readSlot)
	defer slot.Close()
	rr := &slot.r
	if !s.c.GetRangeInto(rr, key, d.hdr+d.skip, d.left) {
		return false, true, nil
	}
	if sum, has := rr.Checksum(); !has || sum != d.sum {
		return false, true, nil
	}
	return true, false, copyOut(d.w, rr)
}

// sendOut flushes w, the writer of the plan, and sends the value r holds to sock, counting what
// the kernel sent past Write with sock.Sent. It returns how many payload bytes reached sock.
func sendOut(w io.Writer, sock Socket, r *blobcache.Reader) (int64, error) {
	if f, ok := w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			return 0, err
		}
	}
	cw := &countedSocket{Socket: sock}
	n, err := r.WriteTo(cw)
	sock.Sent(n - cw.written)
	return n, err
}

// wrapSend is a send's error for Get's caller, which must close the connection: part of the
// payload may be out.
func wrapSend(sent int64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: send: %d payload bytes out: %w", sent, err)
}

// countedSocket counts the bytes written to a Socket with Write.
type countedSocket struct {
	Socket
	written int64
}

func (c *countedSocket) Write(p []byte) (int, error) {
	n, err := c.Socket.Write(p)
	c.written += int64(n)
	return n, err
}

// readMemory is the memory a Get of a blob of size bytes, under a key of keyLen bytes with
// attrLen bytes of attributes, holds while it writes to its client, as the library counts it.
// A blob up to wholeBlob is read to its end before its first byte is written, and written from
// one buffer: the Reader's own (blobcache.Cache.ReadMemory), when the library read it whole and
// hands it over (Reader.Buffered), or else copyOut's (blobcache.BufferSize), into which the
// Reader reads and which it hands its own buffers back before; so the larger of the two. A blob
// over wholeBlob streams to the client through copyOut's buffer and the Reader's together.
func readMemory(c *blobcache.Cache, keyLen, attrLen int, size int64) int64 {
	if size <= wholeBlob {
		return max(int64(blobcache.BufferSize(int(size))), c.ReadMemory(keyLen, attrLen, size))
	}
	return int64(blobcache.BufferSize(copyChunk)) + c.ReadMemory(keyLen, attrLen, size)
}

// copyChunk is the buffer of copyOut for a large blob; wholeBlob is the size up to which a blob
// is read whole before any of it is written, so that a checksum mismatch is known before the
// client has a byte (blobcache.Cache.Get reads such a blob with one positioned read). They are
// the store's choices: what the library holds meanwhile is the library's to say (readMemory).
const (
	copyChunk = 256 << 10
	wholeBlob = 1 << 20
)

// copyOut copies r to w and reports io.EOF as success. A blob up to wholeBlob bytes is read
// whole first, so that a checksum mismatch is known before its first byte is written (the
// caller can still answer with an error); a larger one is streamed through a buffer.
//
// It does not use r.WriteTo (nor io.Copy, which would call it): the library's WriteTo of a
// verified blob held in memory returns the blob's pooled buffer before it writes from it, so
// another Get may overwrite the bytes being written (see the report on read.go). Read copies
// before it releases anything.
func copyOut(w io.Writer, r *blobcache.Reader) error {
	size := r.Size()
	if b, ok := r.Buffered(); ok && int64(len(b)) == size {
		// In memory and checked (the memory tier's, or read whole): written from where it lies,
		// with no copy into a buffer of the store's. The caller closes r after this returns.
		_, err := w.Write(b)
		return err
	}
	if size <= wholeBlob {
		buf := blobcache.GetBuffer(int(size))
		defer blobcache.PutBuffer(buf)
		b := *buf
		n := 0
		for {
			var err error
			if n < len(b) {
				var k int
				k, err = r.Read(b[n:])
				n += k
			} else {
				// All size bytes are in, and the Read that gave the last did not say the blob
				// ended: this one must (or report the check's failure).
				var spare [1]byte
				var k int
				if k, err = r.Read(spare[:]); k > 0 {
					return fmt.Errorf("store: blob longer than its size %d", size)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		_, err := w.Write(b[:n])
		return err
	}
	buf := blobcache.GetBuffer(copyChunk)
	defer blobcache.PutBuffer(buf)
	for {
		n, err := r.Read(*buf)
		if n > 0 && (err == nil || err == io.EOF) { // a damaged tail is not written
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// decoders keeps decoders for the next Get: a hit allocates none of its own.
var decoders = sync.Pool{New: func() any { return new(decoder) }}

// readSlot is a Reader the store owns (blobcache.Cache.GetInto), reused from Get to Get through
// readSlots, so that a hit allocates no Reader. Close closes the reader and hands the slot back:
// it is called once, by Get or by the Holder a payload went to by reference, and nothing uses
// the slot after.
type readSlot struct{ r blobcache.Reader }

var readSlots = sync.Pool{New: func() any { return new(readSlot) }}

func (s *readSlot) Close() error {
	s.r.Close()
	readSlots.Put(s)
	return nil
}

// decoder is the io.Writer a blob's reader writes to: it collects the item header, asks begin
// for a plan, then passes the planned payload bytes on.
type decoder struct {
	s        *Store
	begin    func(Info) (Plan, error)
	blobSize int64
	info     blobcache.BlobInfo
	enc      blobcache.Compression // the blob's bytes as delivered (Reader.Encoding)
	sum      uint32
	hasSum   bool

	head  [item.HeaderSize]byte
	nhead int
	began bool
	hdr   int64 // item header bytes at the start of the blob

	w    io.Writer
	sock Socket // the plan's, when the payload is whole and goes there from the file
	// from says a whole payload goes to w's ReadFrom (Plan.ReadFrom).
	from  bool
	skip  int64 // payload bytes still to skip
	left  int64 // payload bytes still to write
	toEnd bool  // the range ends with the blob: let the reader finish (and verify)

	// With toEnd, the blob's last byte is held back until the reader has finished, because a
	// streamed blob's checksum mismatch is reported only after its last bytes were handed
	// over: a client must never receive a whole body that failed its check.
	last [1]byte
	held bool
}

func (d *decoder) Write(p []byte) (int, error) {
	n := len(p)
	if !d.began {
		want := int(min(item.HeaderSize, d.blobSize))
		if !d.info.Legacy {
			want = 0 // the meta is in the record; only a legacy blob has an item header
		}
		k := copy(d.head[d.nhead:want], p)
		d.nhead += k
		p = p[k:]
		if d.nhead < want {
			return n, nil
		}
		if err := d.start(); err != nil {
			return 0, err
		}
		if d.hdr == 0 {
			if err := d.emit(d.head[:d.nhead]); err != nil {
				return 0, err
			}
		}
	}
	if err := d.emit(p); err != nil {
		return 0, err
	}
	return n, nil
}

// start decodes the head and asks for the plan.
func (d *decoder) start() error {
	d.began = true
	var m item.Meta
	if d.info.Legacy {
		var hl int
		m, hl = item.Decode(d.head[:d.nhead], d.blobSize)
		d.hdr = int64(hl)
	} else {
		m.Flags = d.info.Flags
		if !d.info.Expires.IsZero() {
			m.Expires = d.info.Expires.Unix()
		}
	}
	if m.Expired(d.s.now()) {
		return errExpired
	}
	size := d.blobSize - d.hdr
	plan, err := d.begin(Info{Meta: m, Size: size, BlobSize: d.blobSize, Sum: d.sum, HasSum: d.hasSum,
		Version: d.info.Version, Created: d.info.Created, Attrs: d.info.Attrs, Encoding: d.enc})
	if err != nil {
		return err
	}
	if plan.W == nil {
		return errStop
	}
	off := min(max(plan.Off, 0), size)
	end := size
	if plan.N >= 0 {
		end = min(size, off+plan.N)
	}
	d.w, d.skip, d.left, d.toEnd = plan.W, off, end-off, end == size
	if off == 0 && d.toEnd && d.hdr == 0 && d.left > 0 {
		_, isFrom := plan.W.(io.ReaderFrom)
		d.sock, d.from = plan.Sock, plan.Sock == nil && plan.ReadFrom && isFrom
	}
	if d.left == 0 {
		if d.toEnd {
			return nil // let the reader finish
		}
		return errStop
	}
	if d.hdr+off > switchOffset && d.hasSum {
		return errSwitch
	}
	return nil
}

// emit skips and writes payload bytes.
func (d *decoder) emit(p []byte) error {
	if d.skip > 0 {
		k := min(int64(len(p)), d.skip)
		d.skip -= k
		p = p[k:]
	}
	if len(p) == 0 || d.left == 0 {
		return nil
	}
	p = p[:min(int64(len(p)), d.left)]
	d.left -= int64(len(p))
	if d.left == 0 && d.toEnd {
		d.last[0], d.held = p[len(p)-1], true
		p = p[:len(p)-1]
	}
	if _, err := d.w.Write(p); err != nil {
		return err
	}
	if d.left == 0 && !d.toEnd {
		return errStop
	}
	return nil
}

// Inflight is the memory held by reserved values now.
func (s *Store) Inflight() int64 { return s.inflight.Load() }
