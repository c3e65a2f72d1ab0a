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

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// TestExperimentAdoptAndStatus: the plugin against a real API server, with
// the experiment's status written as the controller would. adopt refuses
// what it must (not completed, no winner, models disagreeing, a base that
// moved) without touching the profile, and otherwise writes the winner's
// parameters into the base, keeping its rollout.
func TestExperimentAdoptAndStatus(t *testing.T) {
	p := startPlugin(t)
	ctx := context.Background()
	base := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "xavier-lan"}, Spec: lanSpec(30, lanRollout())}
	if err := p.c.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	baseRev := revision.Name(base)
	x := &v1alpha1.NetTuningExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "cwnd-sweep"},
		Spec: v1alpha1.NetTuningExperimentSpec{
			Profile: "xavier-lan", Duration: metav1.Duration{Duration: time.Hour},
			Variants: []v1alpha1.ExperimentVariant{
				{Name: "cwnd20", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 20}, Initcwnd: ptr.To[int32](15)}},
				{Name: "cwnd80", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 80}}},
			},
			Analysis: v1alpha1.AnalysisSpec{Name: "slow", Provider: v1alpha1.ProviderLoki,
				Judge: &v1alpha1.JudgeSpec{SlowQuery: "s", TotalQuery: "t"}},
		},
	}
	if err := p.c.Create(ctx, x); err != nil {
		t.Fatal(err)
	}
	setStatus := func(phase string, winners map[string]string, rev string) {
		t.Helper()
		obj := &v1alpha1.NetTuningExperiment{}
		if err := p.c.Get(ctx, client.ObjectKey{Name: "cwnd-sweep"}, obj); err != nil {
			t.Fatal(err)
		}
		obj.Status = v1alpha1.NetTuningExperimentStatus{Phase: phase, BaseRevision: rev,
			Arms: []v1alpha1.ExperimentArm{
				{Name: "control", Phase: v1alpha1.ArmFinished, Cohorts: []v1alpha1.ExperimentCohort{{Hardware: "xavier", Vehicles: []string{"car-1"}}}},
				{Name: "cwnd20", Phase: v1alpha1.ArmMeasuring, Cohorts: []v1alpha1.ExperimentCohort{{Hardware: "xavier", Vehicles: []string{"car-2"},
					Analysis: []v1alpha1.AnalysisResult{{Name: "slow", Verdict: "Pass"}}}}},
				{Name: "cwnd80", Phase: v1alpha1.ArmStopped, StopReason: "slow on xavier: 1 failed measurement(s)"},
			}}
		for hw, w := range winners {
			obj.Status.Results = append(obj.Status.Results, v1alpha1.ExperimentResult{Hardware: hw, Winner: w, Ranking: []v1alpha1.ArmRanking{
				{Arm: "cwnd20", Rank: 1, Slow: 10, Total: 4000, Share: "0.25", Effect: "-2.1", EffectLow: "-2.6", EffectHigh: "-1.6", ProbBetter: "1", ProbAboveNext: "1"},
				{Arm: "control", Rank: 2, Slow: 94, Total: 4000, Share: "2.35"},
			}})
		}
		if err := p.c.Status().Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	setStatus(v1alpha1.ExperimentRunning, map[string]string{"xavier": "cwnd20"}, baseRev)
	p.fails("xavier-lan", []string{"cwnd-sweep is Running", "Completed"}, "experiment", "adopt", "cwnd-sweep")
	out := p.ok("experiment", "status", "cwnd-sweep")
	for _, want := range []string{"Phase: Running", "cwnd80 stopped: slow on xavier", "Ranking on xavier (winner: cwnd20)", "-2.1 [-2.6, -1.6]", "cwnd=20 initcwnd=15", "slow/xavier Pass"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}

	setStatus(v1alpha1.ExperimentCompleted, map[string]string{"xavier": "control"}, baseRev)
	p.fails("xavier-lan", []string{"no variant beat the control", "nothing to adopt"}, "experiment", "adopt", "cwnd-sweep")

	setStatus(v1alpha1.ExperimentCompleted, map[string]string{"xavier": "cwnd20", "orin": "control"}, baseRev)
	p.fails("xavier-lan", []string{"winners differ", "orin: control", "xavier: cwnd20", "--hardware"}, "experiment", "adopt", "cwnd-sweep")

	setStatus(v1alpha1.ExperimentCompleted, map[string]string{"xavier": "cwnd20"}, "xavier-lan-0000000000")
	p.fails("xavier-lan", []string{"changed since experiment cwnd-sweep", "xavier-lan-0000000000"}, "experiment", "adopt", "cwnd-sweep")

	setStatus(v1alpha1.ExperimentCompleted, map[string]string{"xavier": "cwnd20", "orin": "control"}, baseRev)
	out = p.ok("experiment", "adopt", "cwnd-sweep", "--hardware", "xavier")
	after := p.profile("xavier-lan")
	d := after.Spec.Defaults
	if d.Cwnd.Value != 20 || *d.Initcwnd != 15 || *d.Initrwnd != 25 || d.RTOMin.Duration != 10*time.Millisecond {
		t.Errorf("defaults after adopt %+v", d)
	}
	if after.Spec.Rollout == nil || len(after.Spec.Rollout.Steps) != 3 {
		t.Errorf("rollout after adopt %+v", after.Spec.Rollout)
	}
	if after.Annotations[AdoptedAnnotation] != "cwnd-sweep/cwnd20" {
		t.Errorf("annotations %v", after.Annotations)
	}
	newRev := revision.Name(after)
	if newRev == baseRev || !strings.Contains(out, baseRev+" -> "+newRev) || !strings.Contains(out, "canary first") {
		t.Errorf("adopt said %q (revisions %s -> %s)", out, baseRev, newRev)
	}
	// A second adopt finds the base moved on.
	p.fails("xavier-lan", []string{"changed since experiment"}, "experiment", "adopt", "cwnd-sweep", "--hardware", "xavier")
	r := p.run("experiment", "adopt", "nope")
	if r.code != exitError || !strings.Contains(r.stderr, `experiment "nope" not found`) {
		t.Errorf("adopt of a missing experiment: %d %q", r.code, r.stderr)
	}
}
