package workload

// Values cut from random bytes do not compress; values cut from text do, as logs, JSON and
// source files do. The text the bench uses is Go's own source tree (internal/corpus): on every
// machine that builds the bench, the same bytes for the same Go version, nothing to download.

// PayloadOf returns a payload whose values are cut from buf (a text corpus, say) instead of
// random bytes. buf must not be modified while the payload is in use.
func PayloadOf(buf []byte) *Payload { return &Payload{buf: buf} }

// Len is the payload's length in bytes: the longest value it can serve.
func (p *Payload) Len() int { return len(p.buf) }

// Pieces is how many values of n bytes the payload holds end to end (at least 1). n must be
// at most Len.
func (p *Payload) Pieces(n int) int { return max(len(p.buf)/max(n, 1), 1) }

// Piece returns value i of n bytes when the payload is cut into consecutive pieces of n bytes:
// piece i mod Pieces(n). Unlike Value, consecutive indexes read the payload in order, so a run
// of Pieces(n) values covers it once. The slice aliases the payload: callers must not modify it.
func (p *Payload) Piece(i uint64, n int) []byte {
	off := i % uint64(p.Pieces(n)) * uint64(n)
	return p.buf[off : off+uint64(n)]
}
