package policy

import "github.com/seed57392e9e/blobcache/internal/ghost"

// SecondPut admits the Put of a key it remembers and declines one it does not, remembering its
// hash in a bounded ghost set (the oldest forgotten first): a key is written on its second Put
// within the set's memory. Safe for concurrent use, lock-free.
type SecondPut struct{ g *ghost.Set }

// NewSecondPut returns a SecondPut that remembers about remember key hashes.
func NewSecondPut(remember int) *SecondPut { return &SecondPut{ghost.New(remember)} }

// Admit reports whether the Put of the key with hash h is written.
func (p *SecondPut) Admit(_ []byte, h uint64, _ int64) bool {
	if p.g.Contains(h) {
		return true
	}
	p.g.Add(h)
	return false
}
