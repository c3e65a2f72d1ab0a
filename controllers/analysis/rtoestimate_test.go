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
	"strings"
	"testing"

	"github.com/nettune/nettune/api/v1alpha1"
)

// TestRTOGuardFallsBackToEstimate: an RTO guard on a kernel before 6.7
// reads the agent's estimate, for both cohorts, saying so; without the
// estimate reported it stays unmeasurable, naming the kernel.
func TestRTOGuardFallsBackToEstimate(t *testing.T) {
	spec := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "spurious-retransmissions").DeepCopy()
	spec.Judge.SlowQuery = strings.ReplaceAll(spec.Judge.SlowQuery, "nettune_tcp_dsack_dups_total", "nettune_tcp_rto_timeouts_total")
	spec.Judge.NodeFallback = nil
	est := []v1alpha1.NodeCounter{{Name: v1alpha1.EstimateRTOEpisodes, Meaning: "estimated"}}
	k510 := kernel510.DeepCopy()
	k510.EstimatedCounters = est
	k618 := kernel618.DeepCopy()
	k618.EstimatedCounters = est
	kernels := kernelsOf(k510, "av-003")
	for v, n := range kernelsOf(k618, "av-001", "av-002") {
		kernels[v] = n
	}
	canary := Cohort{Vehicles: []string{"av-003"}, Kernels: kernels}
	baseline := Cohort{Vehicles: []string{"av-001", "av-002"}, Kernels: kernels}

	got, msg := withRTOEstimate(spec, canary, baseline)
	if !strings.Contains(got.Judge.SlowQuery, "nettune_tcp_rto_episodes_total") || strings.Contains(got.Judge.SlowQuery, "nettune_tcp_rto_timeouts_total") {
		t.Errorf("slow query not on the estimate: %s", got.Judge.SlowQuery)
	}
	if !strings.Contains(spec.Judge.SlowQuery, "nettune_tcp_rto_timeouts_total") {
		t.Errorf("the analysis' own spec was changed")
	}
	for _, want := range []string{"RTOs estimated", "nettune_tcp_rto_episodes_total", "not the exact count", "on 5.10", "tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-003"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if u, _, _ := checkKernels(got, canary, baseline); u != "" {
		t.Errorf("on the estimate the canary is still unmeasurable: %s", u)
	}

	// Every node on 6.7+: the exact count, no rewrite.
	all618 := kernelsOf(k618, "av-001", "av-002", "av-003")
	if got, msg := withRTOEstimate(spec, Cohort{Vehicles: []string{"av-003"}, Kernels: all618}, Cohort{Vehicles: []string{"av-001"}, Kernels: all618}); got != spec || msg != "" {
		t.Errorf("6.18 everywhere: rewritten (%q)", msg)
	}
	// A baseline node on 6.18 whose agent does not report the estimate: no
	// rewrite (its estimate series would be absent), and the 5.10 canary
	// stays unmeasurable, naming the counter and the kernel.
	oldAgent := kernelsOf(k510, "av-003")
	oldAgent["av-001"] = []NodeKernel{{Node: "av-001-xavier-a", Kernel: kernel618}}
	got, msg = withRTOEstimate(spec, Cohort{Vehicles: []string{"av-003"}, Kernels: oldAgent}, Cohort{Vehicles: []string{"av-001"}, Kernels: oldAgent})
	if got != spec || msg != "" {
		t.Errorf("an agent without the estimate in a cohort: rewritten (%q)", msg)
	}
	if u, _, _ := checkKernels(got, Cohort{Vehicles: []string{"av-003"}, Kernels: oldAgent}, Cohort{}); !strings.Contains(u, "tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on av-003") {
		t.Errorf("unmeasurable message %q", u)
	}
	// A query reading the estimate directly is checked against the
	// agents' reports.
	direct := &v1alpha1.AnalysisSpec{Query: `sum(rate(nettune_tcp_rto_episodes_total[1m]))`}
	if u, _, _ := checkKernels(direct, Cohort{Vehicles: []string{"av-001"}, Kernels: oldAgent}, Cohort{}); !strings.Contains(u, "the agent's estimate rto_episodes not provided") {
		t.Errorf("estimate without report: %q", u)
	}
	if q := replaceMetric("a(nettune_tcp_rto_timeouts_total) + my_nettune_tcp_rto_timeouts_total", rtoTimeoutsMetric, rtoEpisodesMetric); q != "a(nettune_tcp_rto_episodes_total) + my_nettune_tcp_rto_timeouts_total" {
		t.Errorf("replaceMetric: %s", q)
	}
}
