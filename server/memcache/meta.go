package memcache

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/store"
)

// metaFlags are a meta command's flags, parsed as memcached 1.6 parses them: by their first
// byte, so "vv" is v. Return flags are written in the order the client gave them, so the answer
// is built from the request tokens (toks).
type metaFlags struct {
	b, q, v    bool
	stale      bool   // I
	flags      uint32 // F
	ttl        int64  // T, an exptime
	hasTTL     bool
	vivify     bool  // N
	vivTTL     int64 // N's exptime
	recache    bool  // R
	recacheTTL int64
	casID      uint64 // C
	hasCAS     bool
	mode       byte   // M
	delta      uint64 // D
	initial    uint64 // J
	toks       [][]byte
}

// maxMetaTokens is memcached's bound on a meta command's tokens (command and key included).
const maxMetaTokens = 19

// maxOpaque is the longest O token, O included.
const maxOpaque = 32

// parseMetaFlags reads flag tokens. The error is the CLIENT_ERROR message: memcached stops at a
// repeated or unknown flag, and otherwise reports the last bad token it saw.
func parseMetaFlags(toks [][]byte) (metaFlags, string) {
	f := metaFlags{toks: toks, delta: 1}
	var seen [128]bool
	errstr := ""
	bad := func(msg string) {
		errstr = msg
	}
	for _, t := range toks {
		o := t[0]
		if o >= 127 || seen[o] {
			return f, "duplicate flag"
		}
		seen[o] = true
		arg := t[1:]
		var ok bool
		switch o {
		case 'b':
			f.b = true
		case 'N':
			if f.vivTTL, ok = parseInt32(arg); !ok {
				bad("bad token in command line format")
			}
			f.vivify = true
		case 'T':
			if f.ttl, ok = parseInt32(arg); !ok {
				bad("bad token in command line format")
			}
			f.hasTTL = true
		case 'R':
			if f.recacheTTL, ok = parseInt32(arg); !ok {
				bad("bad token in command line format")
			}
			f.recache = true
		case 'h', 'l':
			// memcached's hit-before and last-access: blobcache does not track reads.
			return f, "flags h and l are not supported by blobcache"
		case 'O':
			if len(t) > maxOpaque {
				bad("opaque token too long")
			}
		case 'P', 'L', 'k', 's', 't', 'c', 'f', 'u':
		case 'v':
			f.v = true
		case 'q':
			f.q = true
		case 'F':
			v, ok := strtoull32(arg)
			if !ok {
				bad("bad command line format")
			}
			f.flags = v
		case 'C':
			if f.casID, ok = strtoull(arg); !ok {
				bad("bad token in command line format")
			}
			f.hasCAS = ok
		case 'M':
			if len(t) != 2 {
				bad("incorrect length for M token")
			} else {
				f.mode = t[1]
			}
		case 'J':
			if f.initial, ok = strtoull(arg); !ok {
				bad("invalid numeric initial value")
			}
		case 'D':
			if f.delta, ok = strtoull(arg); !ok {
				bad("invalid numeric delta value")
			}
		case 'I':
			f.stale = true
		default:
			return f, "invalid flag"
		}
	}
	return f, errstr
}

// strtoull32 parses client flags: a number of at most 32 bits. (memcached keeps the low 32 bits
// of a larger one without a word; blobcache refuses it, as it does for set.)
func strtoull32(t []byte) (uint32, bool) {
	v, ok := strtoull(t)
	if !ok || v > 1<<32-1 || len(t) == 0 || t[0] < '0' || t[0] > '9' {
		return 0, false
	}
	return uint32(v), true
}

