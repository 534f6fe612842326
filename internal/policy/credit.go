package policy

// Credit is the bytes reinsertion may still write. The cache's own writes (Puts, Deletes) earn
// it at share/(1-share) per byte, so that copies are at most share of what is written; it is
// capped at a segment per log, since each log's oldest segment may be copied from at once.
// Credit is not safe for concurrent use: its owner's lock guards it. The zero Credit earns
// nothing and spends nothing.
type Credit struct {
	left    int64
	perByte float64
	cap     int64
}

// NewCredit returns the credit of rules r for copies of at most share (in (0, 1)) of the
// bytes written, with segments of segmentSize: none unless r reinserts.
func NewCredit(r Rules, share float64, segmentSize int64) Credit {
	if !r.Reinserts() {
		return Credit{}
	}
	return Credit{perByte: share / (1 - share), cap: segmentSize * int64(r.Regions())}
}

// Earn adds the credit of n bytes written.
func (c *Credit) Earn(n int64) {
	if c.cap > 0 {
		c.left = min(c.left+int64(float64(n)*c.perByte), c.cap)
	}
}

// Covers reports whether n bytes of copies are within the credit.
func (c *Credit) Covers(n int64) bool { return c.left >= n }

// Spend takes n bytes of copies off the credit; the caller checked Covers.
func (c *Credit) Spend(n int64) { c.left -= n }
