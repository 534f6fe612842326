//go:build !race

package blobcache

const raceEnabled = false
