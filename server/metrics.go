package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbox/agentbox/server/api"
)

// metrics are the server's Prometheus metrics. They name tenants, so they
// are served on the operator's listeners (the admin socket, --metrics),
// not to tenants.
type metrics struct {
	reg           *prometheus.Registry
	exec          *prometheus.HistogramVec
	violations    *prometheus.CounterVec
	quotaRefusals *prometheus.CounterVec
	reaped        *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		exec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentbox_exec_seconds",
			Help:    "Wall-clock time of commands run to completion or streamed, by tenant.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"tenant"}),
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_violations_total",
			Help: "Policy violations commands met (a denied host, a limit hit), by tenant.",
		}, []string{"tenant"}),
		quotaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_quota_refusals_total",
			Help: "Requests refused for a tenant's quota or rate.",
		}, []string{"tenant", "kind"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_reaped_sessions_total",
			Help: "Sessions deleted for their TTL or idle timeout.",
		}, []string{"tenant", "reason"}),
	}
	m.reg.MustRegister(m.exec, m.violations, m.quotaRefusals, m.reaped, &sessionCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// MetricsHandler serves the metrics in the Prometheus text format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// sessionCollector counts sessions by tenant, backend and status when
// scraped, from the sessions themselves (no gauge to keep in step).
type sessionCollector struct{ s *Server }

var sessionsDesc = prometheus.NewDesc("agentbox_sessions", "Sessions the server holds, by tenant, backend and status.",
	[]string{"tenant", "backend", "status"}, nil)

var (
	poolReadyDesc = prometheus.NewDesc("agentbox_pool_ready", "Sessions a tenant's warm pool holds ready.",
		[]string{"tenant"}, nil)
	poolCreatesDesc = prometheus.NewDesc("agentbox_pool_creates_total", "Creates that matched a tenant's warm pool, by whether it had a session ready (hit) or not (miss).",
		[]string{"tenant", "result"}, nil)
)

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sessionsDesc
	ch <- poolReadyDesc
	ch <- poolCreatesDesc
}

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	tenants := make([]*tenant, 0, len(c.s.tenants))
	for _, t := range c.s.tenants {
		tenants = append(tenants, t)
	}
	c.s.mu.Unlock()
	for _, t := range tenants {
		counts := map[string]int{api.StatusRunning: 0, api.StatusGone: 0}
		for _, l := range t.list() {
			_, running := l.holds()
			if running {
				counts[api.StatusRunning]++
			} else {
				counts[api.StatusGone]++
			}
		}
		for status, n := range counts {
			ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), t.name, t.client.Name(), status)
		}
		if t.pool == nil {
			continue
		}
		for _, st := range t.pool.Stats() {
			ch <- prometheus.MustNewConstMetric(poolReadyDesc, prometheus.GaugeValue, float64(st.Ready), t.name)
			ch <- prometheus.MustNewConstMetric(poolCreatesDesc, prometheus.CounterValue, float64(st.Hits), t.name, "hit")
			ch <- prometheus.MustNewConstMetric(poolCreatesDesc, prometheus.CounterValue, float64(st.Miss), t.name, "miss")
		}
	}
}
