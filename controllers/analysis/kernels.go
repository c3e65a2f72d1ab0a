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

package analysis

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nettune/nettune/api/v1alpha1"
)

// counterMetrics are the agent's metrics built on a tcp_info counter. An
// agent omits such a metric when its kernel lacks the counter, and a query
// over an absent series reads as zero: a guard of rto timeouts over segments
// sent would compare 0 of N with 0 of M and pass on every kernel older than
// 6.7. The analysis therefore checks what each vehicle's kernel reported.
//
// Where a vehicle's kernel lacks the per-connection counter but counts the
// same thing per node (TcpExt in /proc/net/netstat, which the agent exports
// as nettune_node_tcpext_*_total and reports in status.kernel.nodeCounters),
// the measurement says so: on 4.9 (JetPack 4) a D-SACK guard can be written
// on TCPDSACKRecv and an RTO guard on TCPTimeouts, per node, not per pair.
var counterMetrics = []counterUse{
	{metric: "nettune_tcp_retrans_segments_total", counter: v1alpha1.CounterTotalRetrans},
	{metric: "nettune_tcp_segments_out_total", counter: v1alpha1.CounterSegsOut},
	{metric: "nettune_tcp_dsack_dups_total", counter: v1alpha1.CounterDSACKDups,
		fallback: v1alpha1.NodeCounterDSACKRecv, fallbackMetric: "nettune_node_tcpext_dsack_recv_total"},
	{metric: "nettune_tcp_rto_timeouts_total", counter: v1alpha1.CounterTotalRTO,
		fallback: v1alpha1.NodeCounterTimeouts, fallbackMetric: "nettune_node_tcpext_timeouts_total"},
}

// estimateMetrics are the agent's metrics of estimated counters
// (status.kernel.estimatedCounters): an analysis reading one is checked
// against what each node's agent reported; an agent that reports none does
// not export it (its absent series would read as zero).
var estimateMetrics = []counterUse{
	{metric: rtoEpisodesMetric, counter: v1alpha1.EstimateRTOEpisodes, estimate: true},
}

// rtoTimeoutsMetric is the exact per-pair RTO count (tcpi_total_rto, 6.7+)
// and rtoEpisodesMetric its estimate on every kernel, with the same labels.
const (
	rtoTimeoutsMetric = "nettune_tcp_rto_timeouts_total"
	rtoEpisodesMetric = "nettune_tcp_rto_episodes_total"
)

// nodeCounterMetrics are the agent's metrics of node-level TcpExt counters
// (node-agent/kernel.NodeCounterDefs): an analysis reading one is checked
// against the node counters each kernel reported.
var nodeCounterMetrics = []counterUse{
	{metric: "nettune_node_tcpext_timeouts_total", counter: v1alpha1.NodeCounterTimeouts, node: true},
	{metric: "nettune_node_tcpext_spurious_rtos_total", counter: v1alpha1.NodeCounterSpuriousRTOs, node: true},
	{metric: "nettune_node_tcpext_loss_probes_total", counter: v1alpha1.NodeCounterLossProbes, node: true},
	{metric: "nettune_node_tcpext_dsack_recv_total", counter: v1alpha1.NodeCounterDSACKRecv, node: true},
	{metric: "nettune_node_tcpext_dsack_ofo_recv_total", counter: v1alpha1.NodeCounterDSACKOfoRecv, node: true},
}

// NodeKernel is what one node's agent reported of its kernel
// (NodeNetTuning status.kernel).
type NodeKernel struct {
	Node string
	// Kernel is nil when the node's agent has not reported its kernel
	// (not yet started, or a version that does not): nothing is checked
	// for that node.
	Kernel *v1alpha1.KernelFeatures
}

// counterUse is a kernel counter an analysis reads, and the metric through
// which it reads it: a tcp_info counter (per connection, summed per pair),
// or with node set a node-level TcpExt counter.
type counterUse struct {
	metric, counter string
	node            bool
	// estimate: counter is an estimate the agent reports in
	// estimatedCounters.
	estimate bool
	// fallback is the node-level TcpExt counter that counts the same per
	// node, and fallbackMetric the agent's metric of it; "" when none.
	fallback, fallbackMetric string
}

