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
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sim is a fleet of vehicles whose agents apply what the planner assigns one
// tick later, a clock, and an analysis oracle. It records one line per tick.
type sim struct {
	t        *testing.T
	now      time.Time
	start    time.Time
	profile  string
	revision string
	gen      int64
	rollout  *v1alpha1.RolloutSpec
	status   v1alpha1.NetTuningProfileStatus
	vehicles map[string]*planner.Vehicle
	offline  map[string]bool
	// failOn makes a vehicle report RolledBack for a revision.
	failOn map[string]string
	// verdict returns the phase of a measurement (Successful, Failed,
	// Inconclusive) for an analysis step.
	verdict  func(m *planner.Measure) string
	commands planner.Commands
	// noVerify: agents report but never finish applying.
	noVerify bool
	// gated vehicles' apply gates are closed: they report, and hold a
	// new assignment back (Deferred) until ungated.
	gated map[string]bool
	lines []string
}

func newSim(t *testing.T, rollout *v1alpha1.RolloutSpec, xavier, orin int, stable string) *sim {
	s := &sim{
		t: t, profile: "xavier-lan", revision: stable, gen: 1, rollout: rollout,
		now:      time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
		vehicles: map[string]*planner.Vehicle{}, offline: map[string]bool{}, failOn: map[string]string{}, gated: map[string]bool{},
		verdict: func(*planner.Measure) string { return v1alpha1.AnalysisSuccessful },
	}
	s.start = s.now
	n := 0
	add := func(hw string, k int) {
		for i := 0; i < k; i++ {
			n++
			name := fmt.Sprintf("av-%02d", n)
			s.vehicles[name] = &planner.Vehicle{
				Name: name, Hardware: []string{hw}, Labels: labels.Set{"nettune.io/hardware": hw},
				Assigned: stable, Verified: stable != "", LastSeen: s.now,
			}
		}
	}
	add("xavier", xavier)
	add("orin", orin)
	if stable != "" {
		s.status = v1alpha1.NetTuningProfileStatus{
			CurrentRevision: stable, StableRevision: stable, CurrentStep: ptr(int32(len(rollout.Steps))),
			Revisions: []v1alpha1.Revision{{Name: stable, Generation: 1, Outcome: v1alpha1.OutcomeStable}},
		}
	}
	return s
}

func (s *sim) input() planner.Input {
	var vs []planner.Vehicle
	for _, v := range s.vehicles {
		vs = append(vs, *v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name < vs[j].Name })
	return planner.Input{
		Now: s.now, Profile: s.profile, Revision: s.revision, Generation: s.gen,
		Rollout: s.rollout, Status: s.status, Vehicles: vs, Commands: s.commands,
	}
}

// tick runs one reconcile (with its measurement, as the controller does),
// records it, then lets the agents act and the clock advance by d.
func (s *sim) tick(d time.Duration) planner.Output {
	out := planner.Plan(s.input())
	var measured string
	if len(out.Measures) > 0 {
		st := *out.Status.DeepCopy()
		// Results of the step's other analyses (decided earlier) stay.
		var kept []v1alpha1.AnalysisResult
		for _, a := range st.Analysis {
			if a.Step == out.Measures[0].Step && !slices.ContainsFunc(out.Measures, func(m *planner.Measure) bool { return m.Analysis == a.Name }) {
				kept = append(kept, a)
			}
		}
		st.Analysis = kept
		for _, m := range out.Measures {
			phase := s.verdict(m)
			st.Analysis = append(st.Analysis, v1alpha1.AnalysisResult{Name: m.Analysis, Step: m.Step, Phase: phase, LastMeasured: &metav1.Time{Time: s.now},
				Message: fmt.Sprintf("canary %s vs baseline %s", strings.Join(m.Canary, ","), strings.Join(m.Baseline, ","))})
			measured += fmt.Sprintf(" measure(%s step %d canary=[%s] baseline=%d)=%s", m.Analysis, m.Step, strings.Join(m.Canary, " "), len(m.Baseline), phase)
		}
		in := s.input()
		in.Status = st
		out = planner.Plan(in)
	}
	s.status = out.Status
	s.record(out, measured)
	// The controller renders every vehicle's assignment; every reachable
	// vehicle's agents then apply it and report.
	for name, v := range s.vehicles {
		want := out.Assign[name]
		if v.Assigned != want {
			v.Assigned, v.Verified, v.Failed = want, false, false
		}
		if s.offline[name] {
			continue
		}
		v.LastSeen = s.now.Add(d)
		v.GateClosed = s.gated[name]
		if s.gated[name] {
			if !v.Verified && !v.Failed && want != "" && !v.Deferred {
				v.Deferred, v.DeferredSince = true, s.now
			}
			continue
		}
		v.Deferred, v.DeferredSince = false, time.Time{}
		if !v.Verified && !v.Failed && !s.noVerify {
			v.Failed = want != "" && s.failOn[name] == want
			v.Verified = !v.Failed
		}
	}
	s.now = s.now.Add(d)
	return out
}

