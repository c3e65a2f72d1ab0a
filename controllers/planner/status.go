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

package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/text"
)

// finish fills the counts and conditions shared by every outcome.
func (p *plan) finish() {
	st := p.st()
	p.pruneRevisions()
	c := v1alpha1.VehicleCounts{}
	perRev := map[string]int32{}
	// A hub keeps no list of vehicles in its status (hub is true): its
	// decision lives in each cluster's ManifestWork (spec.hubAssignment,
	// the vehicles that differ from the stable revision), and the status
	// stays of the same size whatever the clusters' vehicle counts
	// (status.assignments of 100,000 vehicles was over etcd's request
	// limit, docs/bench-hub.md).
	hub := p.in.Clusters != nil
	byRev := map[string][]string{}
	for _, v := range p.in.Vehicles {
		want := p.out.Assign[v.Name]
		perRev[want]++
		if want != "" && !hub {
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
		if v.Deferred && !v.Verified && v.Assigned == want {
			c.Deferred++
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
	st.Assignments = nil
	if !hub {
		st.Assignments = AssignmentList(byRev)
	}
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
	if p.in.Hub != nil {
		step = hubProgress(st)
	}
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
		set(v1alpha1.ConditionPaused, metav1.ConditionTrue, pausedReason(p), pausedMessage(p, step))
	} else {
		set(v1alpha1.ConditionPaused, metav1.ConditionFalse, "NotPaused", "")
	}
	// A pause begins or ends: an event (and so a line in Loki), besides
	// the condition. A copy following a hub announces nothing: the hub does.
	// The end of a pause is announced only when nothing else says it: a
	// promotion, a rollback and a new revision have events of their own.
	was := p.in.Status.Phase == v1alpha1.PhasePaused
	switch is := st.Phase == v1alpha1.PhasePaused; {
	case p.in.Hub != nil:
	case is && !was:
		p.event(false, "Paused", "revision %s paused (%s): %s", st.CurrentRevision, pausedReason(p), step)
	case was && !is && st.Phase != v1alpha1.PhaseRolledBack && st.CurrentRevision == p.in.Status.CurrentRevision &&
		!slices.ContainsFunc(p.out.Events, func(e Event) bool { return e.Reason == "Promoted" }):
		p.event(false, "Resumed", "revision %s resumed: %s", st.CurrentRevision, step)
	}
}

// pausedMessage is the Paused condition's message: the progress, led by
// the analyses whose backend is unavailable (name and what it answered).
func pausedMessage(p *plan, step string) string {
	if pausedReason(p) != v1alpha1.ReasonAnalysisUnavailable {
		return step
	}
	var parts []string
	for _, a := range p.st().Analysis {
		if a.Phase == v1alpha1.AnalysisUnavailable {
			parts = append(parts, fmt.Sprintf("analysis %s at step %d unavailable: %s", a.Name, a.Step, a.Message))
		}
	}
	return strings.Join(append(parts, step), "; ")
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
	for _, a := range p.st().Analysis {
		if a.Phase == v1alpha1.AnalysisUnavailable {
			return v1alpha1.ReasonAnalysisUnavailable
		}
	}
	return "PauseStep"
}
