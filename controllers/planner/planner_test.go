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
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

func runUntil(s *sim, limit int, stop func(planner.Output) bool) planner.Output {
	var out planner.Output
	for i := 0; i < limit; i++ {
		out = s.tick(time.Minute)
		if stop(out) {
			return out
		}
	}
	return out
}

func phaseIs(p string) func(planner.Output) bool {
	return func(o planner.Output) bool { return o.Status.Phase == p }
}

func count(out planner.Output, rev string) int {
	n := 0
	for _, r := range out.Assign {
		if r == rev {
			n++
		}
	}
	return n
}

func TestCanaryCohort(t *testing.T) {
	cases := []struct {
		name   string
		canary v1alpha1.CanarySpec
		check  func(t *testing.T, s *sim, got []string)
	}{
		{"count below model count is raised to one per model", v1alpha1.CanarySpec{Count: ptr(int32(1))}, func(t *testing.T, s *sim, got []string) {
			if len(got) != 2 || s.vehicles[got[0]].Hardware[0] == s.vehicles[got[1]].Hardware[0] {
				t.Errorf("canaries %v, want one xavier and one orin", got)
			}
		}},
		{"count stratified round-robin", v1alpha1.CanarySpec{Count: ptr(int32(4))}, func(t *testing.T, s *sim, got []string) {
			hw := map[string]int{}
			for _, c := range got {
				hw[s.vehicles[c].Hardware[0]]++
			}
			if len(got) != 4 || hw["xavier"] != 2 || hw["orin"] != 2 {
				t.Errorf("canaries %v by model %v, want 2+2", got, hw)
			}
		}},
		{"explicit names, unknown ignored", v1alpha1.CanarySpec{Vehicles: []string{"av-03", "av-99"}}, func(t *testing.T, s *sim, got []string) {
			if strings.Join(got, ",") != "av-03" {
				t.Errorf("canaries %v, want [av-03]", got)
			}
		}},
		{"selector", v1alpha1.CanarySpec{Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"nettune.io/hardware": "orin"}}}, func(t *testing.T, s *sim, got []string) {
			if strings.Join(got, ",") != "av-07,av-08,av-09" {
				t.Errorf("canaries %v, want the orin vehicles", got)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, shipped(), 6, 3, "r1")
			s.rollout.Canary = tc.canary
			s.revision = "r2"
			out := s.tick(time.Minute)
			tc.check(t, s, out.Status.CanaryVehicles)
		})
	}
}

// TestCanaryIsCappedAtWhatTheStatusHolds: a canary selector matching more
// vehicles than status.canaryVehicles may hold (its CRD MaxItems) would
// make every status patch invalid and stop the rollout for good (seen with
// a canary of all 6,000 vehicles of a 30,000-node fleet): the canary is
// MaxCanaryVehicles of them, in the profile's stable pseudo-random order,
// with a warning event naming the numbers.
func TestCanaryIsCappedAtWhatTheStatusHolds(t *testing.T) {
	s := newSim(t, shipped(), 1200, 300, "r1")
	s.rollout.Canary = v1alpha1.CanarySpec{Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"nettune.io/hardware": "xavier"}}}
	s.revision = "r2"
	out := s.tick(time.Minute)
	got := out.Status.CanaryVehicles
	if len(got) != planner.MaxCanaryVehicles {
		t.Fatalf("%d canary vehicles, want %d", len(got), planner.MaxCanaryVehicles)
	}
	if !slices.IsSorted(got) {
		t.Errorf("canary vehicles not sorted")
	}
	for _, c := range got {
		if s.vehicles[c].Hardware[0] != "xavier" {
			t.Errorf("canary %s is not a xavier vehicle", c)
		}
	}
	warned := false
	for _, e := range out.Events {
		if e.Reason == "CanaryTruncated" && e.Warning && strings.Contains(e.Message, "selects 1200 vehicles") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no CanaryTruncated warning among %+v", out.Events)
	}
	// A second reconcile keeps the same canary.
	if again := s.tick(time.Minute).Status.CanaryVehicles; !slices.Equal(again, got) {
		t.Errorf("the canary changed between reconciles")
	}
}

