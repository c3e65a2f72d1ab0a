/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

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
	// Deferred is 1 while a new revision waits for the gate or a window.
	Deferred prometheus.Gauge
	// GateOpen is 0 while the vehicle's apply gate is closed.
	GateOpen prometheus.Gauge
	// RTOEpisodes estimates RTOs per peer for
	// nettune_tcp_rto_episodes_total: exported once it runs (RunRTOEpisodes).
	RTOEpisodes *RTOPoller
}

// RunRTOEpisodes polls the engine's namespace for the estimate of
// nettune_tcp_rto_episodes_total every interval until ctx ends.
func (m *Metrics) RunRTOEpisodes(ctx context.Context, engine *Engine, interval time.Duration) {
	if m == nil || engine == nil || engine.Host == nil {
		return
	}
	m.RTOEpisodes.Interval = interval
	m.RTOEpisodes.Run(ctx, engine.Host)
}

// ApplyResults are the values of nettune_agent_applies_total's result label.
var ApplyResults = []string{"committed", "refused", "rolled_back", "error"}

// MetricLabels name the host in the agent's metrics.
type MetricLabels struct {
	// Node is the node label of every metric.
	Node string
	// Vehicle is the vehicle label of every metric (the agent's --vehicle),
	// Host the host label of the nettune_tcp_* metrics (--host): the labels
	// the probe's nettune_probe_latency_seconds has. Each is left out when
	// empty.
	Vehicle, Host string
}

// NewMetrics is NewMetricsFor with only the node label.
func NewMetrics(reg prometheus.Registerer, node string, engine *Engine) *Metrics {
	return NewMetricsFor(reg, MetricLabels{Node: node}, engine)
}

// NewMetricsFor creates the metrics and registers them, with a collector
// that reports, from the committed (last-known-good) spec at scrape time, the
// revision of every profile in force and sock_diag TCP info for its
// destinations.
//
// Every result of nettune_agent_applies_total starts at 0, so that the first
// apply of each kind shows in increase() and rate().
func NewMetricsFor(reg prometheus.Registerer, l MetricLabels, engine *Engine) *Metrics {
	if l.Vehicle != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"vehicle": l.Vehicle}, reg)
	}
	labels := prometheus.Labels{"node": l.Node}
	m := &Metrics{
		Applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nettune_agent_applies_total", Help: "Applies by result (committed, refused, rolled_back, retrying: stopped by the host's environment and tried again, error).", ConstLabels: labels,
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
	m.Deferred = prometheus.NewGauge(prometheus.GaugeOpts{Name: "nettune_agent_apply_deferred", Help: "1 while a new revision waits for the vehicle's apply gate or a maintenance window.", ConstLabels: labels})
	m.GateOpen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "nettune_agent_apply_gate_open", Help: "0 while the vehicle's apply gate is closed (1 when open or not configured).", ConstLabels: labels})
	m.GateOpen.Set(1)
	m.RTOEpisodes = &RTOPoller{Interval: DefaultRTOPollInterval}
	sc := newSpecCollector(l, engine)
	sc.rtoPoller = m.RTOEpisodes
	reg.MustRegister(m.Applies, m.Reverts, m.DriftRepairs, m.ApplyDuration, m.Deferred, m.GateOpen, sc)
	return m
}

func (m *Metrics) observe(o Outcome, err error) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.Applies.WithLabelValues("error").Inc()
	case o.Retry > 0:
		m.Applies.WithLabelValues("retrying").Inc()
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

var descRevision = prometheus.NewDesc("nettune_agent_revision_info",
	"1 for every profile revision in force on the host (the committed, last-known-good spec); node_revision is the NodeNetTuning's own revision.",
	[]string{"node", "profile", "revision", "node_revision"}, nil)

// tcpLabels are the variable labels of the nettune_tcp_* metrics, besides
// the constant vehicle and host: one series per tuned route, named by its
// destination, the peer host it reaches (empty when not rendered from a host
// pair), its profile and the revision of that profile in force, as on the
// probe's nettune_probe_latency_seconds.
var tcpLabels = []string{"node", "destination", "peer", "profile", "revision"}

// accumulatedHelp ends the help of the nettune_tcp_*_total counters.
const accumulatedHelp = " Accumulated at scrape time over the TCP sockets to the destination: each scrape adds what every socket counted since the previous scrape (all of its count for a socket opened since), so the counter does not drop when a socket closes. Missed are what a socket counts after the last scrape before it closes, and all of a socket that opens and closes between two scrapes. Counting starts at the agent's first scrape with tuned routes."

