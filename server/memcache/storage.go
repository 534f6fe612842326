package memcache

import (
	"bytes"
	"errors"
	"io"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/store"
)

// storeMode is what a storage command does with the item it finds: memcached's set, add,
// replace, append, prepend and cas, shared by the text commands and ms's modes.
type storeMode uint8

const (
	modeSet storeMode = iota
	modeAdd
	modeReplace
	modeAppend
	modePrepend
	modeCAS
)

// storeModes maps the text storage commands to their modes.
var storeModes = map[string]storeMode{
	"set": modeSet, "add": modeAdd, "replace": modeReplace, "append": modeAppend,
	"prepend": modePrepend, "cas": modeCAS,
}

// storeResult is a storage command's outcome, answered as memcached does: STORED / HD,
// NOT_STORED / NS, EXISTS / EX, NOT_FOUND / NF.
type storeResult uint8

const (
	stored storeResult = iota
	notStored
	exists
	notFound
)

var (
	textResults = [...]string{stored: "STORED", notStored: "NOT_STORED", exists: "EXISTS", notFound: "NOT_FOUND"}
	metaResults = [...]string{stored: "HD", notStored: "NS", exists: "EX", notFound: "NF"}
	// metricResults are the results of blobcache_requests_total.
	metricResults = [...]string{stored: "stored", notStored: "not_stored", exists: "exists", notFound: "not_found"}
)

// storeCommand answers "<cmd> <key> <flags> <exptime> <bytes> [<cas unique>] [noreply]" for set,
// add, replace, append, prepend and cas. As in memcached, a token after the last one expected
// other than noreply is ignored.
func (c *conn) storeCommand(name string, toks [][]byte) (string, error) {
	c.s.stats.cmdSet.Add(1)
	mode := storeModes[name]
	want := 5
	if mode == modeCAS {
		want = 6
	}
	if len(toks) != want && len(toks) != want+1 {
		c.clientError("bad command line format")
		return "error", errors.New("memcache: unreadable " + name + " command")
	}
	c.noreply(toks)
	n, ok := parseLength(toks[4])
	if !ok {
		c.clientError("bad command line format")
		return "error", errors.New("memcache: unreadable " + name + " command")
	}
	flags, okF := parseUint(toks[2], 32)
	exptime, okE := parseInt(toks[3])
	var casID uint64
	okC := true
	if mode == modeCAS {
		casID, okC = strtoull(toks[5])
	}
	if !okF || !okE || !okC {
		return "error", c.refuse(n, "CLIENT_ERROR bad command line format")
	}
	key := toks[1]
	if err := checkKey(key); err != nil {
		return "error", c.refuse(n, "CLIENT_ERROR bad command line format")
	}
	key = append([]byte(nil), key...) // the line buffer is reused by the data read
	res, line, _, err := c.storeValue(mode, key, n, uint32(flags), exptime, casID)
	if err != nil {
		return "error", err
	}
	if line != "" {
		c.reply(line)
		return "error", nil
	}
	c.reply(textResults[res])
	return metricResults[res], nil
}

// refuse reads past a data block of n bytes and answers line.
func (c *conn) refuse(n int64, line string) error {
	if err := c.swallow(n); err != nil {
		return err
	}
	c.reply(line)
	return nil
}

// errNotStored is returned by an update function to leave the item as it is: NOT_STORED.
var errNotStored = errors.New("memcache: not stored")

// errCASMismatch is returned by an update function whose cas test failed: EXISTS.
var errCASMismatch = errors.New("memcache: cas mismatch")

