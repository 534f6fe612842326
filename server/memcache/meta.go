package memcache

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/store"
)

// metaFlags are a meta command's flags. Return flags are written in the order the client gave
// them, so the answer is built from the request tokens.
type metaFlags struct {
	b, q, v bool
	opaque  []byte
	flags   uint32 // ms F
	ttl     int64  // ms T
	hasTTL  bool
	toks    [][]byte // the flag tokens, for the return flags
}

// parseMetaFlags reads flag tokens; allowed lists the flags the command takes. Flags that take
// a token (O, F, T, M) are validated here; M accepts only S (set). A flag given twice is an
// error, as in memcached.
func parseMetaFlags(toks [][]byte, allowed string) (metaFlags, error) {
	f := metaFlags{toks: toks}
	var seen [128]bool
	for _, t := range toks {
		if len(t) == 0 || !containsByte(allowed, t[0]) {
			return f, errors.New("invalid flag")
		}
		if seen[t[0]] {
			return f, errors.New("duplicate flag")
		}
		seen[t[0]] = true
		arg := t[1:]
		switch t[0] {
		case 'O':
			if len(arg) > 32 {
				return f, errors.New("opaque token too long")
			}
			f.opaque = arg
			continue
		case 'F':
			v, ok := parseUint(arg, 32)
			if !ok {
				return f, errors.New("bad token in command line format")
			}
			f.flags = uint32(v)
			continue
		case 'T':
			v, ok := parseInt(arg)
			if !ok {
				return f, errors.New("bad token in command line format")
			}
			f.ttl, f.hasTTL = v, true
			continue
		case 'M':
			if len(arg) != 1 || (arg[0] != 'S' && arg[0] != 's') {
				return f, errors.New("mode not supported by blobcache: only S (set)")
			}
			continue
		}
		if len(arg) != 0 {
			return f, errors.New("invalid flag")
		}
		switch t[0] {
		case 'b':
			f.b = true
		case 'q':
			f.q = true
		case 'v':
			f.v = true
		}
	}
	return f, nil
}

func containsByte(s string, b byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == b {
			return true
		}
	}
	return false
}

// writeRet writes the return flags of f, in request order: for a hit all of them, for a miss
// (info nil) only O and k. A base64 key is returned as sent, followed by a b flag.
func (c *conn) writeRet(f *metaFlags, keyTok []byte, info *store.Info) {
	for _, t := range f.toks {
		switch t[0] {
		case 'O':
			c.w.WriteString(" O")
			c.w.Write(f.opaque)
		case 'k':
			c.w.WriteString(" k")
			c.w.Write(keyTok)
			if f.b {
				c.w.WriteString(" b") // the key is base64, as memcached marks it
			}
		}
		if info == nil {
			continue
		}
		switch t[0] {
		case 'c':
			c.w.WriteString(" c" + strconv.FormatUint(cas(*info), 10))
		case 'f':
			c.w.WriteString(" f" + strconv.FormatUint(uint64(info.Flags), 10))
		case 's':
			c.w.WriteString(" s" + strconv.FormatInt(info.Size, 10))
		case 't':
			c.w.WriteString(" t" + strconv.FormatInt(item.TTL(info.Expires, c.s.st.Now()), 10))
		}
	}
}

// metaKeyLine parses "<cmd> <key> <flags>*" for a command without a data block, with the
// flags in allowed. On a bad line it answers the client error itself and returns false.
func (c *conn) metaKeyLine(toks [][]byte, allowed string) (metaFlags, []byte, bool) {
	if len(toks) < 2 {
		c.w.WriteString("ERROR\r\n")
		return metaFlags{}, nil, false
	}
	if len(toks) > maxTokens {
		c.clientError("bad command line format")
		return metaFlags{}, nil, false
	}
	f, err := parseMetaFlags(toks[2:], allowed)
	if err != nil {
		if string(toks[0]) == "md" {
			err = errors.New("invalid or duplicate flag") // md's word for both
		}
		c.clientError(err.Error())
		return metaFlags{}, nil, false
	}
	key, err := decodeKey(toks[1], f.b)
	if err != nil {
		c.clientError(err.Error())
		return metaFlags{}, nil, false
	}
	return f, key, true
}

