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
	stable := h.Stable
	named := map[string]string{}
	for _, a := range h.Assignments {
		for _, v := range a.Vehicles {
			named[v] = a.Revision
		}
	}
	inUse := map[string]bool{p.in.Revision: true}
	pending, failed := 0, 0
	for _, v := range p.in.Vehicles {
		rev := stable
		if r, ok := named[v.Name]; ok {
			rev = r
		}
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
			st.Clusters[i] = clusterStatus(c, p.out.Assign)
		}
		return
	}
	prev := st.VehicleReport
	st.VehicleReport = ""
	if p.in.Hub != nil {
		var wake time.Duration
		st.VehicleReport, wake = hubReport(prev, HubReports(p.in.Vehicles, p.in.Now, p.in.Rollout), p.in.Generation, p.in.Now, p.in.Hub.GetReportInterval())
		p.requeue(wake)
	}
}

// hubReport is a copy's status.vehicleReport: the vehicles' lines under a
// header saying when it was written and the copy's generation it answers.
// The previous report is kept as it is while its lines and generation are
// the same and it is younger than interval (no status write, nothing for
// OCM to carry); then it is rewritten for the time alone, a heartbeat that
// tells the hub the controller is alive. wake is when it is due.
func hubReport(prev string, lines []v1alpha1.VehicleReport, generation int64, now time.Time, interval time.Duration) (report string, wake time.Duration) {
	if h, _, err := v1alpha1.ParseVehicleReports(prev); err == nil && !h.Written.IsZero() && !now.Before(h.Written) {
		due := h.Written.Add(interval)
		if now.Before(due) && v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: h.Written, Generation: generation}, lines) == prev {
			return prev, due.Sub(now)
		}
	}
	return v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: now.Truncate(time.Second), Generation: generation}, lines), interval
}

// clusterStatus summarizes one cluster for a hub profile's status.
func clusterStatus(c Cluster, assign map[string]string) v1alpha1.ClusterStatus {
	// The message quotes what OCM says (an apply error can be long): cut to
	// the field's bound, or the whole status would be refused.
	cs := v1alpha1.ClusterStatus{Name: c.Name, Reachable: c.Reachable, Message: text.Truncate(c.Message, 1024), Vehicles: int32(len(c.Reports))}
	for _, rep := range c.Reports {
		if want, ok := assign[rep.Vehicle]; ok && want != "" && rep.Revision == want && rep.Verified && !rep.Mixed {
			cs.Verified++
		}
	}
	return cs
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
