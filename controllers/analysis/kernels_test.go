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
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// Kernels as the agent reports them: Debian 11's arm64 5.10 (the JetPack 5
// line, no tcpi_total_rto) and 6.18 (every counter).
var (
	kernel510 = &v1alpha1.KernelFeatures{Release: "5.10.0-32-arm64", Machine: "aarch64",
		TCPInfoCounters: []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups}}
	kernel618 = &v1alpha1.KernelFeatures{Release: "6.18.0", Machine: "x86_64",
		TCPInfoCounters: []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups, v1alpha1.CounterTotalRTO}}
	// JetPack 4's 4.9 as an agent that reports node counters sees it: no
	// tcpi_dsack_dups nor tcpi_total_rto, every TcpExt counter.
	kernel49 = &v1alpha1.KernelFeatures{Release: "4.9.253-tegra", Machine: "aarch64",
		TCPInfoCounters: []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut},
		NodeCounters: []v1alpha1.NodeCounter{{Name: v1alpha1.NodeCounterTimeouts}, {Name: v1alpha1.NodeCounterSpuriousRTOs},
			{Name: v1alpha1.NodeCounterLossProbes}, {Name: v1alpha1.NodeCounterDSACKRecv}, {Name: v1alpha1.NodeCounterDSACKOfoRecv}}}
	// The same kernel reported by an agent that does not report node
	// counters.
	kernel49Old = &v1alpha1.KernelFeatures{Release: "4.9.140-tegra", Machine: "aarch64",
		TCPInfoCounters: []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut}}
)

// kernelsOf gives every vehicle two nodes (xavier-a, xavier-b) on kernel k.
func kernelsOf(k *v1alpha1.KernelFeatures, vehicles ...string) map[string][]NodeKernel {
	out := map[string][]NodeKernel{}
	for _, v := range vehicles {
		out[v] = []NodeKernel{{Node: v + "-xavier-a", Kernel: k}, {Node: v + "-xavier-b", Kernel: k}}
	}
	return out
}

