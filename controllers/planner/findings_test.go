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

package planner_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// The renderer's findings come out of the plan as the Conflict and
// RenderWarnings conditions; without findings the plan leaves them alone,
// and a raised RenderWarnings is announced once.
func TestPlanWritesRenderFindings(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := planner.Input{Now: now, Profile: "lan", Revision: "lan-1", Generation: 3}
	if out := planner.Plan(in); meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionConflict) != nil {
		t.Errorf("no findings given, yet a Conflict condition: %+v", out.Status.Conditions)
	}
	in.Render = &planner.RenderFindings{Conflicts: []string{"sysctl net.ipv4.tcp_rmem on n1 with other"}, Warnings: []string{"n1: skipped route"}}
	out := planner.Plan(in)
	c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionConflict)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "EqualPriorityClash" || c.ObservedGeneration != 3 || !strings.Contains(c.Message, "tcp_rmem") {
		t.Errorf("Conflict %+v", c)
	}
	msg, raised := planner.RenderWarningsRaised(nil, out.Status.Conditions)
	if !raised || msg != "1 warning(s): n1: skipped route" {
		t.Errorf("RenderWarningsRaised %q %v", msg, raised)
	}
	if _, raised := planner.RenderWarningsRaised(out.Status.Conditions, out.Status.Conditions); raised {
		t.Error("a RenderWarnings already True raised again")
	}
	in.Status, in.Render = out.Status, &planner.RenderFindings{}
	out = planner.Plan(in)
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRenderWarnings); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RenderedCleanly" {
		t.Errorf("RenderWarnings after the warnings went %+v", c)
	}
	long := planner.RenderFindings{Warnings: []string{strings.Repeat("w", 2000)}}
	in.Render = &long
	out = planner.Plan(in)
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRenderWarnings); len(c.Message) != 1024 || !strings.HasSuffix(c.Message, "...") {
		t.Errorf("message of %d bytes, want 1024 ending in ...", len(c.Message))
	}
}

// Measured results go in through the input and are recorded: one per
// analysis and step, the latest 8 kept.
func TestPlanRecordsResults(t *testing.T) {
	st := v1alpha1.NetTuningProfileStatus{}
	for i := range 9 {
		st = planner.WithResult(st, v1alpha1.AnalysisResult{Name: "a", Step: int32(i), Phase: v1alpha1.AnalysisRunning})
	}
	if len(st.Analysis) != 8 || st.Analysis[0].Step != 1 {
		t.Fatalf("kept %d results from step %d, want 8 from step 1", len(st.Analysis), st.Analysis[0].Step)
	}
	st = planner.WithResult(st, v1alpha1.AnalysisResult{Name: "a", Step: 8, Phase: v1alpha1.AnalysisSuccessful})
	if r, ok := planner.AnalysisResultOf(st, "a", 8); !ok || r.Phase != v1alpha1.AnalysisSuccessful || len(st.Analysis) != 8 {
		t.Errorf("replaced result %+v %v (of %d)", r, ok, len(st.Analysis))
	}
	stalled := v1alpha1.NetTuningProfileStatus{}
	planner.Stall(&stalled, 2, "ReconcileError", "boom", time.Unix(0, 0))
	if c := meta.FindStatusCondition(stalled.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ReconcileError" {
		t.Errorf("Stall: Ready %+v", c)
	}
}
