package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	Applies       *prometheus.CounterVec
	Reverts       prometheus.Counter
	DriftRepairs  prometheus.Counter
	ApplyDuration prometheus.Histogram
}

// NewMetrics creates the metrics and registers them, with a collector that
// reports sock_diag TCP info for the destinations of the committed spec.
func NewMetrics(reg prometheus.Registerer, node string, engine *Engine) *Metrics {
	labels := prometheus.Labels{"node": node}
	m := &Metrics{
		Applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nettune_agent_applies_total", Help: "Applies by result (committed, refused, rolled_back, error).", ConstLabels: labels,
		}, []string{"result"}),
		Reverts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nettune_agent_reverts_total", Help: "Applies undone by a local revert.", ConstLabels: labels,
		}),
		DriftRepairs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nettune_agent_drift_repairs_total", Help: "Items re-tuned after drift.", ConstLabels: labels,
		}),
		ApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nettune_agent_apply_duration_seconds", Help: "Duration of a whole apply transaction.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
	}
	reg.MustRegister(m.Applies, m.Reverts, m.DriftRepairs, m.ApplyDuration, &tcpInfoCollector{node: node, engine: engine})
	return m
}

func (m *Metrics) observe(o Outcome, err error) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.Applies.WithLabelValues("error").Inc()
	case o.Committed:
		m.Applies.WithLabelValues("committed").Inc()
	case o.Refused:
		m.Applies.WithLabelValues("refused").Inc()
	case o.RolledBack:
		m.Applies.WithLabelValues("rolled_back").Inc()
		m.Reverts.Inc()
	}
	m.ApplyDuration.Observe(o.Duration.Seconds())
}

var (
	descRTT     = prometheus.NewDesc("nettune_tcp_rtt_seconds", "Smoothed RTT of the established connection to a tuned destination (max over sockets).", []string{"node", "destination"}, nil)
	descRTO     = prometheus.NewDesc("nettune_tcp_rto_seconds", "Retransmission timeout (max over sockets).", []string{"node", "destination"}, nil)
	descCwnd    = prometheus.NewDesc("nettune_tcp_snd_cwnd", "Congestion window in packets (max over sockets).", []string{"node", "destination"}, nil)
	descRetrans = prometheus.NewDesc("nettune_tcp_total_retrans", "Retransmitted segments over the life of the sockets (sum).", []string{"node", "destination"}, nil)
	descSockets = prometheus.NewDesc("nettune_tcp_sockets", "TCP sockets to the destination.", []string{"node", "destination"}, nil)
)

// tcpInfoCollector reads sock_diag at scrape time, so idle costs nothing.
type tcpInfoCollector struct {
	node   string
	engine *Engine
}

func (c *tcpInfoCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRTT, descRTO, descCwnd, descRetrans, descSockets} {
		ch <- d
	}
}

func (c *tcpInfoCollector) Collect(ch chan<- prometheus.Metric) {
	spec, err := c.engine.CommittedSpec()
	if err != nil {
		return
	}
	collectTCPInfo(ch, c.node, c.engine.Host, spec)
}

func collectTCPInfo(ch chan<- prometheus.Metric, node string, host *kernel.Handle, spec v1alpha1.NodeNetTuningSpec) {
	for _, dst := range RouteDestinations(spec) {
		socks, err := host.TCPSockets(dst)
		if err != nil {
			continue
		}
		var rtt, rto float64
		var cwnd, retrans float64
		for _, s := range socks {
			rtt = max(rtt, s.RTT.Seconds())
			rto = max(rto, s.RTO.Seconds())
			cwnd = max(cwnd, float64(s.SndCwnd))
			retrans += float64(s.TotalRetrans)
		}
		d := dst.String()
		ch <- prometheus.MustNewConstMetric(descSockets, prometheus.GaugeValue, float64(len(socks)), node, d)
		if len(socks) == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descRTT, prometheus.GaugeValue, rtt, node, d)
		ch <- prometheus.MustNewConstMetric(descRTO, prometheus.GaugeValue, rto, node, d)
		ch <- prometheus.MustNewConstMetric(descCwnd, prometheus.GaugeValue, cwnd, node, d)
		ch <- prometheus.MustNewConstMetric(descRetrans, prometheus.CounterValue, retrans, node, d)
	}
}
