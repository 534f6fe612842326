package blobcache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/seed57392e9e/blobcache/internal/bloom"
	"github.com/seed57392e9e/blobcache/internal/cachedir"
	"github.com/seed57392e9e/blobcache/internal/codec"
	"github.com/seed57392e9e/blobcache/internal/index"
	"github.com/seed57392e9e/blobcache/internal/intent"
	"github.com/seed57392e9e/blobcache/internal/memtier"
	"github.com/seed57392e9e/blobcache/internal/policy"
	"github.com/seed57392e9e/blobcache/internal/record"
	"github.com/seed57392e9e/blobcache/internal/vfs"
)

// Short names of the directory's entries, whose home is internal/cachedir.
const (
	lockFile     = cachedir.LockFile
	identityFile = cachedir.IdentityFile
	stateFile    = cachedir.StateFile
	bloomFile    = cachedir.BloomFile
	segDir       = cachedir.SegmentsDir
	blobDir      = cachedir.BlobsDir
)

// Cache is a blob cache on local disk. All methods are safe for concurrent use.
type Cache struct {
	opts Options
	dir  string
	lock io.Closer

	idx       index.Index
	bloom     atomic.Pointer[bloom.Filter]
	bloomNext atomic.Pointer[bloom.Filter] // set while a rebuild runs; Puts add to both
	rebuildMu sync.Mutex

	diskBytes atomic.Int64 // the space the layout's files take (space.go, perblob.go)

	// segs is the segment layout (seglayout.go): the live segments, placement, seals and
	// eviction. With PerBlobFiles it holds no segment, and layout is the blob files.
	segs      *segmentLayout
	layout    layout
	w         *writer
	unflushed unflushed  // the write buffer as reads see it
	stale     staleQueue // keys reads found stale, for the writer's tombstones (stale.go)

	// keep is what the cache keeps (internal/policy decides; policy.go); rs copies the records
	// worth keeping when eviction reinserts (reinsert.go), nil otherwise.
	keep    *policy.Policy
	mem     *memtier.Tier     // the memory tier (memory.go); nil without MemorySize
	comp    *codec.Compressor // compresses values (compress.go); nil without Compression
	intents *intent.Log       // the intent log (intents.go); nil for a read-only cache
	memGate memoryGate
	rs      *reinserter
	closed  atomic.Bool
	stats   counters

	lastCorruption atomic.Pointer[string]
	directOff      string // why direct I/O was turned off at open (probeDirect), or ""

	vers      versions
	idVersion uint32 // the identity file's format version when opened

	lost [][]byte // keys lost to damage found by recovery, forgotten durably by New

	fills fillGate // whether hits fill the page cache (readroute.go)

	bg struct {
		sync.Mutex
		started bool
		stop    chan struct{}
		wg      sync.WaitGroup
	}
	closeOnce sync.Once
	closeErr  error
}

