// Package metrics exports the server's and the cache's counters in the Prometheus format
// (prometheus/client_golang).
//
// Cache counters are read from blobcache.Stats when /metrics is scraped, so the cache's hot paths
// pay nothing for them. The server's own measurements (request and cache-call latency histograms,
// connections, admission rejections) are recorded as they happen. Every method is safe for
// concurrent use, and a nil *Metrics records nothing, so code under test may pass nil.
package metrics