// metaKeyLine parses "<cmd> <key> <flags>*" for a command without a data block. On a bad line it
// answers the error itself and returns false. flagErr, if set, replaces the message of every
// flag error (md and ma say "invalid or duplicate flag").
func (c *conn) metaKeyLine(toks [][]byte, flagErr string) (metaFlags, []byte, bool) {
	if len(toks) < 2 {
		c.w.WriteString("ERROR\r\n")
		return metaFlags{}, nil, false
	}
	if len(toks) > maxMetaTokens {
		if string(toks[0]) == "mg" {
			c.clientError("options flags are too long")
		} else {
			c.clientError("options flags too long")
		}
		return metaFlags{}, nil, false
	}
	f, errstr := parseMetaFlags(toks[2:])
	key, kerr := decodeKey(toks[1], f.b)
	if errstr == "" && kerr != nil {
		errstr = kerr.Error()
		if !f.b && flagErr != "" {
			flagErr = "" // a bad key is not a flag error
		}
	}
	if errstr != "" {
		if flagErr != "" {
			errstr = flagErr
		}
		c.clientError(errstr)
		return metaFlags{}, nil, false
	}
	return f, key, true
}

// writeKey writes a k return flag.
func (c *conn) writeKey(f *metaFlags, keyTok []byte) {
	c.w.WriteString(" k")
	c.w.Write(keyTok)
	if f.b {
		c.w.WriteString(" b") // the key is base64, as memcached marks it
	}
}

// writeMiss writes a status line that carries only the O and k return flags.
func (c *conn) writeMiss(code string, f *metaFlags, keyTok []byte) {
	c.w.WriteString(code)
	for _, t := range f.toks {
		switch t[0] {
		case 'O':
			c.w.WriteString(" ")
			c.w.Write(t)
		case 'k':
			c.writeKey(f, keyTok)
		}
	}
	c.w.WriteString("\r\n")
}

// ttlOf is the t return flag's value for an expiry.
func (c *conn) ttlOf(expires int64) int64 {
	return item.TTL(expires, c.s.st.Now())
}

// metaHead writes the status line of an mg hit (store.Get's begin) for the request its fields
// hold, and notes what it wrote. A connection makes its begin once, so an mg allocates no
// closure.
type metaHead struct {
	c      *conn
	f      metaFlags
	keyTok []byte
	begin  func(store.Info) (store.Plan, error)

	began      bool
	hit        store.Info
	newExpires int64
}

func (h *metaHead) write(info store.Info) (store.Plan, error) {
	h.began, h.hit = true, info
	h.newExpires = h.c.writeMetaHit(&h.f, h.keyTok, info, false)
	if !h.f.v {
		return store.Plan{}, nil
	}
	return store.Plan{W: h.c.w, N: -1}, nil
}

