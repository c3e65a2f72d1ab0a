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
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/text"
)

// Defaults and timings of an experiment's decisions.
const (
	// DefaultMaxPercent is spec.maxPercent's default: the share of the
	// base profile's vehicles the cohorts may take.
	DefaultMaxPercent = 20
	// DefaultApplyTimeout is spec.applyTimeout's default (the CRD's too).
	DefaultApplyTimeout = 10 * time.Minute
	// MaxArmPriority is the highest priority an arm's profile may have: the
	// base's must be below it.
	MaxArmPriority = 1000
	// waitRequeue is how soon an experiment waiting for its base profile to
	// be stable, or for another experiment on it to end, looks again.
	waitRequeue = 30 * time.Second
	// applyingRequeue is how often the arms' application is looked at.
	applyingRequeue = 5 * time.Second
	// settleRequeue follows a start, an end or a deletion of arms.
	settleRequeue = 2 * time.Second
)

// Input is what the reconciler gathered for one decision on an experiment.
type Input struct {
	// Now is the decision's instant.
	Now time.Time
	// Experiment is the experiment (read only).
	Experiment *v1alpha1.NetTuningExperiment
	// Base is the base profile, nil when it does not exist.
	Base *v1alpha1.NetTuningProfile
	// Running names another experiment running on the base profile, ""
	// when none (read for a start only).
	Running string
	// Nodes are the cluster's nodes (read only; for a start only).
	Nodes []corev1.Node
	// Arms are the arms' profiles that exist, by name (read only; for a
	// running experiment only).
	Arms map[string]*v1alpha1.NetTuningProfile
}

// Output is the decision: the reconciler applies it.
type Output struct {
	// Status is the experiment's new status (its conditions and
	// observedGeneration are the reconciler's).
	Status v1alpha1.NetTuningExperimentStatus
	// Stalled is set when only a change of the experiment, its base profile
	// or the fleet can cure what stops it.
	Stalled *Stalled
	// Create are the arms' profiles to create, all or none: each is checked
	// by the API server (dry run) first, and when one is refused none is
	// created and Refused decides instead.
	Create []ArmProfile
	// Delete are arm profiles to delete.
	Delete []*v1alpha1.NetTuningProfile
	// DeleteArms deletes every arm profile of the experiment; while any is
	// left the experiment is looked at again after settleRequeue.
	DeleteArms bool
	// Events are the events to emit, in order.
	Events []Event
	// Requeue is when to look again (0: on a change only).
	Requeue time.Duration
	// Measure, when set, is a measurement due: the reconciler takes the
	// measurements it lists and calls Conclude with them.
	Measure *Measure
}

// Stalled is why an experiment cannot go on.
type Stalled struct {
	Reason, Message string
}

// ArmProfile is a variant's profile to create.
type ArmProfile struct {
	Variant v1alpha1.ExperimentVariant
	Profile *v1alpha1.NetTuningProfile
}

// Event is an event on the experiment.
type Event struct {
	Type, Reason, Action, Message string
}

// Measure is a measurement due, and what Conclude needs after it.
type Measure struct {
	// Revisions are each arm's revision (the control's is the base's).
	Revisions map[string]string
	// VehicleLabel is the label naming a node's vehicle.
	VehicleLabel string
	// Due are the measurements to take: every analysis and guard not yet
	// decided of every measuring arm's cohort with a control of its model.
	Due []Due

	applying, measuring int
}

// Due is one measurement to take: an analysis of an arm's cohort against
// the control of its hardware model. The reconciler adds the cohorts'
// kernels.
type Due struct {
	// Profile is the arm's profile.
	Profile string
	// Spec is the analysis as the experiment runs it (experimentSpec).
	Spec *v1alpha1.AnalysisSpec
	// Canary is the arm's cohort, Baseline the control's.
	Canary, Baseline analysis.Cohort

	arm, cohort, spec int
}

