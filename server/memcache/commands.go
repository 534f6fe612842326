package memcache

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/store"
)

// binaryMagic is the first byte of every binary-protocol request; no text command starts with
// it.
const binaryMagic = 0x80

// command reads and answers one command. A non-nil error closes the connection (after the
// answer already buffered is flushed).
func (c *conn) command() error {
	c.quiet = false
	if b, err := c.r.Peek(1); err == nil && b[0] == binaryMagic {
		// A binary request need not hold a line end: waiting for one could hang the client.
		c.clientError("binary protocol is not supported")
		return errors.New("memcache: binary protocol request")
	}
	line, long, err := c.readLine()
	if err != nil {
		return err
	}
	start := time.Now()
	// A line longer than the read buffer is read token by token (longLine), and only a
	// retrieval command, whose keys are answered one at a time, may send one.
	var name string
	var ll *longLine
	if long {
		var rest []byte
		name, rest = firstToken(line)
		if !c.authed || !isRetrieval(name) {
			c.clientError("line too long")
			return fmt.Errorf("memcache: command line over %d bytes", c.s.cfg.MaxLineBytes)
		}
		ll = &longLine{c: c, chunk: rest}
		c.toks = c.toks[:0]
	} else {
		c.toks = split(line, c.toks[:0])
		if len(c.toks) == 0 {
			c.w.WriteString("ERROR\r\n")
			return nil
		}
		name = commandName(c.toks[0])
	}
	if h := c.s.testHooks.command; h != nil {
		h(name)
	}
	if !c.authed {
		return c.authenticate(name, c.toks)
	}
	op := "other"
	result := "ok"
	switch name {
	case "get", "gets", "gat", "gats":
		op = name
		withCAS := name == "gets" || name == "gats"
		switch {
		case ll != nil:
			result, err = c.getLong(ll, withCAS, name == "gat" || name == "gats")
		case name == "gat" || name == "gats":
			result, err = c.gat(c.toks, withCAS)
		default:
			result, err = c.get(c.toks[1:], withCAS, false, 0)
		}
	case "set", "add", "replace", "append", "prepend", "cas":
		op = name
		result, err = c.storeCommand(name, c.toks)
	case "incr", "decr":
		op = name
		result = c.arithmetic(name, c.toks)
	case "touch":
		op = "touch"
		result = c.touch(c.toks)
	case "flush_all":
		op = "flush_all"
		result = c.flushAll(c.toks)
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
	case "ma":
		op = "ma"
		result, err = c.metaArithmetic(c.toks)
	case "me":
		op = "me"
		c.s.stats.cmdMeta.Add(1) // memcached counts me alone as cmd_meta; mg is a get, and so on
		result = c.metaDebug(c.toks)
	case "mn":
		op = "mn"
		c.w.WriteString("MN\r\n")
	case "version":
		op = "version"
		c.w.WriteString("VERSION " + c.s.cfg.Version + "\r\n")
	case "verbosity":
		result = c.verbosity(c.toks)
	case "stats":
		op = "stats"
		result = c.writeStats(c.toks[1:])
	case "quit":
		return errQuit
	default:
		result = "unknown"
		c.w.WriteString("ERROR\r\n")
	}
	if err == errNotResident {
		return err // asked again off the loop, and recorded then
	}
	if err != nil {
		result = "closed"
	}
	c.requestMetric(op, result).Observe(time.Since(start))
	return err
}

// commandNames are the commands command knows, so that naming one allocates nothing.
var commandNames = func() map[string]string {
	m := make(map[string]string)
	for _, n := range []string{"get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend",
		"cas", "incr", "decr", "touch", "flush_all", "delete", "mg", "ms", "md", "ma", "me", "mn",
		"version", "verbosity", "stats", "quit"} {
		m[n] = n
	}
	return m
}()

// commandName is the command b names, as a string.
func commandName(b []byte) string {
	if n, ok := commandNames[string(b)]; ok {
		return n
	}
	return string(b)
}

