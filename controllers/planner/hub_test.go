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
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// TestFollowHub: a cluster's copy of a hub profile renders what the hub
// named, the hub's stable revision for the rest (nothing before there is
// one), keeps the revisions in use and plans no rollout of its own.
func TestFollowHub(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	vs := []planner.Vehicle{
		{Name: "av-1", Assigned: "p-r1", Verified: true, LastSeen: now},
		{Name: "av-2", Assigned: "p-r1", Verified: true, LastSeen: now},
		{Name: "av-3", Assigned: "p-r2", Verified: true, LastSeen: now},
	}
	rollout := &v1alpha1.RolloutSpec{Steps: []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}}}
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Generation: 3, Rollout: rollout, Vehicles: vs,
		Hub: &v1alpha1.HubAssignment{Stable: "p-r1", Assignments: []v1alpha1.RevisionAssignment{{Revision: "p-r2", Vehicles: []string{"av-2", "av-3"}}}}}
	out := planner.Plan(in)
	want := map[string]string{"av-1": "p-r1", "av-2": "p-r2", "av-3": "p-r2"}
	if fmt.Sprint(out.Assign) != fmt.Sprint(want) {
		t.Errorf("assign %v, want %v", out.Assign, want)
	}
	st := out.Status
	if st.Phase != v1alpha1.PhaseProgressing || st.CurrentStep != nil || st.CanaryVehicles != nil || len(out.Measures) != 0 {
		t.Errorf("phase %s step %v canaries %v measures %d: want Progressing (av-2 not on p-r2 yet) and no rollout of its own",
			st.Phase, st.CurrentStep, st.CanaryVehicles, len(out.Measures))
	}
	if st.StableRevision != "p-r1" || st.CurrentRevision != "p-r2" || len(st.Revisions) != 2 {
		t.Errorf("stable %q current %q revisions %v", st.StableRevision, st.CurrentRevision, st.Revisions)
	}
	if st.Vehicles.Updated != 2 || st.Vehicles.Verified != 1 {
		t.Errorf("counts %+v, want 2 updated, 1 verified", st.Vehicles)
	}

	// av-2 catches up: Healthy, still without steps.
	in.Status = st
	in.Vehicles[1].Assigned = "p-r2"
	if out = planner.Plan(in); out.Status.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("every vehicle on its revision: phase %s", out.Status.Phase)
	}

	// Before the first rollout finished there is no stable revision: the
	// vehicles the hub did not name get nothing.
	in.Hub = &v1alpha1.HubAssignment{Assignments: []v1alpha1.RevisionAssignment{{Revision: "p-r2", Vehicles: []string{"av-3"}}}}
	out = planner.Plan(in)
	if out.Assign["av-1"] != "" || out.Assign["av-3"] != "p-r2" {
		t.Errorf("no stable: assign %v", out.Assign)
	}
	for _, r := range out.Status.Revisions {
		if r.Name == "" {
			t.Errorf("an empty revision in the history: %v", out.Status.Revisions)
		}
	}
}