// specCollector reads the committed spec and sock_diag at scrape time, so
// idle costs nothing but the running totals of the TCP counters.
type specCollector struct {
	node   string
	engine *Engine

	rtt, rto, cwnd, sockets       *prometheus.Desc
	retrans, rtos, dsack, segsOut *prometheus.Desc
	episodes                      *prometheus.Desc
	// rtoPoller holds the estimate of nettune_tcp_rto_episodes_total;
	// nil or not yet polled: not exported.
	rtoPoller *RTOPoller
	// nodeCounters are the nettune_node_tcpext_*_total metrics, one per
	// kernel.NodeCounterDefs entry, in that order.
	nodeCounters []*prometheus.Desc

	// mu serializes scrapes: a scrape reads the sockets and adds what they
	// counted to the totals in one step, so that concurrent scrapes never
	// apply an older reading after a newer one.
	mu  sync.Mutex
	tcp tcpTotals
}

func newSpecCollector(l MetricLabels, engine *Engine) *specCollector {
	var constLabels prometheus.Labels
	if l.Host != "" {
		constLabels = prometheus.Labels{"host": l.Host}
	}
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, tcpLabels, constLabels)
	}
	var nodeDescs []*prometheus.Desc
	for _, d := range kernel.NodeCounterDefs {
		help := fmt.Sprintf("TcpExt %s of the agent's network namespace (/proc/net/netstat), the kernel's count since boot: %s. Per node, not per peer.", d.Name, d.Meaning)
		if d.PerSocket != "" {
			help += fmt.Sprintf(" The node-level fallback where tcp_info lacks %s (4.9).", d.PerSocket)
		}
		nodeDescs = append(nodeDescs, prometheus.NewDesc(d.Metric, help, []string{"node"}, constLabels))
	}
	return &specCollector{
		nodeCounters: nodeDescs,
		node:         l.Node,
		engine:       engine,
		rtt:          desc("nettune_tcp_rtt_seconds", "Smoothed RTT of the established connection to a tuned destination (max over sockets)."),
		rto:          desc("nettune_tcp_rto_seconds", "Retransmission timeout (max over sockets)."),
		cwnd:         desc("nettune_tcp_snd_cwnd", "Congestion window in packets (max over sockets)."),
		sockets:      desc("nettune_tcp_sockets", "TCP sockets to the destination."),
		retrans:      desc("nettune_tcp_retrans_segments_total", "Segments retransmitted to the destination (tcpi_total_retrans)."+accumulatedHelp),
		rtos:         desc("nettune_tcp_rto_timeouts_total", "Retransmission timeouts of the connections to the destination (tcpi_total_rto; Linux 6.7+): a guard on rto_min, each one a message waiting at least rto_min."+accumulatedHelp),
		dsack:        desc("nettune_tcp_dsack_dups_total", "Segments the peer received twice (D-SACK, tcpi_dsack_dups; Linux 4.19+): spurious retransmissions, a guard on rto_min below the delayed-ACK time."+accumulatedHelp),
		episodes:     desc("nettune_tcp_rto_episodes_total", rtoEpisodesHelp),
		segsOut:      desc("nettune_tcp_segments_out_total", "Segments sent to the destination (tcpi_segs_out: in MSS units, retransmissions and pure ACKs included; Linux 4.2+), the denominator of the guards."+accumulatedHelp),
	}
}

func (c *specCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRevision, c.rtt, c.rto, c.cwnd, c.sockets, c.retrans, c.rtos, c.dsack, c.segsOut, c.episodes} {
		ch <- d
	}
	for _, d := range c.nodeCounters {
		ch <- d
	}
}

func (c *specCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectNodeCounters(ch)
	spec, err := c.engine.CommittedSpec()
	if err != nil {
		return
	}
	collectRevisionInfo(ch, c.node, spec)
	c.collectTCPInfo(ch, spec)
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

// tcpSeriesKey names a series of the nettune_tcp_* metrics: a new revision
// of a route's profile starts new series, with their own totals.
type tcpSeriesKey struct {
	destination, peer, profile, revision string
}

// tcpSocketKey tells a socket apart across scrapes: the cookie is unique to
// the socket for its life (its inode drops to 0 when the application closes
// it while the kernel still sends, and a 4-tuple can be reused).
type tcpSocketKey struct {
	cookie        uint64
	local, remote netip.AddrPort
}

func socketKey(s kernel.TCPSocketInfo) tcpSocketKey {
	ap := func(a *net.TCPAddr) netip.AddrPort {
		ip, _ := netip.AddrFromSlice(a.IP)
		return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port))
	}
	return tcpSocketKey{cookie: s.Cookie, local: ap(s.Local), remote: ap(s.Remote)}
}

