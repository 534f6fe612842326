// Package corpus gives tests and benchmarks real text to compress: Go source, the .go files of a
// directory (by default the source tree of the go command on the PATH) concatenated in walk
// order. Nothing here writes or keeps state; its functions are safe for concurrent use.
package corpus
