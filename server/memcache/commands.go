package memcache

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/store"
)

// command reads and answers one command. A non-nil error closes the connection (after the
// answer already buffered is flushed).
func (c *conn) command() error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	start := time.Now()
	c.toks = split(line, c.toks[:0])
	if len(c.toks) == 0 {
		c.w.WriteString("ERROR\r\n")
		return nil
	}
	name := string(c.toks[0])
	if h := c.s.testHooks.command; h != nil {
		h(name)
	}
	if !c.authed {
		return c.authenticate(name, c.toks)
	}
	op := "other"
	result := "ok"
	switch name {
	case "get", "gets":
		op = name
		result, err = c.get(c.toks[1:], name == "gets")
	case "set":
		op = "set"
		result, err = c.set(c.toks)
	case "delete":
		op = "delete"
		result, err = c.delete(c.toks)
	case "mg":
		op = "mg"
		result, err = c.metaGet(c.toks)
	case "ms":
		op = "ms"
		result, err = c.metaSet(c.toks)
	case "md":
		op = "md"
		result, err = c.metaDelete(c.toks)
	case "mn":
		op = "mn"
		c.w.WriteString("MN\r\n")
	case "version":
		op = "version"
		c.w.WriteString("VERSION " + c.s.cfg.Version + "\r\n")
	case "verbosity":
		c.w.WriteString("OK\r\n")
	case "stats":
		op = "stats"
		c.writeStats(len(c.toks) > 1)
	case "quit":
		return errQuit
	case "add", "replace", "append", "prepend", "cas":
		// Storage commands with a data block: read past it so the connection stays in step.
		result = "unsupported"
		var n int64
		ok := len(c.toks) >= 5
		if ok {
			n, ok = parseLength(c.toks[4])
		}
		if !ok {
			c.clientError("bad command line format")
			return errors.New("memcache: unreadable data length")
		}
		if err := c.swallow(n); err != nil {
			return err
		}
		c.serverError(name + " is not supported by blobcache")
	case "incr", "decr", "touch", "gat", "gats", "flush_all", "ma", "me", "mt":
		result = "unsupported"
		c.serverError(name + " is not supported by blobcache")
	default:
		result = "unknown"
		c.w.WriteString("ERROR\r\n")
	}
	if err != nil {
		result = "closed"
	}
	c.s.cfg.Metrics.Request("memcache", op, result, time.Since(start))
	return err
}

// authenticate handles the first command of a connection that must authenticate: memcached's
// ASCII authentication, a set whose data is "<user> <password>".
func (c *conn) authenticate(name string, toks [][]byte) error {
	if name != "set" || len(toks) < 5 {
		c.clientError("unauthenticated")
		return errors.New("memcache: command before authentication")
	}
	n, ok := parseLength(toks[4])
	if !ok || n > 1024 {
		c.clientError("bad authentication data")
		return errors.New("memcache: bad authentication length")
	}
	data, err := io.ReadAll(c.dataBlock(n))
	if err != nil {
		return err
	}
	_, pass, _ := cutSpace(data)
	sum := sha256.Sum256(pass)
	if subtle.ConstantTimeCompare(sum[:], c.s.token[:]) != 1 {
		c.clientError("authentication failure")
		return errors.New("memcache: authentication failure")
	}
	c.authed = true
	c.w.WriteString("STORED\r\n")
	return nil
}

