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
// commands, the node renderer's findings and the time) into an Input, calls
// Plan, and carries out the Output (controllers/internal/round is that
// sequence, for a cluster's controller and a hub's alike). The planner is
// the only writer of the profile's status, every field of it:
// Output.Status is the whole status, observedGeneration, a cluster's
// vehicleReport and a hub's clusters included, and the controller writes it
// as it is, in one patch. Stall marks a reconcile that could not plan: the
// Stalled and Ready conditions and observedGeneration, on the status last
// written.
// Files by concern: canary.go (the canary cohort and the rollout order),
// steps.go (the steps), assignment.go (who gets which revision, budgets,
// reachability), status.go (counts and conditions), findings.go (the
// renderer's findings), revisions.go and history.go (status.revisions and
// status.analysis), hub.go (following a hub, what a cluster reports to it,
// a hub's clusters, observedGeneration).
//
// Rollout model:
//
//   - A rollout starts when the profile's content hash (its revision) differs
//     from the one in status. It picks the canary cohort once (status
//     canaryVehicles) and sets the step to 0.
//   - The vehicles are ordered: canaries first, then the rest in a stable
//     pseudo-random order (hash of profile and vehicle name; at a hub,
//     cluster by cluster, and with a Placement's decision groups, group by
//     group: Cluster.DecisionGroup). The target of a
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
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

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
	// VerifiedAt is when the last of its nodes verified the revision in
	// force (zero when not Verified or not reported): an analysis counts
	// the vehicle's samples only from then on.
	VerifiedAt time.Time
	// Failed: a node reports RolledBack or Degraded for its rendered state.
	Failed bool
	// Deferred: a node holds its rendered state back (its apply gate is
	// closed, no maintenance window is open), since DeferredSince, for
	// DeferredReason (the agent's words). Neither failed nor unreachable:
	// a step waits for it up to the apply policy's deferredTimeout.
	Deferred       bool
	DeferredSince  time.Time
	DeferredReason string
	// GateClosed: a node's apply gate is closed now; canary selection
	// passes such a vehicle over when it can.
	GateClosed bool
	// LastSeen is the oldest latest heartbeat among the vehicle's nodes (zero
	// when a node never reported).
	LastSeen time.Time
	// Nodes is how many nodes the vehicle has, VerifiedNodes how many of
	// them verified their rendered state (shown, not planned on).
	Nodes, VerifiedNodes int
	// Group is the vehicle's managed cluster at a hub ("" in a cluster):
	// a canary cohort chosen by count spreads across groups.
	Group string
	// Counters are the tcp_info counters every node's kernel provides (nil
	// when a node has not reported its kernel), reported to a hub.
	Counters []string
}

// Commands are the manual commands of the kubectl plugin, read from the
// profile's annotations. Each names what it acts on, so acting on it twice
// does nothing more.
type Commands struct {
	// PromoteStep skips the pause (or inconclusive analysis) of this step
	// of PromoteRevision's rollout.
	PromoteStep     *int32
	PromoteRevision string
	// PromoteRollout is when the rollout the promote was written for began
	// (status.revisions[].rolloutStarted, to the second); zero for a promote
	// that does not say, which promotes only the revision's first rollout.
	// A promote left from an earlier rollout of the same revision never
	// promotes a later one.
	PromoteRollout time.Time
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
	// Results are the analysis results measured since Status was planned
	// (one per Measure taken, each with its measurement's verdict by
	// analysis.Accumulate), recorded in status.analysis before planning.
	Results []v1alpha1.AnalysisResult
	// Render is what the node renderer found for the profile, written into
	// the Conflict and RenderWarnings conditions; nil leaves them as they
	// are.
	Render *RenderFindings
	// Analysis is what the controller found about the analyses' power on
	// the fleet, written into the AnalysisWarnings condition; nil leaves it
	// as it is.
	Analysis *AnalysisFindings
	// Hub is the decision of a hub for this cluster's vehicles (the
	// profile's spec.hubAssignment): followed instead of a rollout.
	Hub *v1alpha1.HubAssignment
	// Clusters are the managed clusters a hub's profile selects, as the
	// hub observed them: set (non-nil, even with no cluster selected) for
	// a hub's plan, which summarizes them in status.clusters; nil in a
	// cluster.
	Clusters []Cluster
	// Placement is what a hub found in the profile's Placement, written
	// into the PlacementWarnings condition; nil for a hub profile without
	// one (the condition is removed). Read only with Clusters.
	Placement *PlacementFindings
}

// Event is something worth a Kubernetes event.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Measure asks the controller to take the measurement of a running analysis.
type Measure struct {
	Analysis string
	// Spec is the analysis' spec (in.Rollout.Analyses).
	Spec             *v1alpha1.AnalysisSpec
	Step             int32
	Canary           []string
	CanaryRevision   string
	Baseline         []string
	BaselineRevision string
	// VerifiedAt says, for the vehicles of both cohorts, when each verified
	// its cohort's revision: the zero time for one that has not (it is left
	// out of the measurement), absent for one whose time is not known (a
	// hub's report, an older agent: it is counted as before).
	VerifiedAt map[string]time.Time
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
	for _, res := range in.Results {
		recordResult(p.st(), res)
	}
	p.run()
	if in.Render != nil {
		renderConditions(p.st(), in.Generation, *in.Render, in.Now)
	}
	if in.Analysis != nil {
		analysisConditions(p.st(), in.Generation, *in.Analysis, in.Now)
	}
	p.report()
	return p.out
}

type plan struct {
	in  Input
	out Output

	excluded map[string]bool
	active   []Vehicle      // not excluded, in rollout order
	byName   map[string]int // vehicle -> its index in in.Vehicles
	// decisionGroup is each hub cluster's decision group (in.Clusters);
	// grouped when one of them is not 0.
	decisionGroup map[string]int32
	grouped       bool
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
	p.decisionGroup = make(map[string]int32, len(p.in.Clusters))
	for _, c := range p.in.Clusters {
		p.decisionGroup[c.Name] = c.DecisionGroup
		p.grouped = p.grouped || c.DecisionGroup != 0
	}

	if p.in.Hub != nil {
		p.follow()
		p.finish()
		return
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

func (p *plan) now() *metav1.Time { t := metav1.NewTime(p.in.Now); return &t }

func ptr[T any](v T) *T { return &v }
