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

package experiment

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
)

var planNow = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// planBase is a stable base profile selecting role=av, on revision base-1.
func planBase() *v1alpha1.NetTuningProfile {
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "base", Generation: 1}}
	p.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"role": "av"}}
	p.Spec.Priority = 10
	p.Status.ObservedGeneration = 1
	p.Status.StableRevision, p.Status.CurrentRevision = "base-1", "base-1"
	p.Status.Vehicles.Total = 10
	return p
}

// planNodes are ten one-node vehicles av-0..av-9 of hardware xavier.
func planNodes() []corev1.Node {
	var nodes []corev1.Node
	for i := range 10 {
		nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("av-%d-a", i), Labels: map[string]string{
			"role": "av", v1alpha1.DefaultVehicleLabel: fmt.Sprintf("av-%d", i), v1alpha1.DefaultHardwareLabel: "xavier"}}})
	}
	return nodes
}

// planExperiment is a pending experiment "e" on the base with one variant,
// 10 minutes long.
func planExperiment() *v1alpha1.NetTuningExperiment {
	e := &v1alpha1.NetTuningExperiment{ObjectMeta: metav1.ObjectMeta{Name: "e", UID: "uid-e", Generation: 1}}
	e.Spec.Profile = "base"
	e.Spec.Variants = []v1alpha1.ExperimentVariant{initcwndVariant("cwnd20", 20)}
	e.Spec.Duration = metav1.Duration{Duration: 10 * time.Minute}
	return e
}

func initcwndVariant(name string, cwnd int32) v1alpha1.ExperimentVariant {
	v := v1alpha1.ExperimentVariant{Name: name}
	v.Parameters.Initcwnd = &cwnd
	return v
}

// planStart is the input of a start that can go ahead.
func planStart() Input {
	return Input{Now: planNow, Experiment: planExperiment(), Base: planBase(), Nodes: planNodes()}
}

// planRunning is the input of a running experiment started at started, with
// the control measuring and the variant cwnd20 in phase arm, its profile
// (e-cwnd20) verified by its one vehicle.
func planRunning(started time.Time, arm string) Input {
	e := planExperiment()
	st := &e.Status
	t := metav1.NewTime(started)
	st.Phase, st.BaseRevision, st.Started, st.ObservedGeneration = v1alpha1.ExperimentRunning, "base-1", &t, 1
	st.Arms = []v1alpha1.ExperimentArm{
		{Name: v1alpha1.ControlArm, Phase: v1alpha1.ArmMeasuring, Verified: &t, Cohorts: []v1alpha1.ExperimentCohort{{Hardware: "xavier", Vehicles: []string{"av-1"}}}},
		{Name: "cwnd20", Profile: "e-cwnd20", Phase: arm, Cohorts: []v1alpha1.ExperimentCohort{{Hardware: "xavier", Vehicles: []string{"av-2"}}}},
	}
	if arm == v1alpha1.ArmMeasuring {
		st.Arms[1].Verified = &t
		st.MeasuringSince = &t
	}
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "e-cwnd20", Generation: 1}}
	p.Status.ObservedGeneration = 1
	p.Status.StableRevision, p.Status.CurrentRevision = "e-cwnd20-1", "e-cwnd20-1"
	p.Status.Vehicles = v1alpha1.VehicleCounts{Total: 1, Verified: 1}
	return Input{Now: planNow, Experiment: e, Base: planBase(), Arms: map[string]*v1alpha1.NetTuningProfile{"e-cwnd20": p}}
}

func hasEvent(out Output, reason string) bool {
	for _, e := range out.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}

func stalledBy(out Output, reason string) bool {
	return out.Stalled != nil && out.Stalled.Reason == reason
}

