package blobcache

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// Stale keys. A read that finds a key's newest record expired or invalidated (keyLookup.live)
// serves a miss, and the record's space is then worth reclaiming as an overwritten record's is,
// with a tombstone for the key. The read does not write it: it pushes the key, with what it saw
// of it, into the stale queue, and the writer appends the tombstones under its own lock at its
// next write or tick (writer.writeStale), for the keys whose newest record is still the one the
// read saw. A read takes the queue's lock alone, never the writer's, and calls no method of the
// writer.

// staleKey is a key whose newest record a read found expired or invalidated, with where that
// record was.
type staleKey struct {
	key []byte
	obs observation
}

// maxStale bounds the tombstones waiting for stale records; more are not queued (those records
// go with their segments).
const maxStale = 1024

// staleQueue holds the stale keys reads found until the writer takes them, oldest first, at
// most maxStale: a push to a full queue is dropped. The zero value is an empty queue. mu is a
// leaf in the lock order: the writer takes it under writer.mu, and nothing is taken under it.
type staleQueue struct {
	// n is len(mu.keys), read without the lock: an empty queue (nearly always) costs each of
	// the writer's appends one load, and a push to a full one takes no lock.
	n  atomic.Int32
	mu struct {
		sync.Mutex
		keys []staleKey
	}
}

// push queues key (copied), whose newest record a read found stale where o says, unless the
// queue is full.
func (q *staleQueue) push(key []byte, o observation) {
	if q.n.Load() >= maxStale {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.mu.keys) < maxStale {
		q.mu.keys = append(q.mu.keys, staleKey{key: bytes.Clone(key), obs: o})
		q.n.Store(int32(len(q.mu.keys)))
	}
}

// pop takes the oldest stale key, if any.
func (q *staleQueue) pop() (staleKey, bool) {
	if q.n.Load() == 0 {
		return staleKey{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.mu.keys) == 0 {
		return staleKey{}, false
	}
	sk := q.mu.keys[0]
	q.mu.keys[0] = staleKey{}
	q.mu.keys = q.mu.keys[1:]
	if len(q.mu.keys) == 0 {
		q.mu.keys = nil // the array of a burst is not kept
	}
	q.n.Store(int32(len(q.mu.keys)))
	return sk, true
}

// dropStale counts a read that found key's newest record expired or invalidated, and queues the
// key for a tombstone (where o says the record was) when the cache writes: a read-only cache has
// no writer and writes nothing.
func (c *Cache) dropStale(key []byte, f fate, o observation) {
	if f == expired {
		c.stats.expired.Add(1)
	} else {
		c.stats.invalidated.Add(1)
	}
	if !c.opts.ReadOnly {
		c.stale.push(key, o)
	}
}