// provides reports whether k has the counter of u, and whether that is
// known: a kernel reported without node counters (an older agent) is not
// checked for them.
func (u counterUse) provides(k *v1alpha1.KernelFeatures) (has, known bool) {
	if u.estimate {
		return k.ProvidesEstimate(u.counter), true
	}
	if !u.node {
		return k.Provides(u.counter), true
	}
	if len(k.NodeCounters) == 0 {
		return false, false
	}
	return k.ProvidesNodeCounter(u.counter), true
}

// name is how a message names the counter of u.
func (u counterUse) name() string {
	if u.node {
		return "TcpExt " + u.counter
	}
	if u.estimate {
		return "the agent's estimate " + u.counter
	}
	return u.counter
}

// requiredCounters are the tcp_info counters spec's queries read, found by
// the agent metrics they name.
func requiredCounters(spec *v1alpha1.AnalysisSpec) []counterUse {
	queries := []string{spec.Query}
	if spec.SamplesQuery != nil {
		queries = append(queries, *spec.SamplesQuery)
	}
	if j := spec.Judge; j != nil {
		queries = append(queries, j.SlowQuery, j.TotalQuery)
		if j.IntervalQuery != nil {
			queries = append(queries, *j.IntervalQuery)
		}
	}
	var uses []counterUse
	for _, cm := range slices.Concat(counterMetrics, nodeCounterMetrics, estimateMetrics) {
		if slices.ContainsFunc(queries, func(q string) bool { return namesMetric(q, cm.metric) }) {
			uses = append(uses, cm)
		}
	}
	return uses
}

// namesMetric reports whether query names metric as a whole identifier.
func namesMetric(query, metric string) bool {
	for i := 0; ; {
		j := strings.Index(query[i:], metric)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(metric)
		if (start == 0 || !identByte(query[start-1])) && (end == len(query) || !identByte(query[end])) {
			return true
		}
		i = end
	}
}

