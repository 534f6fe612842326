//go:build !unix

package memtier

// mapsOnDemand is false: a buffer counts for its whole size class.
const mapsOnDemand = false

// mapBytes returns n bytes of heap memory: the platform maps none here.
func mapBytes(n int) []byte { return make([]byte, n) }

// unmapBytes leaves b to the garbage collector.
func unmapBytes([]byte) {}
