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

// Package planner decides a profile's rollout: which vehicle runs which
// revision, which step the rollout is on, and when it rolls back. It is pure:
// no Kubernetes client, no clock of its own, no I/O. The controller gathers the
// observed state (vehicles, their nodes' reports, analysis results, manual
// commands and the time) into an Input, calls Plan, and carries out the Output.
//
// Rollout model:
//
//   - A rollout starts when the profile's content hash (its revision) differs
//     from the one in status. It picks the canary cohort once (status
//     canaryVehicles) and sets the step to 0.
//   - The vehicles are ordered: canaries first, then the rest in a stable
//     pseudo-random order (hash of profile and vehicle name). The target of a
//     step is the latest setVehicles at or before it (the canary cohort before
//     any); the first target vehicles of the order get the new revision, the
//     rest keep the stable one. maxUnavailable caps vehicles that are assigned
//     but not yet verified.
//   - A step acts once its cohort is settled: every targeted vehicle verified
//     the revision, or is Unreachable for longer than unreachableTimeout (it
//     keeps its assignment and catches up when it returns), or failed within the
//     failure budget. setVehicles then completes; pause waits its duration or
//     for a promote; analysis waits for its verdict.
//   - After the last step every vehicle gets the revision; once settled the
//     revision becomes stable.
//   - A failed analysis, a failure budget exceeded, or an abort puts every
//     vehicle back on the stable revision; the revision is remembered as failed
//     and not retried until the content changes.
package planner

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/text"
)

// The phases, outcomes and analysis phases the planner writes are
// v1alpha1's (api/v1alpha1/vocabulary.go).

// Vehicle is the observed state of one vehicle for one profile.
type Vehicle struct {
	Name string
	// Hardware is the set of hardware models of the vehicle's nodes, sorted.
	Hardware []string
	// Labels are the labels the vehicle's nodes have in common (canary
	// selector): a labels.Set, or a view that computes them only when asked
	// (fleetmodel's, since only a rollout's start with a canary selector
	// reads them).
	Labels labels.Labels
	// Assigned is the revision of this profile every node of the vehicle is
	// rendered with ("" = none); Mixed when the nodes disagree.
	Assigned string
	Mixed    bool
	// Verified: every node applied and verified its rendered state, which
	// carries Assigned.
	Verified bool
	// Failed: a node reports RolledBack or Degraded for its rendered state.
	Failed bool
	// LastSeen is the oldest latest heartbeat among the vehicle's nodes (zero
	// when a node never reported).
	LastSeen time.Time
	// Nodes is how many nodes the vehicle has, VerifiedNodes how many of
	// them verified their rendered state (shown, not planned on).
	Nodes, VerifiedNodes int
}

// Commands are the manual commands of the kubectl plugin, read from the
// profile's annotations. Each names what it acts on, so acting on it twice
// does nothing more.
type Commands struct {
	// PromoteStep skips the pause (or inconclusive analysis) of this step
	// of PromoteRevision's rollout.
	PromoteStep     *int32
	PromoteRevision string
	// AbortRevision rolls this revision back.
	AbortRevision string
	// Excluded vehicles stay on the stable revision and are not counted.
	Excluded []string
}

// Input is everything Plan decides from.
type Input struct {
	Now      time.Time
	Profile  string
	Revision string
	// Generation of the profile, recorded with new revisions.
	Generation int64
	// Rollout is the profile's rollout; nil updates every vehicle at once.
	Rollout  *v1alpha1.RolloutSpec
	Status   v1alpha1.NetTuningProfileStatus
	Vehicles []Vehicle
	Commands Commands
	// LivenessTimer says the caller wakes the planner when a vehicle turns
	// Unreachable (one timer for the whole fleet): the output then asks for
	// no requeue for that.
	LivenessTimer bool
}

// Event is something worth a Kubernetes event.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Measure asks the controller to take the measurement of a running analysis.
type Measure struct {
	Analysis         string
	Step             int32
	Canary           []string
	CanaryRevision   string
	Baseline         []string
	BaselineRevision string
}