// metaGet answers "mg <key> <flags>*". With c.residentOnly, a value not in memory is not read:
// metaGet returns errNotResident having written and counted nothing.
func (c *conn) metaGet(toks [][]byte) (string, error) {
	f, key, ok := c.metaKeyLine(toks, "")
	if !ok {
		return "error", nil
	}
	keyTok := toks[1]
	for attempt := 0; ; attempt++ {
		h := &c.metaHead
		h.f, h.keyTok, h.began = f, keyTok, false
		var found bool
		var err error
		if c.residentOnly && attempt == 0 {
			found, err = c.s.st.SendResident(c.s.ctx, key, h.begin) // a plan without a socket: as Get
		} else {
			found, err = c.s.st.Get(c.s.ctx, key, h.begin)
		}
		f, began, hit, newExpires := h.f, h.began, h.hit, h.newExpires
		*h = metaHead{c: c, begin: h.begin} // no reference to the request is kept
		if err == store.ErrNotResident {
			return "", errNotResident // nothing written or counted: asked again parked
		}
		if attempt == 0 {
			c.s.stats.cmdGet.Add(1)
		}
		switch {
		case err != nil && began:
			c.s.log.Error("memcache mg failed mid-value", "key", fmt.Sprintf("%q", key), "err", err)
			return "error", err
		case errors.Is(err, store.ErrBusy):
			c.s.cfg.Metrics.Busy("memcache")
			found = false
		case err != nil:
			c.s.log.Error("memcache mg: cannot read", "key", fmt.Sprintf("%q", key), "err", err)
			found = false
		}
		if found {
			c.s.stats.getHits.Add(1)
			if f.v {
				c.w.WriteString("\r\n")
			}
			if f.hasTTL && newExpires != hit.Expires {
				if _, err := c.s.st.Touch(c.s.ctx, key, newExpires); err != nil {
					c.s.log.Error("memcache mg: cannot touch", "key", fmt.Sprintf("%q", key), "err", err)
				}
			}
			return "hit", nil
		}
		if !f.vivify || attempt > 0 {
			break
		}
		// N: create an empty item for the client that won the right to fill it.
		expires := int64(0)
		for _, t := range f.toks {
			switch t[0] {
			case 'T':
				expires = c.expiresFor(f.ttl)
			case 'N':
				expires = c.expiresFor(f.vivTTL)
			}
		}
		v, err := c.s.st.Reserve(c.s.ctx, 0)
		if err != nil {
			break
		}
		version, err := c.s.st.Put(key, v, bytes.NewReader(nil), item.Meta{Expires: expires}, blobcache.IfAbsent())
		v.Release()
		if err == nil {
			c.writeMetaHit(&f, keyTok, store.Info{Meta: item.Meta{Expires: expires}, Version: version}, true)
			c.s.marks.set(version, markWon)
			if f.v {
				c.w.WriteString("\r\n")
			}
			c.s.stats.getMisses.Add(1)
			return "miss", nil
		}
		if !errors.Is(err, blobcache.ErrExists) && !errors.Is(err, blobcache.ErrConflict) {
			c.s.log.Error("memcache mg: cannot create", "key", fmt.Sprintf("%q", key), "err", err)
			break
		}
		// Created meanwhile by another client: read it.
	}
	c.s.stats.getMisses.Add(1)
	if !f.q {
		c.writeMiss("EN", &f, keyTok)
	}
	return "miss", nil
}

// writeMetaHit writes the status line of an mg hit (VA or HD) with its return flags, in the
// order asked, and the W, Z and X flags of the recache protocol. created is set for an item N
// just created. It returns the expiry the item is to have (T changes it; a t before T reports
// the old one, as in memcached).
func (c *conn) writeMetaHit(f *metaFlags, keyTok []byte, info store.Info, created bool) int64 {
	if f.v {
		c.w.WriteString("VA")
		c.w.writeInt(0, info.Size)
	} else {
		c.w.WriteString("HD")
	}
	expires := info.Expires
	marks := c.s.marks.get(info.Version)
	won := created
	for _, t := range f.toks {
		switch t[0] {
		case 'T':
			expires = c.expiresFor(f.ttl)
		case 'R':
			if marks&markWon == 0 && !created && expires != 0 && expires < c.recacheAt(f.recacheTTL) {
				won = true
			}
		case 's':
			c.w.writeInt('s', info.Size)
		case 't':
			c.w.writeInt('t', c.ttlOf(expires))
		case 'c':
			c.w.writeUint('c', cas(info))
		case 'f':
			c.w.writeUint('f', uint64(info.Flags))
		case 'O':
			c.w.WriteString(" ")
			c.w.Write(t)
		case 'k':
			c.writeKey(f, keyTok)
		}
	}
	if marks&markWon != 0 {
		c.w.WriteString(" Z")
	}
	if marks&markStale != 0 {
		c.w.WriteString(" X")
		if marks&markWon == 0 {
			won = true
		}
	}
	if won && !created {
		// Only one client wins: the first to mark the version.
		won = c.s.marks.win(info.Version)
	}
	if won {
		c.w.WriteString(" W")
	}
	c.w.WriteString("\r\n")
	return expires
}

// recacheAt is the expiry below which an R token wins: now plus its TTL (an exptime).
func (c *conn) recacheAt(exptime int64) int64 {
	at, live := item.ExpiresAt(exptime, c.s.st.Now())
	if !live {
		return 1
	}
	if at == 0 {
		return 0
	}
	return at
}

