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
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/text"
)

// follow carries out a hub's decision in a cluster (in.Hub): every vehicle
// gets the revision the hub named for it, or the hub's stable revision
// (none before the profile's first rollout finished);
// there are no steps, no analyses and no rollback here (the hub decides
// them for the whole fleet). The status says how far the cluster is.
func (p *plan) follow() {
	st := p.st()
	h := p.in.Hub
	stable, revisionFor := h.Stable, h.RevisionFor()
	inUse := map[string]bool{p.in.Revision: true}
	pending, failed := 0, 0
	for _, v := range p.in.Vehicles {
		rev := revisionFor(v.Name)
		p.out.Assign[v.Name] = rev
		if rev != "" {
			inUse[rev] = true
		}
		if v.Failed {
			failed++
		} else if rev != "" && (v.Assigned != rev || v.Mixed || !v.Verified) {
			pending++
		}
	}
	st.CurrentRevision, st.StableRevision, st.FailedRevision = p.in.Revision, stable, ""
	st.CurrentStep, st.StepStarted, st.CanaryVehicles, st.Analysis = nil, nil, nil, nil
	// The revisions in use, so that the controller keeps their
	// ControllerRevisions (the hub places the ones it names).
	var revs []v1alpha1.Revision
	for _, r := range st.Revisions {
		if inUse[r.Name] {
			revs = append(revs, r)
			delete(inUse, r.Name)
		}
	}
	var added []string
	for name := range inUse {
		added = append(added, name)
	}
	sort.Strings(added)
	for _, name := range added {
		revs = append(revs, v1alpha1.Revision{Name: name, Generation: p.in.Generation, Created: metav1.NewTime(p.in.Now), Outcome: v1alpha1.OutcomeProgressing})
	}
	st.Revisions = revs
	switch {
	case failed > 0:
		st.Phase = v1alpha1.PhaseDegraded
	case pending > 0:
		st.Phase = v1alpha1.PhaseProgressing
	default:
		st.Phase = v1alpha1.PhaseHealthy
	}
}

// Cluster is a managed cluster a hub's profile selects (Input.Clusters).
type Cluster struct {
	Name string
	// Reachable: the ManagedCluster is Available.
	Reachable bool
	// Message says what the hub saw of the cluster and its work.
	Message string
	// Reports are its vehicles as its controller last reported them (the
	// cluster's status.vehicleReport; nil before the first report).
	Reports []v1alpha1.VehicleReport
	// DecisionGroup is the index of the Placement's decision group the
	// cluster is in (0 for every cluster of a clusterSelector): the canary
	// cohort comes from the lowest group, and the steps move the vehicles
	// group by group.
	DecisionGroup int32
}

// PlacementFindings are what a hub found in the Placement a profile
// refers to (Input.Placement).
type PlacementFindings struct {
	// Warnings say what of the Placement may cost the rollout a cluster
	// (a missing toleration), sorted.
	Warnings []string
}

// placementConditions sets the PlacementWarnings condition from f; without
// a Placement (f nil) the condition is removed.
func placementConditions(st *v1alpha1.NetTuningProfileStatus, gen int64, f *PlacementFindings, now time.Time) {
	if f == nil {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionPlacementWarnings)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionPlacementWarnings, Status: metav1.ConditionFalse, Reason: "PlacementKeepsSilentClusters",
		Message: "the Placement keeps a silent cluster in its decisions", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if len(f.Warnings) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "MissingToleration", boundedList("", f.Warnings)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// ConditionRaised reports whether condition t turned True from before to
// after, with its message: worth one Warning event.
func ConditionRaised(before, after []metav1.Condition, t string) (msg string, raised bool) {
	c := meta.FindStatusCondition(after, t)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", false
	}
	old := meta.FindStatusCondition(before, t)
	return c.Message, old == nil || old.Status != metav1.ConditionTrue || old.Message != c.Message
}

// report writes what the status says besides the rollout itself:
// observedGeneration (the profile's generation planned); at a hub,
// status.clusters (every cluster selected: reachable, its vehicles, how
// many of them verified the revision the plan assigns them); in a cluster,
// status.vehicleReport (the vehicles as a copy following a hub reports them
// to it, HubReports; empty for any other profile).
func (p *plan) report() {
	st := p.st()
	st.ObservedGeneration = p.in.Generation
	if p.in.Clusters != nil {
		st.Clusters = make([]v1alpha1.ClusterStatus, len(p.in.Clusters))
		for i, c := range p.in.Clusters {
			st.Clusters[i] = p.clusterStatus(c)
		}
		placementConditions(st, p.in.Generation, p.in.Placement, p.in.Now)
		return
	}
	prev := st.VehicleReport
	st.VehicleReport = ""
	if p.in.Hub != nil {
		var wake time.Duration
		interval := p.in.Hub.GetReportInterval()
		if !p.in.Hub.Heartbeat() {
			interval = 0
		}
		st.VehicleReport, wake = hubReport(prev, HubReports(p.in.Vehicles, p.in.Now, p.in.Rollout), p.in.Generation, p.in.Now, interval)
		if wake > 0 {
			p.requeue(wake)
		}
	}
}

