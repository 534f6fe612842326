package memcache

import (
	"context"
	"errors"
	"strconv"

	"github.com/seed57392e9e/blobcache"
	"github.com/seed57392e9e/blobcache/server/item"
	"github.com/seed57392e9e/blobcache/server/store"
)

// isSpace is C's isspace: what strtoull skips before a number and what may end one.
func isSpace(b byte) bool { return b == ' ' || b >= '\t' && b <= '\r' }

// strtoull parses a number the way memcached's safe_strtoull does, which is what decides what
// incr and decr take for a number: leading white space, an optional sign, decimal digits that fit
// in 64 bits, then the end, a NUL or white space (so "12 " and "12 34" are 12). A minus sign
// negates modulo 2^64, as C's strtoull does, and is refused when the result is at least 2^63.
func strtoull(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	start := i
	var v uint64
	overflow := false
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		d := uint64(b[i] - '0')
		if v > (1<<64-1-d)/10 {
			overflow = true
		}
		v = v*10 + d
		i++
	}
	if i == start || overflow {
		return 0, false
	}
	if i < len(b) && b[i] != 0 && !isSpace(b[i]) {
		return 0, false
	}
	if neg {
		v = -v
	}
	if int64(v) < 0 {
		// memcached refuses a result past 2^63 when the text holds a minus sign anywhere
		// before its first NUL.
		for _, x := range b {
			if x == 0 {
				break
			}
			if x == '-' {
				return 0, false
			}
		}
	}
	return v, true
}

// chunked reports whether memcached 1.6 (64-bit, default settings) would store an item of this
// key, flags and value size in chunks, past its slab_chunk_max of 512 KiB: its incr and decr take
// such a value for non-numeric, whatever it holds, and so does blobcache. The item's size is
// memcached's header (48 bytes and 8 of cas), the key and its NUL, 4 bytes of flags unless they
// are 0, and the value with its "\r\n".
func chunked(key []byte, flags uint32, size int) bool {
	const slabChunkMax, header = 512 << 10, 48 + 8
	n := header + len(key) + 1 + size + 2
	if flags != 0 {
		n += 4
	}
	return n > slabChunkMax
}

// errNonNumeric is an incr or decr of a value that is not a number.
var errNonNumeric = errors.New("memcache: cannot increment or decrement non-numeric value")

// delta is an incr or decr: the number to apply, the direction, and for ma a cas to test
// (0: none) and the expiry to give the item (keepTTL false).
type delta struct {
	by      uint64
	incr    bool
	casID   uint64
	expires int64
	setTTL  bool
}

// deltaResult is what applying a delta did: the new number, and the item before and after.
type deltaResult struct {
	value     uint64
	old, info store.Info
}

// applyDelta adds or subtracts d.by to the number key holds, atomically (store.Update retries on
// a concurrent write), as memcached does: incr wraps at 2^64, decr stops at 0. The new number
// takes the old one's place padded with spaces when it is not longer (so the value keeps its
// length, as in memcached), else it replaces the value. Flags and expiry are kept (but for
// d.setTTL). Errors: blobcache.ErrNotFound, errNonNumeric, errCASMismatch, or the store's.
func (s *Server) applyDelta(ctx context.Context, key []byte, d delta) (deltaResult, error) {
	var r deltaResult
	info, err := s.st.Update(ctx, key, func(payload []byte, info store.Info) ([]byte, item.Meta, error) {
		r.old = info
		if len(payload) == 0 || chunked(key, info.Flags, len(payload)) {
			return nil, item.Meta{}, errNonNumeric
		}
		if d.casID != 0 && info.Version != d.casID {
			return nil, item.Meta{}, errCASMismatch
		}
		v, ok := strtoull(payload)
		if !ok {
			return nil, item.Meta{}, errNonNumeric
		}
		switch {
		case d.incr:
			v += d.by
		case d.by > v:
			v = 0
		default:
			v -= d.by
		}
		r.value = v
		out := strconv.AppendUint(make([]byte, 0, max(len(payload), 20)), v, 10)
		for len(out) < len(payload) {
			out = append(out, ' ')
		}
		m := info.Meta
		if d.setTTL {
			m.Expires = d.expires
		}
		return out, m, nil
	})
	r.info = info
	return r, err
}

// arithmetic answers "incr|decr <key> <delta> [noreply]" with the new value.
func (c *conn) arithmetic(name string, toks [][]byte) string {
	if len(toks) != 3 && len(toks) != 4 {
		c.w.WriteString("ERROR\r\n")
		return "error"
	}
	c.noreply(toks)
	if checkKey(toks[1]) != nil {
		c.clientError("bad command line format")
		return "error"
	}
	by, ok := strtoull(toks[2])
	if !ok {
		c.clientError("invalid numeric delta argument")
		return "error"
	}
	incr := name == "incr"
	r, err := c.s.applyDelta(c.s.ctx, toks[1], delta{by: by, incr: incr})
	switch {
	case err == nil:
		c.countDelta(incr, true)
		c.reply(strconv.FormatUint(r.value, 10))
		return "ok"
	case errors.Is(err, blobcache.ErrNotFound):
		c.countDelta(incr, false)
		c.reply("NOT_FOUND")
		return "not_found"
	case errors.Is(err, errNonNumeric):
		c.clientError("cannot increment or decrement non-numeric value")
		return "error"
	case errors.Is(err, store.ErrBusy):
		c.s.cfg.Metrics.Busy("memcache")
		c.serverError("busy, try again")
		return "error"
	}
	c.reply(storeError(err))
	return "error"
}

func (c *conn) countDelta(incr, hit bool) {
	st := &c.s.stats
	switch {
	case incr && hit:
		st.incrHits.Add(1)
	case incr:
		st.incrMisses.Add(1)
	case hit:
		st.decrHits.Add(1)
	default:
		st.decrMisses.Add(1)
	}
}