// TestPlan: one decision per case.
func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func() Input
		// measured runs Conclude after Plan, as the reconciler does after a
		// measurement, with the measurements taken (by default one
		// inconclusive measurement per due one).
		measured bool
		taken    func(due []Due) []analysis.Measurement
		want     func(Output) string // "" when the decision is right
	}{
		{
			name: "an ended experiment only deletes its arms",
			in: func() Input {
				in := planStart()
				in.Experiment.Status.Phase = v1alpha1.ExperimentCompleted
				return in
			},
			want: func(o Output) string {
				if !o.DeleteArms || o.Status.Phase != v1alpha1.ExperimentCompleted || len(o.Events) > 0 || o.Requeue != 0 {
					return "want the arms deleted and nothing else"
				}
				return ""
			},
		},
		{
			name: "a missing base profile stalls a pending experiment",
			in:   func() Input { in := planStart(); in.Base = nil; return in },
			want: func(o Output) string {
				if !stalledBy(o, "ProfileNotFound") || o.Status.Phase != v1alpha1.ExperimentPending {
					return "want Pending, stalled ProfileNotFound"
				}
				return ""
			},
		},
		{
			name: "a missing base profile aborts a running experiment",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				in.Base = nil
				return in
			},
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentAborted || !o.DeleteArms || !hasEvent(o, v1alpha1.ExperimentAborted) ||
					o.Status.Arms[1].Phase != v1alpha1.ArmFinished || o.Requeue != settleRequeue {
					return "want Aborted, arms finished and deleted, an Aborted event"
				}
				return ""
			},
		},
		{
			name: "a base rolling out is waited for",
			in:   func() Input { in := planStart(); in.Base.Status.CurrentRevision = "base-2"; return in },
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentPending || !strings.HasPrefix(o.Status.Message, "waiting: ") || o.Requeue != waitRequeue || len(o.Create) > 0 {
					return "want Pending, waiting, requeued after waitRequeue"
				}
				return ""
			},
		},
		{
			name: "a base at the top priority leaves the arms none",
			in:   func() Input { in := planStart(); in.Base.Spec.Priority = MaxArmPriority; return in },
			want: func(o Output) string {
				if !stalledBy(o, "PriorityTooHigh") || len(o.Create) > 0 {
					return "want stalled PriorityTooHigh"
				}
				return ""
			},
		},
		{
			name: "another experiment running on the base is waited for",
			in:   func() Input { in := planStart(); in.Running = "other"; return in },
			want: func(o Output) string {
				if !strings.Contains(o.Status.Message, "experiment other is running") || o.Requeue != waitRequeue || len(o.Create) > 0 {
					return "want waiting for experiment other"
				}
				return ""
			},
		},
		{
			name: "too few vehicles for one per arm",
			in:   func() Input { in := planStart(); in.Nodes = in.Nodes[:4]; return in },
			want: func(o Output) string {
				if !stalledBy(o, "TooFewVehicles") || len(o.Create) > 0 {
					return "want stalled TooFewVehicles"
				}
				return ""
			},
		},
		{
			name: "a start draws the cohorts within the default maxPercent and creates the arms",
			in:   planStart,
			want: func(o Output) string {
				st := o.Status
				if st.Phase != v1alpha1.ExperimentRunning || st.BaseRevision != "base-1" || !st.Started.Time.Equal(planNow) || len(st.Arms) != 2 {
					return "want Running on base-1 with the control and one arm"
				}
				// 20 % of 10 vehicles: one per arm.
				if !strings.Contains(st.Message, fmt.Sprintf("2 vehicles drawn (2 allowed by maxPercent %d%% of 10)", DefaultMaxPercent)) {
					return "message " + st.Message
				}
				if len(o.Create) != 1 || o.Create[0].Profile.Name != "e-cwnd20" || o.Create[0].Profile.Spec.Priority != 11 ||
					o.Create[0].Profile.Labels[v1alpha1.ExperimentLabel] != "e" || st.Arms[1].Phase != v1alpha1.ArmApplying {
					return "want one arm profile e-cwnd20, one priority above the base, its arm Applying"
				}
				if !hasEvent(o, "Started") || o.Requeue != settleRequeue {
					return "want a Started event and a requeue after settleRequeue"
				}
				return ""
			},
		},
		{
			name: "a spec changed while running aborts",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				in.Experiment.Generation = 2
				return in
			},
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentAborted || !strings.Contains(o.Status.Message, "generation 1 to 2") {
					return "want Aborted for the spec change"
				}
				return ""
			},
		},
		{
			name: "a base that moved aborts",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				in.Base.Status.CurrentRevision = "base-2"
				return in
			},
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentAborted || !strings.Contains(o.Status.Message, "moved from revision base-1") {
					return "want Aborted for the base's move"
				}
				return ""
			},
		},
		{
			name: "an arm whose profile was deleted is stopped",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmApplying)
				delete(in.Arms, "e-cwnd20")
				return in
			},
			want: func(o Output) string {
				if o.Status.Arms[1].Phase != v1alpha1.ArmStopped || !strings.Contains(o.Status.Arms[1].StopReason, "was deleted") || !hasEvent(o, "ArmStopped") {
					return "want the arm Stopped"
				}
				return ""
			},
		},
		{
			name: "an arm with a failed vehicle is stopped and its profile deleted",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmApplying)
				in.Arms["e-cwnd20"].Status.Vehicles = v1alpha1.VehicleCounts{Total: 1, Failed: 1}
				return in
			},
			want: func(o Output) string {
				if o.Status.Arms[1].Phase != v1alpha1.ArmStopped || len(o.Delete) != 1 || o.Delete[0].Name != "e-cwnd20" {
					return "want the arm Stopped, its profile deleted"
				}
				return ""
			},
		},
		{
			name: "an arm verified by all its vehicles measures, and a measurement is due",
			in:   func() Input { return planRunning(planNow.Add(-time.Minute), v1alpha1.ArmApplying) },
			want: func(o Output) string {
				a := o.Status.Arms[1]
				if a.Phase != v1alpha1.ArmMeasuring || !a.Verified.Time.Equal(planNow) || !hasEvent(o, "ArmVerified") {
					return "want the arm Measuring from now"
				}
				if o.Measure == nil || o.Measure.Revisions["cwnd20"] != "e-cwnd20-1" || o.Measure.Revisions[v1alpha1.ControlArm] != "base-1" ||
					o.Status.MeasuringSince == nil || !o.Status.MeasuringSince.Time.Equal(planNow) {
					return "want a measurement due, measuring since now"
				}
				return ""
			},
		},
		{
			name: "an arm not verified within the default applyTimeout is stopped",
			in: func() Input {
				in := planRunning(planNow.Add(-DefaultApplyTimeout), v1alpha1.ArmApplying)
				in.Arms["e-cwnd20"].Status.Vehicles = v1alpha1.VehicleCounts{Total: 1}
				return in
			},
			want: func(o Output) string {
				if o.Status.Arms[1].Phase != v1alpha1.ArmStopped || !strings.Contains(o.Status.Arms[1].StopReason, "applyTimeout 10m0s") || len(o.Delete) != 1 {
					return "want the arm Stopped at applyTimeout"
				}
				return ""
			},
		},
		{
			name: "an arm still applying is looked at again soon",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmApplying)
				in.Arms["e-cwnd20"].Status.Vehicles = v1alpha1.VehicleCounts{Total: 1}
				return in
			},
			want: func(o Output) string {
				if o.Status.Arms[1].Phase != v1alpha1.ArmApplying || o.Measure != nil || o.Requeue != applyingRequeue ||
					!strings.HasPrefix(o.Status.Message, "1 arm(s) applying, 0 measuring") {
					return "want the arm Applying, no measurement, a requeue after applyingRequeue"
				}
				return ""
			},
		},
		{
			name: "every variant stopped ends the experiment",
			in:   func() Input { return planRunning(planNow.Add(-time.Minute), v1alpha1.ArmStopped) },
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentCompleted || !strings.Contains(o.Status.Message, "every variant was stopped") ||
					!o.DeleteArms || len(o.Delete) != 1 || !hasEvent(o, v1alpha1.ExperimentCompleted) || o.Measure != nil {
					return "want Completed, the stopped arm's profile and the arms deleted"
				}
				return ""
			},
		},
		{
			name: "no measurement before the interval: the progress and the next measurement",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				t := metav1.NewTime(planNow.Add(-20 * time.Second))
				in.Experiment.Status.LastMeasured = &t
				return in
			},
			want: func(o Output) string {
				if o.Measure != nil || o.Status.Phase != v1alpha1.ExperimentRunning || o.Requeue != 40*time.Second ||
					!strings.HasPrefix(o.Status.Message, "0 arm(s) applying, 1 measuring, ends ") || len(o.Status.Results) != 1 {
					return "want no measurement, a requeue at the next interval, the progress"
				}
				return ""
			},
		},
		{
			name:     "a measurement taken: results and the next one",
			in:       func() Input { return planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring) },
			measured: true,
			want: func(o Output) string {
				if o.Measure != nil || o.Status.LastMeasured == nil || !o.Status.LastMeasured.Time.Equal(planNow) || o.Requeue != time.Minute ||
					o.Status.Phase != v1alpha1.ExperimentRunning {
					return "want the measurement recorded and a requeue after the interval"
				}
				return ""
			},
		},
		{
			name: "the measurement due is the analysis of the arm's cohort against the control's",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				in.Experiment.Spec.Analysis.Name = "judge"
				in.Experiment.Spec.Guards = []v1alpha1.AnalysisSpec{{Name: "guard"}}
				in.Experiment.Status.Arms[1].Cohorts[0].Analysis = []v1alpha1.AnalysisResult{{Name: "guard", Phase: v1alpha1.AnalysisSuccessful}}
				return in
			},
			want: func(o Output) string {
				if o.Measure == nil || len(o.Measure.Due) != 1 {
					return "want one measurement due (the guard has decided)"
				}
				d := o.Measure.Due[0]
				if d.Profile != "e-cwnd20" || d.Spec.Name != "judge" || d.Canary.Revision != "e-cwnd20-1" || d.Canary.Vehicles[0] != "av-2" ||
					d.Baseline.Revision != "base-1" || d.Baseline.Vehicles[0] != "av-1" || *d.Spec.Measurements != math.MaxInt32 ||
					d.Spec.Window.Duration != 12*time.Minute {
					return fmt.Sprintf("due %+v", d)
				}
				return ""
			},
		},
		{
			name:     "a failed analysis stops its arm",
			in:       func() Input { return planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring) },
			measured: true,
			taken: func(due []Due) []analysis.Measurement {
				return []analysis.Measurement{{Verdict: analysis.VerdictFail, At: planNow, Message: "worse"}}
			},
			want: func(o Output) string {
				a := o.Status.Arms[1]
				if a.Phase != v1alpha1.ArmStopped || !strings.Contains(a.StopReason, "worse") || !hasEvent(o, "ArmStopped") ||
					len(a.Cohorts[0].Analysis) != 1 || a.Cohorts[0].Analysis[0].Phase != v1alpha1.AnalysisFailed {
					return "want the arm Stopped by its failed analysis"
				}
				return ""
			},
		},
		{
			name:     "the judge's counts go to the cohort and the control's",
			in:       func() Input { return planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring) },
			measured: true,
			taken: func(due []Due) []analysis.Measurement {
				j := &analysis.JudgeResult{Pairs: []analysis.PairResult{
					{CanarySlow: 1, CanaryTotal: 100, BaselineSlow: 2, BaselineTotal: 200},
					{CanarySlow: 3, CanaryTotal: 300, BaselineSlow: 4, BaselineTotal: 400}}}
				return []analysis.Measurement{{Verdict: analysis.VerdictInconclusive, At: planNow, Judge: j}}
			},
			want: func(o Output) string {
				c, ctl := o.Status.Arms[1].Cohorts[0], o.Status.Arms[0].Cohorts[0]
				if c.Slow != 4 || c.Total != 400 || c.ControlSlow != 6 || c.ControlTotal != 600 || ctl.Slow != 6 || ctl.Total != 600 {
					return fmt.Sprintf("counts: arm %+v, control %+v", c, ctl)
				}
				return ""
			},
		},
		{
			name:     "the duration measured ends the experiment",
			in:       func() Input { return planRunning(planNow.Add(-10*time.Minute), v1alpha1.ArmMeasuring) },
			measured: true,
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentCompleted || !strings.Contains(o.Status.Message, "measured for 10m0s") ||
					o.Status.Arms[1].Phase != v1alpha1.ArmFinished || !o.DeleteArms {
					return "want Completed after the duration"
				}
				return ""
			},
		},
		{
			name: "the sample target reached ends the experiment",
			in: func() Input {
				in := planRunning(planNow.Add(-time.Minute), v1alpha1.ArmMeasuring)
				target := int64(100)
				in.Experiment.Spec.SampleTarget = &target
				for i := range in.Experiment.Status.Arms {
					in.Experiment.Status.Arms[i].Cohorts[0].Total = 100
				}
				return in
			},
			measured: true,
			want: func(o Output) string {
				if o.Status.Phase != v1alpha1.ExperimentCompleted || !strings.Contains(o.Status.Message, "sampleTarget 100") {
					return "want Completed at the sample target"
				}
				return ""
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			before := in.Experiment.Status.DeepCopy()
			out := Plan(in)
			if tc.measured {
				if out.Measure == nil {
					t.Fatal("no measurement due")
				}
				taken := make([]analysis.Measurement, len(out.Measure.Due))
				for i := range taken {
					taken[i] = analysis.Measurement{Verdict: analysis.VerdictInconclusive, At: planNow}
				}
				if tc.taken != nil {
					taken = tc.taken(out.Measure.Due)
				}
				out = Conclude(in, out, taken)
			}
			if msg := tc.want(out); msg != "" {
				t.Errorf("%s; got status %+v, stalled %+v, events %+v, requeue %s", msg, out.Status, out.Stalled, out.Events, out.Requeue)
			}
			if !equalStatus(before, &in.Experiment.Status) {
				t.Error("Plan changed its input")
			}
		})
	}
}

func equalStatus(a, b *v1alpha1.NetTuningExperimentStatus) bool {
	return fmt.Sprintf("%+v", *a) == fmt.Sprintf("%+v", *b)
}

// TestRefusedStartsNoArm: a variant the API server refuses leaves the
// experiment Pending, stalled.
func TestRefusedStartsNoArm(t *testing.T) {
	in := planStart()
	out := Refused(in, in.Experiment.Spec.Variants[0], errors.New("initcwnd above cwnd"))
	if !stalledBy(out, "InvalidVariant") || out.Status.Phase != v1alpha1.ExperimentPending || len(out.Create) > 0 ||
		!strings.Contains(out.Stalled.Message, "variant cwnd20") {
		t.Errorf("refused: %+v", out)
	}
}
