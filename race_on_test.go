//go:build race

package blobcache

// raceEnabled thins out the exhaustive fault tests (every byte, every offset): the race detector
// slows them many times and finds nothing in their single goroutine that a sample does not.
const raceEnabled = true