func TestRequiredCounters(t *testing.T) {
	guard := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "spurious-retransmissions")
	judge := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "slow-messages")
	rto := guard.DeepCopy()
	rto.Judge.SlowQuery = strings.ReplaceAll(rto.Judge.SlowQuery, "nettune_tcp_dsack_dups_total", "nettune_tcp_rto_timeouts_total")
	query := &v1alpha1.AnalysisSpec{Query: `sum(rate(nettune_tcp_retrans_segments_total[1m])) / sum(rate(nettune_tcp_segments_out_total[1m]))`}
	lookalike := &v1alpha1.AnalysisSpec{Query: `sum(rate(my_nettune_tcp_rto_timeouts_total[1m])) + sum(nettune_tcp_rto_timeouts_total_v2)`}
	for _, tc := range []struct {
		name string
		spec *v1alpha1.AnalysisSpec
		want []string
	}{
		{"the demo's D-SACK guard", guard, []string{v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups}},
		{"an rto guard (slow query only)", rto, []string{v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups, v1alpha1.CounterTotalRTO}},
		{"the latency judge reads no tcp_info counter", judge, nil},
		{"a query analysis", query, []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut}},
		{"names that only contain a metric's name", lookalike, nil},
		{"a node-level guard", &v1alpha1.AnalysisSpec{Query: `sum(rate(nettune_node_tcpext_dsack_recv_total[1m])) / sum(rate(nettune_tcp_segments_out_total[1m]))`},
			[]string{v1alpha1.CounterSegsOut, v1alpha1.NodeCounterDSACKRecv}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, u := range requiredCounters(tc.spec) {
				got = append(got, u.counter)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("counters %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckKernels(t *testing.T) {
	spec := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "spurious-retransmissions").DeepCopy()
	spec.Judge.SlowQuery = strings.ReplaceAll(spec.Judge.SlowQuery, "nettune_tcp_dsack_dups_total", "nettune_tcp_rto_timeouts_total")
	mixed := kernelsOf(kernel618, "av-001", "av-002")
	mixed["av-003"] = []NodeKernel{{Node: "av-003-xavier-a", Kernel: kernel618}, {Node: "av-003-xavier-b", Kernel: kernel510}}
	for k, v := range kernelsOf(kernel510, "av-004", "av-005", "av-006", "av-007", "av-008", "av-009", "av-010") {
		mixed[k] = v
	}
	unreported := map[string][]NodeKernel{"av-001": {{Node: "av-001-xavier-a"}}}

	t.Run("a canary vehicle with one node on a kernel without the counter is unmeasurable", func(t *testing.T) {
		msg, _, _ := checkKernels(spec, Cohort{Vehicles: []string{"av-001", "av-003"}, Kernels: mixed}, Cohort{})
		want := "the canary cannot measure this analysis: tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-003 (nettune_tcp_rto_timeouts_total cannot be measured there)"
		if msg != want {
			t.Errorf("got %q\nwant %q", msg, want)
		}
	})
	t.Run("baseline vehicles that cannot measure are left out, named", func(t *testing.T) {
		all := []string{"av-002", "av-003", "av-004", "av-005", "av-006", "av-007", "av-008", "av-009", "av-010"}
		msg, baseline, note := checkKernels(spec, Cohort{Vehicles: []string{"av-001"}, Kernels: mixed}, Cohort{Vehicles: all, Kernels: mixed})
		if msg != "" || !reflect.DeepEqual(baseline.Vehicles, []string{"av-002"}) {
			t.Errorf("unmeasurable %q, baseline %v: want measurable, baseline [av-002]", msg, baseline.Vehicles)
		}
		want := "baseline without tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-003, av-004, av-005, av-006, av-007 and 3 more (nettune_tcp_rto_timeouts_total cannot be measured there)"
		if note != want {
			t.Errorf("note %q\nwant %q", note, want)
		}
	})
	t.Run("nodes that did not report their kernel are not checked", func(t *testing.T) {
		if msg, _, note := checkKernels(spec, Cohort{Vehicles: []string{"av-001"}, Kernels: unreported}, Cohort{}); msg != "" || note != "" {
			t.Errorf("unmeasurable %q, note %q: want neither", msg, note)
		}
	})
	t.Run("an analysis that reads no tcp_info counter is not checked", func(t *testing.T) {
		judge := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "slow-messages")
		if msg, _, _ := checkKernels(judge, Cohort{Vehicles: []string{"av-004"}, Kernels: mixed}, Cohort{}); msg != "" {
			t.Errorf("unmeasurable %q for a latency judge", msg)
		}
	})
}

