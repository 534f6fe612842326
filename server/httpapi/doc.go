// Package httpapi is BlobCache's HTTP interface.
//
//	PUT    /v1/blobs/{key}   store the body (Content-Length required) → 204
//	GET    /v1/blobs/{key}   the blob (Range, If-Range, If-None-Match) → 200, 206, 304, 404, 416
//	HEAD   /v1/blobs/{key}   GET without the body
//	DELETE /v1/blobs/{key}   remove the blob, whether or not it was there → 204
//	GET    /healthz          200 "ok", 503 while the server shuts down
//	GET    /metrics          Prometheus metrics
//	GET    /debug/pprof/     profiles, only when Config.Pprof
//
// A key is every byte of the path after /v1/blobs/, URL-unescaped, so any byte string of 1 to
// Config.MaxKeyLen bytes is a key ("%2F" is a slash inside the key, not a separator). Bodies
// are streamed to the client from the cache; an upload is read into a buffer of its
// Content-Length (the library's Put takes a slice), within the store's memory budget, and a
// server past its budget answers 503 with Retry-After. Errors: 400 bad key, bad header or
// truncated body; 401 missing or wrong bearer token (when Config.Token is set); 411 no
// Content-Length; 413 past the value limit; 503 busy or shutting down.
//
// Items written through the memcached front end with client flags or an expiry carry them in
// the Blobcache-Flags and Expires response headers; a PUT may set them with Blobcache-Flags and
// Blobcache-TTL (seconds). ETags are the blob's stored CRC-32C and length, so they are strong
// validators for Range and conditional requests.
//
// The Handler is safe for concurrent use. Connection-level protections (header size, timeouts,
// connection limits, TLS) are the http.Server's and the listener's; see package server.
package httpapi