func TestCanaryPrefersReachable(t *testing.T) {
	s := newSim(t, shipped(), 2, 1, "r1")
	s.rollout.Canary = v1alpha1.CanarySpec{Count: ptr(int32(2))}
	// av-01 and av-02 are the xavier vehicles; make one long silent.
	s.vehicles["av-01"].LastSeen = s.now.Add(-time.Hour)
	s.revision = "r2"
	out := s.tick(time.Minute)
	for _, c := range out.Status.CanaryVehicles {
		if c == "av-01" {
			t.Errorf("unreachable av-01 picked as canary: %v", out.Status.CanaryVehicles)
		}
	}
}

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		max  intstr.IntOrString
		want int
	}{{intstr.FromInt32(1), 1}, {intstr.FromInt32(3), 3}, {intstr.FromString("50%"), 5}} {
		s := newSim(t, shipped(), 8, 2, "r1")
		s.rollout.MaxUnavailable = &tc.max
		s.rollout.Canary = v1alpha1.CanarySpec{Count: ptr(int32(8))}
		s.revision = "r2"
		s.noVerify = true // agents report but never verify: every assigned vehicle stays in flight
		var out planner.Output
		for i := 0; i < 5; i++ {
			out = s.tick(time.Minute)
		}
		if got := count(out, "r2"); got != tc.want {
			t.Errorf("maxUnavailable %s: %d vehicles in flight, want %d", tc.max.String(), got, tc.want)
		}
		s.noVerify = false
		if out = runUntil(s, 30, phaseIs(v1alpha1.PhaseHealthy)); out.Status.Phase != v1alpha1.PhaseHealthy {
			t.Errorf("maxUnavailable %s: rollout did not complete once agents verified", tc.max.String())
		}
	}
}

func TestFailureBudget(t *testing.T) {
	for _, tc := range []struct {
		budget     intstr.IntOrString
		failing    []string
		rolledBack bool
	}{
		{intstr.FromInt32(0), []string{"av-01"}, true},
		{intstr.FromInt32(1), []string{"av-01"}, false},
		{intstr.FromInt32(1), []string{"av-01", "av-02"}, true},
		{intstr.FromString("20%"), []string{"av-01", "av-02"}, false},
	} {
		s := newSim(t, shipped(), 8, 2, "r1")
		s.rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-01", "av-02", "av-09"}}
		s.rollout.MaxUnavailable = ptr(intstr.FromInt32(10))
		s.rollout.FailureBudget = &tc.budget
		s.revision = "r2"
		for _, v := range tc.failing {
			s.failOn[v] = "r2"
		}
		out := runUntil(s, 15, func(o planner.Output) bool {
			return o.Status.Phase == v1alpha1.PhaseRolledBack || o.Status.Phase == v1alpha1.PhaseHealthy
		})
		if got := out.Status.Phase == v1alpha1.PhaseRolledBack; got != tc.rolledBack {
			t.Errorf("budget %s with %v failing: rolled back %v, want %v (phase %s)", tc.budget.String(), tc.failing, got, tc.rolledBack, out.Status.Phase)
		}
		if tc.rolledBack {
			c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRolledBack)
			if c == nil || c.Reason != "FailureBudgetExceeded" || !strings.Contains(c.Message, tc.failing[0]) {
				t.Errorf("RolledBack condition %+v, want reason FailureBudgetExceeded naming %s", c, tc.failing[0])
			}
			assertAll(t, out, "r1")
		}
	}
}

func TestPauseAndPromote(t *testing.T) {
	s := newSim(t, shipped(), 4, 1, "r1")
	s.rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}, {SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}}}
	s.revision = "r2"
	out := runUntil(s, 5, phaseIs("never"))
	if out.Status.Phase != v1alpha1.PhasePaused || *out.Status.CurrentStep != 0 {
		t.Fatalf("indefinite pause: phase %s step %d, want Paused 0", out.Status.Phase, *out.Status.CurrentStep)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionPaused); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PauseStep" {
		t.Errorf("Paused condition %+v", c)
	}
	// Promote naming another step, or the step of another revision, does nothing.
	s.commands.PromoteStep, s.commands.PromoteRevision = ptr(int32(1)), "r2"
	out = s.tick(time.Minute)
	if *out.Status.CurrentStep != 0 {
		t.Errorf("promote of step 1 moved step 0")
	}
	s.commands.PromoteStep, s.commands.PromoteRevision = ptr(int32(0)), "r1"
	out = s.tick(time.Minute)
	if *out.Status.CurrentStep != 0 {
		t.Errorf("promote of r1's step 0 moved r2's step 0")
	}
	s.commands.PromoteStep, s.commands.PromoteRevision = ptr(int32(0)), "r2"
	out = runUntil(s, 10, phaseIs(v1alpha1.PhaseHealthy))
	if out.Status.StableRevision != "r2" {
		t.Errorf("after promote: stable %s, want r2", out.Status.StableRevision)
	}
}