func cutSpace(b []byte) (before, after []byte, found bool) {
	for i, x := range b {
		if x == ' ' {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// cas is the "unique" a gets or mg reports: not a counter the server keeps (there is no cas
// command to check it against), but a value that changes when the stored blob does.
func cas(info store.Info) uint64 {
	return uint64(info.Sum)<<32 | uint64(uint32(info.BlobSize))
}

// get answers get and gets: a VALUE block per hit, then END. A bad key ends the answer with
// CLIENT_ERROR, as in memcached.
func (c *conn) get(keys [][]byte, withCAS bool) (string, error) {
	if len(keys) == 0 {
		c.w.WriteString("ERROR\r\n")
		return "error", nil
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			c.clientError("bad command line format")
			return "error", nil
		}
	}
	result := "hit"
	for _, k := range keys {
		c.s.stats.cmdGet.Add(1)
		began := false
		found, err := c.s.st.Get(c.s.ctx, k, func(info store.Info) (store.Plan, error) {
			began = true
			c.w.WriteString("VALUE ")
			c.w.Write(k)
			c.w.WriteString(" " + strconv.FormatUint(uint64(info.Flags), 10) + " " + strconv.FormatInt(info.Size, 10))
			if withCAS {
				c.w.WriteString(" " + strconv.FormatUint(cas(info), 10))
			}
			c.w.WriteString("\r\n")
			return store.Plan{W: c.w, N: -1}, nil
		})
		switch {
		case err != nil && began:
			// Part of the value is out: only a closed connection tells the client.
			c.s.log.Error("memcache get failed mid-value", "key", fmt.Sprintf("%q", k), "err", err)
			return "error", err
		case errors.Is(err, store.ErrBusy):
			c.s.cfg.Metrics.Busy("memcache") // a miss is always a safe answer from a cache
			found = false
		case err != nil:
			c.s.log.Error("memcache get: cannot read", "key", fmt.Sprintf("%q", k), "err", err)
			found = false
		}
		if found {
			c.s.stats.getHits.Add(1)
			c.w.WriteString("\r\n")
		} else {
			c.s.stats.getMisses.Add(1)
			result = "miss"
		}
	}
	c.w.WriteString("END\r\n")
	return result, nil
}

// set answers "set <key> <flags> <exptime> <bytes> [noreply]".
func (c *conn) set(toks [][]byte) (string, error) {
	c.s.stats.cmdSet.Add(1)
	var n int64
	ok := len(toks) == 5 || len(toks) == 6
	if ok {
		n, ok = parseLength(toks[4])
	}
	if !ok {
		c.clientError("bad command line format")
		return "error", errors.New("memcache: unreadable set command")
	}
	flags, okF := parseUint(toks[2], 32)
	exptime, okE := parseInt(toks[3])
	noreply := len(toks) == 6
	if !okF || !okE || (noreply && string(toks[5]) != "noreply") {
		return "error", c.refuse(n, "CLIENT_ERROR bad command line format")
	}
	key := toks[1]
	if err := checkKey(key); err != nil {
		return "error", c.refuse(n, "CLIENT_ERROR bad command line format")
	}
	key = append([]byte(nil), key...) // the line buffer is reused by the data read
	res, err := c.store(key, n, uint32(flags), exptime)
	if err != nil {
		return "error", err
	}
	if res != "" {
		c.w.WriteString(res + "\r\n")
		return "error", nil
	}
	if !noreply {
		c.w.WriteString("STORED\r\n")
	}
	return "stored", nil
}

// refuse reads past a data block of n bytes and answers msg.
func (c *conn) refuse(n int64, msg string) error {
	if err := c.swallow(n); err != nil {
		return err
	}
	c.w.WriteString(msg + "\r\n")
	return nil
}

// store reads a data block of n bytes and stores it under key. It returns an error line to
// answer (the block was read), or an error that closes the connection (nothing was stored).
func (c *conn) store(key []byte, n int64, flags uint32, exptime int64) (string, error) {
	if n > c.s.st.MaxValueSize() {
		return "SERVER_ERROR object too large for cache", c.swallow(n)
	}
	v, err := c.s.st.Reserve(c.s.ctx, n)
	if err != nil {
		c.s.cfg.Metrics.Busy("memcache")
		return "SERVER_ERROR busy, try again", c.swallow(n)
	}
	defer v.Release()
	expires, live := item.ExpiresAt(exptime, c.s.st.Now())
	if !live {
		// Stored already expired: memcached's way to delete.
		if err := c.swallow(n); err != nil {
			return "", err
		}
		c.s.stats.bytesRead.Add(uint64(n))
		err = c.s.st.Delete(key)
	} else {
		// The data block streams into the cache; one cut short or not ending in "\r\n" stores
		// nothing and closes the connection.
		err = c.s.st.Put(key, v, c.dataBlock(n), item.Meta{Flags: flags, Expires: expires})
		var re *store.ReadError
		if errors.As(err, &re) {
			return "", re.Err
		}
	}
	if err != nil {
		return storeError(err), nil
	}
	return "", nil
}

func storeError(err error) string {
	switch {
	case errors.Is(err, blobcache.ErrValueTooLarge):
		return "SERVER_ERROR object too large for cache"
	case errors.Is(err, blobcache.ErrInvalidKey):
		return "CLIENT_ERROR bad key"
	case errors.Is(err, blobcache.ErrClosed):
		return "SERVER_ERROR shutting down"
	}
	return "SERVER_ERROR " + sanitize(err.Error())
}

// sanitize keeps an error message on one line.
func sanitize(s string) string {
	b := []byte(s)
	for i, x := range b {
		if x < ' ' {
			b[i] = ' '
		}
	}
	return string(b)
}

// delete answers "delete <key> [0] [noreply]".
func (c *conn) delete(toks [][]byte) (string, error) {
	noreply := false
	switch {
	case len(toks) == 3 && string(toks[2]) == "noreply":
		noreply = true
	case len(toks) == 3 && string(toks[2]) == "0":
	case len(toks) == 4 && string(toks[2]) == "0" && string(toks[3]) == "noreply":
		noreply = true
	case len(toks) != 2:
		c.clientError("bad command line format. Usage: delete <key> [noreply]")
		return "error", nil
	}
	if err := checkKey(toks[1]); err != nil {
		c.clientError("bad command line format")
		return "error", nil
	}
	existed, err := c.s.st.Remove(toks[1])
	if err != nil {
		c.w.WriteString(storeError(err) + "\r\n")
		return "error", nil
	}
	if existed {
		c.s.stats.deleteHits.Add(1)
	} else {
		c.s.stats.deleteMisses.Add(1)
	}
	if noreply {
		return "ok", nil
	}
	if existed {
		c.w.WriteString("DELETED\r\n")
		return "deleted", nil
	}
	c.w.WriteString("NOT_FOUND\r\n")
	return "not_found", nil
}

// writeStats answers "stats". Groups ("stats slabs", ...) are empty.
func (c *conn) writeStats(group bool) {
	if !group {
		s := c.s
		cs := s.st.Cache().Stats()
		now := time.Now()
		stat := func(name string, v any) { fmt.Fprintf(c.w, "STAT %s %v\r\n", name, v) }
		stat("pid", os.Getpid())
		stat("uptime", int64(now.Sub(s.start).Seconds()))
		stat("time", now.Unix())
		stat("version", s.cfg.Version)
		stat("curr_connections", s.stats.conns.Load())
		stat("total_connections", s.stats.totalConns.Load())
		stat("cmd_get", s.stats.cmdGet.Load())
		stat("cmd_set", s.stats.cmdSet.Load())
		stat("get_hits", s.stats.getHits.Load())
		stat("get_misses", s.stats.getMisses.Load())
		stat("delete_hits", s.stats.deleteHits.Load())
		stat("delete_misses", s.stats.deleteMisses.Load())
		stat("bytes_read", s.stats.bytesRead.Load())
		stat("curr_items", cs.Blobs)
		stat("bytes", cs.DiskBytes)
		stat("evictions", cs.Evictions)
		stat("blobcache_segments", cs.Segments)
		stat("blobcache_bloom_rejections", cs.BloomRejects)
		stat("blobcache_bloom_false_positives", cs.BloomFalsePositives)
		stat("blobcache_corrupt_records", cs.CorruptRecord)
	}
	c.w.WriteString("END\r\n")
}