// Output is the decision.
type Output struct {
	// Assign maps every vehicle to the revision it must be rendered with
	// ("" = the profile does not apply to it).
	Assign map[string]string
	Status v1alpha1.NetTuningProfileStatus
	Events []Event
	// Measures are set while an analysis step waits for its verdicts: one
	// per analysis of the step still running.
	Measures []*Measure
	// RequeueAfter is when the plan may change with time alone (0 = never).
	RequeueAfter time.Duration
}

// Plan decides the rollout for one profile.
func Plan(in Input) Output {
	p := &plan{in: in, out: Output{Assign: map[string]string{}, Status: *in.Status.DeepCopy()}}
	p.run()
	return p.out
}

type plan struct {
	in  Input
	out Output

	excluded map[string]bool
	active   []Vehicle      // not excluded, in rollout order
	byName   map[string]int // vehicle -> its index in in.Vehicles
}

func (p *plan) st() *v1alpha1.NetTuningProfileStatus { return &p.out.Status }

func (p *plan) event(warning bool, reason, format string, args ...any) {
	p.out.Events = append(p.out.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (p *plan) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Second
	}
	if p.out.RequeueAfter == 0 || d < p.out.RequeueAfter {
		p.out.RequeueAfter = d
	}
}

func (p *plan) run() {
	st := p.st()
	p.excluded = map[string]bool{}
	for _, v := range p.in.Commands.Excluded {
		p.excluded[v] = true
	}
	p.byName = make(map[string]int, len(p.in.Vehicles))
	for i := range p.in.Vehicles {
		p.byName[p.in.Vehicles[i].Name] = i
	}

	switch {
	case st.CurrentRevision != p.in.Revision && p.in.Revision == st.StableRevision:
		// Back to the stable content (an undo, or an edit reverted): no
		// rollout needed, every vehicle returns to stable at once.
		p.supersede(st.CurrentRevision)
		st.CurrentRevision = p.in.Revision
		st.CurrentStep = ptr(p.stepCount())
		st.StepStarted = p.now()
		st.Analysis = nil
		p.event(false, "RolloutComplete", "revision %s is the stable revision again", p.in.Revision)
	case st.CurrentRevision != p.in.Revision && p.in.Revision == st.FailedRevision:
		// The content went back to a revision that was rolled back: it is not
		// retried until the content changes.
		p.supersede(st.CurrentRevision)
		st.CurrentRevision = p.in.Revision
		st.Analysis = nil
		p.event(true, "RevisionFailedBefore", "revision %s was rolled back before; change the profile to roll out again", p.in.Revision)
	case st.CurrentRevision != p.in.Revision:
		p.start()
	}

	p.order()

	if st.CurrentRevision == st.FailedRevision && st.FailedRevision != "" {
		p.rolledBack()
		p.finish()
		return
	}
	if p.in.Commands.AbortRevision != "" && p.in.Commands.AbortRevision == st.CurrentRevision && st.CurrentRevision != st.StableRevision {
		p.rollback("Aborted", fmt.Sprintf("rollout of %s aborted by the user", st.CurrentRevision))
		p.finish()
		return
	}
	if st.CurrentRevision == st.StableRevision {
		p.steady()
		p.finish()
		return
	}
	p.progress()
	p.finish()
}

// start begins a rollout of in.Revision.
func (p *plan) start() {
	st := p.st()
	if st.CurrentRevision != "" && st.CurrentRevision != st.StableRevision && st.CurrentRevision != st.FailedRevision {
		p.supersede(st.CurrentRevision)
		p.event(false, "RolloutRestarted", "revision %s replaces %s mid-rollout; starting over from the canary step", p.in.Revision, st.CurrentRevision)
	}
	st.CurrentRevision = p.in.Revision
	st.CurrentStep = ptr(int32(0))
	st.StepStarted = p.now()
	st.Analysis = nil
	st.CanaryVehicles = p.pickCanaries()
	p.addRevision(p.in.Revision, v1alpha1.OutcomeProgressing)
	if p.in.Rollout == nil {
		p.event(false, "RolloutStarted", "revision %s: updating every vehicle (no rollout steps)", p.in.Revision)
		return
	}
	p.event(false, "RolloutStarted", "revision %s: canary vehicles %s", p.in.Revision, strings.Join(st.CanaryVehicles, ", "))
}