func TestTimedPause(t *testing.T) {
	s := newSim(t, shipped(), 4, 1, "r1")
	s.rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{Duration: dur(10 * time.Minute)}}}
	s.revision = "r2"
	s.tick(time.Minute)
	s.tick(time.Minute)
	out := s.tick(time.Minute)
	if *out.Status.CurrentStep != 0 || out.RequeueAfter <= 0 || out.RequeueAfter > 10*time.Minute {
		t.Errorf("timed pause: step %d requeue %s", *out.Status.CurrentStep, out.RequeueAfter)
	}
	out = runUntil(s, 20, phaseIs(v1alpha1.PhaseHealthy))
	if out.Status.Phase != v1alpha1.PhaseHealthy || s.now.Sub(s.start) < 10*time.Minute {
		t.Errorf("timed pause finished at %s phase %s, want after 10m Healthy", s.now.Sub(s.start), out.Status.Phase)
	}
}

func TestPausedSpecHoldsAssignments(t *testing.T) {
	s := newSim(t, shipped(), 6, 2, "r1")
	s.revision = "r2"
	s.tick(time.Minute)
	s.rollout.Paused = true
	before := count(s.tick(time.Minute), "r2")
	out := runUntil(s, 5, phaseIs("never"))
	if out.Status.Phase != v1alpha1.PhasePaused || count(out, "r2") != before {
		t.Errorf("paused: phase %s, r2 vehicles %d -> %d", out.Status.Phase, before, count(out, "r2"))
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionPaused); c == nil || c.Reason != "PausedByUser" {
		t.Errorf("Paused condition %+v, want reason PausedByUser", c)
	}
	s.rollout.Paused = false
	if out = runUntil(s, 20, phaseIs(v1alpha1.PhaseHealthy)); out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("resumed rollout did not complete: %s", out.Status.Phase)
	}
}

// A pause is announced once when it begins and, when nothing else says
// so, once when it ends: the events become Kubernetes Events and lines in
// Loki.
func TestPauseEvents(t *testing.T) {
	events := func(out planner.Output, reason string) []planner.Event {
		var r []planner.Event
		for _, e := range out.Events {
			if e.Reason == reason {
				r = append(r, e)
			}
		}
		return r
	}
	t.Run("spec.rollout.paused", func(t *testing.T) {
		s := newSim(t, shipped(), 6, 2, "r1")
		s.revision = "r2"
		s.tick(time.Minute)
		s.rollout.Paused = true
		var paused, resumed []planner.Event
		for range 4 {
			out := s.tick(time.Minute)
			paused, resumed = append(paused, events(out, "Paused")...), append(resumed, events(out, "Resumed")...)
		}
		if len(paused) != 1 || len(resumed) != 0 {
			t.Fatalf("4 ticks paused: %d Paused and %d Resumed events, want 1 and 0", len(paused), len(resumed))
		}
		if e := paused[0]; e.Warning || !strings.Contains(e.Message, "revision r2 paused (PausedByUser)") {
			t.Errorf("Paused event %+v", e)
		}
		s.rollout.Paused = false
		out := s.tick(time.Minute)
		if r := events(out, "Resumed"); len(r) != 1 || !strings.HasPrefix(r[0].Message, "revision r2 resumed") {
			t.Errorf("unpaused: Resumed events %+v, want one for r2", r)
		}
		if r := events(s.tick(time.Minute), "Resumed"); len(r) != 0 {
			t.Errorf("the tick after: %d Resumed events, want none", len(r))
		}
	})
	t.Run("a pause step promoted", func(t *testing.T) {
		s := newSim(t, shipped(), 4, 1, "r1")
		s.rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}, {SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}}}
		s.revision = "r2"
		var paused []planner.Event
		for range 5 {
			paused = append(paused, events(s.tick(time.Minute), "Paused")...)
		}
		if len(paused) != 1 || !strings.Contains(paused[0].Message, "(PauseStep)") {
			t.Fatalf("Paused events %+v, want one with reason PauseStep", paused)
		}
		s.commands.PromoteStep, s.commands.PromoteRevision = ptr(int32(0)), "r2"
		out := s.tick(time.Minute)
		if len(events(out, "Promoted")) != 1 || len(events(out, "Resumed")) != 0 {
			t.Errorf("promoted: events %+v, want Promoted and no Resumed", out.Events)
		}
	})
	t.Run("a paused rollout replaced by a new revision", func(t *testing.T) {
		s := newSim(t, shipped(), 6, 2, "r1")
		s.revision = "r2"
		s.tick(time.Minute)
		s.rollout.Paused = true
		s.tick(time.Minute)
		s.rollout.Paused = false
		s.revision = "r3"
		out := s.tick(time.Minute)
		if len(events(out, "Resumed")) != 0 || len(events(out, "RolloutRestarted")) != 1 {
			t.Errorf("new revision after a pause: events %+v, want RolloutRestarted and no Resumed", out.Events)
		}
	})
}