// tcpCounts are the guard counters of a socket, or the totals of a series.
type tcpCounts struct {
	retrans, rtos, dsack, segsOut uint64
	// episodes is the series' share of the RTO estimate (totals only).
	episodes float64
}

func socketCounts(s kernel.TCPSocketInfo) tcpCounts {
	return tcpCounts{retrans: uint64(s.TotalRetrans), rtos: uint64(s.TotalRTO), dsack: uint64(s.DSACKDups), segsOut: uint64(s.SegsOut)}
}

// since is what a socket counted since it was seen with prev: the kernel's
// counters are u32 (tcpi_total_rto u16) and wrap, so the difference is taken
// modulo their width and is never negative.
func (c tcpCounts) since(prev tcpCounts) tcpCounts {
	return tcpCounts{
		retrans: uint64(uint32(c.retrans - prev.retrans)),
		rtos:    uint64(uint16(c.rtos - prev.rtos)),
		dsack:   uint64(uint32(c.dsack - prev.dsack)),
		segsOut: uint64(uint32(c.segsOut - prev.segsOut)),
	}
}

func (c *tcpCounts) add(d tcpCounts) {
	c.retrans += d.retrans
	c.rtos += d.rtos
	c.dsack += d.dsack
	c.segsOut += d.segsOut
}

// tcpTotals is the state of the nettune_tcp_*_total counters between
// scrapes.
type tcpTotals struct {
	// totals of every series of the spec at the last scrape.
	totals map[tcpSeriesKey]*tcpCounts
	// socks are the counters of every socket of the namespace with tcp_info
	// at the last dump; nil before the first dump (and after a scrape
	// without routes, which reads nothing).
	socks map[tcpSocketKey]tcpCounts
	// The kernel's tcp_info carries tcpi_total_rto, tcpi_dsack_dups and
	// tcpi_segs_out: learned from any socket of the namespace.
	hasRTO, hasDSACK, hasSegsOut bool
	// episodes are the RTO poller's per-peer totals at the last scrape;
	// nil before the first scrape that read them.
	episodes map[netip.Addr]float64
}

// tcpRoute is a route of the spec as the nettune_tcp_* metrics see it.
type tcpRoute struct {
	dst *net.IPNet
	key tcpSeriesKey
}

func tcpRoutes(spec v1alpha1.NodeNetTuningSpec) []tcpRoute {
	revisions := make(map[string]string, len(spec.Profiles))
	for _, p := range spec.Profiles {
		revisions[p.Name] = p.Revision
	}
	var out []tcpRoute
	seen := map[string]bool{}
	for _, r := range spec.Routes {
		dst, err := kernel.ParseDestination(r.Destination)
		if err != nil || seen[dst.String()] {
			continue
		}
		seen[dst.String()] = true
		out = append(out, tcpRoute{dst, tcpSeriesKey{destination: dst.String(), peer: r.Peer, profile: r.Profile, revision: revisions[r.Profile]}})
	}
	return out
}

