package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seed57392e9e/blobcache"
)

// StatsSource is what the metrics read the cache's counters from: a *blobcache.Cache.
type StatsSource interface{ Stats() blobcache.Stats }

// Metrics holds the server's metrics and the registry /metrics serves.
type Metrics struct {
	reg *prometheus.Registry

	getSeconds     *prometheus.HistogramVec
	getHit         prometheus.Observer // getSeconds' series, resolved once
	getMiss        prometheus.Observer
	putSeconds     prometheus.Histogram
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	connections    *prometheus.GaugeVec
	rejectedConns  *prometheus.CounterVec
	busy           *prometheus.CounterVec
	inflightBytes  prometheus.Gauge
}

// latencyBuckets spans 10µs (a bloom-filter miss through the whole stack) to about 10s (a large
// blob to a slow client).
var latencyBuckets = prometheus.ExponentialBucketsRange(10e-6, 10, 19)

// New returns metrics that read the cache's counters from src at every scrape, with the Go
// runtime and process collectors.
func New(src StatsSource) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		getSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blobcache_get_duration_seconds",
			Help:    "Time of a cache Get: bloom filter, index and the first read of the blob (not the transfer to the client).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		putSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "blobcache_put_duration_seconds",
			Help:    "Time of a cache Put, including any wait for a free write buffer (backpressure).",
			Buckets: latencyBuckets,
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blobcache_requests_total",
			Help: "Requests answered, by protocol, operation and result (HTTP status code, or memcached outcome).",
		}, []string{"proto", "op", "result"}),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blobcache_request_duration_seconds",
			Help:    "Time to answer a request, from its first byte read to its last byte written.",
			Buckets: latencyBuckets,
		}, []string{"proto", "op"}),
		connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "blobcache_connections",
			Help: "Open client connections, by protocol.",
		}, []string{"proto"}),
		rejectedConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blobcache_connections_rejected_total",
			Help: "Connections closed at once because the connection limit was reached.",
		}, []string{"proto"}),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "blobcache_busy_rejections_total",
			Help: "Writes refused because the server's value memory stayed full for the admission timeout (HTTP 503, memcached SERVER_ERROR busy).",
		}, []string{"proto"}),
		inflightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "blobcache_inflight_value_bytes",
			Help: "Memory held by request values between the network and the cache.",
		}),
	}
	// Every documented series of the vectors whose labels are known up front exists from the
	// start, at zero, so a dashboard or an alert sees 0 rather than no data.
	m.getHit, m.getMiss = m.getSeconds.WithLabelValues("hit"), m.getSeconds.WithLabelValues("miss")
	for _, proto := range []string{"http", "memcache"} {
		m.connections.WithLabelValues(proto)
		m.rejectedConns.WithLabelValues(proto)
		m.busy.WithLabelValues(proto)
	}
	m.reg.MustRegister(m.getSeconds, m.putSeconds, m.requests, m.requestSeconds, m.connections,
		m.rejectedConns, m.busy, m.inflightBytes,
		newStatsCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry the metrics are in, for callers that add their own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveGet records the time of one cache Get.
func (m *Metrics) ObserveGet(d time.Duration, hit bool) {
	if m == nil {
		return
	}
	if hit {
		m.getHit.Observe(d.Seconds())
	} else {
		m.getMiss.Observe(d.Seconds())
	}
}

// ObservePut records the time of one cache Put.
func (m *Metrics) ObservePut(d time.Duration) {
	if m != nil {
		m.putSeconds.Observe(d.Seconds())
	}
}

// Request records one answered request.
func (m *Metrics) Request(proto, op, result string, d time.Duration) {
	m.RequestMetric(proto, op, result).Observe(d)
}

// RequestMetric is the series of one kind of request (protocol, operation and result), resolved
// once: a connection that keeps it records each request without looking its labels up again.
// Its zero value (from nil Metrics) records nothing.
type RequestMetric struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// RequestMetric returns the series of requests of proto, op and result.
func (m *Metrics) RequestMetric(proto, op, result string) RequestMetric {
	if m == nil {
		return RequestMetric{}
	}
	return RequestMetric{m.requests.WithLabelValues(proto, op, result), m.requestSeconds.WithLabelValues(proto, op)}
}

// Observe records one request that took d.
func (r RequestMetric) Observe(d time.Duration) {
	if r.count == nil {
		return
	}
	r.count.Inc()
	r.duration.Observe(d.Seconds())
}

// ConnOpened and ConnClosed track open connections.
func (m *Metrics) ConnOpened(proto string) {
	if m != nil {
		m.connections.WithLabelValues(proto).Inc()
	}
}

// ConnClosed is the counterpart of ConnOpened.
func (m *Metrics) ConnClosed(proto string) {
	if m != nil {
		m.connections.WithLabelValues(proto).Dec()
	}
}

// ConnRejected counts a connection refused by the connection limit.
func (m *Metrics) ConnRejected(proto string) {
	if m != nil {
		m.rejectedConns.WithLabelValues(proto).Inc()
	}
}

// Busy counts a write refused by admission control.
func (m *Metrics) Busy(proto string) {
	if m != nil {
		m.busy.WithLabelValues(proto).Inc()
	}
}

// InflightBytes adds delta to the memory held by request values.
func (m *Metrics) InflightBytes(delta int64) {
	if m != nil {
		m.inflightBytes.Add(float64(delta))
	}
}