func TestAbort(t *testing.T) {
	s := newSim(t, shipped(), 6, 2, "r1")
	s.revision = "r2"
	s.tick(time.Minute)
	s.commands.AbortRevision = "r-other"
	if out := s.tick(time.Minute); out.Status.Phase == v1alpha1.PhaseRolledBack {
		t.Fatalf("abort of another revision rolled back")
	}
	s.commands.AbortRevision = "r2"
	out := s.tick(time.Minute)
	if out.Status.Phase != v1alpha1.PhaseRolledBack || out.Status.FailedRevision != "r2" {
		t.Fatalf("abort: phase %s failed %s", out.Status.Phase, out.Status.FailedRevision)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Reason != "Aborted" {
		t.Errorf("RolledBack condition %+v, want Aborted", c)
	}
	assertAll(t, out, "r1")
}

func TestExcludeVehicle(t *testing.T) {
	s := newSim(t, shipped(), 6, 2, "r1")
	s.commands.Excluded = []string{"av-03"}
	s.revision = "r2"
	out := runUntil(s, 30, phaseIs(v1alpha1.PhaseHealthy))
	if out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Fatalf("phase %s", out.Status.Phase)
	}
	if out.Assign["av-03"] != "r1" || out.Status.Vehicles.Total != 7 {
		t.Errorf("excluded av-03 assigned %s, total %d; want r1 and 7", out.Assign["av-03"], out.Status.Vehicles.Total)
	}
	s.commands.Excluded = nil
	out = s.tick(time.Minute)
	if out.Assign["av-03"] != "r2" {
		t.Errorf("included av-03 assigned %s, want the stable r2", out.Assign["av-03"])
	}
}

func TestAnalysisVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict string
		dryRun  bool
		policy  v1alpha1.InconclusivePolicy
		phase   string
	}{
		{"failed rolls back", v1alpha1.AnalysisFailed, false, "", v1alpha1.PhaseRolledBack},
		{"failed in dry run goes on", v1alpha1.AnalysisFailed, true, "", v1alpha1.PhaseHealthy},
		{"inconclusive pauses", v1alpha1.AnalysisInconclusive, false, v1alpha1.InconclusivePause, v1alpha1.PhasePaused},
		{"inconclusive aborts", v1alpha1.AnalysisInconclusive, false, v1alpha1.InconclusiveAbort, v1alpha1.PhaseRolledBack},
		{"running waits", v1alpha1.AnalysisRunning, false, "", v1alpha1.PhaseProgressing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, shipped(), 6, 2, "r1")
			s.rollout.Analyses[0].DryRun = tc.dryRun
			s.rollout.Analyses[0].OnInconclusive = tc.policy
			s.revision = "r2"
			s.verdict = func(*planner.Measure) string { return tc.verdict }
			stop := phaseIs(tc.phase)
			if tc.verdict == v1alpha1.AnalysisRunning {
				stop = phaseIs("never")
			}
			out := runUntil(s, 25, stop)
			if out.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", out.Status.Phase, tc.phase)
			}
			if tc.phase == v1alpha1.PhaseProgressing && (len(out.Measures) == 0 || out.RequeueAfter <= 0) {
				t.Errorf("running analysis: measures %v requeue %s", out.Measures, out.RequeueAfter)
			}
			if tc.phase == v1alpha1.PhasePaused {
				c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionPaused)
				if c == nil || c.Reason != v1alpha1.ReasonAnalysisInconclusive {
					t.Errorf("Paused condition %+v", c)
				}
				s.commands.PromoteStep, s.commands.PromoteRevision = out.Status.CurrentStep, out.Status.CurrentRevision
				s.verdict = func(*planner.Measure) string { return v1alpha1.AnalysisSuccessful }
				if out = runUntil(s, 25, phaseIs(v1alpha1.PhaseHealthy)); out.Status.Phase != v1alpha1.PhaseHealthy {
					t.Errorf("promoted past inconclusive: %s", out.Status.Phase)
				}
			}
		})
	}
}