// Plan decides the experiment's next step from what was gathered: wait for
// a stable base, draw the cohorts and start the arms, follow their
// application, stop an arm that fails or times out, measure when due, end
// the experiment, or abort it. It is pure.
func Plan(in Input) Output {
	exp := in.Experiment
	out := Output{Status: *exp.Status.DeepCopy()}
	st := &out.Status
	if st.Phase == v1alpha1.ExperimentCompleted || st.Phase == v1alpha1.ExperimentAborted {
		out.DeleteArms = true
		return out
	}
	base := in.Base
	if base == nil {
		if st.Phase == v1alpha1.ExperimentRunning {
			out.abort(in, fmt.Sprintf("the base profile %s was deleted", exp.Spec.Profile))
			return out
		}
		st.Phase = v1alpha1.ExperimentPending
		out.stall("ProfileNotFound", "profile %s does not exist", exp.Spec.Profile)
		return out
	}
	if st.Phase != v1alpha1.ExperimentRunning {
		out.start(in)
		return out
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration != exp.Generation {
		out.abort(in, fmt.Sprintf("the spec changed while the experiment ran (generation %d to %d): its cohorts were measured under the old one; create a new experiment", st.ObservedGeneration, exp.Generation))
		return out
	}
	if base.Status.StableRevision != st.BaseRevision || base.Status.CurrentRevision != st.BaseRevision {
		out.abort(in, fmt.Sprintf("the base profile %s moved from revision %s (stable %s, current %s): the control no longer runs what the variants patch",
			base.Name, st.BaseRevision, base.Status.StableRevision, base.Status.CurrentRevision))
		return out
	}
	out.run(in)
	return out
}

// NotStarted is the decision when the arms' profiles could not all be
// created: the experiment stays Pending, to start again.
func NotStarted(in Input) Output {
	out := Output{Status: *in.Experiment.Status.DeepCopy()}
	out.Status.Phase = v1alpha1.ExperimentPending
	return out
}

// Refused is the decision when the API server refused the arm profile of
// variant (err): the experiment starts no arm.
func Refused(in Input, variant v1alpha1.ExperimentVariant, err error) Output {
	out := NotStarted(in)
	out.stall("InvalidVariant", "variant %s (%s) on profile %s: %v", variant.Name, Describe(variant.Parameters), in.Base.Name, err)
	return out
}

func (o *Output) stall(reason, format string, args ...any) {
	o.Stalled = &Stalled{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func (o *Output) event(typ, reason, action, msg string) {
	o.Events = append(o.Events, Event{Type: typ, Reason: reason, Action: action, Message: msg})
}

// soon lowers Requeue to d (when positive).
func (o *Output) soon(d time.Duration) {
	if d > 0 && (o.Requeue == 0 || d < o.Requeue) {
		o.Requeue = d
	}
}

// applyTimeout is how long the arms may take to be verified.
func applyTimeout(exp *v1alpha1.NetTuningExperiment) time.Duration {
	if t := exp.Spec.ApplyTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultApplyTimeout
}

// maxPercent is spec.maxPercent or DefaultMaxPercent.
func maxPercent(exp *v1alpha1.NetTuningExperiment) int {
	if exp.Spec.MaxPercent != nil {
		return int(*exp.Spec.MaxPercent)
	}
	return DefaultMaxPercent
}

// stableBase says why base is not ready to be experimented on, "" when it is.
func stableBase(base *v1alpha1.NetTuningProfile) string {
	s := base.Status
	switch {
	case s.ObservedGeneration != base.Generation:
		return fmt.Sprintf("profile %s: generation %d not yet observed", base.Name, base.Generation)
	case s.StableRevision == "" || s.CurrentRevision != s.StableRevision:
		return fmt.Sprintf("profile %s is rolling out (current %s, stable %s): an experiment starts from a stable revision", base.Name, s.CurrentRevision, s.StableRevision)
	case s.Vehicles.Total == 0:
		return fmt.Sprintf("profile %s selects no vehicles", base.Name)
	}
	return ""
}

// start draws the cohorts and starts the arms, all or none.
func (o *Output) start(in Input) {
	exp, base := in.Experiment, in.Base
	st := &o.Status
	st.Phase = v1alpha1.ExperimentPending
	if why := stableBase(base); why != "" {
		st.Message = "waiting: " + why
		o.Requeue = waitRequeue
		return
	}
	if base.Spec.Priority >= MaxArmPriority {
		o.stall("PriorityTooHigh", "profile %s has priority %d: the arms need one above it (at most %d)", base.Name, base.Spec.Priority, MaxArmPriority)
		return
	}
	if in.Running != "" {
		st.Message = fmt.Sprintf("waiting: experiment %s is running on profile %s", in.Running, base.Name)
		o.Requeue = waitRequeue
		return
	}
	fleet, err := fleetmodel.Select(base, in.Nodes)
	if err != nil {
		o.stall("InvalidSelector", "profile %s: %v", base.Name, err)
		return
	}
	only := labels.Everything()
	if exp.Spec.Selector != nil {
		if only, err = metav1.LabelSelectorAsSelector(exp.Spec.Selector.AsMetav1()); err != nil {
			o.stall("InvalidSelector", "spec.selector: %v", err)
			return
		}
	}
	var eligible []Vehicle
	for name, vnodes := range fleet.Vehicles {
		ok := true
		for _, n := range vnodes {
			ok = ok && only.Matches(labels.Set(n.Labels))
		}
		if ok {
			eligible = append(eligible, Vehicle{Name: name, Hardware: HardwareModel(vnodes, fleet.HardwareLabel)})
		}
	}
	var variants []string
	for _, v := range exp.Spec.Variants {
		variants = append(variants, v.Name)
	}
	perArm := 0
	if exp.Spec.VehiclesPerArm != nil {
		perArm = int(*exp.Spec.VehiclesPerArm)
	}
	maxPercent := maxPercent(exp)
	draw := Assign(len(fleet.Vehicles), eligible, variants, maxPercent, perArm, string(exp.UID))
	if draw.Used == 0 {
		o.stall("TooFewVehicles", "%d of profile %s's %d vehicles are eligible; maxPercent %d%% allows %d vehicles, fewer than one per arm (%d arms with the control) for every hardware model",
			len(eligible), base.Name, len(fleet.Vehicles), maxPercent, draw.Budget, len(variants)+1)
		return
	}
	for _, v := range exp.Spec.Variants {
		o.Create = append(o.Create, ArmProfile{Variant: v, Profile: armProfile(exp, base, fleet.VehicleLabel, v, draw.Cohorts[v.Name])})
	}
	now := metav1.NewTime(in.Now)
	st.Phase, st.BaseRevision, st.Started = v1alpha1.ExperimentRunning, base.Status.StableRevision, &now
	st.MeasuringSince, st.LastMeasured, st.Finished, st.Results = nil, nil, nil, nil
	st.Arms = []v1alpha1.ExperimentArm{{Name: v1alpha1.ControlArm, Phase: v1alpha1.ArmMeasuring, Verified: &now, Cohorts: cohorts(draw.Cohorts[v1alpha1.ControlArm])}}
	for i, v := range exp.Spec.Variants {
		st.Arms = append(st.Arms, v1alpha1.ExperimentArm{Name: v.Name, Profile: o.Create[i].Profile.Name, Phase: v1alpha1.ArmApplying, Cohorts: cohorts(draw.Cohorts[v.Name])})
	}
	st.Message = fmt.Sprintf("%d vehicles drawn (%d allowed by maxPercent %d%% of %d)", draw.Used, draw.Budget, maxPercent, len(fleet.Vehicles))
	if len(draw.Skipped) > 0 {
		st.Message += fmt.Sprintf("; too few vehicles for one per arm: %s", strings.Join(draw.Skipped, ", "))
	}
	o.event(corev1.EventTypeNormal, "Started", "Start", st.Message)
	o.Requeue = settleRequeue
}

func cohorts(byModel map[string][]string) []v1alpha1.ExperimentCohort {
	var out []v1alpha1.ExperimentCohort
	for m, vs := range byModel {
		out = append(out, v1alpha1.ExperimentCohort{Hardware: m, Vehicles: vs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hardware < out[j].Hardware })
	return out
}

// armProfile is a variant's profile: the base patched with the variant, for
// the arm's vehicles only, one priority above the base, applied at once.
// The reconciler makes the experiment its controller.
func armProfile(exp *v1alpha1.NetTuningExperiment, base *v1alpha1.NetTuningProfile, vehicleLabel string,
	v v1alpha1.ExperimentVariant, byModel map[string][]string) *v1alpha1.NetTuningProfile {
	var vehicles []string
	for _, vs := range byModel {
		vehicles = append(vehicles, vs...)
	}
	spec := Overlay(&base.Spec, v.Parameters)
	spec.NodeSelector = v1alpha1.LabelSelectorFromMetav1(ArmSelector(base.Spec.NodeSelector.AsMetav1(), vehicleLabel, vehicles))
	spec.Priority = base.Spec.Priority + 1
	spec.Rollout = nil
	return &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ArmProfileName(exp.Name, v.Name),
			Labels: map[string]string{v1alpha1.ExperimentLabel: exp.Name},
			Annotations: map[string]string{
				"nettune.io/variant": Describe(v.Parameters),
			},
		},
		Spec: *spec,
	}
}

// abort ends the experiment without results: the arms still applying or
// measuring are finished, their profiles deleted.
func (o *Output) abort(in Input, why string) {
	st := &o.Status
	now := metav1.NewTime(in.Now)
	st.Phase, st.Message, st.Finished = v1alpha1.ExperimentAborted, why, &now
	for i := range st.Arms {
		if st.Arms[i].Phase == v1alpha1.ArmApplying || st.Arms[i].Phase == v1alpha1.ArmMeasuring {
			st.Arms[i].Phase = v1alpha1.ArmFinished
		}
	}
	o.event(corev1.EventTypeWarning, v1alpha1.ExperimentAborted, "Abort", why)
	o.DeleteArms = true
	o.Requeue = settleRequeue
}

// stopArm stops an arm: its vehicles return to the base.
func (o *Output) stopArm(arm *v1alpha1.ExperimentArm, why string) {
	arm.Phase, arm.StopReason = v1alpha1.ArmStopped, text.Truncate(why, 1024)
	o.event(corev1.EventTypeWarning, "ArmStopped", "Stop", fmt.Sprintf("arm %s stopped, its vehicles return to the base: %s", arm.Name, why))
}

// run advances a running experiment: arms verified, stopped or deleted,
// then a measurement when one is due (Measure) or the conclusion.
func (o *Output) run(in Input) {
	exp := in.Experiment
	st := &o.Status
	now := in.Now
	m := &Measure{Revisions: map[string]string{v1alpha1.ControlArm: st.BaseRevision}, VehicleLabel: v1alpha1.DefaultVehicleLabel}
	for i := range st.Arms {
		arm := &st.Arms[i]
		if arm.Name == v1alpha1.ControlArm {
			continue
		}
		p := in.Arms[arm.Profile]
		if p == nil {
			if arm.Phase == v1alpha1.ArmApplying || arm.Phase == v1alpha1.ArmMeasuring {
				o.stopArm(arm, fmt.Sprintf("its profile %s was deleted", arm.Profile))
			}
			continue
		}
		m.Revisions[arm.Name] = p.Status.CurrentRevision
		m.VehicleLabel = p.Spec.GetVehicleLabel()
		switch arm.Phase {
		case v1alpha1.ArmStopped, v1alpha1.ArmFinished:
			o.Delete = append(o.Delete, p)
		case v1alpha1.ArmApplying:
			want := int32(0)
			for _, c := range arm.Cohorts {
				want += int32(len(c.Vehicles))
			}
			v := p.Status.Vehicles
			switch {
			case p.Status.ObservedGeneration == p.Generation && v.Failed > 0:
				o.stopArm(arm, fmt.Sprintf("%d of its %d vehicles failed to apply the variant (their agents reverted to the last-known-good)", v.Failed, want))
				o.Delete = append(o.Delete, p)
			case p.Status.ObservedGeneration == p.Generation && p.Status.StableRevision != "" && v.Total == want && v.Verified == want:
				t := metav1.NewTime(now)
				arm.Phase, arm.Verified = v1alpha1.ArmMeasuring, &t
				o.event(corev1.EventTypeNormal, "ArmVerified", "Verify",
					fmt.Sprintf("arm %s: %d vehicles verified on %s", arm.Name, want, p.Status.CurrentRevision))
			case st.Started != nil && !now.Before(st.Started.Add(applyTimeout(exp))):
				o.stopArm(arm, fmt.Sprintf("%d of its %d vehicles verified the variant within applyTimeout %s (%d unreachable)",
					v.Verified, want, applyTimeout(exp), v.Unreachable))
				o.Delete = append(o.Delete, p)
			default:
				m.applying++
				o.soon(applyingRequeue)
				if st.Started != nil {
					o.soon(st.Started.Add(applyTimeout(exp)).Sub(now))
				}
			}
		}
	}
	for _, a := range st.Arms {
		if a.Name != v1alpha1.ControlArm && a.Phase == v1alpha1.ArmMeasuring {
			m.measuring++
		}
	}
	if m.applying == 0 && st.MeasuringSince == nil {
		t := metav1.NewTime(now)
		st.MeasuringSince = &t
	}
	if m.applying == 0 && m.measuring == 0 {
		o.finish(in, "every variant was stopped")
		return
	}
	end := measuringEnd(exp, st)
	ending := !end.IsZero() && !now.Before(end)
	due := st.LastMeasured == nil || !now.Before(st.LastMeasured.Add(analysis.Interval(&exp.Spec.Analysis))) || ending
	o.Measure = m
	if due && m.measuring > 0 {
		m.Due = dueMeasurements(exp, st, m.Revisions)
		return
	}
	o.conclude(in, false)
}

// experimentSpec is the analysis as an experiment runs it: over everything
// since the arm was verified, and never finished by its measurement or
// inconclusive counts (only a Failed result stops an arm).
func experimentSpec(spec *v1alpha1.AnalysisSpec, d time.Duration) *v1alpha1.AnalysisSpec {
	s := spec.DeepCopy()
	s.Window = &metav1.Duration{Duration: d + 2*analysis.Interval(spec)}
	huge := int32(math.MaxInt32)
	s.Measurements, s.InconclusiveLimit, s.ConsecutiveErrorLimit = &huge, &huge, &huge
	return s
}

// dueMeasurements lists the measurements of every measuring arm and model
// against the control of that model, for the analyses and guards not yet
// decided.
func dueMeasurements(exp *v1alpha1.NetTuningExperiment, st *v1alpha1.NetTuningExperimentStatus, revisions map[string]string) []Due {
	control := map[string][]string{}
	for _, a := range st.Arms {
		if a.Name == v1alpha1.ControlArm {
			for _, c := range a.Cohorts {
				control[c.Hardware] = c.Vehicles
			}
		}
	}
	specs := []*v1alpha1.AnalysisSpec{experimentSpec(&exp.Spec.Analysis, exp.Spec.Duration.Duration)}
	for i := range exp.Spec.Guards {
		specs = append(specs, experimentSpec(&exp.Spec.Guards[i], exp.Spec.Duration.Duration))
	}
	var due []Due
	for i, arm := range st.Arms {
		if arm.Name == v1alpha1.ControlArm || arm.Phase != v1alpha1.ArmMeasuring {
			continue
		}
		for j, c := range arm.Cohorts {
			ctrlVehicles := control[c.Hardware]
			if len(ctrlVehicles) == 0 || len(c.Vehicles) == 0 {
				continue
			}
			since := arm.Verified.Time
			for k, spec := range specs {
				if prev, _ := analysisOf(c, spec.Name); v1alpha1.AnalysisTerminal(prev.Phase) {
					continue
				}
				due = append(due, Due{Profile: arm.Profile, Spec: spec,
					Canary:   analysis.Cohort{Vehicles: c.Vehicles, Revision: revisions[arm.Name], Since: since},
					Baseline: analysis.Cohort{Vehicles: ctrlVehicles, Revision: st.BaseRevision, Since: since},
					arm:      i, cohort: j, spec: k})
			}
		}
	}
	return due
}

// analysisOf is the cohort's result of the named analysis and its index
// (-1 when none yet).
func analysisOf(c v1alpha1.ExperimentCohort, name string) (v1alpha1.AnalysisResult, int) {
	prev, idx := v1alpha1.AnalysisResult{}, -1
	for n, a := range c.Analysis {
		if a.Name == name {
			prev, idx = a, n
		}
	}
	return prev, idx
}

// Conclude follows Plan's Measure once the reconciler took its Due
// measurements (taken[i] of Due[i]): each accumulated into its cohort's
// result, the cohorts' counts from the judge, the arms an analysis failed
// stopped; then the results, the end of the experiment or its progress. It
// is pure.
func Conclude(in Input, out Output, taken []analysis.Measurement) Output {
	out.Status = *out.Status.DeepCopy()
	out.record(taken)
	out.conclude(in, true)
	return out
}

// record accumulates the measurements taken into the cohorts' results and
// stops the arms an analysis failed.
func (o *Output) record(taken []analysis.Measurement) {
	st := &o.Status
	var controlArm *v1alpha1.ExperimentArm
	for i := range st.Arms {
		if st.Arms[i].Name == v1alpha1.ControlArm {
			controlArm = &st.Arms[i]
		}
	}
	// The control's own counts come from the measurement with the longest
	// window (the arm verified first).
	longest := map[string]time.Time{}
	failed := map[int][]string{}
	var order []int
	for i, d := range o.Measure.Due {
		arm := &st.Arms[d.arm]
		c := &arm.Cohorts[d.cohort]
		m := taken[i]
		prev, idx := analysisOf(*c, d.Spec.Name)
		res := analysis.Accumulate(prev, m, d.Spec)
		res.Name = d.Spec.Name
		res.Pairs = nil // the cohort's sums below; pairs stay in the judge's message
		if idx >= 0 {
			c.Analysis[idx] = res
		} else {
			c.Analysis = append(c.Analysis, res)
		}
		if d.spec == 0 && m.Judge != nil && len(m.Judge.Pairs) > 0 {
			var s, t, cs, ct int64
			for _, p := range m.Judge.Pairs {
				s, t, cs, ct = s+p.CanarySlow, t+p.CanaryTotal, cs+p.BaselineSlow, ct+p.BaselineTotal
			}
			c.Slow, c.Total, c.ControlSlow, c.ControlTotal = s, t, cs, ct
			since := d.Canary.Since
			if first, ok := longest[c.Hardware]; !ok || since.Before(first) {
				longest[c.Hardware] = since
				for n := range controlArm.Cohorts {
					if controlArm.Cohorts[n].Hardware == c.Hardware {
						controlArm.Cohorts[n].Slow, controlArm.Cohorts[n].Total = cs, ct
					}
				}
			}
		}
		if res.Phase == v1alpha1.AnalysisFailed {
			if _, ok := failed[d.arm]; !ok {
				order = append(order, d.arm)
			}
			failed[d.arm] = append(failed[d.arm], fmt.Sprintf("%s on %s: %s", d.Spec.Name, c.Hardware, res.Message))
		}
	}
	for _, i := range order {
		o.stopArm(&st.Arms[i], strings.Join(failed[i], "; "))
	}
}

// measuringEnd is when the measurement ends (zero before it began).
func measuringEnd(exp *v1alpha1.NetTuningExperiment, st *v1alpha1.NetTuningExperimentStatus) time.Time {
	if st.MeasuringSince == nil {
		return time.Time{}
	}
	return st.MeasuringSince.Add(exp.Spec.Duration.Duration)
}

func (o *Output) conclude(in Input, measured bool) {
	exp := in.Experiment
	st := &o.Status
	now := in.Now
	m := o.Measure
	o.Measure = nil
	if measured {
		t := metav1.NewTime(now)
		st.LastMeasured = &t
	}
	interval := analysis.Interval(&exp.Spec.Analysis)
	end := measuringEnd(exp, st)
	st.Results = rank(exp, st.Arms)
	switch {
	case !end.IsZero() && !now.Before(end):
		o.finish(in, fmt.Sprintf("measured for %s", exp.Spec.Duration.Duration))
		return
	case st.MeasuringSince != nil && sampleTargetMet(exp, st.Arms):
		o.finish(in, fmt.Sprintf("every arm and model reached sampleTarget %d messages", *exp.Spec.SampleTarget))
		return
	}
	if st.LastMeasured != nil {
		o.soon(st.LastMeasured.Add(interval).Sub(now))
	}
	if !end.IsZero() {
		o.soon(end.Sub(now))
	}
	st.Message = progress(st, m.applying, m.measuring, end)
	if o.Requeue == 0 {
		o.Requeue = interval
	}
}

func progress(st *v1alpha1.NetTuningExperimentStatus, applying, measuring int, end time.Time) string {
	s := fmt.Sprintf("%d arm(s) applying, %d measuring", applying, measuring)
	if !end.IsZero() {
		s += fmt.Sprintf(", ends %s", end.UTC().Format(time.RFC3339))
	}
	for _, res := range st.Results {
		s += fmt.Sprintf("; %s: leading %s", res.Hardware, leader(res))
	}
	return s
}

func leader(res v1alpha1.ExperimentResult) string {
	if len(res.Ranking) == 0 || res.Ranking[0].Rank == 0 {
		return "(no messages yet)"
	}
	return res.Ranking[0].Arm
}

// rank ranks the arms per hardware model from their latest counts.
func rank(exp *v1alpha1.NetTuningExperiment, arms []v1alpha1.ExperimentArm) []v1alpha1.ExperimentResult {
	confidence := analysis.DefaultJudgeConfidence
	if cfg, err := analysis.JudgeConfigFor(&exp.Spec.Analysis); err == nil {
		confidence = cfg.Confidence
	}
	byModel := map[string][]ArmCounts{}
	for _, arm := range arms {
		for _, c := range arm.Cohorts {
			row := ArmCounts{Arm: arm.Name, Slow: c.Slow, Total: c.Total,
				ControlSlow: c.ControlSlow, ControlTotal: c.ControlTotal, Stopped: arm.Phase == v1alpha1.ArmStopped}
			if arm.Name != v1alpha1.ControlArm {
				row.Unguarded = unguarded(exp.Spec.Guards, c)
			}
			byModel[c.Hardware] = append(byModel[c.Hardware], row)
		}
	}
	var out []v1alpha1.ExperimentResult
	for m, rows := range byModel {
		ranking, winner := Rank(rows, confidence)
		out = append(out, v1alpha1.ExperimentResult{Hardware: m, Winner: winner, Ranking: ranking})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hardware < out[j].Hardware })
	return out
}

func sampleTargetMet(exp *v1alpha1.NetTuningExperiment, arms []v1alpha1.ExperimentArm) bool {
	if exp.Spec.SampleTarget == nil {
		return false
	}
	for _, arm := range arms {
		if arm.Phase == v1alpha1.ArmStopped {
			continue
		}
		for _, c := range arm.Cohorts {
			if c.Total < *exp.Spec.SampleTarget {
				return false
			}
		}
	}
	return true
}

// finish ends the experiment: results final, arms' profiles deleted (their
// vehicles return to the base).
func (o *Output) finish(in Input, why string) {
	st := &o.Status
	now := metav1.NewTime(in.Now)
	st.Results = rank(in.Experiment, st.Arms)
	st.Phase, st.Finished = v1alpha1.ExperimentCompleted, &now
	for i := range st.Arms {
		if st.Arms[i].Phase == v1alpha1.ArmMeasuring || st.Arms[i].Phase == v1alpha1.ArmApplying {
			st.Arms[i].Phase = v1alpha1.ArmFinished
		}
	}
	st.Message = fmt.Sprintf("completed (%s); winners %s", why, strings.Join(Winners(st), ", "))
	o.event(corev1.EventTypeNormal, v1alpha1.ExperimentCompleted, "Complete", st.Message)
	o.Measure = nil
	o.DeleteArms = true
	o.Requeue = settleRequeue
}

// Winners are the winners per hardware model of a completed experiment's
// results, as its message names them.
func Winners(st *v1alpha1.NetTuningExperimentStatus) []string {
	var winners []string
	for _, res := range st.Results {
		winners = append(winners, fmt.Sprintf("%s: %s", res.Hardware, res.Winner))
	}
	return winners
}

// unguarded says which guards have not passed a measurement on cohort c
// ("" when every guard has): a guard that cannot measure on its vehicles
// (a counter their kernels lack) stays Inconclusive for the whole
// experiment, and its arm is then reported and never recommended instead
// of being judged by the analysis alone.
func unguarded(guards []v1alpha1.AnalysisSpec, c v1alpha1.ExperimentCohort) string {
	var why []string
	for _, g := range guards {
		res, idx := analysisOf(c, g.Name)
		switch {
		case idx < 0:
			why = append(why, fmt.Sprintf("guard %s not measured on %s yet", g.Name, c.Hardware))
		case res.Successful == 0 && res.Phase != v1alpha1.AnalysisSuccessful:
			why = append(why, fmt.Sprintf("guard %s has not passed on %s (%d inconclusive, %d errors): %s", g.Name, c.Hardware, res.Inconclusive, res.Errors, res.Message))
		}
	}
	return strings.Join(why, "; ")
}