// order puts the canaries first, then the other vehicles in a stable order.
func (p *plan) order() {
	canary := map[string]int{}
	for i, c := range p.st().CanaryVehicles {
		canary[c] = i
	}
	p.active = make([]Vehicle, 0, len(p.in.Vehicles))
	for _, v := range p.in.Vehicles {
		if !p.excluded[v.Name] {
			p.active = append(p.active, v)
		}
	}
	sort.SliceStable(p.active, func(i, j int) bool {
		a, b := p.active[i], p.active[j]
		ia, ca := canary[a.Name]
		ib, cb := canary[b.Name]
		if ca != cb {
			return ca
		}
		if ca {
			return ia < ib
		}
		return p.before(a.Name, b.Name)
	})
}

// before orders vehicles in the profile's stable pseudo-random order.
func (p *plan) before(a, b string) bool {
	ha, hb := p.hash(a), p.hash(b)
	if ha != hb {
		return ha < hb
	}
	return a < b
}

func (p *plan) hash(vehicle string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.in.Profile + "/" + vehicle))
	return h.Sum64()
}

// pickCanaries chooses the canary cohort of a new rollout.
func (p *plan) pickCanaries() []string {
	r := p.in.Rollout
	if r == nil {
		return nil
	}
	var out []string
	switch {
	case len(r.Canary.Vehicles) > 0:
		for _, name := range r.Canary.Vehicles {
			if _, ok := p.byName[name]; ok && !p.excluded[name] {
				out = append(out, name)
			} else {
				p.event(true, "CanaryMissing", "canary vehicle %s is not selected by the profile or is excluded", name)
			}
		}
	case r.Canary.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(r.Canary.Selector)
		if err != nil {
			p.event(true, "CanarySelector", "canary selector: %v", err)
			return nil
		}
		for _, v := range p.in.Vehicles {
			lbls := v.Labels
			if lbls == nil {
				lbls = labels.Set(nil)
			}
			if !p.excluded[v.Name] && sel.Matches(lbls) {
				out = append(out, v.Name)
			}
		}
	case r.Canary.Count != nil:
		out = p.stratified(int(*r.Canary.Count))
	}
	if len(out) > MaxCanaryVehicles {
		// status.canaryVehicles holds at most MaxCanaryVehicles: a status
		// that could not be written would stop the rollout for good. The
		// canary is the first of them in the profile's stable
		// pseudo-random order; the rest follow with the steps.
		sort.Slice(out, func(i, j int) bool { return p.before(out[i], out[j]) })
		p.event(true, "CanaryTruncated", "the canary selects %d vehicles; status.canaryVehicles holds at most %d: the canary is %d of them, the rest follow with the steps",
			len(out), MaxCanaryVehicles, MaxCanaryVehicles)
		out = out[:MaxCanaryVehicles]
	}
	sort.Strings(out)
	return out
}

// MaxCanaryVehicles is the most vehicles status.canaryVehicles holds (its
// CRD MaxItems).
const MaxCanaryVehicles = 1000