func TestNoRolloutUpdatesAll(t *testing.T) {
	s := newSim(t, shipped(), 4, 2, "")
	s.rollout = nil
	s.revision = "r1"
	out := s.tick(time.Minute)
	if count(out, "r1") != 6 {
		t.Errorf("no rollout: %d vehicles on r1, want 6", count(out, "r1"))
	}
	out = s.tick(time.Minute)
	if out.Status.StableRevision != "r1" || out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("stable %q phase %s", out.Status.StableRevision, out.Status.Phase)
	}
}

func TestFirstRolloutHasNoBaseline(t *testing.T) {
	s := newSim(t, shipped(), 4, 2, "")
	s.revision = "r1"
	var measured *planner.Measure
	s.verdict = func(m *planner.Measure) string { measured = m; return v1alpha1.AnalysisSuccessful }
	out := runUntil(s, 20, phaseIs(v1alpha1.PhaseHealthy))
	if out.Status.StableRevision != "r1" {
		t.Fatalf("first rollout did not complete: %s", out.Status.Phase)
	}
	if measured == nil || len(measured.Baseline) != 0 || measured.BaselineRevision != "" {
		t.Errorf("first rollout measure %+v, want canaries only", measured)
	}
}

func TestUndoToStableIsImmediate(t *testing.T) {
	s := newSim(t, shipped(), 6, 2, "r1")
	s.revision = "r2"
	runUntil(s, 4, phaseIs("never"))
	s.revision = "r1"
	out := s.tick(time.Minute)
	assertAll(t, out, "r1")
	if out.Status.Phase != v1alpha1.PhaseHealthy || out.Status.CurrentRevision != "r1" {
		t.Errorf("undo: phase %s current %s", out.Status.Phase, out.Status.CurrentRevision)
	}
}

func TestFailedRevisionNotRetried(t *testing.T) {
	s := newSim(t, shipped(), 6, 2, "r1")
	s.revision = "r2"
	s.verdict = func(*planner.Measure) string { return v1alpha1.AnalysisFailed }
	runUntil(s, 10, phaseIs(v1alpha1.PhaseRolledBack))
	s.revision = "r3"
	s.tick(time.Minute)
	s.revision = "r2" // edited back to the failed content
	out := s.tick(time.Minute)
	if out.Status.Phase != v1alpha1.PhaseRolledBack || count(out, "r2") != 0 {
		t.Errorf("failed revision retried: phase %s, %d vehicles on r2", out.Status.Phase, count(out, "r2"))
	}
}

func TestRevisionHistoryLimit(t *testing.T) {
	s := newSim(t, shipped(), 2, 1, "r0")
	s.rollout.RevisionHistoryLimit = ptr(int32(3))
	s.rollout.Steps = nil
	for _, r := range []string{"r1", "r2", "r3", "r4", "r5"} {
		s.revision = r
		runUntil(s, 10, func(o planner.Output) bool { return o.Status.StableRevision == r })
	}
	var names []string
	for _, r := range s.status.Revisions {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "r3,r4,r5" {
		t.Errorf("revisions %v, want [r3 r4 r5]", names)
	}
}

func TestConditionsKstatus(t *testing.T) {
	s := newSim(t, shipped(), 4, 2, "r1")
	s.revision = "r2"
	out := s.tick(time.Minute)
	want := map[string]metav1.ConditionStatus{
		v1alpha1.ConditionReady: metav1.ConditionFalse, v1alpha1.ConditionReconciling: metav1.ConditionTrue,
		v1alpha1.ConditionStalled: metav1.ConditionFalse,
	}
	for typ, st := range want {
		if c := meta.FindStatusCondition(out.Status.Conditions, typ); c == nil || c.Status != st || c.ObservedGeneration != s.gen {
			t.Errorf("progressing: condition %s = %+v, want %s at generation %d", typ, c, st, s.gen)
		}
	}
	out = runUntil(s, 30, phaseIs(v1alpha1.PhaseHealthy))
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("healthy: Ready %+v", c)
	}
	if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("healthy: Reconciling %+v", c)
	}
}

