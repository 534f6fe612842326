// Package server runs a BlobCache as a network server: the HTTP interface (package httpapi),
// the memcached protocol (package memcache) and Prometheus metrics (package metrics), over one
// cache opened from a directory. `blobcache serve` is a thin front over it.
//
// Safety defaults: both listeners are on loopback unless configured otherwise; an optional
// bearer token (HTTP) and ASCII authentication (memcached) guard them, and TLS covers both;
// keys, values, header and command-line sizes, connections per listener and the memory held by
// values in flight are bounded; every read and write has a timeout.
//
// Lifecycle: New opens the cache and listens (so the addresses are known, port 0 included);
// Run serves until its context ends, then shuts down gracefully: /healthz turns 503, the
// listeners close, requests in progress finish (up to ShutdownTimeout), and the cache drains
// its write buffer and closes cleanly, so a SIGTERM loses no acknowledged write. Config.Notify,
// if set, hears of it in sd_notify(3)'s words: READY=1 once Run serves, WATCHDOG=1 while it
// does, STOPPING=1 when the shutdown begins.
package server