// hubReport is a copy's status.vehicleReport: the vehicles' lines under a
// header saying when it was written and the copy's generation it answers.
// The previous report is kept as it is while its lines and generation are
// the same and it is younger than interval (no status write, nothing for
// OCM to carry); then it is rewritten for the time alone, a heartbeat that
// tells the hub the controller is alive. wake is when it is due.
// interval 0 (liveness AddOnLease: the hub reads the add-on's health
// instead) keeps it for as long as its lines and generation stay, with no
// wake (0).
func hubReport(prev string, lines []v1alpha1.VehicleReport, generation int64, now time.Time, interval time.Duration) (report string, wake time.Duration) {
	if h, _, err := v1alpha1.ParseVehicleReports(prev); err == nil && !h.Written.IsZero() &&
		v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: h.Written, Generation: generation}, lines) == prev {
		if interval == 0 {
			return prev, 0
		}
		if due := h.Written.Add(interval); !now.Before(h.Written) && now.Before(due) {
			return prev, due.Sub(now)
		}
	}
	return v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: now.Truncate(time.Second), Generation: generation}, lines), interval
}

// clusterStatus summarizes one cluster for a hub profile's status.
func (p *plan) clusterStatus(c Cluster) v1alpha1.ClusterStatus {
	// The message quotes what OCM and the cluster's API server said, of any
	// length: cut to what status.clusters[].message holds, or the status
	// patch is refused and the rollout stops.
	cs := v1alpha1.ClusterStatus{Name: c.Name, Reachable: c.Reachable, Message: text.Truncate(c.Message, 1024), Vehicles: int32(len(c.Reports)),
		DecisionGroup: c.DecisionGroup, RolloutStatus: p.rolloutStatus(c)}
	for _, rep := range c.Reports {
		if want, ok := p.out.Assign[rep.Vehicle]; ok && want != "" && rep.Revision == want && rep.Verified && !rep.Mixed {
			cs.Verified++
		}
	}
	return cs
}

// rolloutStatus is a cluster's state in the rollout in Open Cluster
// Management's words: Failed when a vehicle of it failed; ToApply before
// it reported, or while a rollout is under way and none of its vehicles is
// assigned the rollout's revision yet; Succeeded when every vehicle
// verified what the plan assigns it; TimeOut when one that has not is
// Unreachable past unreachableTimeout; Progressing otherwise.
func (p *plan) rolloutStatus(c Cluster) v1alpha1.ClusterRolloutStatus {
	if c.Reports == nil {
		return v1alpha1.ClusterToApply
	}
	st := p.st()
	rolling := st.CurrentRevision != "" && st.CurrentRevision != st.StableRevision && st.CurrentRevision != st.FailedRevision
	reached, pending, timedOut, failed := false, false, false, false
	for _, rep := range c.Reports {
		i, ok := p.byName[rep.Vehicle]
		if !ok || p.in.Vehicles[i].Group != c.Name {
			// Kept in another cluster (a duplicate name).
			continue
		}
		want := p.out.Assign[rep.Vehicle]
		if rolling && want == st.CurrentRevision {
			reached = true
		}
		if rep.Failed {
			failed = true
			continue
		}
		if want != "" && (rep.Revision != want || !rep.Verified || rep.Mixed) {
			pending = true
			if v := p.in.Vehicles[i]; !p.reachable(v) && !p.in.Now.Before(p.giveUpAt(v)) {
				timedOut = true
			}
		}
	}
	switch {
	case failed:
		return v1alpha1.ClusterFailed
	case rolling && !reached:
		return v1alpha1.ClusterToApply
	case !pending:
		return v1alpha1.ClusterSucceeded
	case timedOut:
		return v1alpha1.ClusterTimeOut
	default:
		return v1alpha1.ClusterProgressing
	}
}

// HubReports are the vehicles as a cluster reports them to its hub
// (status.vehicleReport): what every vehicle is rendered with, whether it
// verified or failed it, and since when it is Unreachable, judged with the
// profile's unreachableAfter.
func HubReports(vehicles []Vehicle, now time.Time, rollout *v1alpha1.RolloutSpec) []v1alpha1.VehicleReport {
	after := rollout.GetUnreachableAfter()
	out := make([]v1alpha1.VehicleReport, 0, len(vehicles))
	for _, v := range vehicles {
		r := v1alpha1.VehicleReport{Vehicle: v.Name, Revision: v.Assigned, Verified: v.Verified && !v.Mixed, Failed: v.Failed, Mixed: v.Mixed,
			Deferred: v.Deferred && !v.Verified, GateClosed: v.GateClosed, Hardware: v.Hardware, Counters: v.Counters}
		if v.Mixed {
			r.Revision = ""
		}
		if !Reachable(v, now, after) {
			r.UnreachableSince = v.LastSeen
			if v.LastSeen.IsZero() {
				r.UnreachableSince = time.Unix(1, 0)
			}
		}
		out = append(out, r)
	}
	return out
}

func hubProgress(st *v1alpha1.NetTuningProfileStatus) string {
	return fmt.Sprintf("following the hub: %d/%d vehicles assigned %s, %d verified", st.Vehicles.Updated, st.Vehicles.Total, st.CurrentRevision, st.Vehicles.Verified)
}

// spreadGroups reorders vehicles (already in preference order) round-robin
// across their groups, each group keeping its order and the groups ordered
// by their first vehicle: the first n of the result then span min(n,
// groups) clusters.
func spreadGroups(vs []Vehicle) []Vehicle {
	var groups []string
	byGroup := map[string][]Vehicle{}
	for _, v := range vs {
		if _, ok := byGroup[v.Group]; !ok {
			groups = append(groups, v.Group)
		}
		byGroup[v.Group] = append(byGroup[v.Group], v)
	}
	if len(groups) < 2 {
		return vs
	}
	out := make([]Vehicle, 0, len(vs))
	for round := 0; len(out) < len(vs); round++ {
		for _, g := range groups {
			if round < len(byGroup[g]) {
				out = append(out, byGroup[g][round])
			}
		}
	}
	return out
}