// New opens the cache in directory path, creating it if it does not exist, and recovers what is
// on disk: sealed segments through their footers, unsealed ones by scanning (a torn tail is cut
// back to its last whole record). A non-empty directory that is not a BlobCache, or one that
// another process has open, is refused.
func New(path string, opts ...Option) (*Cache, error) {
	var o Options
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	given := o
	o = o.withDefaults()
	c := &Cache{opts: o, dir: path}
	c.segs = newSegmentLayout(c)
	c.unflushed.init()
	if err := c.openDir(); err != nil {
		return nil, err
	}
	if given.MaxSize == MaxSizeAuto {
		// The bound is known now: derive again what derives from it.
		given.MaxSize, given.PerBlobFiles = c.opts.MaxSize, c.opts.PerBlobFiles
		if err := given.Validate(); err != nil {
			c.lock.Close()
			return nil, fmt.Errorf("blobcache: %s: MaxSizeAuto chose %d bytes: %w", path, given.MaxSize, err)
		}
		d := given.withDefaults()
		c.opts.SegmentSize, c.opts.WriteBufferSize = d.SegmentSize, d.WriteBufferSize
	}
	c.probeDirect()
	o = c.opts // openDir adopts the directory's storage mode; probeDirect may turn direct I/O off
	c.keep = newPolicy(&o)
	if o.MemorySize > 0 {
		c.mem = memtier.New(o.MemorySize)
	}
	if o.Compression != CompressionNone {
		var err error
		if c.comp, err = codec.NewCompressor(codec.Codec(o.Compression)); err != nil {
			c.lock.Close()
			return nil, fmt.Errorf("blobcache: %w", err)
		}
	}
	switch o.Index {
	case IndexSkipList:
		c.idx = index.NewSkipList()
	default:
		c.idx = index.NewHashTable(int(o.ExpectedBlobs))
	}
	if o.PerBlobFiles {
		c.layout = &blobFiles{c: c}
	} else {
		c.layout = c.segs
	}
	stamp, err := c.layout.recover()
	if err != nil {
		c.closeSegments()
		c.lock.Close()
		return nil, err
	}
	c.loadBloom(stamp)
	if err := c.openVersions(); err != nil {
		c.closeSegments()
		c.lock.Close()
		return nil, err
	}
	if err := c.openIntents(); err != nil {
		c.closeSegments()
		c.lock.Close()
		return nil, err
	}
	if o.ReadOnly {
		c.lost = nil // forgotten in the index by their delete entries; nothing is written
		return c, nil
	}
	if o.MaxSize > 0 {
		if err := c.layout.evict(o.MaxSize); err != nil {
			c.closeSegments()
			c.intents.Close()
			c.lock.Close()
			return nil, err
		}
	}
	if c.keep.Reinserts() {
		c.rs = newReinserter(c)
	}
	c.w = newWriter(c)
	if len(c.lost) > 0 {
		// Make the forgetting of keys lost to damage durable: tombstones for those with no
		// newer record elsewhere.
		c.w.forget(c.lost)
		if err := c.w.drain(true); err != nil {
			c.noteCorruption(fmt.Errorf("blobcache: write tombstones of keys lost to damage: %w", err))
		}
		c.lost = nil
	}
	return c, nil
}

// probeDirect turns direct writes and direct reads off, saying why in Stats.DirectIOOff, if
// the directory's file system refuses O_DIRECT (some do; open(2) fails with EINVAL): the cache
// then works through the page cache instead of failing every write. The probe opens the identity
// file for direct reading, which needs no write, and closes it.
func (c *Cache) probeDirect() {
	if c.opts.BufferedWrites && c.opts.BufferedReads {
		return
	}
	f, err := c.opts.fs.OpenDirect(filepath.Join(c.dir, identityFile), os.O_RDONLY, 0)
	if err == nil {
		f.Close()
		return
	}
	c.opts.BufferedWrites, c.opts.DirectIOReads, c.opts.BufferedReads = true, false, true
	c.directOff = fmt.Sprintf("the file system of %s refuses O_DIRECT (%v): reads and writes go through the page cache", c.dir, err)
}

// openVersions reads the state file and leases the first record versions; then a directory
// written before record versions existed is marked as upgraded.
func (c *Cache) openVersions() error {
	damaged, err := c.vers.open(c.opts.fs, c.dir, c.opts.versionLease, c.opts.Clock, c.opts.ReadOnly)
	if err != nil {
		return err
	}
	if damaged != nil {
		c.stats.corrupt.Add(1)
		c.noteCorruption(fmt.Errorf("blobcache: %w (everything stored before this open is forgotten)", damaged))
	}
	if want := c.formatVersion(); c.idVersion < want && !c.opts.ReadOnly {
		id, err := c.readIdentity()
		if err == nil {
			id.Version = want
			err = cachedir.Replace(c.opts.fs, filepath.Join(c.dir, identityFile), id.encode())
		}
		if err != nil {
			return fmt.Errorf("blobcache: upgrade %s: %w", c.dir, err)
		}
	}
	return nil
}