// storeValue reads a data block of n bytes and stores it under key the way mode says, with
// client flags and memcached exptime (ignored by append and prepend, which keep the item's),
// and, for modeCAS and a non-zero casID with append and prepend, only if the item's cas is
// casID. It returns the result and the version stored; or an error line to answer (the block
// was read); or an error that closes the connection (nothing was stored).
func (c *conn) storeValue(mode storeMode, key []byte, n int64, flags uint32, exptime int64, casID uint64) (storeResult, string, uint64, error) {
	if n > c.s.st.MaxValueSize() {
		c.s.stats.tooLarge.Add(1)
		if mode == modeSet {
			// As memcached does, a set that cannot be stored does not leave the old value.
			c.s.st.Delete(key)
		}
		return 0, "SERVER_ERROR object too large for cache", 0, c.swallow(n)
	}
	if mode == modeAppend || mode == modePrepend {
		return c.appendValue(mode, key, n, casID)
	}
	v, err := c.reserve(n)
	if err != nil {
		c.s.cfg.Metrics.Busy("memcache")
		return 0, "SERVER_ERROR busy, try again", 0, c.swallow(n)
	}
	defer v.Release()
	expires, live := item.ExpiresAt(exptime, c.s.st.Now())
	var cond blobcache.Precondition
	switch mode {
	case modeAdd:
		cond = blobcache.IfAbsent()
	case modeReplace:
		cond = blobcache.IfPresent()
	case modeCAS:
		cond = blobcache.IfVersion(casID)
	}
	if !live && mode == modeSet {
		// Stored already expired: memcached's way to delete.
		if err := c.swallow(n); err != nil {
			return 0, "", 0, err
		}
		c.s.stats.bytesRead.Add(uint64(n))
		if err := c.s.st.Delete(key); err != nil {
			return 0, storeError(err), 0, nil
		}
		return stored, "", 0, nil
	}
	if !live {
		// A conditional write of an item already expired still tests its condition, and then
		// leaves a miss: an expiry in the past does it.
		expires = 1
	}
	// The data block streams into the cache; one cut short or not ending in "\r\n" stores
	// nothing and closes the connection.
	block := c.dataBlock(n)
	version, err := c.s.st.Put(key, v, block, item.Meta{Flags: flags, Expires: expires}, cond)
	var re *store.ReadError
	if errors.As(err, &re) {
		return 0, "", 0, re.Err
	}
	if err != nil {
		// A write refused (its condition failed, or the cache could not take it) may not have
		// read its block: read past what is left of it.
		if _, derr := io.Copy(io.Discard, block); derr != nil {
			return 0, "", 0, derr
		}
	}
	if res, ok := condResult(mode, err); ok {
		c.countCAS(mode, res)
		if res == stored && live {
			c.s.stats.totalItems.Add(1)
		}
		return res, "", version, nil
	}
	return 0, storeError(err), 0, nil
}

// condResult maps a conditional write's error to memcached's result for mode; ok is false for
// an error that is not the condition's.
func condResult(mode storeMode, err error) (storeResult, bool) {
	switch {
	case err == nil:
		return stored, true
	case errors.Is(err, blobcache.ErrExists), errors.Is(err, blobcache.ErrConflict):
		if mode == modeCAS {
			return exists, true
		}
		return notStored, true
	case errors.Is(err, blobcache.ErrNotFound):
		if mode == modeCAS {
			return notFound, true
		}
		return notStored, true
	}
	return 0, false
}

// countCAS counts a cas command's outcome for stats.
func (c *conn) countCAS(mode storeMode, res storeResult) {
	if mode != modeCAS {
		return
	}
	switch res {
	case stored:
		c.s.stats.casHits.Add(1)
	case exists:
		c.s.stats.casBadval.Add(1)
	case notFound:
		c.s.stats.casMisses.Add(1)
	}
}

// appendValue reads a data block of n bytes and appends or prepends it to key's item, which
// keeps its flags and expiry. A missing item, or a result over the value limit, is NOT_STORED;
// a casID other than 0 that is not the item's is EXISTS.
func (c *conn) appendValue(mode storeMode, key []byte, n int64, casID uint64) (storeResult, string, uint64, error) {
	v, err := c.reserve(n)
	if err != nil {
		c.s.cfg.Metrics.Busy("memcache")
		return 0, "SERVER_ERROR busy, try again", 0, c.swallow(n)
	}
	var data bytes.Buffer
	data.Grow(int(n))
	_, err = io.Copy(&data, c.dataBlock(n))
	v.Release()
	if err != nil {
		return 0, "", 0, err
	}
	limit := c.s.st.MaxValueSize()
	info, err := c.s.st.Update(c.s.ctx, key, func(payload []byte, info store.Info) ([]byte, item.Meta, error) {
		if casID != 0 && info.Version != casID {
			return nil, item.Meta{}, errCASMismatch
		}
		if int64(len(payload))+n > limit {
			return nil, item.Meta{}, errNotStored
		}
		out := make([]byte, 0, len(payload)+int(n))
		if mode == modeAppend {
			out = append(append(out, payload...), data.Bytes()...)
		} else {
			out = append(append(out, data.Bytes()...), payload...)
		}
		return out, info.Meta, nil
	})
	switch {
	case err == nil:
		c.s.stats.totalItems.Add(1) // a new item, as memcached counts it
		return stored, "", info.Version, nil
	case errors.Is(err, errCASMismatch):
		return exists, "", 0, nil
	case errors.Is(err, errNotStored), errors.Is(err, blobcache.ErrNotFound):
		return notStored, "", 0, nil
	case errors.Is(err, store.ErrBusy):
		c.s.cfg.Metrics.Busy("memcache")
		return 0, "SERVER_ERROR busy, try again", 0, nil
	}
	return 0, storeError(err), 0, nil
}
