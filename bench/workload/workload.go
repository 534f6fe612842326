// Package workload generates the benchmark's keys, value sizes, value bytes and operation mix.
//
// Everything is a pure function of an index and a seed, so a child process can regenerate the
// key of blob i, its size and its bytes without sharing state with the process that wrote it.
// Keys of the "present" space and the "absent" space never collide: a Get of an absent key is a
// true miss in every engine. The two spaces are interleaved in key order, so that a miss is not
// outside the key range of the engines' files.
package workload

import (
	"encoding/binary"
	"math/rand/v2"
)

// KeyLen is the length of every key, in bytes.
const KeyLen = 17

// Key spaces: byte 8 of a key.
const (
	Present byte = 'p' // keys that are written
	Absent  byte = 'a' // keys that are never written
)

// mix is a bijection on uint64 (the splitmix64 finalizer): consecutive indexes give keys spread
// over the whole key space, so engines that sort keys see random-order inserts.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Key writes the key of index i in space into buf (at least KeyLen bytes) and returns it.
// The layout is mix(i), then space, then i, big-endian: unique per (space, i), random in
// order, and the two spaces interleaved in key order. An absent key must sort among the present
// ones, as a missing key does in production: were the spaces apart in key order (the space
// byte first), an LSM engine would reject every miss by comparing it with each file's smallest
// key, without probing a single filter.
func Key(buf []byte, space byte, i uint64) []byte {
	buf = buf[:KeyLen]
	binary.BigEndian.PutUint64(buf[0:8], mix(i))
	buf[8] = space
	binary.BigEndian.PutUint64(buf[9:17], i)
	return buf
}

// Sizes is a distribution of value sizes: uniform over [Min, Max].
type Sizes struct {
	Min, Max int
	Seed     uint64
}

// Fixed is the distribution of a single size.
func Fixed(n int) Sizes { return Sizes{Min: n, Max: n} }

// Size returns the size of value i.
func (s Sizes) Size(i uint64) int {
	if s.Max <= s.Min {
		return s.Min
	}
	span := uint64(s.Max - s.Min + 1)
	return s.Min + int(mix(i^s.Seed^0x5bd1e995)%span)
}

// Mean is the mean size.
func (s Sizes) Mean() float64 { return float64(s.Min+max(s.Max, s.Min)) / 2 }

// Payload is a block of random bytes that values are cut from, so values do not compress and
// producing one costs no work.
type Payload struct{ buf []byte }

// NewPayload returns a payload able to serve values up to maxValue bytes.
func NewPayload(maxValue int, seed uint64) *Payload {
	n := maxValue + 1<<20
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return &Payload{buf: b}
}

// Value returns the value of index i with size n. The slice aliases the payload: callers must
// not modify it.
func (p *Payload) Value(i uint64, n int) []byte {
	span := uint64(len(p.buf) - n)
	off := mix(i+1) % (span + 1)
	return p.buf[off : off+uint64(n)]
}

// Op is an operation of the mixed workload.
type Op uint8

const (
	OpPut     Op = iota // write a new blob
	OpGetHit            // Get a key that exists
	OpGetMiss           // Get a key that does not exist
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpGetHit:
		return "get-hit"
	case OpGetMiss:
		return "get-miss"
	}
	return "op?"
}

// Mix is the fraction of each operation; the fractions are normalized by their sum.
type Mix struct {
	Put, GetHit, GetMiss float64
}

// SeedMix is seed 000's production mix: 10% writes, 45% Gets of present keys, 45% of absent ones.
var SeedMix = Mix{Put: 0.10, GetHit: 0.45, GetMiss: 0.45}

// Picker draws operations and key indexes for one goroutine. It is not safe for concurrent use:
// give each goroutine its own, seeded differently.
type Picker struct {
	mix Mix
	sum float64
	r   *rand.Rand
}

// NewPicker returns a picker for mix seeded with seed.
func NewPicker(mix Mix, seed uint64) *Picker {
	return &Picker{mix: mix, sum: mix.Put + mix.GetHit + mix.GetMiss, r: rand.New(rand.NewPCG(seed, ^seed))}
}

// Op draws the next operation.
func (p *Picker) Op() Op {
	x := p.r.Float64() * p.sum
	switch {
	case x < p.mix.Put:
		return OpPut
	case x < p.mix.Put+p.mix.GetHit:
		return OpGetHit
	}
	return OpGetMiss
}

// Index draws an index uniformly in [0, n). n must be positive.
func (p *Picker) Index(n uint64) uint64 { return p.r.Uint64N(n) }