// stratified picks n vehicles so that every hardware model of the fleet is
// represented (n is raised to the number of models), preferring reachable
// vehicles, round-robin across models in a stable pseudo-random order.
func (p *plan) stratified(n int) []string {
	groups := map[string][]Vehicle{}
	var models []string
	for _, v := range p.in.Vehicles {
		if p.excluded[v.Name] {
			continue
		}
		m := strings.Join(v.Hardware, "+")
		if _, ok := groups[m]; !ok {
			models = append(models, m)
		}
		groups[m] = append(groups[m], v)
	}
	sort.Strings(models)
	for _, m := range models {
		g := groups[m]
		sort.Slice(g, func(i, j int) bool {
			ri, rj := p.reachable(g[i]), p.reachable(g[j])
			if ri != rj {
				return ri
			}
			return p.before(g[i].Name, g[j].Name)
		})
	}
	if n < len(models) {
		n = len(models)
	}
	var out []string
	for round := 0; len(out) < n; round++ {
		took := false
		for _, m := range models {
			if round < len(groups[m]) && len(out) < n {
				out = append(out, groups[m][round].Name)
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// steady keeps every vehicle on the stable revision.
func (p *plan) steady() {
	st := p.st()
	for _, v := range p.in.Vehicles {
		p.out.Assign[v.Name] = st.StableRevision
	}
	st.CurrentStep = ptr(p.stepCount())
	if p.failed(st.StableRevision) > 0 {
		st.Phase = v1alpha1.PhaseDegraded
	} else {
		st.Phase = v1alpha1.PhaseHealthy
	}
	p.unreachableRequeue()
}

// rolledBack keeps every vehicle on stable after a rollback.
func (p *plan) rolledBack() {
	for _, v := range p.in.Vehicles {
		p.out.Assign[v.Name] = p.st().StableRevision
	}
	p.st().Phase = v1alpha1.PhaseRolledBack
}

// rollback sends every vehicle back to the stable revision.
func (p *plan) rollback(reason, message string) {
	st := p.st()
	failed := st.CurrentRevision
	st.FailedRevision = failed
	p.setOutcome(failed, v1alpha1.OutcomeRolledBack)
	p.rolledBack()
	target := st.StableRevision
	if target == "" {
		target = "no revision (the profile's items are removed)"
	}
	p.event(true, v1alpha1.ReasonRolledBack, "%s: %s; every vehicle returns to %s", reason, message, target)
	p.out.Status.Conditions = setCondition(p.out.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionTrue, Reason: reason,
		Message: text.Truncate(message, 1024), ObservedGeneration: p.in.Generation,
	}, p.in.Now)
}

// progress moves a rollout of CurrentRevision along its steps.
func (p *plan) progress() {
	st := p.st()
	rev := st.CurrentRevision
	steps := p.steps()
	p.out.Status.Conditions = removeCondition(p.out.Status.Conditions, v1alpha1.ConditionRolledBack)

	// Failure budget, counted over the vehicles of this rollout.
	if failed := p.failed(rev); failed > p.budget() {
		p.rollback("FailureBudgetExceeded", fmt.Sprintf("%d vehicle(s) on %s report RolledBack or Degraded (%s), failure budget %d",
			failed, rev, strings.Join(p.failedNames(rev), ", "), p.budget()))
		return
	}

	step := int32(0)
	if st.CurrentStep != nil {
		step = *st.CurrentStep
	}
	if int(step) > len(steps) {
		step = int32(len(steps))
	}
	paused := p.in.Rollout != nil && p.in.Rollout.Paused

	for {
		target := p.target(step)
		settled, waitUnreachable := p.assign(rev, target, paused)
		st.CurrentStep = ptr(step)
		if paused {
			st.Phase = v1alpha1.PhasePaused
			return
		}
		st.Phase = v1alpha1.PhaseProgressing
		if !settled {
			if waitUnreachable > 0 {
				p.requeue(waitUnreachable)
			}
			return
		}
		if int(step) == len(steps) {
			p.complete(rev)
			return
		}
		done, stop := p.runStep(step, steps[step])
		if stop || !done {
			return
		}
		step++
		st.StepStarted = p.now()
		st.Analysis = nil
		p.event(false, "StepAdvanced", "revision %s: step %d/%d %s", rev, step, len(steps), describeStep(steps, step))
	}
}

// runStep acts on a settled step: done when the rollout may move past it;
// stop when the rollout has been rolled back.
func (p *plan) runStep(i int32, s v1alpha1.RolloutStep) (done, stop bool) {
	st := p.st()
	promoted := p.in.Commands.PromoteStep != nil && *p.in.Commands.PromoteStep == i && p.in.Commands.PromoteRevision == st.CurrentRevision
	switch {
	case s.SetVehicles != nil:
		return true, false
	case s.Pause != nil:
		if promoted {
			p.event(false, "Promoted", "step %d (pause) promoted by the user", i)
			return true, false
		}
		if s.Pause.Duration == nil {
			st.Phase = v1alpha1.PhasePaused
			return false, false
		}
		started := p.in.Now
		if st.StepStarted != nil {
			started = st.StepStarted.Time
		}
		left := started.Add(s.Pause.Duration.Duration).Sub(p.in.Now)
		if left > 0 {
			p.requeue(left)
			return false, false
		}
		return true, false
	case s.Analysis != nil:
		return p.runAnalysis(i, s.Analysis, promoted)
	}
	return true, false
}

func (p *plan) runAnalysis(i int32, step *v1alpha1.AnalysisStep, promoted bool) (done, stop bool) {
	st := p.st()
	names := step.Names()
	specs := make([]*v1alpha1.AnalysisSpec, len(names))
	for k, name := range names {
		if specs[k] = p.analysisSpec(name); specs[k] == nil {
			// Admission forbids this; treat it as a pause rather than skipping a check.
			st.Phase = v1alpha1.PhasePaused
			p.event(true, "AnalysisMissing", "step %d names analysis %q which is not defined", i, name)
			return false, false
		}
	}
	if promoted {
		p.event(false, "Promoted", "step %d (analysis %s) promoted by the user", i, strings.Join(names, ", "))
		return true, false
	}
	results := make([]*v1alpha1.AnalysisResult, len(names))
	for k, name := range names {
		for j := range st.Analysis {
			if st.Analysis[j].Name == name && st.Analysis[j].Step == i {
				results[k] = &st.Analysis[j]
			}
		}
	}
	phase := func(k int) string {
		if results[k] == nil {
			return ""
		}
		return results[k].Phase
	}
	// A failure rolls back at once, whatever the others say.
	for k, name := range names {
		if phase(k) == v1alpha1.AnalysisFailed && !specs[k].DryRun {
			p.rollback(v1alpha1.ReasonAnalysisFailed, fmt.Sprintf("analysis %s at step %d failed: %s", name, i, results[k].Message))
			return false, true
		}
	}
	for k, name := range names {
		if phase(k) != v1alpha1.AnalysisInconclusive || specs[k].DryRun {
			continue
		}
		if specs[k].OnInconclusive == v1alpha1.InconclusiveAbort {
			p.rollback(v1alpha1.ReasonAnalysisInconclusive, fmt.Sprintf("analysis %s at step %d was inconclusive: %s", name, i, results[k].Message))
			return false, true
		}
		st.Phase = v1alpha1.PhasePaused
		return false, false
	}
	// Running or not started: ask for a measurement of each.
	var canary, baseline []string
	for _, v := range p.in.Vehicles {
		if p.excluded[v.Name] {
			continue
		}
		switch p.out.Assign[v.Name] {
		case st.CurrentRevision:
			canary = append(canary, v.Name)
		case st.StableRevision:
			if st.StableRevision != "" {
				baseline = append(baseline, v.Name)
			}
		}
	}
	sort.Strings(canary)
	sort.Strings(baseline)
	pending := false
	for k, name := range names {
		if v1alpha1.AnalysisTerminal(phase(k)) {
			continue // decided (a failed or inconclusive one is a dry run)
		}
		pending = true
		p.out.Measures = append(p.out.Measures, &Measure{Analysis: name, Step: i,
			Canary: canary, CanaryRevision: st.CurrentRevision, Baseline: baseline, BaselineRevision: st.StableRevision})
		interval := specs[k].GetInterval()
		next := interval
		if r := results[k]; r != nil && r.LastMeasured != nil {
			next = r.LastMeasured.Add(interval).Sub(p.in.Now)
		}
		p.requeue(next)
	}
	if pending {
		return false, false
	}
	// Every analysis decided and none acts: the step is done. A dry run's
	// failure is reported once, here.
	for k, name := range names {
		if phase(k) == v1alpha1.AnalysisFailed {
			p.event(true, "AnalysisFailedDryRun", "analysis %s failed (dry run, not acted on): %s", name, results[k].Message)
		}
	}
	return true, false
}

// complete makes the rollout's revision stable.
func (p *plan) complete(rev string) {
	st := p.st()
	prev := st.StableRevision
	if prev != "" && prev != rev {
		p.setOutcome(prev, v1alpha1.OutcomeSuperseded)
	}
	st.StableRevision = rev
	st.Phase = v1alpha1.PhaseHealthy
	st.CurrentStep = ptr(p.stepCount())
	p.setOutcome(rev, v1alpha1.OutcomeStable)
	p.event(false, "RolloutComplete", "revision %s is stable on %d vehicle(s)", rev, len(p.active))
}

// target is how many vehicles should run the revision at step i.
func (p *plan) target(i int32) int {
	steps := p.steps()
	n := len(p.active)
	if int(i) >= len(steps) {
		return n
	}
	t := 0
	for _, c := range p.st().CanaryVehicles {
		if _, ok := p.byName[c]; ok && !p.excluded[c] {
			t++
		}
	}
	for k := int32(0); k <= i; k++ {
		s := steps[k].SetVehicles
		if s == nil {
			continue
		}
		switch {
		case s.Count != nil:
			t = int(*s.Count)
		case s.Percent != nil:
			t = int(math.Ceil(float64(n) * float64(*s.Percent) / 100))
		}
	}
	if t > n {
		t = n
	}
	return t
}

// assign renders the first target vehicles with rev and the rest with stable,
// within maxUnavailable. It reports whether the targeted vehicles settled and,
// if it waits only for Unreachable ones, how long until it stops waiting.
func (p *plan) assign(rev string, target int, paused bool) (settled bool, waitUnreachable time.Duration) {
	st := p.st()
	stable := st.StableRevision
	for _, v := range p.in.Vehicles {
		if p.excluded[v.Name] {
			p.out.Assign[v.Name] = stable
		}
	}
	inflight := 0
	for _, v := range p.active {
		if v.Assigned == rev && !v.Mixed && !v.Verified && !v.Failed && p.reachable(v) {
			inflight++
		}
	}
	maxUnavail := p.maxUnavailable()
	settled = true
	count := 0
	for _, v := range p.active {
		want := stable
		switch {
		case count < target && v.Assigned == rev && !v.Mixed:
			want = rev
		case count < target && !paused && inflight < maxUnavail:
			want = rev
			inflight++
		case count < target:
			settled = false
		}
		if want == rev {
			count++
			switch {
			case v.Assigned == rev && !v.Mixed && (v.Verified || v.Failed):
			case !p.reachable(v) && !p.in.Now.Before(p.giveUpAt(v)):
			case !p.reachable(v):
				settled = false
				if w := p.giveUpAt(v).Sub(p.in.Now); waitUnreachable == 0 || w > waitUnreachable {
					waitUnreachable = w
				}
			default:
				settled = false
				waitUnreachable = 0
			}
		}
		p.out.Assign[v.Name] = want
	}
	if settled {
		waitUnreachable = 0
	}
	return settled, waitUnreachable
}

// AssignmentList is the status form of an assignment: per revision, its
// vehicles sorted, revisions sorted (nil when nothing is assigned).
func AssignmentList(byRev map[string][]string) []v1alpha1.RevisionAssignment {
	var out []v1alpha1.RevisionAssignment
	for rev, vs := range byRev {
		vs = slices.Clone(vs)
		slices.Sort(vs)
		out = append(out, v1alpha1.RevisionAssignment{Revision: rev, Vehicles: slices.Compact(vs)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.RevisionAssignment) int { return strings.Compare(a.Revision, b.Revision) })
	return out
}

// finish fills the counts and conditions shared by every outcome.
func (p *plan) finish() {
	st := p.st()
	p.pruneRevisions()
	c := v1alpha1.VehicleCounts{}
	perRev := map[string]int32{}
	byRev := map[string][]string{}
	for _, v := range p.in.Vehicles {
		want := p.out.Assign[v.Name]
		perRev[want]++
		if want != "" {
			byRev[want] = append(byRev[want], v.Name)
		}
		if p.excluded[v.Name] {
			continue
		}
		c.Total++
		if want == st.CurrentRevision && st.CurrentRevision != "" {
			c.Updated++
			if v.Assigned == want && !v.Mixed && v.Verified {
				c.Verified++
			}
		}
		if !p.reachable(v) {
			c.Unreachable++
		}
		if v.Failed {
			c.Failed++
		}
	}
	st.Vehicles = c
	st.RevisionVehicles = nil
	for rev, n := range perRev {
		if rev == "" {
			continue
		}
		st.RevisionVehicles = append(st.RevisionVehicles, v1alpha1.RevisionVehicles{Revision: rev, Vehicles: n})
	}
	sort.Slice(st.RevisionVehicles, func(i, j int) bool { return st.RevisionVehicles[i].Revision < st.RevisionVehicles[j].Revision })
	st.Assignments = AssignmentList(byRev)
	// Nothing else wakes the controller when a vehicle goes silent (its
	// missing heartbeats are no events): look again when one would turn
	// Unreachable.
	p.unreachableRequeue()
	p.conditions()
}

func (p *plan) conditions() {
	st := p.st()
	now := p.in.Now
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		st.Conditions = setCondition(st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: text.Truncate(msg, 1024), ObservedGeneration: p.in.Generation}, now)
	}
	step := describeProgress(p)
	switch st.Phase {
	case v1alpha1.PhaseHealthy:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, "RolloutComplete", fmt.Sprintf("revision %s on %d vehicle(s)", st.StableRevision, st.Vehicles.Total))
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, "RolloutComplete", "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, "RolloutComplete", "")
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, "RolloutComplete", "")
		st.Conditions = removeCondition(st.Conditions, v1alpha1.ConditionRolledBack)
	case v1alpha1.PhaseDegraded:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, "VehiclesFailed", fmt.Sprintf("%d vehicle(s) report RolledBack or Degraded", st.Vehicles.Failed))
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, "RolloutComplete", "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, "RolloutComplete", "")
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, "VehiclesFailed", fmt.Sprintf("%d vehicle(s) report RolledBack or Degraded", st.Vehicles.Failed))
	case v1alpha1.PhaseRolledBack:
		msg := fmt.Sprintf("revision %s was rolled back; it is not retried until the profile changes", st.FailedRevision)
		if c := findCondition(st.Conditions, v1alpha1.ConditionRolledBack); c != nil {
			msg = c.Message
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRolledBack, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonRolledBack, "")
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonRolledBack, "")
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonRolledBack, msg)
	default:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, "RolloutInProgress", step)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, "RolloutInProgress", step)
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, "RolloutInProgress", step)
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, "RolloutInProgress", "")
	}
	if st.Phase == v1alpha1.PhasePaused {
		set(v1alpha1.ConditionPaused, metav1.ConditionTrue, pausedReason(p), step)
	} else {
		set(v1alpha1.ConditionPaused, metav1.ConditionFalse, "NotPaused", "")
	}
}