// TestRequeueWhenAVehicleWouldTurnUnreachable: a vehicle that stops
// reporting generates no event, so the plan must ask to be run again when it
// would turn Unreachable, or a step waiting for it waits forever.
func TestRequeueWhenAVehicleWouldTurnUnreachable(t *testing.T) {
	s := newSim(t, shipped(), 4, 2, "r1")
	s.rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-01"}}
	s.rollout.UnreachableAfter = dur(15 * time.Second)
	s.revision = "r2"
	s.offline["av-01"] = true
	s.vehicles["av-01"].LastSeen = s.now.Add(-5 * time.Second)
	out := s.tick(0)
	if out.RequeueAfter <= 0 || out.RequeueAfter > 11*time.Second {
		t.Errorf("RequeueAfter %s, want about 10s (when av-01, silent for 5s, turns Unreachable after 15s)", out.RequeueAfter)
	}
	s.now = s.now.Add(out.RequeueAfter)
	out = s.tick(0)
	if out.Status.Vehicles.Unreachable != 1 {
		t.Errorf("at the requeue: %d unreachable, want 1", out.Status.Vehicles.Unreachable)
	}
	if out.RequeueAfter <= 0 {
		t.Errorf("waiting for an unreachable canary without a requeue")
	}
}

// TestNoUnreachableRequeueWithLivenessTimer: when the caller keeps the
// fleet's one liveness timer, a healthy, idle profile asks for no requeue
// (with a thousand vehicles renewing at different moments, the earliest
// one's deadline would otherwise wake every profile again and again).
func TestNoUnreachableRequeueWithLivenessTimer(t *testing.T) {
	s := newSim(t, shipped(), 4, 2, "r1")
	s.rollout.UnreachableAfter = dur(15 * time.Second)
	s.vehicles["av-01"].LastSeen = s.now.Add(-5 * time.Second)
	in := s.input()
	if out := planner.Plan(in); out.RequeueAfter <= 0 || out.RequeueAfter > 11*time.Second {
		t.Fatalf("without the timer: RequeueAfter %s, want about 10s", out.RequeueAfter)
	}
	in.LivenessTimer = true
	out := planner.Plan(in)
	if out.RequeueAfter != 0 || out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("with the timer: RequeueAfter %s phase %s, want none on a healthy profile", out.RequeueAfter, out.Status.Phase)
	}
}

// withGuard is shipped() whose analysis steps also run a "tcp-guard"
// analysis beside the latency one.
func withGuard(dryRun bool) *v1alpha1.RolloutSpec {
	r := shipped()
	r.Analyses = append(r.Analyses, v1alpha1.AnalysisSpec{
		Name: "tcp-guard", Provider: v1alpha1.ProviderPrometheus, Interval: dur(30 * time.Second),
		OnInconclusive: v1alpha1.InconclusivePause, DryRun: dryRun,
	})
	for i := range r.Steps {
		if a := r.Steps[i].Analysis; a != nil {
			a.With = []string{"tcp-guard"}
		}
	}
	return r
}

// guardSim is a sim of withGuard(dryRun) rolling r1 out to r2, whose
// latency analysis and guard answer latency and guard.
func guardSim(t *testing.T, dryRun bool, latency, guard string) *sim {
	s := newSim(t, withGuard(dryRun), 6, 2, "r1")
	s.revision = "r2"
	s.verdict = func(m *planner.Measure) string {
		if m.Analysis == "tcp-guard" {
			return guard
		}
		return latency
	}
	return s
}

