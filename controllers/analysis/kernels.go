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
var counterMetrics = []struct{ metric, counter string }{
	{"nettune_tcp_retrans_segments_total", v1alpha1.CounterTotalRetrans},
	{"nettune_tcp_segments_out_total", v1alpha1.CounterSegsOut},
	{"nettune_tcp_dsack_dups_total", v1alpha1.CounterDSACKDups},
	{"nettune_tcp_rto_timeouts_total", v1alpha1.CounterTotalRTO},
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

// counterUse is a tcp_info counter an analysis reads, and the metric
// through which it reads it.
type counterUse struct{ metric, counter string }

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
	for _, cm := range counterMetrics {
		if slices.ContainsFunc(queries, func(q string) bool { return namesMetric(q, cm.metric) }) {
			uses = append(uses, counterUse(cm))
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
				if n.Kernel.Provides(u.counter) {
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
					gaps = append(gaps, kernelGap{counterUse: u, release: release})
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
		parts = append(parts, fmt.Sprintf("%s not provided by kernel %s on %s%s (%s cannot be measured there)",
			g.counter, g.release, strings.Join(vs, ", "), more, g.metric))
	}
	return strings.Join(parts, "; ")
}

// checkKernels applies what the cohorts' kernels can measure to a
// measurement of spec. A canary vehicle whose kernel lacks a counter the
// analysis reads makes the measurement Inconclusive, saying so by name (it
// never counts as a Pass; the analysis' inconclusiveLimit and onInconclusive
// decide what the rollout does). Baseline vehicles whose kernel lacks one
// are left out of the baseline, and note says so.
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