// metaGet answers "mg <key> <flags>*".
func (c *conn) metaGet(toks [][]byte) (string, error) {
	f, key, ok := c.metaKeyLine(toks, "bcfkOqstv")
	if !ok {
		return "error", nil
	}
	c.s.stats.cmdGet.Add(1)
	began := false
	found, err := c.s.st.Get(c.s.ctx, key, func(info store.Info) (store.Plan, error) {
		began = true
		if !f.v {
			c.w.WriteString("HD")
			c.writeRet(&f, toks[1], &info)
			c.w.WriteString("\r\n")
			return store.Plan{}, nil
		}
		c.w.WriteString("VA " + strconv.FormatInt(info.Size, 10))
		c.writeRet(&f, toks[1], &info)
		c.w.WriteString("\r\n")
		return store.Plan{W: c.w, N: -1}, nil
	})
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
	if !found {
		c.s.stats.getMisses.Add(1)
		if !f.q {
			c.w.WriteString("EN")
			c.writeRet(&f, toks[1], nil)
			c.w.WriteString("\r\n")
		}
		return "miss", nil
	}
	c.s.stats.getHits.Add(1)
	if f.v {
		c.w.WriteString("\r\n")
	}
	return "hit", nil
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
	if len(toks) > maxTokens {
		return "error", c.refuse(n, "CLIENT_ERROR bad command line format")
	}
	f, err := parseMetaFlags(toks[3:], "bckOqFTMI")
	if err == nil && containsFlag(toks[3:], 'I') {
		err = errors.New("invalidation is not supported by blobcache")
	}
	if err != nil {
		return "error", c.refuse(n, "CLIENT_ERROR "+err.Error())
	}
	key, err := decodeKey(toks[1], f.b)
	if err != nil {
		return "error", c.refuse(n, "CLIENT_ERROR "+err.Error())
	}
	key = append([]byte(nil), key...)
	// The line buffer is reused by the data read: keep what the answer needs.
	keyTok := append([]byte(nil), toks[1]...)
	f.opaque = append([]byte(nil), f.opaque...)
	retToks := make([][]byte, len(f.toks))
	for i, t := range f.toks {
		retToks[i] = []byte{t[0]}
	}
	f.toks = retToks
	exptime := int64(0)
	if f.hasTTL {
		exptime = f.ttl
	}
	res, err := c.store(key, n, f.flags, exptime)
	if err != nil {
		return "error", err
	}
	if res != "" {
		c.w.WriteString(res + "\r\n")
		return "error", nil
	}
	if !f.q {
		c.w.WriteString("HD")
		c.writeRet(&f, keyTok, nil)
		c.w.WriteString("\r\n")
	}
	return "stored", nil
}

func containsFlag(toks [][]byte, flag byte) bool {
	for _, t := range toks {
		if len(t) > 0 && t[0] == flag {
			return true
		}
	}
	return false
}

// metaDelete answers "md <key> <flags>*".
func (c *conn) metaDelete(toks [][]byte) (string, error) {
	f, key, ok := c.metaKeyLine(toks, "bkOq")
	if !ok {
		return "error", nil
	}
	existed, err := c.s.st.Remove(key)
	if err != nil {
		c.w.WriteString(storeError(err) + "\r\n")
		return "error", nil
	}
	code, result := "HD", "deleted"
	if !existed {
		code, result = "NF", "not_found"
	}
	if !f.q || !existed { // q hides HD only, as in memcached
		c.w.WriteString(code)
		c.writeRet(&f, toks[1], nil)
		c.w.WriteString("\r\n")
	}
	return result, nil
}
