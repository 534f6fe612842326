package memcache

import "time"

// The timeout sweep keeps every connection's time limits with one goroutine, as memcached's
// idle-timeout thread does, instead of a deadline armed per command: each sweepEvery it looks at
// each connection's phase and moves a deadline into the past once its limit has passed (the
// blocked read or write then fails with a timeout, and the connection ends). A limit is kept to
// within one sweep interval: a command may run up to ReadTimeout (WriteTimeout) plus that before
// its read (write) fails, and an idle connection may wait up to IdleTimeout plus that.

// sweepEvery is how often the sweep runs for cfg: an eighth of the shortest limit, between 1 ms
// and a second.
func sweepEvery(cfg Config) time.Duration {
	d := min(cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout) / 8
	return min(max(d, time.Millisecond), time.Second)
}

// sweep runs until the server's context ends.
func (s *Server) sweep() {
	t := time.NewTicker(sweepEvery(s.cfg))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			for c := range s.mu.conns {
				c.expire(now)
			}
			s.mu.Unlock()
		}
	}
}

// expire moves past its limit each of c's deadlines whose limit has passed at now.
func (c *conn) expire(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.since.IsZero() {
		return // not started
	}
	el := now.Sub(c.mu.since)
	past := time.Unix(1, 0)
	switch {
	case c.mu.idle:
		if el >= c.s.cfg.IdleTimeout && !c.mu.kicked {
			c.mu.kicked = true
			c.nc.SetReadDeadline(past)
		}
	default:
		if el >= c.s.cfg.ReadTimeout && !c.mu.readExpired {
			c.mu.readExpired = true
			c.nc.SetReadDeadline(past)
		}
		if el >= c.s.cfg.WriteTimeout && !c.mu.writeExpired {
			c.mu.writeExpired = true
			c.nc.SetWriteDeadline(past)
		}
	}
}