// TestGuardOnAbsentCounterIsNeverAPass runs an rto guard (retransmission
// timeouts over segments sent, per host pair) against a real Prometheus
// scraping the agents' counters, where the canary's kernel (5.10) has no
// tcpi_total_rto and its agent therefore exports no
// nettune_tcp_rto_timeouts_total: the query then reads the canary's
// timeouts as zero, so without the kernels' reports the guard compares 0 of
// N with the baseline's share and passes. With them it is Inconclusive,
// saying why by name, and the analysis ends Inconclusive at its limit.
func TestGuardOnAbsentCounterIsNeverAPass(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"vehicle", "host", "peer", "revision"}
	segs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_tcp_segments_out_total", Help: "segments"}, labels)
	rtos := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_tcp_rto_timeouts_total", Help: "timeouts"}, labels)
	reg.MustRegister(segs, rtos)
	type vehicle struct {
		name, revision string
		hasRTO         bool
	}
	fleet := []vehicle{
		{"av-001", "canary", false}, // 5.10: no tcpi_total_rto
		{"av-002", "canary", true},  // 6.18
		{"av-003", "stable", true},
		{"av-004", "stable", true},
		{"av-005", "stable", false}, // 5.10 in the baseline
	}
	pairs := [][2]string{{"xavier-a", "xavier-b"}, {"xavier-b", "xavier-a"}}
	n := 0
	every(t, 50*time.Millisecond, func() {
		n++
		for _, v := range fleet {
			for _, p := range pairs {
				segs.WithLabelValues(v.name, p[0], p[1], v.revision).Add(100)
				if v.hasRTO {
					c := rtos.WithLabelValues(v.name, p[0], p[1], v.revision)
					// The baseline's kernels time out once in 2,000
					// segments; av-005's 5.10 would too, unseen.
					if v.revision == "stable" && n%20 == 0 {
						c.Add(1)
					} else {
						c.Add(0)
					}
				}
			}
		}
	})
	prom := scrapedBy(t, reg)
	prom.WaitForQuery(t, `count_over_time(nettune_tcp_rto_timeouts_total{vehicle="av-003"}[1m]) >= 12`, time.Minute)

	spec := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "spurious-retransmissions").DeepCopy()
	spec.Name = "rto-timeouts"
	for _, q := range []*string{&spec.Judge.SlowQuery, spec.Judge.IntervalQuery} {
		*q = strings.ReplaceAll(*q, "nettune_tcp_dsack_dups_total", "nettune_tcp_rto_timeouts_total")
	}
	spec.Window = &metav1.Duration{Duration: 15 * time.Second}
	spec.Judge.Step = &metav1.Duration{Duration: 3 * time.Second}
	spec.MinSamples = ptrInt64(1000)
	spec.Judge.Confidence = ptrString("0.9")
	limit := int32(2)
	spec.InconclusiveLimit = &limit
	q := NewPrometheus(prom.URL, nil)
	ctx := context.Background()
	kernels := kernelsOf(kernel618, "av-002", "av-003", "av-004")
	for k, v := range kernelsOf(kernel510, "av-001", "av-005") {
		kernels[k] = v
	}
	baseline := Cohort{Vehicles: []string{"av-003", "av-004", "av-005"}, Revision: "stable", Kernels: kernels}
	at := time.Now()

	t.Run("a canary on 5.10 is Inconclusive, naming counter, kernel and vehicle", func(t *testing.T) {
		canary := Cohort{Vehicles: []string{"av-001"}, Revision: "canary", Kernels: kernels}
		var res v1alpha1.AnalysisResult
		for i := range 3 {
			m := Measure(ctx, q, "xavier-lan", spec, canary, baseline, at.Add(time.Duration(i)*time.Second))
			t.Logf("measurement %d: %s", i, describe(m))
			if m.Verdict != VerdictInconclusive || m.Judge == nil || m.Judge.Verdict != VerdictInconclusive ||
				!strings.Contains(m.Message, "tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-001") {
				t.Fatalf("verdict %s: %q, want Inconclusive naming tcpi_total_rto, the kernel and av-001", m.Verdict, m.Message)
			}
			res = Accumulate(res, m, spec)
		}
		if res.Phase != v1alpha1.AnalysisInconclusive || !strings.Contains(res.Message, "tcpi_total_rto not provided") {
			t.Errorf("result after 3 measurements (inconclusiveLimit 2): %s %q, want Inconclusive", res.Phase, res.Message)
		}
	})
	t.Run("a canary that can measure passes without the baseline vehicle that cannot", func(t *testing.T) {
		canary := Cohort{Vehicles: []string{"av-002"}, Revision: "canary", Kernels: kernels}
		m := Measure(ctx, q, "xavier-lan", spec, canary, baseline, at)
		t.Logf("measurement: %s", describe(m))
		if m.Verdict != VerdictPass || m.Judge == nil || len(m.Judge.Pairs) != 2 {
			t.Fatalf("verdict %s: %q, want Pass on 2 pairs", m.Verdict, m.Message)
		}
		if !strings.Contains(m.Message, "baseline without tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-005") {
			t.Errorf("message %q does not say av-005 was left out", m.Message)
		}
		// av-003 and av-004 each send about 2 x 15 s x 20 x 100 segments
		// a pair; av-005's segments are not counted.
		for _, p := range m.Judge.Pairs {
			if p.BaselineTotal > int64(float64(p.CanaryTotal)*2.5) || p.BaselineSlow == 0 {
				t.Errorf("pair %s: baseline %d/%d against canary %d/%d: av-005 counted, or no baseline timeouts", p.Pair,
					p.BaselineSlow, p.BaselineTotal, p.CanarySlow, p.CanaryTotal)
			}
		}
	})
}