func pausedReason(p *plan) string {
	if p.in.Rollout != nil && p.in.Rollout.Paused {
		return "PausedByUser"
	}
	for _, a := range p.st().Analysis {
		if a.Phase == v1alpha1.AnalysisInconclusive {
			return v1alpha1.ReasonAnalysisInconclusive
		}
	}
	return "PauseStep"
}

func describeProgress(p *plan) string {
	st := p.st()
	steps := p.steps()
	step := int32(0)
	if st.CurrentStep != nil {
		step = *st.CurrentStep
	}
	return fmt.Sprintf("revision %s step %d/%d %s: %d/%d vehicles updated, %d verified",
		st.CurrentRevision, step, len(steps), describeStep(steps, step), st.Vehicles.Updated, st.Vehicles.Total, st.Vehicles.Verified)
}

func describeStep(steps []v1alpha1.RolloutStep, i int32) string {
	if int(i) >= len(steps) {
		return "(all vehicles)"
	}
	s := steps[i]
	switch {
	case s.SetVehicles != nil && s.SetVehicles.Count != nil:
		return fmt.Sprintf("(setVehicles %d)", *s.SetVehicles.Count)
	case s.SetVehicles != nil && s.SetVehicles.Percent != nil:
		return fmt.Sprintf("(setVehicles %d%%)", *s.SetVehicles.Percent)
	case s.Pause != nil && s.Pause.Duration != nil:
		return fmt.Sprintf("(pause %s)", s.Pause.Duration.Duration)
	case s.Pause != nil:
		return "(pause until promoted)"
	case s.Analysis != nil:
		return fmt.Sprintf("(analysis %s)", strings.Join(s.Analysis.Names(), ", "))
	}
	return ""
}