// authenticate handles the first command of a connection that must authenticate: memcached's
// ASCII authentication, a set whose data is "<user> <password>".
func (c *conn) authenticate(name string, toks [][]byte) error {
	c.s.stats.authCmds.Add(1)
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
		c.s.stats.authErrors.Add(1)
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

// cas is the "unique" a gets or mg reports: the item's version, unique per write of the cache
// and kept across restarts (blobcache.BlobInfo.Version).
func cas(info store.Info) uint64 { return info.Version }

// gat answers "gat|gats <exptime> <key>*".
func (c *conn) gat(toks [][]byte, withCAS bool) (string, error) {
	if len(toks) < 2 {
		c.w.WriteString("ERROR\r\n")
		return "error", nil
	}
	exptime, ok := c.gatExptime(toks[1])
	if !ok {
		return "error", nil
	}
	if len(toks) == 2 {
		c.w.WriteString("END\r\n") // no keys: memcached answers END
		return "miss", nil
	}
	return c.get(toks[2:], withCAS, true, c.expiresFor(exptime))
}

// get answers get and gets, and with touch gat and gats (setting each item's expiry to
// expires): a VALUE block per hit, then END. A bad key is answered with CLIENT_ERROR alone, as
// in memcached.
func (c *conn) get(keys [][]byte, withCAS, touch bool, expires int64) (string, error) {
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
	start, result := 0, "hit"
	if c.resumeAt > 0 {
		// Parked after its loop answered keys[:resumeAt] (below): the rest is answered here.
		start, c.resumeAt = c.resumeAt, 0
		if c.resumeMiss {
			result = "miss"
		}
		c.resumeMiss = false
	}
	var may []bool
	if !touch && len(keys) > 1 {
		// The cache's filter answers the misses of a multi-get for all keys at once; a get
		// resumed off its loop keeps the answers its loop had (the filter counts each once).
		if start == 0 {
			c.may = slices.Grow(c.may[:0], len(keys))[:len(keys)]
			c.s.st.MayHold(keys, c.may)
		}
		may = c.may[:len(keys)]
	}
	for i := start; i < len(keys); i++ {
		k := keys[i]
		if may != nil && !may[i] {
			c.s.stats.cmdGet.Add(1)
			c.s.stats.getMisses.Add(1)
			result = "miss"
			continue
		}
		found, err := c.getOne(k, withCAS, touch, expires)
		if err == errNotResident {
			// The keys are answered in order: those before k are, in the reply buffer, and the
			// get resumes at k parked (loop.go), where reads may wait for the device.
			c.resumeAt, c.resumeMiss = i, result == "miss"
			return "", errNotResident
		}
		if err != nil {
			return "error", err
		}
		if !found {
			result = "miss"
		}
	}
	c.w.WriteString("END\r\n")
	return result, nil
}

// getLong answers a get or gets whose line is longer than the read buffer, key by key as the
// line is read. A bad key ends the answer with CLIENT_ERROR after the values of the keys before
// it, which are already sent (memcached holds the whole line, and sends the error alone); the
// rest of the line is read past.
func (c *conn) getLong(l *longLine, withCAS, touch bool) (string, error) {
	result := "hit"
	n := 0
	var expires int64
	if touch {
		tok, err := l.next()
		if err != nil {
			return "error", err
		}
		if tok == nil {
			c.w.WriteString("ERROR\r\n")
			return "error", nil
		}
		exptime, ok := c.gatExptime(tok)
		if !ok {
			return "error", l.skip()
		}
		expires = c.expiresFor(exptime)
		n = 1 // gat with an exptime and no key answers END
	}
	for ; ; n++ {
		k, err := l.next()
		if err != nil {
			return "error", err
		}
		if k == nil {
			break
		}
		if checkKey(k) != nil {
			if err := l.skip(); err != nil {
				return "error", err
			}
			c.clientError("bad command line format")
			return "error", nil
		}
		found, err := c.getOne(k, withCAS, touch, expires)
		if err != nil {
			return "error", err
		}
		if !found {
			result = "miss"
		}
	}
	if n == 0 {
		c.w.WriteString("ERROR\r\n")
		return "error", nil
	}
	c.w.WriteString("END\r\n")
	return result, nil
}

// valueHead writes the VALUE line of a get's hit (store.Get's begin) for the key and options its
// fields hold. A connection makes its begin once, so a get allocates no closure.
type valueHead struct {
	c       *conn
	key     []byte
	withCAS bool
	began   bool // begin was called
	begin   func(store.Info) (store.Plan, error)
}

func (h *valueHead) write(info store.Info) (store.Plan, error) {
	h.began = true
	w := h.c.w
	w.WriteString("VALUE ")
	w.Write(h.key)
	w.writeUint(0, uint64(info.Flags))
	w.writeInt(0, info.Size)
	if h.withCAS {
		w.writeUint(0, cas(info))
	}
	w.WriteString("\r\n")
	return store.Plan{W: w, N: -1, Sock: h.c.sock}, nil
}

// getOne writes the VALUE block of key k if the cache has it, and with touch then sets its
// expiry (as memcached's gat, which answers with the item it touched, even one it expires). An
// error means part of the value is out and the connection must close.
//
// With c.residentOnly, a value that is not in memory is not read: getOne returns errNotResident
// having written and counted nothing.
func (c *conn) getOne(k []byte, withCAS, touch bool, expires int64) (bool, error) {
	h := &c.head
	h.key, h.withCAS, h.began = k, withCAS, false
	var found bool
	var err error
	if c.residentOnly {
		found, err = c.s.st.SendResident(c.s.ctx, k, h.begin)
	} else {
		found, err = c.s.st.Send(c.s.ctx, k, h.begin)
	}
	began := h.began
	h.key = nil
	if err == store.ErrNotResident {
		return false, errNotResident
	}
	if touch {
		c.s.stats.cmdTouch.Add(1)
	} else {
		c.s.stats.cmdGet.Add(1)
	}
	switch {
	case err != nil && began:
		// Part of the value is out: only a closed connection tells the client.
		c.s.log.Error("memcache get failed mid-value", "key", fmt.Sprintf("%q", k), "err", err)
		return false, err
	case errors.Is(err, store.ErrBusy):
		c.s.cfg.Metrics.Busy("memcache") // a miss is always a safe answer from a cache
		found = false
	case err != nil:
		c.s.log.Error("memcache get: cannot read", "key", fmt.Sprintf("%q", k), "err", err)
		found = false
	}
	if !found {
		if touch {
			c.s.stats.touchMisses.Add(1)
		} else {
			c.s.stats.getMisses.Add(1)
		}
		return false, nil
	}
	c.w.WriteString("\r\n")
	if !touch {
		c.s.stats.getHits.Add(1)
		return true, nil
	}
	c.s.stats.touchHits.Add(1)
	if _, err := c.s.st.Touch(c.s.ctx, k, expires); err != nil {
		c.s.log.Error("memcache gat: cannot touch", "key", fmt.Sprintf("%q", k), "err", err)
	}
	return true, nil
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
	if len(toks) < 2 || len(toks) > 4 {
		c.w.WriteString("ERROR\r\n")
		return "error", nil
	}
	if len(toks) > 2 {
		// memcached's rules: a third token is 0 or noreply, a fourth only noreply after 0.
		noreply := c.noreply(toks)
		zero := string(toks[2]) == "0"
		if !(len(toks) == 3 && (zero || noreply) || len(toks) == 4 && zero && noreply) {
			c.clientError("bad command line format.  Usage: delete <key> [noreply]")
			return "error", nil
		}
	}
	if err := checkKey(toks[1]); err != nil {
		c.clientError("bad command line format")
		return "error", nil
	}
	existed, err := c.s.st.Remove(toks[1])
	if err != nil {
		c.reply(storeError(err))
		return "error", nil
	}
	if !existed {
		c.s.stats.deleteMisses.Add(1)
		c.reply("NOT_FOUND")
		return "not_found", nil
	}
	c.s.stats.deleteHits.Add(1)
	c.reply("DELETED")
	return "deleted", nil
}

// verbosity answers "verbosity <level> [noreply]". The level is kept for stats settings; it
// does not change what the server logs.
func (c *conn) verbosity(toks [][]byte) string {
	if len(toks) != 2 && len(toks) != 3 {
		c.w.WriteString("ERROR\r\n")
		return "error"
	}
	c.noreply(toks)
	level, ok := parseUint(toks[1], 32)
	if !ok {
		c.clientError("bad command line format")
		return "error"
	}
	c.s.verbosity.Store(uint32(min(level, maxVerbosity)))
	c.reply("OK")
	return "ok"
}

// maxVerbosity is memcached's highest verbosity level; a higher one is taken as it.
const maxVerbosity = 2