// TestCheckKernelsNodeLevelFallback: on 4.9 (no tcpi_dsack_dups, no
// tcpi_total_rto) a guard on them is still never a Pass, and where the
// kernel has the node-level TcpExt counterpart the message names it, its
// metric and that it is per node, not per pair; where it has neither, the
// message names the vehicle, the counter and the kernel. An analysis that
// reads a node-level metric is checked against the node counters reported.
func TestCheckKernelsNodeLevelFallback(t *testing.T) {
	dsack := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "spurious-retransmissions")
	rto := dsack.DeepCopy()
	rto.Judge.SlowQuery = strings.ReplaceAll(rto.Judge.SlowQuery, "nettune_tcp_dsack_dups_total", "nettune_tcp_rto_timeouts_total")
	kernels := kernelsOf(kernel49, "av-011", "av-012")
	for k, v := range kernelsOf(kernel49Old, "av-013") {
		kernels[k] = v
	}
	for k, v := range kernelsOf(kernel510, "av-003") {
		kernels[k] = v
	}
	for _, tc := range []struct {
		name    string
		spec    *v1alpha1.AnalysisSpec
		canary  []string
		want    string
		noteFor []string // baseline
		note    string
	}{
		{"the D-SACK guard on 4.9 with TCPDSACKRecv", dsack, []string{"av-011"},
			"the canary cannot measure this analysis: tcpi_dsack_dups not provided by kernel 4.9.253-tegra on av-011 (nettune_tcp_dsack_dups_total cannot be measured there; the kernel counts it as TcpExt TCPDSACKRecv, exported as nettune_node_tcpext_dsack_recv_total: per node, not per pair, on 4.9)",
			nil, ""},
		{"an RTO guard on 4.9 with TCPTimeouts", rto, []string{"av-012"},
			"the canary cannot measure this analysis: tcpi_dsack_dups not provided by kernel 4.9.253-tegra on av-012 (nettune_tcp_dsack_dups_total cannot be measured there; the kernel counts it as TcpExt TCPDSACKRecv, exported as nettune_node_tcpext_dsack_recv_total: per node, not per pair, on 4.9); " +
				"tcpi_total_rto not provided by kernel 4.9.253-tegra on av-012 (nettune_tcp_rto_timeouts_total cannot be measured there; the kernel counts it as TcpExt TCPTimeouts, exported as nettune_node_tcpext_timeouts_total: per node, not per pair, on 4.9)",
			nil, ""},
		{"neither: a 4.9 whose agent reported no node counters", dsack, []string{"av-013"},
			"the canary cannot measure this analysis: tcpi_dsack_dups not provided by kernel 4.9.140-tegra on av-013 (nettune_tcp_dsack_dups_total cannot be measured there)",
			nil, ""},
		{"a 4.9 baseline vehicle is left out, the note names the fallback", dsack, []string{"av-003"}, "",
			[]string{"av-003", "av-011"},
			"baseline without tcpi_dsack_dups not provided by kernel 4.9.253-tegra on av-011 (nettune_tcp_dsack_dups_total cannot be measured there; the kernel counts it as TcpExt TCPDSACKRecv, exported as nettune_node_tcpext_dsack_recv_total: per node, not per pair, on 4.9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, _, note := checkKernels(tc.spec, Cohort{Vehicles: tc.canary, Kernels: kernels}, Cohort{Vehicles: tc.noteFor, Kernels: kernels})
			if msg != tc.want {
				t.Errorf("got  %q\nwant %q", msg, tc.want)
			}
			if note != tc.note {
				t.Errorf("note %q\nwant %q", note, tc.note)
			}
		})
	}

	node := &v1alpha1.AnalysisSpec{Query: `sum(rate(nettune_node_tcpext_dsack_recv_total{vehicle=~"{{ .Vehicles }}"}[5m]))`}
	t.Run("a node-level guard measures on 4.9", func(t *testing.T) {
		if msg, _, note := checkKernels(node, Cohort{Vehicles: []string{"av-011"}, Kernels: kernels}, Cohort{}); msg != "" || note != "" {
			t.Errorf("unmeasurable %q, note %q: want measurable", msg, note)
		}
	})
	t.Run("a node-level guard where the agent reported no node counters is not checked", func(t *testing.T) {
		if msg, _, _ := checkKernels(node, Cohort{Vehicles: []string{"av-013", "av-003"}, Kernels: kernels}, Cohort{}); msg != "" {
			t.Errorf("unmeasurable %q: want not checked", msg)
		}
	})
	t.Run("a node-level guard on a kernel without the node counter", func(t *testing.T) {
		without := *kernel49
		without.Release = "4.9.999-custom"
		without.NodeCounters = []v1alpha1.NodeCounter{{Name: v1alpha1.NodeCounterTimeouts}}
		msg, _, _ := checkKernels(node, Cohort{Vehicles: []string{"av-020"}, Kernels: kernelsOf(&without, "av-020")}, Cohort{})
		want := "the canary cannot measure this analysis: TcpExt TCPDSACKRecv not provided by kernel 4.9.999-custom on av-020 (nettune_node_tcpext_dsack_recv_total cannot be measured there)"
		if msg != want {
			t.Errorf("got  %q\nwant %q", msg, want)
		}
	})
}