// TestPlanWritesEveryStatusField: besides the rollout, the plan writes
// observedGeneration; in a cluster, the vehicle report a copy following a
// hub sends it (none for any other profile); at a hub, each cluster's
// summary. Stall marks the generation it could not plan.
func TestPlanWritesEveryStatusField(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	vs := []planner.Vehicle{
		{Name: "av-1", Assigned: "p-r1", Verified: true, LastSeen: now, Counters: []string{"tcpi_total_rto"}},
		{Name: "av-2", Assigned: "p-r1", Verified: true, LastSeen: now.Add(-time.Hour)},
	}
	stale := v1alpha1.NetTuningProfileStatus{ObservedGeneration: 2, VehicleReport: "stale"}

	// A cluster's profile of its own: no report.
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r1", Generation: 3, Status: stale, Vehicles: vs}
	st := planner.Plan(in).Status
	if st.ObservedGeneration != 3 || st.VehicleReport != "" || st.Clusters != nil {
		t.Errorf("a cluster's profile: observedGeneration %d, vehicleReport %q, clusters %v; want 3, none, none", st.ObservedGeneration, st.VehicleReport, st.Clusters)
	}

	// A copy following a hub reports its vehicles, judged with the hub's
	// unreachableAfter.
	in.Hub = &v1alpha1.HubAssignment{Stable: "p-r1"}
	in.Rollout = in.Hub.Rollout()
	want := v1alpha1.EncodeVehicleReports(planner.HubReports(vs, now, in.Rollout))
	if st = planner.Plan(in).Status; st.VehicleReport != want || st.ObservedGeneration != 3 {
		t.Errorf("a copy following a hub: vehicleReport %q, observedGeneration %d; want %q, 3", st.VehicleReport, st.ObservedGeneration, want)
	}
	rs, err := v1alpha1.ParseVehicleReports(st.VehicleReport)
	if err != nil || len(rs) != 2 || len(rs[0].Counters) != 1 || rs[1].UnreachableSince.IsZero() {
		t.Errorf("reports %+v (%v): want av-1 with its counter, av-2 Unreachable", rs, err)
	}

	// A hub summarizes its clusters: a vehicle counts verified on the
	// revision the plan assigns it. The vehicle report is no hub's field.
	hub := planner.Input{Now: now, Profile: "p", Revision: "p-r1", Generation: 5, Status: stale,
		Vehicles: []planner.Vehicle{
			{Name: "av-1", Group: "c1", Assigned: "p-r1", Verified: true, LastSeen: now},
			{Name: "av-2", Group: "c1", Assigned: "p-r0", Verified: true, LastSeen: now},
			{Name: "av-3", Group: "c2", Assigned: "p-r1", Mixed: true, LastSeen: now},
		},
		Clusters: []planner.Cluster{
			{Name: "c1", Reachable: true, Reports: []v1alpha1.VehicleReport{
				{Vehicle: "av-1", Revision: "p-r1", Verified: true}, {Vehicle: "av-2", Revision: "p-r0", Verified: true}}},
			{Name: "c2", Message: "not Available yet", Reports: []v1alpha1.VehicleReport{{Vehicle: "av-3", Mixed: true}}},
			{Name: "c3", Message: "waiting for the cluster's first vehicle report"},
		}}
	out := planner.Plan(hub)
	st = out.Status
	wantClusters := []v1alpha1.ClusterStatus{
		{Name: "c1", Reachable: true, Vehicles: 2, Verified: 1, RolloutStatus: v1alpha1.ClusterProgressing},
		{Name: "c2", Message: "not Available yet", Vehicles: 1, RolloutStatus: v1alpha1.ClusterProgressing},
		{Name: "c3", Message: "waiting for the cluster's first vehicle report", RolloutStatus: v1alpha1.ClusterToApply},
	}
	if fmt.Sprint(st.Clusters) != fmt.Sprint(wantClusters) || out.Assign["av-2"] != "p-r1" {
		t.Errorf("clusters %+v (av-2 assigned %q), want %+v", st.Clusters, out.Assign["av-2"], wantClusters)
	}
	if st.ObservedGeneration != 5 || st.VehicleReport != "stale" {
		t.Errorf("a hub: observedGeneration %d, vehicleReport %q; want 5 and the report left as it was", st.ObservedGeneration, st.VehicleReport)
	}
	hub.Clusters = []planner.Cluster{}
	if st = planner.Plan(hub).Status; st.Clusters == nil || len(st.Clusters) != 0 {
		t.Errorf("a hub selecting no cluster: clusters %#v, want empty", st.Clusters)
	}

	st = stale
	planner.Stall(&st, 6, "ReconcileError", "boom", now)
	if st.ObservedGeneration != 6 || st.VehicleReport != "stale" {
		t.Errorf("stalled: observedGeneration %d, vehicleReport %q; want 6 and the rest as it was", st.ObservedGeneration, st.VehicleReport)
	}
}