// metaSet answers "ms <key> <datalen> <flags>*" followed by a data block.
func (c *conn) metaSet(toks [][]byte) (string, error) {
	c.s.stats.cmdSet.Add(1)
	if len(toks) < 2 {
		c.w.WriteString("ERROR\r\n")
		return "error", nil
	}
	n, ok := int64(0), len(toks) >= 3
	if ok {
		n, ok = parseLength(toks[2])
	}
	if !ok {
		// The data block, if one follows, cannot be found.
		c.clientError("bad command line format")
		return "error", errors.New("memcache: unreadable ms data length")
	}
	if len(toks) > maxMetaTokens {
		return "error", c.refuse(n, "CLIENT_ERROR options flags too long")
	}
	f, errstr := parseMetaFlags(toks[3:])
	mode := modeSet
	if errstr == "" {
		switch f.mode {
		case 0, 'S':
		case 'E':
			mode = modeAdd
		case 'A':
			mode = modeAppend
		case 'P':
			mode = modePrepend
		case 'R':
			mode = modeReplace
		default:
			errstr = "invalid mode for ms M token"
		}
	}
	if errstr != "" {
		return "error", c.refuse(n, "CLIENT_ERROR "+errstr)
	}
	key, err := decodeKey(toks[1], f.b)
	if err != nil {
		return "error", c.refuse(n, "CLIENT_ERROR "+err.Error())
	}
	if f.hasCAS && (mode == modeSet || mode == modeReplace) {
		mode = modeCAS
	}
	casID := uint64(0)
	if f.hasCAS {
		casID = f.casID
	}
	// The line buffer is reused by the data read: keep what the answer needs.
	key = append([]byte(nil), key...)
	keyTok := append([]byte(nil), toks[1]...)
	retToks := make([][]byte, len(f.toks))
	for i, t := range f.toks {
		retToks[i] = append([]byte(nil), t...)
	}
	f.toks = retToks
	exptime := int64(0)
	if f.hasTTL {
		exptime = f.ttl
	}
	var res storeResult
	var line string
	var version uint64
	if f.stale && mode == modeCAS {
		res, line, version, err = c.storeStale(key, n, f.flags, exptime, casID)
	} else {
		res, line, version, err = c.storeValue(mode, key, n, f.flags, exptime, casID)
	}
	if err != nil {
		return "error", err
	}
	if line != "" {
		c.w.WriteString(line + "\r\n")
		return "error", nil
	}
	if res == stored && f.q {
		return "stored", nil
	}
	c.w.WriteString(metaResults[res])
	for _, t := range f.toks {
		switch t[0] {
		case 'O':
			c.w.WriteString(" ")
			c.w.Write(t)
		case 'k':
			c.writeKey(&f, keyTok)
		case 'c':
			c.w.WriteString(" c" + strconv.FormatUint(version, 10))
		}
	}
	c.w.WriteString("\r\n")
	return metricResults[res], nil
}

// storeStale is ms with I and C: a cas older than the item's still stores the value, keeping
// the item's expiry, and marks it stale (mg then returns X, and W to one client).
func (c *conn) storeStale(key []byte, n int64, flags uint32, exptime int64, casID uint64) (storeResult, string, uint64, error) {
	v, err := c.s.st.Reserve(c.s.ctx, n)
	if err != nil {
		c.s.cfg.Metrics.Busy("memcache")
		return 0, "SERVER_ERROR busy, try again", 0, c.swallow(n)
	}
	defer v.Release()
	var data bytes.Buffer
	if _, err := data.ReadFrom(c.dataBlock(n)); err != nil {
		return 0, "", 0, err
	}
	expires, live := item.ExpiresAt(exptime, c.s.st.Now())
	if !live {
		expires = 1
	}
	version, err := c.s.st.Put(key, v, bytes.NewReader(data.Bytes()), item.Meta{Flags: flags, Expires: expires}, blobcache.IfVersion(casID))
	if !errors.Is(err, blobcache.ErrExists) && !errors.Is(err, blobcache.ErrConflict) {
		if res, ok := condResult(modeCAS, err); ok {
			return res, "", version, nil
		}
		return 0, storeError(err), 0, nil
	}
	for {
		var cur store.Info
		found, err := c.s.st.Get(c.s.ctx, key, func(info store.Info) (store.Plan, error) {
			cur = info
			return store.Plan{}, nil
		})
		if err != nil {
			return 0, storeError(err), 0, nil
		}
		if !found {
			return notFound, "", 0, nil
		}
		if casID >= cur.Version {
			return exists, "", 0, nil
		}
		version, err := c.s.st.Put(key, v, bytes.NewReader(data.Bytes()), item.Meta{Flags: flags, Expires: cur.Expires}, blobcache.IfVersion(cur.Version))
		if err == nil {
			c.s.marks.set(version, markStale|c.s.marks.get(cur.Version)&markWon)
			return stored, "", version, nil
		}
		if !errors.Is(err, blobcache.ErrExists) && !errors.Is(err, blobcache.ErrConflict) {
			if res, ok := condResult(modeCAS, err); ok {
				return res, "", 0, nil
			}
			return 0, storeError(err), 0, nil
		}
	}
}