// openDir checks that the directory is a BlobCache (or empty), takes the lock and writes the
// identity file of a new cache. Read-only, it creates nothing: a missing or empty directory is
// ErrNoCache, and the lock taken is shared (see cachedir.Lock).
func (c *Cache) openDir() error {
	fs := c.opts.fs
	if c.opts.ReadOnly {
		if _, err := fs.Stat(c.dir); err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return fmt.Errorf("%w at %s", ErrNoCache, c.dir)
			}
			return fmt.Errorf("blobcache: %w", err)
		}
	} else if err := fs.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("blobcache: create %s: %w", c.dir, err)
	}
	what, entry, err := cachedir.Survey(fs, c.dir)
	switch {
	case err != nil:
		return fmt.Errorf("blobcache: read %s: %w", c.dir, err)
	case what == cachedir.Foreign:
		return fmt.Errorf("%w: %s holds %q and no %s file", ErrNotBlobCache, c.dir, entry, identityFile)
	case what == cachedir.Empty && c.opts.ReadOnly:
		return fmt.Errorf("%w at %s (the directory is empty)", ErrNoCache, c.dir)
	}
	lk, err := c.lockDir()
	if err != nil {
		return err
	}
	c.lock = lk
	idPath := filepath.Join(c.dir, identityFile)
	if what == cachedir.Cache {
		id, err := c.readIdentity()
		if err != nil {
			lk.Close()
			return fmt.Errorf("blobcache: %s: %w", idPath, err)
		}
		// A cache keeps the storage mode it was created with.
		c.opts.PerBlobFiles = id.Flags&flagPerBlob != 0
		c.idVersion = id.Version
	} else {
		// An empty directory, or a creation a crash cut short: Replace starts it again.
		id := newIdentity().withMode(c.opts.PerBlobFiles)
		id.Version = c.formatVersion()
		if err := cachedir.Replace(fs, idPath, id.encode()); err != nil {
			lk.Close()
			return err
		}
		c.idVersion = id.Version
	}
	if c.opts.MaxSize == MaxSizeAuto {
		if err := c.adoptBound(); err != nil {
			lk.Close()
			return err
		}
	}
	if c.opts.ReadOnly {
		return nil
	}
	if err := fs.MkdirAll(c.segs.dir, 0o755); err != nil {
		lk.Close()
		return fmt.Errorf("blobcache: create %s: %w", c.segs.dir, err)
	}
	return nil
}

// lockDir takes the directory's lock (cachedir.Lock: exclusive, or shared for a read-only
// cache) and reports a lock another process holds as ErrLocked.
func (c *Cache) lockDir() (io.Closer, error) {
	lk, err := cachedir.Lock(c.opts.fs, c.dir, c.opts.ReadOnly)
	switch {
	case err == nil:
		return lk, nil
	case errors.Is(err, vfs.ErrLocked):
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, c.dir, err)
	default:
		return nil, fmt.Errorf("blobcache: lock %s: %w", c.dir, err)
	}
}

func (c *Cache) readIdentity() (identity, error) {
	b, err := cachedir.ReadFile(c.opts.fs, filepath.Join(c.dir, identityFile))
	if err != nil {
		return identity{}, err
	}
	return decodeIdentity(b)
}

// Put stores value under key. It copies value, so the caller may reuse it at once. The blob is
// visible to Get as soon as Put returns, and is in a segment after the next flush (Drain forces
// one). Put blocks while the write buffers are full.
func (c *Cache) Put(key, value []byte) error { return c.put(key, value, 0, false, true, nil) }

// UnsafePut is Put without the copy: the caller must not modify value until Drain returns (or
// the cache is closed). With direct writes (the default; see Options.BufferedWrites) it copies
// like Put.
func (c *Cache) UnsafePut(key, value []byte) error { return c.put(key, value, 0, false, false, nil) }

// PutChecksummed is Put with the blob's checksum computed by the caller with the configured hash
// (CRC-32C unless WithChecksumHash). A checksum that does not match the value is refused with
// ErrChecksumMismatch, so a blob damaged before it reached the cache is never stored.
func (c *Cache) PutChecksummed(key, value []byte, checksum uint32) error {
	return c.put(key, value, checksum, true, true, nil)
}

// UnsafePutChecksummed is PutChecksummed without the copy (see UnsafePut).
func (c *Cache) UnsafePutChecksummed(key, value []byte, checksum uint32) error {
	return c.put(key, value, checksum, true, false, nil)
}

// MaxValueSize is the largest value the cache accepts for a key of length keyLen: a record must
// fit in one segment, with its footer entry, the trailer and (with DirectIO) its padding. A
// record larger than a write buffer is not buffered: Put and PutFrom write it straight into its
// segment (see stream.go). In the one-file-per-blob mode a record must fit in one write buffer.
func (c *Cache) MaxValueSize(keyLen int) int64 { return c.layout.maxValueSize(keyLen) }

// buffered reports whether a record of n bytes goes through a write buffer; a larger one is
// written straight into its segment.
func (c *Cache) buffered(n int64) bool {
	return !c.layout.streams() || n <= c.opts.WriteBufferSize
}

