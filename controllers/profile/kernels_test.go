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

package profile_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/envtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// TestGuardOnKernelWithoutCounterPauses: every vehicle's agents report
// Debian 11's arm64 5.10 kernel (the JetPack 5 line), which has no
// tcpi_total_rto, so the agents export no nettune_tcp_rto_timeouts_total. A
// guard on that metric beside the latency analysis is then Inconclusive,
// naming the counter, the kernel and a canary vehicle, and the rollout
// pauses as the guard's onInconclusive says: it is never measured as a Pass
// (over absent series the guard's query would read zero timeouts and pass).
func TestGuardOnKernelWithoutCounterPauses(t *testing.T) {
	prom := testenv.StartPrometheus(t)
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, prom.URL)
	for _, v := range envtest.AllVehicles() {
		e.SetKernel(v, &v1alpha1.KernelFeatures{Release: "5.10.0-32-arm64", Machine: "aarch64",
			TCPInfoCounters:    []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups},
			CongestionControls: []string{"reno", "cubic"}})
	}
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)

	guard := v1alpha1.AnalysisSpec{
		Name: "rto-guard", Provider: v1alpha1.ProviderPrometheus,
		Query:    `sum(increase(nettune_tcp_rto_timeouts_total{vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}[{{ .Window }}]))`,
		Interval: envtest.Dur(time.Second), Window: envtest.Dur(15 * time.Second), Measurements: envtest.Ptr(int32(1)),
		MaxValue: envtest.Ptr("0"), FailureLimit: envtest.Ptr(int32(0)), InconclusiveLimit: envtest.Ptr(int32(0)), OnInconclusive: v1alpha1.InconclusivePause,
	}
	r1, r2 := beginRollout(t, e, l, 30, 1.0, 2, func(p *v1alpha1.NetTuningProfile) {
		p.Spec.Rollout.Analyses = append(p.Spec.Rollout.Analyses, guard)
		for i := range p.Spec.Rollout.Steps {
			if a := p.Spec.Rollout.Steps[i].Analysis; a != nil {
				a.With = []string{guard.Name}
			}
		}
	})
	paused := e.WaitProfile("xavier-lan", 60*time.Second, "paused on the guard", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision == r2 && p.Status.Phase == v1alpha1.PhasePaused
	})
	c := meta.FindStatusCondition(paused.Status.Conditions, v1alpha1.ConditionPaused)
	if c == nil || c.Reason != "AnalysisInconclusive" {
		t.Errorf("Paused condition %+v, want AnalysisInconclusive", c)
	}
	var res *v1alpha1.AnalysisResult
	for i, a := range paused.Status.Analysis {
		if a.Name == guard.Name {
			res = &paused.Status.Analysis[i]
		}
	}
	if res == nil {
		t.Fatalf("no result for %s in %+v", guard.Name, paused.Status.Analysis)
	}
	t.Logf("%s: %s: %s", res.Name, res.Phase, res.Message)
	canary := paused.Status.CanaryVehicles
	if res.Phase != v1alpha1.AnalysisInconclusive || res.Successful != 0 || len(canary) == 0 ||
		!strings.Contains(res.Message, "tcpi_total_rto not provided by kernel 5.10.0-32-arm64 on "+canary[0]) {
		t.Errorf("guard %s (%d successful): %q, want Inconclusive naming tcpi_total_rto, the kernel and canary %v", res.Phase, res.Successful, res.Message, canary)
	}
	if paused.Status.StableRevision != r1 || paused.Status.Vehicles.Updated != 2 {
		t.Errorf("paused at stable %s with %d updated, want %s and the 2 canaries", paused.Status.StableRevision, paused.Status.Vehicles.Updated, r1)
	}
}