func (s *sim) record(out planner.Output, measured string) {
	st := out.Status
	byRev := map[string][]string{}
	for name, rev := range out.Assign {
		byRev[rev] = append(byRev[rev], name)
	}
	var revs []string
	for r := range byRev {
		revs = append(revs, r)
	}
	sort.Strings(revs)
	var parts []string
	for _, r := range revs {
		names := byRev[r]
		sort.Strings(names)
		label := r
		if label == "" {
			label = "none"
		}
		if len(names) > 4 {
			parts = append(parts, fmt.Sprintf("%s:%d", label, len(names)))
		} else {
			parts = append(parts, fmt.Sprintf("%s:[%s]", label, strings.Join(names, " ")))
		}
	}
	step := "-"
	if st.CurrentStep != nil {
		step = fmt.Sprint(*st.CurrentStep)
	}
	line := fmt.Sprintf("t+%-4s step=%s phase=%-11s stable=%-3s current=%-3s %s counts=%d/%d/%d/%d/%d",
		s.now.Sub(s.start).Round(time.Second).String(), step, st.Phase, or(st.StableRevision, "-"), or(st.CurrentRevision, "-"),
		strings.Join(parts, " "), st.Vehicles.Total, st.Vehicles.Updated, st.Vehicles.Verified, st.Vehicles.Unreachable, st.Vehicles.Failed)
	line += measured
	for _, e := range out.Events {
		line += fmt.Sprintf("\n    event %s: %s", e.Reason, e.Message)
	}
	s.lines = append(s.lines, line)
}

func (s *sim) note(format string, args ...any) {
	s.lines = append(s.lines, "# "+fmt.Sprintf(format, args...))
}

func (s *sim) golden(name string) {
	s.t.Helper()
	got := strings.Join(s.lines, "\n") + "\n"
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("%v (run go test ./controllers/planner -update to create it)", err)
	}
	if string(want) != got {
		s.t.Errorf("rollout sequence differs from %s (rerun with -update after checking the change):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// shipped is the xavier-lan-v2 sample's rollout: 2 canaries, analysis, 25 %,
// analysis, 100 %.
func shipped() *v1alpha1.RolloutSpec {
	one := intstr.FromInt32(1)
	zero := intstr.FromInt32(0)
	return &v1alpha1.RolloutSpec{
		Canary:         v1alpha1.CanarySpec{Count: ptr(int32(2))},
		MaxUnavailable: &one,
		FailureBudget:  &zero,
		Steps: []v1alpha1.RolloutStep{
			{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
			{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(25))}},
			{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
			{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}},
		},
		Analyses: []v1alpha1.AnalysisSpec{{
			Name: "p9999-latency", Provider: v1alpha1.ProviderLoki, Interval: dur(time.Minute),
			OnInconclusive: v1alpha1.InconclusivePause,
		}},
		UnreachableAfter:   dur(2 * time.Minute),
		UnreachableTimeout: dur(10 * time.Minute),
	}
}

// assertAll checks every vehicle's rendered revision.
func assertAll(t *testing.T, out planner.Output, want string) {
	t.Helper()
	for name, rev := range out.Assign {
		if rev != want {
			t.Errorf("vehicle %s assigned %q, want %q", name, rev, want)
		}
	}
}

func TestGoldenFullRollout(t *testing.T) {
	s := newSim(t, shipped(), 9, 3, "r1")
	s.revision, s.gen = "r2", 2
	s.note("12 vehicles (9 xavier, 3 orin) on stable r1; profile edited to r2")
	var out planner.Output
	for i := 0; i < 20 && (i == 0 || out.Status.Phase != v1alpha1.PhaseHealthy); i++ {
		out = s.tick(time.Minute)
	}
	if out.Status.StableRevision != "r2" || out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Fatalf("rollout did not complete: stable=%s phase=%s", out.Status.StableRevision, out.Status.Phase)
	}
	assertAll(t, out, "r2")
	// Canary cohort stratified: both hardware models.
	hw := map[string]bool{}
	for _, c := range out.Status.CanaryVehicles {
		hw[s.vehicles[c].Hardware[0]] = true
	}
	if len(out.Status.CanaryVehicles) != 2 || !hw["xavier"] || !hw["orin"] {
		t.Errorf("canaries %v do not cover xavier and orin", out.Status.CanaryVehicles)
	}
	s.golden("full-rollout")
}