func identByte(b byte) bool {
	return b == '_' || b == ':' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// kernelGap is a counter a kernel does not provide, and the vehicles whose
// nodes run that kernel.
type kernelGap struct {
	counterUse
	release  string
	vehicles []string
	// nodeLevel: the kernel has the node-level fallback counter.
	nodeLevel bool
}

// kernelGaps lists, for the cohort's vehicles, the counters of uses that a
// node's reported kernel does not provide, grouped by counter and kernel,
// and the vehicles with at least one such node.
func kernelGaps(uses []counterUse, c Cohort) (gaps []kernelGap, lacking map[string]bool) {
	if len(uses) == 0 || c.Kernels == nil {
		return nil, nil
	}
	index := map[[2]string]int{}
	for _, v := range c.Vehicles {
		for _, n := range c.Kernels[v] {
			if n.Kernel == nil {
				continue
			}
			for _, u := range uses {
				if has, known := u.provides(n.Kernel); has || !known {
					continue
				}
				if lacking == nil {
					lacking = map[string]bool{}
				}
				lacking[v] = true
				release := n.Kernel.Release
				if release == "" {
					release = "(release not reported)"
				}
				key := [2]string{u.counter, release}
				i, ok := index[key]
				if !ok {
					i = len(gaps)
					index[key] = i
					gaps = append(gaps, kernelGap{counterUse: u, release: release,
						nodeLevel: u.fallback != "" && n.Kernel.ProvidesNodeCounter(u.fallback)})
				}
				if !slices.Contains(gaps[i].vehicles, v) {
					gaps[i].vehicles = append(gaps[i].vehicles, v)
				}
			}
		}
	}
	return gaps, lacking
}

// describeGaps says which counter which kernel lacks on which vehicles, e.g.
// "tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-003
// (nettune_tcp_rto_timeouts_total cannot be measured there)".
func describeGaps(gaps []kernelGap) string {
	parts := make([]string, 0, len(gaps))
	for _, g := range gaps {
		vs := g.vehicles
		more := ""
		if len(vs) > 5 {
			vs, more = vs[:5], fmt.Sprintf(" and %d more", len(g.vehicles)-5)
		}
		fallback := ""
		if g.nodeLevel {
			fallback = fmt.Sprintf("; the kernel counts it as TcpExt %s, exported as %s: per node, not per pair, on %s",
				g.fallback, g.fallbackMetric, kernelLine(g.release))
		}
		parts = append(parts, fmt.Sprintf("%s not provided by kernel %s on %s%s (%s cannot be measured there%s)",
			g.name(), g.release, strings.Join(vs, ", "), more, g.metric, fallback))
	}
	return strings.Join(parts, "; ")
}

// kernelLine is the major.minor of a kernel release ("4.9" of
// "4.9.253-tegra"), or the release when it has none.
func kernelLine(release string) string {
	v := strings.SplitN(release, ".", 3)
	if len(v) < 2 {
		return release
	}
	minor := v[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	if v[0] == "" || minor == "" {
		return release
	}
	return v[0] + "." + minor
}

// checkKernels applies what the cohorts' kernels can measure to a
// measurement of spec. A canary vehicle whose kernel lacks a counter the
// analysis reads makes the measurement Inconclusive, saying so by name (it
// never counts as a Pass; the analysis' inconclusiveLimit and onInconclusive
// decide what the rollout does). Baseline vehicles whose kernel lacks one
// are left out of the baseline, and note says so. Where such a kernel has
// the node-level counterpart (TcpExt TCPDSACKRecv for tcpi_dsack_dups,
// TCPTimeouts for tcpi_total_rto, on 4.9), the message names it and its
// metric, per node, not per pair; the guard's query is not rewritten to it.
func checkKernels(spec *v1alpha1.AnalysisSpec, canary, baseline Cohort) (unmeasurable string, measurable Cohort, note string) {
	uses := requiredCounters(spec)
	if gaps, _ := kernelGaps(uses, canary); len(gaps) > 0 {
		return "the canary cannot measure this analysis: " + describeGaps(gaps), baseline, ""
	}
	gaps, lacking := kernelGaps(uses, baseline)
	if len(gaps) == 0 {
		return "", baseline, ""
	}
	measurable = baseline
	measurable.Vehicles = slices.DeleteFunc(slices.Clone(baseline.Vehicles), func(v string) bool { return lacking[v] })
	return "", measurable, "baseline without " + describeGaps(gaps)
}

// withNodeFallback is spec with its judge's queries replaced by
// judge.nodeFallback's when a vehicle of either cohort runs a kernel that
// lacks a per-pair counter the judge reads and the fallback reads that
// counter's node-level counterpart (both cohorts then measure per node, so
// that they compare like with like), and says so; otherwise spec as it is
// and "". The fallback's own counters are then checked like any
// analysis' (a kernel without them makes the canary unmeasurable, naming
// the vehicle, the counter and the kernel).
func withNodeFallback(spec *v1alpha1.AnalysisSpec, canary, baseline Cohort) (*v1alpha1.AnalysisSpec, string) {
	if spec.Judge == nil || spec.Judge.NodeFallback == nil {
		return spec, ""
	}
	uses := slices.DeleteFunc(requiredCounters(spec), func(u counterUse) bool { return u.node })
	cg, _ := kernelGaps(uses, canary)
	bg, _ := kernelGaps(uses, baseline)
	gaps := append(cg, bg...)
	if len(gaps) == 0 {
		return spec, ""
	}
	// The fallback stands in only for the counters it counts: each missing
	// per-pair counter's node-level counterpart must be read by its
	// queries (a D-SACK fallback says nothing of RTO timeouts).
	nf := spec.Judge.NodeFallback
	fallbackQueries := []string{nf.SlowQuery, nf.TotalQuery}
	if nf.IntervalQuery != nil {
		fallbackQueries = append(fallbackQueries, *nf.IntervalQuery)
	}
	for _, g := range gaps {
		if g.fallbackMetric == "" || !slices.ContainsFunc(fallbackQueries, func(q string) bool { return namesMetric(q, g.fallbackMetric) }) {
			return spec, ""
		}
	}
	var lines []string
	for _, g := range gaps {
		if l := kernelLine(g.release); !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	fb := spec.DeepCopy()
	nf = fb.Judge.NodeFallback
	fb.Judge.SlowQuery, fb.Judge.TotalQuery, fb.Judge.IntervalQuery = nf.SlowQuery, nf.TotalQuery, nf.IntervalQuery
	return fb, fmt.Sprintf("per node, not per pair, on %s (%s)", strings.Join(lines, ", "), describeGaps(gaps))
}

// withRTOEstimate is spec with nettune_tcp_rto_timeouts_total replaced by
// nettune_tcp_rto_episodes_total in every query when a vehicle of either
// cohort runs a kernel without tcpi_total_rto (before 6.7) and every node
// of both cohorts reports the estimate (status.kernel.estimatedCounters):
// both cohorts then read the estimate, like with like, and the message
// says so. Otherwise spec as it is and "" (the kernel check then makes the
// canary unmeasurable, naming the counter and the kernel).
func withRTOEstimate(spec *v1alpha1.AnalysisSpec, canary, baseline Cohort) (*v1alpha1.AnalysisSpec, string) {
	queries := []*string{&spec.Query, spec.SamplesQuery}
	if j := spec.Judge; j != nil {
		queries = append(queries, &j.SlowQuery, &j.TotalQuery, j.IntervalQuery)
	}
	reads := false
	for _, q := range queries {
		if q != nil && namesMetric(*q, rtoTimeoutsMetric) {
			reads = true
		}
	}
	if !reads {
		return spec, ""
	}
	rto := []counterUse{{metric: rtoTimeoutsMetric, counter: v1alpha1.CounterTotalRTO}}
	cg, _ := kernelGaps(rto, canary)
	bg, _ := kernelGaps(rto, baseline)
	gaps := append(cg, bg...)
	if len(gaps) == 0 {
		return spec, ""
	}
	est := estimateMetrics[:1]
	if g, _ := kernelGaps(est, canary); len(g) > 0 {
		return spec, ""
	}
	if g, _ := kernelGaps(est, baseline); len(g) > 0 {
		return spec, ""
	}
	var lines []string
	for _, g := range gaps {
		if l := kernelLine(g.release); !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	out := spec.DeepCopy()
	oq := []*string{&out.Query, out.SamplesQuery}
	if j := out.Judge; j != nil {
		oq = append(oq, &j.SlowQuery, &j.TotalQuery, j.IntervalQuery)
		if nf := j.NodeFallback; nf != nil {
			oq = append(oq, &nf.SlowQuery, &nf.TotalQuery, nf.IntervalQuery)
		}
	}
	for _, q := range oq {
		if q != nil {
			*q = replaceMetric(*q, rtoTimeoutsMetric, rtoEpisodesMetric)
		}
	}
	return out, fmt.Sprintf("RTOs estimated (%s, polled sock_diag and TcpExt TCPTimeouts: not the exact count), for both cohorts, on %s (%s)",
		rtoEpisodesMetric, strings.Join(lines, ", "), describeGaps(gaps))
}

// replaceMetric replaces metric, where query names it as a whole
// identifier, by with.
func replaceMetric(query, metric, with string) string {
	var b strings.Builder
	for i := 0; ; {
		j := strings.Index(query[i:], metric)
		if j < 0 {
			b.WriteString(query[i:])
			return b.String()
		}
		start, end := i+j, i+j+len(metric)
		b.WriteString(query[i:start])
		if (start == 0 || !identByte(query[start-1])) && (end == len(query) || !identByte(query[end])) {
			b.WriteString(with)
		} else {
			b.WriteString(metric)
		}
		i = end
	}
}