// --- helpers ---------------------------------------------------------------

func (p *plan) steps() []v1alpha1.RolloutStep {
	if p.in.Rollout == nil {
		return nil
	}
	return p.in.Rollout.Steps
}

func (p *plan) stepCount() int32 { return int32(len(p.steps())) }

func (p *plan) now() *metav1.Time { t := metav1.NewTime(p.in.Now); return &t }

func (p *plan) analysisSpec(name string) *v1alpha1.AnalysisSpec {
	if p.in.Rollout == nil {
		return nil
	}
	for i := range p.in.Rollout.Analyses {
		if p.in.Rollout.Analyses[i].Name == name {
			return &p.in.Rollout.Analyses[i]
		}
	}
	return nil
}

func (p *plan) unreachableAfter() time.Duration { return p.in.Rollout.GetUnreachableAfter() }

func (p *plan) unreachableTimeout() time.Duration { return p.in.Rollout.GetUnreachableTimeout() }

// Reachable reports whether a vehicle's agents reported recently enough.
func Reachable(v Vehicle, now time.Time, after time.Duration) bool {
	return !v.LastSeen.IsZero() && now.Sub(v.LastSeen) < after
}

func (p *plan) reachable(v Vehicle) bool { return Reachable(v, p.in.Now, p.unreachableAfter()) }