func TestGoldenFailingAnalysisEachStep(t *testing.T) {
	for _, failStep := range []int32{0, 2} {
		t.Run(fmt.Sprintf("step%d", failStep), func(t *testing.T) {
			s := newSim(t, shipped(), 9, 3, "r1")
			s.revision, s.gen = "r2", 2
			s.note("analysis fails at step %d", failStep)
			s.verdict = func(m *planner.Measure) string {
				if m.Step == failStep {
					return v1alpha1.AnalysisFailed
				}
				return v1alpha1.AnalysisSuccessful
			}
			var out planner.Output
			for i := 0; i < 12; i++ {
				out = s.tick(time.Minute)
				if out.Status.Phase == v1alpha1.PhaseRolledBack {
					break
				}
			}
			if out.Status.Phase != v1alpha1.PhaseRolledBack || out.Status.FailedRevision != "r2" {
				t.Fatalf("phase %s failed %q, want RolledBack r2", out.Status.Phase, out.Status.FailedRevision)
			}
			assertAll(t, out, "r1")
			// Not retried: later reconciles keep everything on r1.
			for i := 0; i < 3; i++ {
				out = s.tick(time.Minute)
			}
			assertAll(t, out, "r1")
			if out.Status.Phase != v1alpha1.PhaseRolledBack {
				t.Errorf("phase %s after rollback, want RolledBack", out.Status.Phase)
			}
			s.note("profile edited to r3: a new rollout starts")
			s.revision, s.gen = "r3", 3
			out = s.tick(time.Minute)
			if out.Status.CurrentRevision != "r3" || out.Status.Phase != v1alpha1.PhaseProgressing {
				t.Errorf("after edit: current %s phase %s, want r3 Progressing", out.Status.CurrentRevision, out.Status.Phase)
			}
			s.golden(fmt.Sprintf("failing-analysis-step%d", failStep))
		})
	}
}

func TestGoldenOfflineCanary(t *testing.T) {
	s := newSim(t, shipped(), 9, 3, "r1")
	s.revision, s.gen = "r2", 2
	s.rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-01", "av-10"}}
	s.offline["av-01"] = true
	s.note("canary av-01 is offline from the start (last seen t+0)")
	var out planner.Output
	sawWait := false
	for i := 0; i < 40 && out.Status.Phase != v1alpha1.PhaseHealthy; i++ {
		if i == 20 {
			s.note("av-01 comes back online")
			delete(s.offline, "av-01")
		}
		out = s.tick(time.Minute)
		if i == 5 && out.Status.CurrentStep != nil && *out.Status.CurrentStep == 0 {
			sawWait = true
		}
	}
	if !sawWait {
		t.Errorf("the canary step did not wait for the unreachable canary")
	}
	if out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Fatalf("phase %s, want Healthy:\n%s", out.Status.Phase, strings.Join(s.lines, "\n"))
	}
	if s.vehicles["av-01"].Assigned != "r2" || !s.vehicles["av-01"].Verified {
		t.Errorf("returning vehicle av-01: assigned %q verified %v, want r2 verified", s.vehicles["av-01"].Assigned, s.vehicles["av-01"].Verified)
	}
	s.golden("offline-canary")
}

func TestGoldenEditMidRollout(t *testing.T) {
	s := newSim(t, shipped(), 9, 3, "r1")
	s.revision, s.gen = "r2", 2
	var out planner.Output
	for i := 0; i < 6; i++ {
		out = s.tick(time.Minute)
	}
	if out.Status.Vehicles.Updated <= 2 {
		t.Fatalf("setup: expected the rollout past the canaries, updated=%d", out.Status.Vehicles.Updated)
	}
	s.note("profile edited to r3 mid-rollout")
	s.revision, s.gen = "r3", 3
	out = s.tick(time.Minute)
	if *out.Status.CurrentStep != 0 || out.Status.CurrentRevision != "r3" {
		t.Errorf("edit: step %d current %s, want 0 r3", *out.Status.CurrentStep, out.Status.CurrentRevision)
	}
	for name, rev := range out.Assign {
		if rev == "r2" {
			t.Errorf("vehicle %s still on superseded r2", name)
		}
	}
	for i := 0; i < 20 && out.Status.Phase != v1alpha1.PhaseHealthy; i++ {
		out = s.tick(time.Minute)
	}
	assertAll(t, out, "r3")
	outcomes := map[string]string{}
	for _, r := range out.Status.Revisions {
		outcomes[r.Name] = r.Outcome
	}
	if outcomes["r1"] != v1alpha1.OutcomeSuperseded || outcomes["r2"] != v1alpha1.OutcomeSuperseded || outcomes["r3"] != v1alpha1.OutcomeStable {
		t.Errorf("revision outcomes %v", outcomes)
	}
	s.golden("edit-mid-rollout")
}