// TestNodeCounterMetricsMatchTheAgent: the node-level metrics the analysis
// knows are the ones the agent exports, for the same TcpExt counters, and
// each tcp_info counter's fallback is the agent's node-level counterpart.
func TestNodeCounterMetricsMatchTheAgent(t *testing.T) {
	var want, got []string
	perSocket := map[string]string{}
	for _, d := range kernel.NodeCounterDefs {
		want = append(want, d.Name+"="+d.Metric)
		if d.PerSocket != "" {
			perSocket[d.PerSocket] = d.Name + "=" + d.Metric
		}
	}
	for _, u := range nodeCounterMetrics {
		got = append(got, u.counter+"="+u.metric)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("analysis %v, agent %v", got, want)
	}
	for _, u := range counterMetrics {
		fb := ""
		if u.fallback != "" {
			fb = u.fallback + "=" + u.fallbackMetric
		}
		if fb != perSocket[u.counter] {
			t.Errorf("%s: fallback %q, agent %q", u.counter, fb, perSocket[u.counter])
		}
	}
}

// TestNodeFallbackOnPrometheus: a D-SACK guard with judge.nodeFallback,
// measured on a real Prometheus scraping the agents' metrics, where the
// canary vehicle runs 4.9 (no tcpi_dsack_dups, so no per-pair D-SACK
// series, but TcpExt TCPDSACKRecv per node) and the baseline 5.10: both
// cohorts are judged per node, the measurement says so, and the canary's
// tenfold D-SACK share fails it; without the fallback it is Inconclusive,
// and a canary kernel without the node counter either is told by name.
func TestNodeFallbackOnPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	pair := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_tcp_dsack_dups_total"}, []string{"vehicle", "host", "peer"})
	segs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_tcp_segments_out_total"}, []string{"vehicle", "host", "peer"})
	node := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_node_tcpext_dsack_recv_total"}, []string{"vehicle", "host"})
	reg.MustRegister(pair, segs, node)
	// Per second: each host sends 100,000 segments to xavier-a; D-SACKs
	// 100 on the canary (av-001, 4.9: no per-pair series), 10 on the
	// baseline.
	every(t, time.Second, func() {
		for _, h := range []string{"xavier-b", "xavier-c"} {
			segs.WithLabelValues("av-001", h, "xavier-a").Add(100000)
			segs.WithLabelValues("av-002", h, "xavier-a").Add(100000)
			node.WithLabelValues("av-001", h).Add(100)
			node.WithLabelValues("av-002", h).Add(10)
			pair.WithLabelValues("av-002", h, "xavier-a").Add(10)
		}
	})
	prom := scrapedBy(t, reg)
	q := NewPrometheus(prom.URL, nil)
	// Ten seconds of the baseline's D-SACKs scraped (100 a second), on the
	// busy machine as long as it takes, within a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		v, ok, err := q.Query(context.Background(), `sum(increase(nettune_node_tcpext_dsack_recv_total{vehicle="av-002"}[30s]))`, time.Time{})
		if err == nil && ok && v >= 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for 10 s of the baseline's D-SACKs in Prometheus: %v %v %v", v, ok, err)
		}
		time.Sleep(500 * time.Millisecond)
	}

	spec := &v1alpha1.AnalysisSpec{Name: "dsack", Provider: v1alpha1.ProviderPrometheus, Window: metav1Duration(30 * time.Second),
		MinSamples: ptrInt64(1000), Judge: &v1alpha1.JudgeSpec{
			Quantile: ptrString("0.999"), Confidence: ptrString("0.95"), MaxRatio: ptrString("2"), MaxIncrease: ptrString("0.0002"),
			SlowQuery:  `sum by (host) (increase(nettune_tcp_dsack_dups_total{vehicle=~"{{ .Vehicles }}"}[{{ .Window }}]))`,
			TotalQuery: `sum by (host) (increase(nettune_tcp_segments_out_total{vehicle=~"{{ .Vehicles }}"}[{{ .Window }}]))`,
			NodeFallback: &v1alpha1.JudgeFallback{
				SlowQuery:  `sum by (host) (increase(nettune_node_tcpext_dsack_recv_total{vehicle=~"{{ .Vehicles }}"}[{{ .Window }}]))`,
				TotalQuery: `sum by (host) (increase(nettune_tcp_segments_out_total{vehicle=~"{{ .Vehicles }}"}[{{ .Window }}]))`,
			}}}
	canary := Cohort{Vehicles: []string{"av-001"}, Kernels: kernelsOf(kernel49, "av-001")}
	baseline := Cohort{Vehicles: []string{"av-002"}, Kernels: kernelsOf(kernel510, "av-002")}

	m := Measure(context.Background(), q, "p", spec, canary, baseline, time.Now())
	t.Logf("with the fallback: %s %s", m.Verdict, m.Message)
	if m.Verdict != VerdictFail || !strings.HasPrefix(m.Message, "per node, not per pair, on 4.9 (tcpi_dsack_dups not provided by kernel 4.9.253-tegra on av-001") {
		t.Fatalf("with the fallback: %s %q, want Fail per node on 4.9", m.Verdict, m.Message)
	}

	primary := spec.DeepCopy()
	primary.Judge.NodeFallback = nil
	if m := Measure(context.Background(), q, "p", primary, canary, baseline, time.Now()); m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "tcpi_dsack_dups not provided by kernel 4.9.253-tegra on av-001") {
		t.Fatalf("without the fallback: %s %q, want Inconclusive naming the counter, kernel and vehicle", m.Verdict, m.Message)
	}

	bare := kernel49.DeepCopy()
	bare.NodeCounters = nil
	bare.Release = "4.9.140-custom"
	noNode := Cohort{Vehicles: []string{"av-001"}, Kernels: kernelsOf(bare, "av-001")}
	// A kernel reported without node counters is not checked for them (an
	// older agent): report them as known-absent with one other counter.
	bare.NodeCounters = []v1alpha1.NodeCounter{{Name: v1alpha1.NodeCounterTimeouts}}
	if m := Measure(context.Background(), q, "p", spec, noNode, baseline, time.Now()); m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "TcpExt TCPDSACKRecv not provided by kernel 4.9.140-custom on av-001") {
		t.Fatalf("a fallback the kernel cannot give: %s %q, want Inconclusive naming the node counter, kernel and vehicle", m.Verdict, m.Message)
	}
}