// metaDelete answers "md <key> <flags>*".
func (c *conn) metaDelete(toks [][]byte) (string, error) {
	f, key, ok := c.metaKeyLine(toks, "invalid or duplicate flag")
	if !ok {
		return "error", nil
	}
	code, result := "HD", "deleted"
	var err error
	switch {
	case f.stale:
		// I: keep the item, with a new cas, marked stale (and T's TTL).
		var info store.Info
		info, err = c.s.st.Update(c.s.ctx, key, func(payload []byte, info store.Info) ([]byte, item.Meta, error) {
			if f.hasCAS && info.Version != f.casID {
				return nil, item.Meta{}, errCASMismatch
			}
			m := info.Meta
			if f.hasTTL {
				m.Expires = c.expiresFor(f.ttl)
			}
			return payload, m, nil
		})
		if err == nil {
			c.s.marks.set(info.Version, markStale)
		}
	case f.hasCAS:
		err = c.s.st.DeleteIf(key, blobcache.IfVersion(f.casID))
	default:
		var existed bool
		existed, err = c.s.st.Remove(key)
		if err == nil && !existed {
			err = blobcache.ErrNotFound
		}
	}
	switch {
	case err == nil:
		c.s.stats.deleteHits.Add(1)
	case errors.Is(err, blobcache.ErrNotFound):
		c.s.stats.deleteMisses.Add(1)
		code, result = "NF", "not_found"
	case errors.Is(err, errCASMismatch), errors.Is(err, blobcache.ErrExists):
		c.s.stats.deleteMisses.Add(1)
		code, result = "EX", "exists"
	default:
		c.w.WriteString(storeError(err) + "\r\n")
		return "error", nil
	}
	if !f.q || code != "HD" { // q hides HD only, as in memcached
		c.writeMiss(code, &f, toks[1])
	}
	return result, nil
}