func TestAnalysisStepWith(t *testing.T) {
	t.Run("both measured on the same cohorts, and both must pass", func(t *testing.T) {
		s := newSim(t, withGuard(false), 6, 2, "r1")
		s.revision = "r2"
		seen := map[string][]string{}
		s.verdict = func(m *planner.Measure) string {
			seen[m.Analysis] = append(seen[m.Analysis], strings.Join(m.Canary, ",")+"|"+strings.Join(m.Baseline, ","))
			return v1alpha1.AnalysisSuccessful
		}
		out := runUntil(s, 30, phaseIs(v1alpha1.PhaseHealthy))
		if out.Status.StableRevision != "r2" {
			t.Fatalf("rollout did not complete: phase %s", out.Status.Phase)
		}
		if len(seen["p9999-latency"]) == 0 || !slices.Equal(seen["p9999-latency"], seen["tcp-guard"]) {
			t.Errorf("cohorts measured: latency %v, guard %v; want the same, non-empty", seen["p9999-latency"], seen["tcp-guard"])
		}
	})
	t.Run("the guard failing rolls back while the judge still runs", func(t *testing.T) {
		s := guardSim(t, false, v1alpha1.AnalysisRunning, v1alpha1.AnalysisFailed)
		out := runUntil(s, 10, phaseIs(v1alpha1.PhaseRolledBack))
		if out.Status.Phase != v1alpha1.PhaseRolledBack || count(out, "r2") != 0 {
			t.Fatalf("phase %s, %d vehicles on r2; want rolled back", out.Status.Phase, count(out, "r2"))
		}
		c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionRolledBack)
		if c == nil || !strings.Contains(c.Message, "analysis tcp-guard at step 0 failed") {
			t.Errorf("RolledBack condition %+v, want it to name tcp-guard", c)
		}
	})
	t.Run("a passing judge waits for the guard", func(t *testing.T) {
		s := guardSim(t, false, v1alpha1.AnalysisSuccessful, v1alpha1.AnalysisRunning)
		out := runUntil(s, 10, phaseIs("never"))
		if out.Status.Phase != v1alpha1.PhaseProgressing || *out.Status.CurrentStep != 0 {
			t.Fatalf("phase %s step %d; want still progressing at step 0", out.Status.Phase, *out.Status.CurrentStep)
		}
		if len(out.Measures) != 1 || out.Measures[0].Analysis != "tcp-guard" {
			t.Errorf("measures %v; want the guard only (the judge passed)", out.Measures)
		}
	})
	t.Run("a dry-run guard's failure is reported once and not acted on", func(t *testing.T) {
		s := guardSim(t, true, v1alpha1.AnalysisSuccessful, v1alpha1.AnalysisFailed)
		events := 0
		var out planner.Output
		for range 30 {
			out = s.tick(time.Minute)
			for _, e := range out.Events {
				if e.Reason == "AnalysisFailedDryRun" {
					events++
				}
			}
			if out.Status.Phase == v1alpha1.PhaseHealthy {
				break
			}
		}
		if out.Status.StableRevision != "r2" {
			t.Fatalf("dry-run guard blocked the rollout: phase %s", out.Status.Phase)
		}
		if events != 2 { // one per analysis step
			t.Errorf("%d AnalysisFailedDryRun events over 2 analysis steps, want 2", events)
		}
	})
}

// TestAnalysisUnavailable: a backend that refuses or does not answer
// pauses the rollout with a condition naming the analysis and what it
// answered, keeps the analysis measured (never a promotion, never a
// rollback, even with onInconclusive Abort), and the rollout goes on by
// itself once the backend answers.
func TestAnalysisUnavailable(t *testing.T) {
	for _, policy := range []v1alpha1.InconclusivePolicy{v1alpha1.InconclusivePause, v1alpha1.InconclusiveAbort} {
		t.Run(string(policy), func(t *testing.T) {
			s := newSim(t, shipped(), 6, 2, "r1")
			s.rollout.Analyses[0].OnInconclusive = policy
			s.revision = "r2"
			s.verdict = func(*planner.Measure) string { return v1alpha1.AnalysisUnavailable }
			out := runUntil(s, 25, phaseIs(v1alpha1.PhasePaused))
			if out.Status.Phase != v1alpha1.PhasePaused {
				t.Fatalf("phase %s, want Paused", out.Status.Phase)
			}
			c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionPaused)
			if c == nil || c.Reason != v1alpha1.ReasonAnalysisUnavailable || !strings.Contains(c.Message, "analysis "+s.rollout.Analyses[0].Name+" at step") {
				t.Fatalf("Paused condition %+v, want reason %s naming the analysis", c, v1alpha1.ReasonAnalysisUnavailable)
			}
			for i := 0; i < 10; i++ {
				out = s.tick(time.Minute)
				if out.Status.Phase != v1alpha1.PhasePaused || out.Status.StableRevision != "r1" {
					t.Fatalf("tick %d while unavailable: phase %s stable %s, want Paused on r1", i, out.Status.Phase, out.Status.StableRevision)
				}
				if len(out.Measures) == 0 || out.RequeueAfter <= 0 {
					t.Fatalf("tick %d while unavailable: measures %v requeue %s: the analysis must be measured again", i, out.Measures, out.RequeueAfter)
				}
				if n := count(out, "r2"); n > 2 {
					t.Fatalf("tick %d: %d vehicles on r2 while the analysis could not measure", i, n)
				}
			}
			s.verdict = func(*planner.Measure) string { return v1alpha1.AnalysisSuccessful }
			if out = runUntil(s, 25, phaseIs(v1alpha1.PhaseHealthy)); out.Status.Phase != v1alpha1.PhaseHealthy || out.Status.StableRevision != "r2" {
				t.Fatalf("after the backend answered: phase %s stable %s, want Healthy on r2 without a promote", out.Status.Phase, out.Status.StableRevision)
			}
		})
	}
}