// unreachableRequeue wakes the controller when a vehicle turns Unreachable.
func (p *plan) unreachableRequeue() {
	if p.in.LivenessTimer {
		return
	}
	after := p.unreachableAfter()
	for _, v := range p.in.Vehicles {
		if p.reachable(v) {
			p.requeue(v.LastSeen.Add(after).Sub(p.in.Now) + time.Second)
		}
	}
}

// giveUpAt is when the rollout stops waiting for an Unreachable vehicle:
// unreachableTimeout after it became Unreachable or after the rollout
// started, whichever is later. Each rollout waits for a vehicle once, not at
// every step.
func (p *plan) giveUpAt(v Vehicle) time.Time {
	since := v.LastSeen.Add(p.unreachableAfter())
	for _, r := range p.st().Revisions {
		if r.Name == p.st().CurrentRevision && r.Created.After(since) {
			since = r.Created.Time
		}
	}
	return since.Add(p.unreachableTimeout())
}

func (p *plan) scaled(v *intstr.IntOrString, def int, roundUp bool) int {
	if v == nil {
		return def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, len(p.active), roundUp)
	if err != nil {
		return def
	}
	return n
}

func (p *plan) maxUnavailable() int {
	var v *intstr.IntOrString
	if p.in.Rollout != nil {
		v = p.in.Rollout.MaxUnavailable
	}
	if v == nil && p.in.Rollout == nil {
		return len(p.active) + 1
	}
	n := p.scaled(v, 1, false)
	if n < 1 {
		n = 1
	}
	return n
}

