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
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	want := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: now, Generation: 3}, planner.HubReports(vs, now, in.Rollout))
	if st = planner.Plan(in).Status; st.VehicleReport != want || st.ObservedGeneration != 3 {
		t.Errorf("a copy following a hub: vehicleReport %q, observedGeneration %d; want %q, 3", st.VehicleReport, st.ObservedGeneration, want)
	}
	_, rs, err := v1alpha1.ParseVehicleReports(st.VehicleReport)
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
	a := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{}, planner.HubReports(silentOnly, now.Add(time.Minute), nil))
	if b := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{}, planner.HubReports(silentOnly, now.Add(time.Hour), nil)); a != b {
		t.Errorf("a silent vehicle's report changes with time alone: %q, then %q", a, b)
	}
}

// TestHubReportHeartbeat: a copy's report says when it was written and
// which generation of the copy it answers; while its lines and generation
// stay the same it is left as it is (no status write) until the report
// interval has passed, then rewritten for the time alone, and the planner
// asks to be woken when that is due; a changed line or a new generation
// rewrites it at once.
func TestHubReportHeartbeat(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	vs := []planner.Vehicle{{Name: "av-1", Assigned: "p-r1", Verified: true, LastSeen: t0}}
	hub := &v1alpha1.HubAssignment{Stable: "p-r1", UnreachableAfter: &metav1.Duration{Duration: 2 * time.Minute},
		ReportInterval: &metav1.Duration{Duration: 20 * time.Second}}
	plan := func(now time.Time, gen int64, prev string, vs []planner.Vehicle) planner.Output {
		for i := range vs {
			vs[i].LastSeen = now
		}
		return planner.Plan(planner.Input{Now: now, Profile: "p", Revision: "p-r1", Generation: gen, LivenessTimer: true,
			Status: v1alpha1.NetTuningProfileStatus{VehicleReport: prev}, Vehicles: vs, Hub: hub, Rollout: hub.Rollout()})
	}
	header := func(report string) v1alpha1.ReportHeader {
		t.Helper()
		h, _, err := v1alpha1.ParseVehicleReports(report)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	out := plan(t0.Add(300*time.Millisecond), 4, "", vs)
	first := out.Status.VehicleReport
	if h := header(first); !h.Written.Equal(t0) || h.Generation != 4 {
		t.Fatalf("first report's header %+v, want written %s (to the second), generation 4:\n%s", h, t0, first)
	}
	if out.RequeueAfter != 20*time.Second {
		t.Errorf("after a report: requeue after %s, want the report interval 20s", out.RequeueAfter)
	}
	// 12 s later, nothing changed: the same string, woken when it is due.
	out = plan(t0.Add(12*time.Second), 4, first, vs)
	if out.Status.VehicleReport != first || out.RequeueAfter != 8*time.Second {
		t.Errorf("12 s later, unchanged: report %q requeue %s; want the same report, requeue 8s", out.Status.VehicleReport, out.RequeueAfter)
	}
	// Due: rewritten for the time alone.
	out = plan(t0.Add(20*time.Second), 4, first, vs)
	beat := out.Status.VehicleReport
	if h := header(beat); !h.Written.Equal(t0.Add(20*time.Second)) || h.Generation != 4 {
		t.Errorf("a heartbeat's header %+v, want written 20 s later, generation 4", h)
	}
	if strings.SplitN(beat, "\n", 2)[1] != strings.SplitN(first, "\n", 2)[1] {
		t.Errorf("a heartbeat changed the vehicles' lines:\n%s\nthen\n%s", first, beat)
	}
	// A new generation of the copy (a new share) is answered at once.
	out = plan(t0.Add(21*time.Second), 5, beat, vs)
	if h := header(out.Status.VehicleReport); !h.Written.Equal(t0.Add(21*time.Second)) || h.Generation != 5 {
		t.Errorf("a new generation: header %+v, want written at 21 s, generation 5", h)
	}
	// A changed line too.
	changed := []planner.Vehicle{{Name: "av-1", Assigned: "p-r1", Failed: true}}
	out = plan(t0.Add(22*time.Second), 5, out.Status.VehicleReport, changed)
	if h, rs, _ := v1alpha1.ParseVehicleReports(out.Status.VehicleReport); !h.Written.Equal(t0.Add(22*time.Second)) || len(rs) != 1 || !rs[0].Failed {
		t.Errorf("a changed line: header %+v, lines %+v; want written at 22 s, av-1 failed", h, rs)
	}
	// Without reportInterval (an older hub): a quarter of unreachableAfter.
	if d := (&v1alpha1.HubAssignment{UnreachableAfter: &metav1.Duration{Duration: 2 * time.Minute}}).GetReportInterval(); d != 30*time.Second {
		t.Errorf("default report interval %s, want 30s", d)
	}
	if d := (&v1alpha1.HubAssignment{ReportInterval: &metav1.Duration{}}).GetReportInterval(); d != v1alpha1.MinReportInterval {
		t.Errorf("a zero report interval: %s, want the minimum %s", d, v1alpha1.MinReportInterval)
	}
}

// TestHubReportWithoutHeartbeat: with liveness AddOnLease the report is
// rewritten only when a line or the generation changes, never for the time.
func TestHubReportWithoutHeartbeat(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	hub := &v1alpha1.HubAssignment{Stable: "p-r1", UnreachableAfter: &metav1.Duration{Duration: 2 * time.Minute},
		ReportInterval: &metav1.Duration{Duration: 20 * time.Second}, Liveness: v1alpha1.LivenessAddOnLease}
	plan := func(now time.Time, gen int64, prev string, failed bool) planner.Output {
		vs := []planner.Vehicle{{Name: "av-1", Assigned: "p-r1", Verified: !failed, Failed: failed, LastSeen: now}}
		return planner.Plan(planner.Input{Now: now, Profile: "p", Revision: "p-r1", Generation: gen, LivenessTimer: true,
			Status: v1alpha1.NetTuningProfileStatus{VehicleReport: prev}, Vehicles: vs, Hub: hub, Rollout: hub.Rollout()})
	}
	first := plan(t0, 4, "", false).Status.VehicleReport
	if h, _, err := v1alpha1.ParseVehicleReports(first); err != nil || !h.Written.Equal(t0) || h.Generation != 4 {
		t.Fatalf("first report %q: header %+v (%v), want written %s, generation 4", first, h, err, t0)
	}
	for _, later := range []time.Duration{20 * time.Second, 10 * time.Minute, 24 * time.Hour} {
		out := plan(t0.Add(later), 4, first, false)
		if out.Status.VehicleReport != first {
			t.Errorf("%s later, unchanged, without heartbeat: report rewritten\n%s\nthen\n%s", later, first, out.Status.VehicleReport)
		}
		if out.RequeueAfter == 20*time.Second {
			t.Errorf("%s later: requeued after the report interval %s, want no heartbeat wake", later, out.RequeueAfter)
		}
	}
	if h, _, _ := v1alpha1.ParseVehicleReports(plan(t0.Add(time.Hour), 5, first, false).Status.VehicleReport); !h.Written.Equal(t0.Add(time.Hour)) || h.Generation != 5 {
		t.Errorf("a new generation: header %+v, want written an hour later, generation 5", h)
	}
	if h, rs, _ := v1alpha1.ParseVehicleReports(plan(t0.Add(2*time.Hour), 4, first, true).Status.VehicleReport); !h.Written.Equal(t0.Add(2*time.Hour)) || len(rs) != 1 || !rs[0].Failed {
		t.Errorf("a changed line: header %+v, lines %+v; want written two hours later, av-1 failed", h, rs)
	}
	if !(&v1alpha1.HubAssignment{}).Heartbeat() || !(*v1alpha1.HubAssignment)(nil).Heartbeat() || hub.Heartbeat() {
		t.Errorf("Heartbeat: want true by default and for nil, false for AddOnLease")
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

// TestClusterMessageBounded: a cluster's message (it quotes what OCM says)
// is cut to status.clusters[].message's bound, so the status stays valid.
func TestClusterMessageBounded(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	long := "the profile is not applied in the cluster (" + strings.Repeat("connection refused; ", 100) + ")"
	out := planner.Plan(planner.Input{Now: now, Profile: "p", Revision: "p-r1", Clusters: []planner.Cluster{{Name: "c1", Message: long}}})
	if cs := out.Status.Clusters; len(cs) != 1 || len(cs[0].Message) > 1024 || !strings.HasPrefix(cs[0].Message, "the profile is not applied") {
		t.Errorf("status.clusters %+v: want c1's message cut to 1,024 bytes", cs)
	}
}

// TestHubStatusNamesNoVehicle: a hub's status does not grow with its
// clusters' vehicles. The same rollout step over 40 clusters of 10 and of
// 100 vehicles: the decision (Assign) covers every vehicle, the status
// lists none but the canary (status.assignments is left empty, the
// vehicles that differ from the stable revision go in each cluster's
// work), and the two statuses differ in size only by the digits of their
// counts. A cluster's own profile keeps status.assignments (the node
// renderer reads it).
func TestHubStatusNamesNoVehicle(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	const clusters = 40
	plan := func(perCluster int, hub bool) (planner.Output, int) {
		var vs []planner.Vehicle
		var cs []planner.Cluster
		for c := 0; c < clusters; c++ {
			name := fmt.Sprintf("cluster-%04d", c)
			cl := planner.Cluster{Name: name, Reachable: true, Reports: []v1alpha1.VehicleReport{}}
			for i := 0; i < perCluster; i++ {
				v := fmt.Sprintf("c%04d-av-%03d", c, i)
				vs = append(vs, planner.Vehicle{Name: v, Group: name, Hardware: []string{"xavier"}, Assigned: "p-r1", Verified: true, LastSeen: now})
				cl.Reports = append(cl.Reports, v1alpha1.VehicleReport{Vehicle: v, Revision: "p-r1", Verified: true})
			}
			cs = append(cs, cl)
		}
		ten, half, all := int32(10), int32(50), intstrPercent(100)
		in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Vehicles: vs, Generation: 2,
			Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &ten}, MaxUnavailable: &all,
				Steps: []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &half}}, {Pause: &v1alpha1.PauseStep{}}}},
			Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
		if hub {
			in.Clusters = cs
		}
		// The canary verifies, then the step moves half the fleet.
		out := planner.Plan(in)
		for i := range in.Vehicles {
			in.Vehicles[i].Assigned = out.Assign[in.Vehicles[i].Name]
		}
		for c := range cs {
			for i := range cs[c].Reports {
				cs[c].Reports[i].Revision = out.Assign[cs[c].Reports[i].Vehicle]
			}
		}
		in.Status = out.Status
		out = planner.Plan(in)
		raw, err := json.Marshal(out.Status)
		if err != nil {
			t.Fatal(err)
		}
		return out, len(raw)
	}
	small, smallBytes := plan(10, true)
	large, largeBytes := plan(100, true)
	t.Logf("hub status of %d clusters: %d bytes at 10 vehicles a cluster, %d at 100", clusters, smallBytes, largeBytes)
	moved := 0
	for _, rev := range large.Assign {
		if rev == "p-r2" {
			moved++
		}
	}
	if len(large.Assign) != clusters*100 || moved < clusters*100/2 {
		t.Fatalf("the decision: %d vehicles assigned, %d to p-r2; want %d, at least half", len(large.Assign), moved, clusters*100)
	}
	for _, out := range []planner.Output{small, large} {
		if out.Status.Assignments != nil || len(out.Status.CanaryVehicles) != 10 || len(out.Status.Clusters) != clusters {
			t.Errorf("hub status: %d assignments, %d canaries, %d clusters; want none, 10, %d",
				len(out.Status.Assignments), len(out.Status.CanaryVehicles), len(out.Status.Clusters), clusters)
		}
	}
	// Per cluster "vehicles":100 and "verified":100 against 10: two digits;
	// the vehicle counts and the step's message a few more.
	if d := largeBytes - smallBytes; d > 3*clusters+64 {
		t.Errorf("hub status grows with the vehicles: %d bytes at 10 a cluster, %d at 100 (+%d)", smallBytes, largeBytes, d)
	}
	if own, _ := plan(10, false); len(own.Status.Assignments) == 0 {
		t.Errorf("a cluster's own profile: no status.assignments; the node renderer needs them")
	}
}
