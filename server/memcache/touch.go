package memcache

import (
	"time"

	"github.com/seed57392e9e/blobcache/server/item"
)

// expiresFor converts a memcached exptime for an item being touched: 0 never, and an item already
// expired gets an expiry in the past (1), so that it becomes a miss at once.
func (c *conn) expiresFor(exptime int64) int64 {
	expires, live := item.ExpiresAt(exptime, c.s.st.Now())
	if !live {
		return 1
	}
	return expires
}

// touch answers "touch <key> <exptime> [noreply]": TOUCHED or NOT_FOUND.
func (c *conn) touch(toks [][]byte) string {
	if len(toks) != 3 && len(toks) != 4 {
		c.w.WriteString("ERROR\r\n")
		return "error"
	}
	c.noreply(toks)
	if checkKey(toks[1]) != nil {
		c.clientError("bad command line format")
		return "error"
	}
	exptime, ok := parseInt32(toks[2])
	if !ok {
		c.clientError("invalid exptime argument")
		return "error"
	}
	c.s.stats.cmdTouch.Add(1)
	found, err := c.s.st.Touch(c.s.ctx, toks[1], c.expiresFor(exptime))
	if err != nil {
		c.reply(storeError(err))
		return "error"
	}
	if !found {
		c.s.stats.touchMisses.Add(1)
		c.reply("NOT_FOUND")
		return "not_found"
	}
	c.s.stats.touchHits.Add(1)
	c.reply("TOUCHED")
	return "touched"
}

// gatExptime parses the exptime of a gat or gats; on a bad one it answers the error itself.
func (c *conn) gatExptime(tok []byte) (int64, bool) {
	exptime, ok := parseInt32(tok)
	if !ok {
		c.clientError("invalid exptime argument")
	}
	return exptime, ok
}

// flushAll answers "flush_all [delay] [noreply]": every item stored before now, or before the
// delay has passed (seconds, or a unix time past 30 days, as exptimes are), is a miss from then
// on.
func (c *conn) flushAll(toks [][]byte) string {
	if len(toks) > 3 {
		c.w.WriteString("ERROR\r\n")
		return "error"
	}
	noreply := c.noreply(toks)
	c.s.stats.cmdFlush.Add(1)
	var delay int64
	if len(toks) == 3 || len(toks) == 2 && !noreply {
		var ok bool
		if delay, ok = parseInt32(toks[1]); !ok {
			c.clientError("invalid exptime argument")
			return "error"
		}
	}
	now := c.s.st.Now()
	at := now
	if delay > 0 {
		expires, live := item.ExpiresAt(delay, now)
		if !live {
			// An absolute time already past: memcached 1.6 takes it for "never" and flushes
			// nothing (its oldest_live becomes 0), and so does blobcache.
			c.reply("OK")
			return "ok"
		}
		at = time.Unix(expires, 0)
	}
	if err := c.s.st.FlushAll(at); err != nil {
		c.reply(storeError(err))
		return "error"
	}
	c.reply("OK")
	return "ok"
}