// metaArithmetic answers "ma <key> <flags>*".
func (c *conn) metaArithmetic(toks [][]byte) (string, error) {
	f, key, ok := c.metaKeyLine(toks, "invalid or duplicate flag")
	if !ok {
		return "error", nil
	}
	incr := true
	switch f.mode {
	case 0, 'I', '+':
	case 'D', '-':
		incr = false
	default:
		c.clientError("invalid mode for ma M token")
		return "error", nil
	}
	d := delta{by: f.delta, incr: incr, casID: f.casID}
	if f.hasTTL {
		d.setTTL, d.expires = true, c.expiresFor(f.ttl)
	}
	for {
		r, err := c.s.applyDelta(c.s.ctx, key, d)
		switch {
		case err == nil:
			c.countDelta(incr, true)
			if !f.q {
				c.writeArithmetic(&f, toks[1], r.value, r.old.Expires, r.info.Version, false)
			}
			return "ok", nil
		case errors.Is(err, errCASMismatch):
			c.writeMiss("EX", &f, toks[1])
			return "exists", nil
		case errors.Is(err, errNonNumeric):
			c.clientError("cannot increment or decrement non-numeric value")
			return "error", nil
		case errors.Is(err, store.ErrBusy):
			c.s.cfg.Metrics.Busy("memcache")
			c.serverError("busy, try again")
			return "error", nil
		case !errors.Is(err, blobcache.ErrNotFound):
			c.w.WriteString(storeError(err) + "\r\n")
			return "error", nil
		}
		if !f.vivify {
			c.countDelta(incr, false)
			c.writeMiss("NF", &f, toks[1])
			return "not_found", nil
		}
		// N: create the item with J's value.
		expires := int64(0)
		for _, t := range f.toks {
			switch t[0] {
			case 'T':
				expires = d.expires
			case 'N':
				expires = c.expiresFor(f.vivTTL)
			}
		}
		payload := strconv.AppendUint(nil, f.initial, 10)
		v, err := c.s.st.Reserve(c.s.ctx, int64(len(payload)))
		if err != nil {
			c.s.cfg.Metrics.Busy("memcache")
			c.serverError("busy, try again")
			return "error", nil
		}
		version, err := c.s.st.Put(key, v, bytes.NewReader(payload), item.Meta{Expires: expires}, blobcache.IfAbsent())
		v.Release()
		if err == nil {
			c.writeArithmetic(&f, toks[1], f.initial, 0, version, true)
			return "created", nil
		}
		if !errors.Is(err, blobcache.ErrExists) && !errors.Is(err, blobcache.ErrConflict) {
			c.w.WriteString(storeError(err) + "\r\n")
			return "error", nil
		}
		// Created meanwhile: apply the delta to it.
	}
}

// writeArithmetic writes ma's answer: HD, or VA and the number with v, and the return flags in
// the order asked; t reports the expiry before a T that comes after it, as in memcached.
func (c *conn) writeArithmetic(f *metaFlags, keyTok []byte, value uint64, expires int64, version uint64, created bool) {
	num := strconv.FormatUint(value, 10)
	if f.v {
		c.w.WriteString("VA " + strconv.Itoa(len(num)))
	} else {
		c.w.WriteString("HD")
	}
	for _, t := range f.toks {
		switch t[0] {
		case 'c':
			c.w.WriteString(" c" + strconv.FormatUint(version, 10))
		case 't':
			c.w.writeInt('t', c.ttlOf(expires))
		case 'T':
			expires = c.expiresFor(f.ttl)
		case 'N':
			if created {
				expires = c.expiresFor(f.vivTTL)
			}
		case 'O':
			c.w.WriteString(" ")
			c.w.Write(t)
		case 'k':
			c.writeKey(f, keyTok)
		}
	}
	c.w.WriteString("\r\n")
	if f.v {
		c.w.WriteString(num + "\r\n")
	}
}

// metaDebug answers "me <key> [b]" with what blobcache knows of an item: its expiry (as
// memcached shows it: seconds past it, -1 for never), cas and value size. memcached's la, fetch
// and cls (last access, fetched before, slab class) have no counterpart here.
func (c *conn) metaDebug(toks [][]byte) string {
	if len(toks) < 2 || len(toks[1]) > MaxKeyLen {
		c.clientError("bad command line format")
		return "error"
	}
	b := len(toks) >= 3 && string(toks[2]) == "b"
	key, err := decodeKey(toks[1], b)
	if err != nil {
		c.clientError("bad command line format")
		return "error"
	}
	var hit store.Info
	found, err := c.s.st.Get(c.s.ctx, key, func(info store.Info) (store.Plan, error) {
		hit = info
		return store.Plan{}, nil
	})
	if err != nil || !found {
		c.w.WriteString("EN\r\n")
		return "miss"
	}
	exp := int64(-1)
	if hit.Expires != 0 {
		exp = c.s.st.Now().Unix() - hit.Expires
	}
	fmt.Fprintf(c.w, "ME %s exp=%d cas=%d size=%d\r\n", toks[1], exp, cas(hit), hit.Size)
	return "hit"
}