// stamp gives hdr its version (a new one, or the one m keeps) and m's metadata, and tells m the
// version.
func (c *Cache) stamp(hdr *record.Header, m *writeMeta) error {
	if m != nil && m.keep != 0 {
		hdr.Version = m.keep
	} else {
		v, err := c.vers.next()
		if err != nil {
			return err
		}
		hdr.Version = v
	}
	if m != nil {
		hdr.Expires, hdr.ClientFlags = m.expires, m.clientFlags
		if hdr.Kind == record.KindPut && len(m.attrs) > 0 {
			hdr.AttrLen, hdr.AttrCRC = uint32(len(m.attrs)), record.CRC(m.attrs)
		}
		m.version = hdr.Version
	}
	return nil
}

// attrsOf is the attributes a write with meta m stores.
func attrsOf(m *writeMeta) []byte {
	if m == nil {
		return nil
	}
	return m.attrs
}

// checkSize refuses a value of n bytes with attrs for key that no record can hold.
func (c *Cache) checkSize(key, attrs []byte, n int64) error {
	if len(attrs) > MaxAttrLen {
		return fmt.Errorf("%w: %d attribute bytes, the limit is %d", ErrValueTooLarge, len(attrs), MaxAttrLen)
	}
	if max := c.MaxValueSize(len(key)); n+int64(len(attrs)) > max {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrValueTooLarge, n+int64(len(attrs)), max)
	}
	return nil
}

func (c *Cache) checkKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}

// put writes a record of value under key; m, if not nil, carries its metadata and the
// observation of a conditional write (see conditional.go), and gets the version stored.
func (c *Cache) put(key, value []byte, sum uint32, hasSum, copyValue bool, m *writeMeta) error {
	if err := c.writable(); err != nil {
		return err
	}
	if err := c.checkKey(key); err != nil {
		return err
	}
	if err := c.checkSize(key, attrsOf(m), int64(len(value))); err != nil {
		return err
	}
	// The record as stored: a compressed value is what is counted and written (compress.go).
	stored, sbuf, compressed := c.compress(value)
	if compressed {
		defer putBuf(sbuf)
	} else {
		stored = value
	}
	n := record.HeaderSize + int64(len(key)) + int64(len(stored)) + int64(len(attrsOf(m)))
	h := record.KeyHash(key)
	if c.declines(key, h, n, m) {
		return c.decline(key, h, m)
	}
	var want *uint32 // the caller's checksum, for PutChecksummed
	if hasSum {
		want = &sum
	}
	if !c.buffered(n) {
		// Too large for a write buffer: written straight from value before Put returns, its
		// checksums computed on the way, as given.
		return c.putFromStream(key, bytes.NewReader(value), int64(len(value)), want, m)
	}
	hdr := record.Header{
		Kind:     record.KindPut,
		KeyLen:   uint32(len(key)),
		ValueLen: uint32(len(value)),
		CTime:    c.opts.Clock().UnixNano(),
	}
	vc := c.writeCheck(hasSum || c.opts.Checksum)
	vc.write(value)
	if err := vc.seal(&hdr, want); err != nil {
		return err
	}
	if compressed {
		c.compressInto(&hdr, value, stored)
		copyValue = true // stored lies in a pooled buffer
	}
	if err := c.stamp(&hdr, m); err != nil {
		return err
	}
	held := c.prepareWritten(h, hdr, key, value, attrsOf(m))
	accepted, err := c.w.append(h, hdr, key, stored, copyValue, held, m)
	if accepted {
		c.bloomAdd(h)
		c.stats.puts.Add(1)
	}
	return err
}

// bloomHash is what the bloom filter takes for key hash h. The index keeps only part of h
// (index.Canonical), and the filter is rebuilt from the index (rebuildBloom), so it takes the
// index's part of h too, mixed again (index.FilterHash). bloomFormat says so in a saved filter's
// stamp.
func bloomHash(h uint64) uint64 { return index.FilterHash(h) }

// bloomFormat is the first word of a saved filter's stamp: the directory format, and in bits 16
// up how the filter's keys are hashed (1: bloomHash). A filter saved with other keys is rebuilt.
const bloomFormat = identityVersion | 1<<16

// bloomAdd adds h to the filter, and to the one being rebuilt if any. Loading next before the
// current filter is what keeps a rebuild from losing a key (see rebuildBloom).
func (c *Cache) bloomAdd(h uint64) {
	h = bloomHash(h)
	next := c.bloomNext.Load()
	c.bloom.Load().Add(h)
	if next != nil {
		next.Add(h)
	}
}

