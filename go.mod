module github.com/seed57392e9e/blobcache

go 1.26.0

require (
	github.com/cespare/xxhash/v2 v2.3.0
	golang.org/x/sys v0.49.0
)
