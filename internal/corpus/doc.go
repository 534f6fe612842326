// Package corpus gives tests and benchmarks real text to compress: the Go source tree of the go
// command on the PATH, its .go files concatenated in walk order. Nothing here writes or keeps
// state; GoSource is safe for concurrent use.
package corpus