// collectTCPInfo reports, for every route of spec, the gauges of the
// sockets to its destination and the running totals of their counters.
//
// Each scrape dumps the sockets of the namespace once and adds to the totals
// of every route whose destination a socket's remote address is in what the
// socket counted since the previous dump: the difference for a socket in
// that dump, all of its count for a socket opened since. The first dump
// (after the start, or after a spec without routes) only records the
// sockets, so the totals start at 0 and count what happens while the agent
// watches, not the history of long-lived sockets. Sockets that are gone are
// forgotten and what they counted stays in the totals; totals of series no
// longer in the spec (a route removed, or under another profile revision)
// are dropped.
func (c *specCollector) collectTCPInfo(ch chan<- prometheus.Metric, spec v1alpha1.NodeNetTuningSpec) {
	routes := tcpRoutes(spec)
	c.mu.Lock()
	defer c.mu.Unlock()
	totals := make(map[tcpSeriesKey]*tcpCounts, len(routes))
	for _, r := range routes {
		t := c.tcp.totals[r.key]
		if t == nil {
			t = &tcpCounts{}
		}
		totals[r.key] = t
	}
	c.tcp.totals = totals
	if len(routes) == 0 || c.engine.Host == nil {
		c.tcp.socks = nil
		c.tcp.episodes = nil
		return
	}

	socks, err := c.engine.Host.TCPSockets(nil)
	if err == nil {
		first := c.tcp.socks == nil
		seen := make(map[tcpSocketKey]tcpCounts, len(c.tcp.socks))
		for _, s := range socks {
			if !s.HasInfo {
				continue // time-wait (or an orphan in FIN-WAIT-2): no counters; what it counted before stays
			}
			c.tcp.hasRTO = c.tcp.hasRTO || s.HasTotalRTO
			c.tcp.hasDSACK = c.tcp.hasDSACK || s.HasDSACK
			c.tcp.hasSegsOut = c.tcp.hasSegsOut || s.HasSegsOut
			k, cur := socketKey(s), socketCounts(s)
			seen[k] = cur
			prev, known := c.tcp.socks[k]
			if first || (known && prev == cur) {
				continue
			}
			d := cur.since(prev) // from 0 for a socket opened since the last dump
			for _, r := range routes {
				if r.dst.Contains(s.Remote.IP) {
					totals[r.key].add(d)
				}
			}
		}
		c.tcp.socks = seen
	}
	polled := c.collectEpisodes(routes, totals)

	for _, r := range routes {
		labels := []string{c.node, r.key.destination, r.key.peer, r.key.profile, r.key.revision}
		if err == nil {
			var rtt, rto, cwnd float64
			n := 0
			for _, s := range socks {
				if !r.dst.Contains(s.Remote.IP) {
					continue
				}
				n++
				rtt = max(rtt, s.RTT.Seconds())
				rto = max(rto, s.RTO.Seconds())
				cwnd = max(cwnd, float64(s.SndCwnd))
			}
			ch <- prometheus.MustNewConstMetric(c.sockets, prometheus.GaugeValue, float64(n), labels...)
			if n > 0 {
				ch <- prometheus.MustNewConstMetric(c.rtt, prometheus.GaugeValue, rtt, labels...)
				ch <- prometheus.MustNewConstMetric(c.rto, prometheus.GaugeValue, rto, labels...)
				ch <- prometheus.MustNewConstMetric(c.cwnd, prometheus.GaugeValue, cwnd, labels...)
			}
		}
		t := totals[r.key]
		ch <- prometheus.MustNewConstMetric(c.retrans, prometheus.CounterValue, float64(t.retrans), labels...)
		if c.tcp.hasRTO {
			ch <- prometheus.MustNewConstMetric(c.rtos, prometheus.CounterValue, float64(t.rtos), labels...)
		}
		if c.tcp.hasDSACK {
			ch <- prometheus.MustNewConstMetric(c.dsack, prometheus.CounterValue, float64(t.dsack), labels...)
		}
		if c.tcp.hasSegsOut {
			ch <- prometheus.MustNewConstMetric(c.segsOut, prometheus.CounterValue, float64(t.segsOut), labels...)
		}
		if polled {
			ch <- prometheus.MustNewConstMetric(c.episodes, prometheus.CounterValue, t.episodes, labels...)
		}
	}
}

// collectEpisodes adds to the totals of every route what the RTO poller
// estimated for the peers in its destination since the previous scrape,
// and reports whether the poller runs. Like the socket counters, the first
// scrape only records where the estimate stands.
func (c *specCollector) collectEpisodes(routes []tcpRoute, totals map[tcpSeriesKey]*tcpCounts) bool {
	if c.rtoPoller == nil {
		return false
	}
	if _, _, _, polls := c.rtoPoller.Stats(); polls == 0 {
		return false
	}
	cur := c.rtoPoller.Totals()
	if c.tcp.episodes != nil {
		for peer, v := range cur {
			d := v - c.tcp.episodes[peer]
			if d <= 0 {
				continue
			}
			for _, r := range routes {
				if r.dst.Contains(peer.AsSlice()) {
					totals[r.key].episodes += d
				}
			}
		}
	}
	c.tcp.episodes = cur
	return true
}

// collectNodeCounters reports the node-level TcpExt counters of the agent's
// namespace as they stand, tuned or not; a counter the kernel lacks has no
// series (as a tcp_info counter it lacks).
func (c *specCollector) collectNodeCounters(ch chan<- prometheus.Metric) {
	if c.engine == nil || c.engine.Host == nil {
		return
	}
	tc, err := c.engine.Host.ReadTCPCounters()
	if err != nil {
		return
	}
	for i, d := range kernel.NodeCounterDefs {
		v, ok := tc.All["TcpExt."+d.Name]
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.nodeCounters[i], prometheus.CounterValue, float64(uint64(v)), c.node)
	}
}