// TestDeferredVehicles: a canary whose apply gate is closed holds the new
// revision back. It is counted Deferred (not failed, not unreachable, not
// in flight against maxUnavailable); the step waits for it up to the apply
// policy's deferredTimeout, then goes on without it, and it takes the
// revision once its gate opens.
func TestDeferredVehicles(t *testing.T) {
	s := newSim(t, shipped(), 4, 0, "r1")
	s.rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-01", "av-02"}}
	s.rollout.Apply = &v1alpha1.ApplyPolicy{DeferredTimeout: &metav1.Duration{Duration: 10 * time.Minute}}
	s.gated["av-01"] = true
	s.revision = "r2"
	var out planner.Output
	for range 3 {
		out = s.tick(time.Minute)
	}
	if out.Status.Phase != v1alpha1.PhaseProgressing || *out.Status.CurrentStep != 0 {
		t.Fatalf("phase %s step %d, want Progressing at step 0 (waiting for the deferred canary)", out.Status.Phase, *out.Status.CurrentStep)
	}
	c := out.Status.Vehicles
	if c.Deferred != 1 || c.Failed != 0 || c.Unreachable != 0 || c.Verified != 1 {
		t.Errorf("counts %+v, want 1 deferred, 1 verified, none failed or unreachable", c)
	}
	ready := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || !strings.Contains(ready.Message, "1 deferred") {
		t.Errorf("Ready condition %+v, want it to say 1 deferred", ready)
	}
	if out.RequeueAfter <= 0 || out.RequeueAfter > 10*time.Minute {
		t.Errorf("requeueAfter %s, want a wake-up when the wait for the deferred vehicle ends", out.RequeueAfter)
	}
	// Past deferredTimeout the rollout goes on without av-01.
	out = runUntil(s, 30, func(o planner.Output) bool {
		return *o.Status.CurrentStep > 0 || o.Status.Phase == v1alpha1.PhaseHealthy
	})
	if *out.Status.CurrentStep == 0 {
		t.Fatalf("still at step 0 after the deferred timeout: %+v", out.Status.Conditions)
	}
	out = runUntil(s, 60, phaseIs(v1alpha1.PhaseHealthy))
	if out.Status.Phase != v1alpha1.PhaseHealthy || out.Assign["av-01"] != "r2" || s.vehicles["av-01"].Verified {
		t.Fatalf("phase %s, av-01 assigned %s verified %t: want Healthy with av-01 assigned r2 and not yet verified", out.Status.Phase, out.Assign["av-01"], s.vehicles["av-01"].Verified)
	}
	// Its gate opens: it catches up.
	delete(s.gated, "av-01")
	s.tick(time.Minute)
	out = s.tick(time.Minute)
	if !s.vehicles["av-01"].Verified || out.Status.Vehicles.Deferred != 0 {
		t.Errorf("after its gate opened av-01 verified=%t, deferred count %d", s.vehicles["av-01"].Verified, out.Status.Vehicles.Deferred)
	}
}

// TestCanaryPrefersOpenGates: a canary chosen by count passes over vehicles
// whose apply gate is closed when others can take the change now, and says so.
func TestCanaryPrefersOpenGates(t *testing.T) {
	s := newSim(t, shipped(), 4, 0, "r1")
	s.rollout.Canary = v1alpha1.CanarySpec{Count: ptr(int32(2))}
	for _, v := range []string{"av-01", "av-02"} {
		s.gated[v] = true
	}
	s.tick(time.Minute) // the agents report their gates
	s.revision = "r2"
	out := s.tick(time.Minute)
	for _, c := range out.Status.CanaryVehicles {
		if s.gated[c] {
			t.Errorf("canary %v holds %s, whose gate is closed", out.Status.CanaryVehicles, c)
		}
	}
	if len(out.Status.CanaryVehicles) != 2 {
		t.Errorf("canary %v, want 2 vehicles", out.Status.CanaryVehicles)
	}
	if !slices.ContainsFunc(out.Events, func(e planner.Event) bool {
		return e.Reason == "CanaryGatesOpen" && strings.Contains(e.Message, "2 vehicle(s) with a closed apply gate passed over")
	}) {
		t.Errorf("events %+v, want CanaryGatesOpen naming 2 vehicles passed over", out.Events)
	}
}