// Delete removes key. Get misses it as soon as Delete returns. With Fsync, Delete returns after
// the deletion is durable, so it is never undone by a crash.
func (c *Cache) Delete(key []byte) error { return c.delete(key, nil) }

// delete writes a tombstone for key if it may have a blob; m is as for put.
func (c *Cache) delete(key []byte, m *writeMeta) error {
	if err := c.writable(); err != nil {
		return err
	}
	if err := c.checkKey(key); err != nil {
		return err
	}
	// Only a key the cache may hold gets a tombstone.
	h := record.KeyHash(key)
	if !c.bloom.Load().Test(bloomHash(h)) {
		return nil
	}
	var l keyLookup
	l.start(c, key, h, nil)
	if v, ok := l.buffered(); ok && v.Kind != record.KindPut || !ok && !l.inIndex() {
		return nil
	}
	hdr := record.Header{Kind: record.KindDelete, KeyLen: uint32(len(key)), CTime: c.opts.Clock().UnixNano()}
	if err := c.stamp(&hdr, m); err != nil {
		return err
	}
	c.keep.Charge(hdr.Len()) // a tombstone is always written, and counts
	accepted, err := c.w.append(l.h, hdr, key, nil, true, nil, m)
	if !accepted {
		return err
	}
	c.stats.deletes.Add(1)
	if err != nil {
		return err // an earlier failure; this Delete is taken all the same
	}
	if c.opts.Fsync {
		return c.w.drain(true)
	}
	return nil
}

// Drain returns once every Put, UnsafePut and Delete that returned before the call is written
// to a segment and in the index, and synced when Fsync is on. If a batch fails to write, its
// blobs are forgotten; Flush reports that, as do the next Put and Stats.FlushErrors.
func (c *Cache) Drain() {
	if !c.closed.Load() && c.w != nil {
		_ = c.w.drain(false)
	}
}

// Flush is Drain that returns an error wrapping ErrWriteFailed if a batch failed to write
// meanwhile, and ErrClosed after Close.
func (c *Cache) Flush() error {
	if c.closed.Load() {
		return ErrClosed
	}
	if c.w == nil {
		return nil // read-only: nothing was written
	}
	return c.w.drain(true)
}

// Close drains the write buffer, seals the active segment, saves the bloom filter and releases
// the directory. Operations after Close return ErrClosed (Get misses).
func (c *Cache) Close() error {
	c.closeOnce.Do(func() {
		c.stopBackground()
		c.closed.Store(true)
		if c.w == nil { // read-only: nothing to write
			c.closeSegments()
			c.mem.Close()
			c.closeErr = c.lock.Close()
			return
		}
		failed := c.stats.flushErrors.Load()
		unreported := c.w.takeUnreported() // a failure before Close that no caller was told of
		if c.rs != nil {
			c.rs.close()
		}
		c.segs.hurryAll() // the seals Close queues, and those waiting for write-back, sync now
		c.w.close()
		c.segs.sealers.Wait()
		var errs []error
		switch {
		case c.stats.flushErrors.Load() > failed:
			errs = append(errs, c.w.lastError())
		case unreported != nil:
			errs = append(errs, unreported)
		default:
			if err := c.w.brokenErr(); err != nil {
				errs = append(errs, err) // writes were refused: what was accepted before may be lost
			}
		}
		if err := c.saveBloom(); err != nil {
			errs = append(errs, err)
		}
		c.closeSegments()
		// The memory tier's memory lies outside the Go heap: given back now, or, for values a
		// Reader still holds, as each is released.
		c.mem.Close()
		if c.opts.Fsync {
			if err := c.opts.fs.SyncDir(c.segs.dir); err != nil {
				errs = append(errs, err)
			}
		}
		// Every write is committed: no intent is pending.
		if err := c.intents.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := c.lock.Close(); err != nil {
			errs = append(errs, err)
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

func (c *Cache) closeSegments() {
	c.segs.mu.Lock()
	defer c.segs.mu.Unlock()
	for _, s := range c.segs.all() {
		c.segs.remove(s)
		s.unref()
	}
}

// writable returns why the cache takes no writes (ErrClosed, ErrReadOnly), or nil.
func (c *Cache) writable() error {
	switch {
	case c.closed.Load():
		return ErrClosed
	case c.w == nil:
		return ErrReadOnly
	}
	return nil
}

// noteCorruption remembers the last corruption seen for Stats.
func (c *Cache) noteCorruption(err error) {
	msg := err.Error()
	c.lastCorruption.Store(&msg)
}