func (p *plan) budget() int {
	if p.in.Rollout == nil {
		return len(p.active)
	}
	return p.scaled(p.in.Rollout.FailureBudget, 0, false)
}

func (p *plan) failed(rev string) int { return len(p.failedNames(rev)) }

func (p *plan) failedNames(rev string) []string {
	var out []string
	for _, v := range p.active {
		if v.Failed && v.Assigned == rev {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

func (p *plan) limit() int {
	if p.in.Rollout != nil && p.in.Rollout.RevisionHistoryLimit != nil {
		return int(*p.in.Rollout.RevisionHistoryLimit)
	}
	return 10
}

func (p *plan) addRevision(name, outcome string) {
	st := p.st()
	for i := range st.Revisions {
		if st.Revisions[i].Name == name {
			st.Revisions[i].Outcome = outcome
			st.Revisions[i].Generation = p.in.Generation
			r := st.Revisions[i]
			st.Revisions = append(append(st.Revisions[:i:i], st.Revisions[i+1:]...), r)
			return
		}
	}
	st.Revisions = append(st.Revisions, v1alpha1.Revision{Name: name, Generation: p.in.Generation, Created: metav1.NewTime(p.in.Now), Outcome: outcome})
}

func (p *plan) setOutcome(name, outcome string) {
	for i := range p.st().Revisions {
		if p.st().Revisions[i].Name == name {
			p.st().Revisions[i].Outcome = outcome
		}
	}
}

func (p *plan) supersede(name string) {
	if name == "" || name == p.st().StableRevision || name == p.st().FailedRevision {
		return
	}
	p.setOutcome(name, v1alpha1.OutcomeSuperseded)
}

// pruneRevisions keeps at most revisionHistoryLimit revisions, never dropping
// the current or stable one.
func (p *plan) pruneRevisions() {
	st := p.st()
	limit := p.limit()
	for len(st.Revisions) > limit {
		dropped := false
		for i, r := range st.Revisions {
			if r.Name != st.CurrentRevision && r.Name != st.StableRevision {
				st.Revisions = append(st.Revisions[:i:i], st.Revisions[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}

func ptr[T any](v T) *T { return &v }
