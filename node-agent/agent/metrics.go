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

// ApplyResults are the values of nettune_agent_applies_total's result label.
var ApplyResults = []string{"committed", "refused", "rolled_back", "error"}

// NewMetrics creates the metrics and registers them, with a collector that
// reports, from the committed (last-known-good) spec at scrape time, the
// revision of every profile in force and sock_diag TCP info for its
// destinations.
//
// Every result of nettune_agent_applies_total starts at 0, so that the first
// apply of each kind shows in increase() and rate().
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
	for _, r := range ApplyResults {
		m.Applies.WithLabelValues(r)
	}
	reg.MustRegister(m.Applies, m.Reverts, m.DriftRepairs, m.ApplyDuration, &specCollector{node: node, engine: engine})
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
	descRevision = prometheus.NewDesc("nettune_agent_revision_info",
		"1 for every profile revision in force on the host (the committed, last-known-good spec); node_revision is the NodeNetTuning's own revision.",
		[]string{"node", "profile", "revision", "node_revision"}, nil)
	descRTT     = prometheus.NewDesc("nettune_tcp_rtt_seconds", "Smoothed RTT of the established connection to a tuned destination (max over sockets).", []string{"node", "destination"}, nil)
	descRTO     = prometheus.NewDesc("nettune_tcp_rto_seconds", "Retransmission timeout (max over sockets).", []string{"node", "destination"}, nil)
	descCwnd    = prometheus.NewDesc("nettune_tcp_snd_cwnd", "Congestion window in packets (max over sockets).", []string{"node", "destination"}, nil)
	descRetrans = prometheus.NewDesc("nettune_tcp_total_retrans", "Retransmitted segments over the life of the sockets (sum).", []string{"node", "destination"}, nil)
	descRTOs    = prometheus.NewDesc("nettune_tcp_rto_timeouts", "Retransmission timeouts over the life of the sockets (sum; Linux 6.7+): a guard on rto_min, each one a message waiting at least rto_min.", []string{"node", "destination"}, nil)
	descDSACK   = prometheus.NewDesc("nettune_tcp_dsack_dups", "Segments the peer received twice (D-SACK) over the life of the sockets (sum; Linux 5.10+): spurious retransmissions, a guard on rto_min below the delayed-ACK time.", []string{"node", "destination"}, nil)
	descSockets = prometheus.NewDesc("nettune_tcp_sockets", "TCP sockets to the destination.", []string{"node", "destination"}, nil)
)

// specCollector reads the committed spec and sock_diag at scrape time, so
// idle costs nothing.
type specCollector struct {
	node   string
	engine *Engine
}

func (c *specCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRevision, descRTT, descRTO, descCwnd, descRetrans, descRTOs, descDSACK, descSockets} {
		ch <- d
	}
}

func (c *specCollector) Collect(ch chan<- prometheus.Metric) {
	spec, err := c.engine.CommittedSpec()
	if err != nil {
		return
	}
	collectRevisionInfo(ch, c.node, spec)
	collectTCPInfo(ch, c.node, c.engine.Host, spec)
}

// collectRevisionInfo reports nettune_agent_revision_info for every profile
// of spec (nothing before the first commit).
func collectRevisionInfo(ch chan<- prometheus.Metric, node string, spec v1alpha1.NodeNetTuningSpec) {
	seen := map[string]bool{}
	for _, p := range spec.Profiles {
		if p.Name == "" || seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		ch <- prometheus.MustNewConstMetric(descRevision, prometheus.GaugeValue, 1, node, p.Name, p.Revision, spec.Revision)
	}
}

func collectTCPInfo(ch chan<- prometheus.Metric, node string, host *kernel.Handle, spec v1alpha1.NodeNetTuningSpec) {
	for _, dst := range RouteDestinations(spec) {
		socks, err := host.TCPSockets(dst)
		if err != nil {
			continue
		}
		var rtt, rto float64
		var cwnd, retrans, rtos, dsack float64
		hasRTOs, hasDSACK := true, true
		for _, s := range socks {
			rtt = max(rtt, s.RTT.Seconds())
			rto = max(rto, s.RTO.Seconds())
			cwnd = max(cwnd, float64(s.SndCwnd))
			retrans += float64(s.TotalRetrans)
			rtos += float64(s.TotalRTO)
			dsack += float64(s.DSACKDups)
			hasRTOs = hasRTOs && s.HasTotalRTO
			hasDSACK = hasDSACK && s.HasDSACK
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
		if hasRTOs {
			ch <- prometheus.MustNewConstMetric(descRTOs, prometheus.CounterValue, rtos, node, d)
		}
		if hasDSACK {
			ch <- prometheus.MustNewConstMetric(descDSACK, prometheus.CounterValue, dsack, node, d)
		}
	}
}