// TestHubReports: what a cluster reports to its hub, with Unreachable
// judged by the profile's unreachableAfter and stable while the vehicle is
// silent.
func TestHubReports(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	silent := now.Add(-10 * time.Minute)
	vs := []planner.Vehicle{
		{Name: "av-1", Assigned: "p-r1", Verified: true, LastSeen: now.Add(-time.Second), Hardware: []string{"xavier"}},
		{Name: "av-2", Assigned: "p-r1", Verified: true, LastSeen: silent},
		{Name: "av-3", Assigned: "p-r1", Mixed: true, LastSeen: now},
		{Name: "av-4", Assigned: "p-r2", Deferred: true, GateClosed: true, LastSeen: now},
	}
	rs := planner.HubReports(vs, now, nil)
	if !rs[3].Deferred || !rs[3].GateClosed || rs[3].Verified {
		t.Errorf("a deferred vehicle behind a closed gate: %+v", rs[3])
	}
	if !rs[0].UnreachableSince.IsZero() || !rs[1].UnreachableSince.Equal(silent) {
		t.Errorf("unreachable since: %v %v", rs[0].UnreachableSince, rs[1].UnreachableSince)
	}
	if rs[2].Revision != "" || rs[2].Verified || !rs[2].Mixed {
		t.Errorf("a mixed vehicle: %+v", rs[2])
	}
	// A silent vehicle's line does not change while it stays silent (no
	// status write, no feedback, no hub reconcile per heartbeat missed).
	silentOnly := vs[1:2]
	a := v1alpha1.EncodeVehicleReports(planner.HubReports(silentOnly, now.Add(time.Minute), nil))
	if b := v1alpha1.EncodeVehicleReports(planner.HubReports(silentOnly, now.Add(time.Hour), nil)); a != b {
		t.Errorf("a silent vehicle's report changes with time alone: %q, then %q", a, b)
	}
}

// TestCanarySpreadsAcrossClusters: at a hub, a canary of n vehicles of one
// hardware model spans n clusters.
func TestCanarySpreadsAcrossClusters(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	var vs []planner.Vehicle
	for c := 0; c < 3; c++ {
		for i := 0; i < 4; i++ {
			vs = append(vs, planner.Vehicle{Name: fmt.Sprintf("c%d-av-%d", c, i), Group: fmt.Sprintf("c%d", c), Hardware: []string{"xavier"},
				Assigned: "p-r1", Verified: true, LastSeen: now})
		}
	}
	two := int32(2)
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &two}},
		Vehicles: vs, Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
	out := planner.Plan(in)
	groups := map[string]bool{}
	for _, c := range out.Status.CanaryVehicles {
		groups[c[:2]] = true
	}
	if len(out.Status.CanaryVehicles) != 2 || len(groups) != 2 {
		t.Errorf("canaries %v: want 2 in 2 clusters", out.Status.CanaryVehicles)
	}
}

// TestStepsMoveWholeClusters: at a hub, after the canaries, the vehicles
// move cluster by cluster, so that a step touches a cluster's work once.
func TestStepsMoveWholeClusters(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	var vs []planner.Vehicle
	for c := 0; c < 4; c++ {
		for i := 0; i < 5; i++ {
			// Vehicle names say nothing of their cluster (a cluster's
			// vehicles are not next to each other in the name order).
			vs = append(vs, planner.Vehicle{Name: fmt.Sprintf("av-%02d", i*4+c), Group: fmt.Sprintf("c%d", c), Hardware: []string{"xavier"},
				Assigned: "p-r1", Verified: true, LastSeen: now})
		}
	}
	group := map[string]string{}
	for _, v := range vs {
		group[v.Name] = v.Group
	}
	half, all := int32(50), intstrPercent(100)
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Vehicles: vs,
		Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Vehicles: []string{"av-00"}}, MaxUnavailable: &all,
			Steps: []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &half}}, {Pause: &v1alpha1.PauseStep{}}}},
		Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
	out := planner.Plan(in)
	// The canary verifies; the step moves half the fleet.
	for i := range in.Vehicles {
		if out.Assign[in.Vehicles[i].Name] == "p-r2" {
			in.Vehicles[i].Assigned = "p-r2"
		}
	}
	in.Status = out.Status
	out = planner.Plan(in)
	moved := map[string]int{}
	for v, rev := range out.Assign {
		if rev == "p-r2" && v != "av-00" {
			moved[group[v]]++
		}
	}
	partial := 0
	for _, n := range moved {
		if n != 5 && n != 4 {
			partial++
		}
	}
	t.Logf("moved by cluster: %v", moved)
	if len(moved) == 0 || partial > 1 {
		t.Errorf("moved by cluster %v: want whole clusters, at most one split", moved)
	}
}

func intstrPercent(p int) intstr.IntOrString { return intstr.FromString(fmt.Sprintf("%d%%", p)) }
