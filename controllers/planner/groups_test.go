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
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// groupedFleet is clusters c0..c<n-1> of per vehicles each (vehicle names
// say nothing of their cluster), every vehicle on p-r1 and verified, and
// the clusters with the decision groups given.
func groupedFleet(now time.Time, per int, groups []int32) ([]planner.Vehicle, []planner.Cluster) {
	var vs []planner.Vehicle
	cs := make([]planner.Cluster, len(groups))
	for c, g := range groups {
		cs[c] = planner.Cluster{Name: fmt.Sprintf("c%d", c), Reachable: true, DecisionGroup: g}
		for i := 0; i < per; i++ {
			name := fmt.Sprintf("av-%02d", i*len(groups)+c)
			vs = append(vs, planner.Vehicle{Name: name, Group: cs[c].Name, Hardware: []string{"xavier"}, Assigned: "p-r1", Verified: true, LastSeen: now})
			cs[c].Reports = append(cs[c].Reports, v1alpha1.VehicleReport{Vehicle: name, Revision: "p-r1", Verified: true, Hardware: []string{"xavier"}})
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name < vs[j].Name })
	return vs, cs
}

func clustersOf(vs []planner.Vehicle, names []string) []string {
	group := map[string]string{}
	for _, v := range vs {
		group[v.Name] = v.Group
	}
	set := map[string]bool{}
	for _, n := range names {
		set[group[n]] = true
	}
	var out []string
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// TestCanaryFromFirstDecisionGroup: with a Placement's decision groups, a
// canary chosen by count comes from the lowest group (which, by the hash
// order alone, would spread it over two clusters of any group), and from
// the next group only for what the first lacks.
func TestCanaryFromFirstDecisionGroup(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	two, three := int32(2), int32(3)
	for _, first := range []int{0, 1, 2} {
		groups := []int32{1, 1, 1}
		groups[first] = 0
		vs, cs := groupedFleet(now, 2, groups)
		in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &two}},
			Vehicles: vs, Clusters: cs, Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
		out := planner.Plan(in)
		want := fmt.Sprintf("c%d", first)
		if got := clustersOf(vs, out.Status.CanaryVehicles); len(out.Status.CanaryVehicles) != 2 || fmt.Sprint(got) != "["+want+"]" {
			t.Errorf("group 0 = %s: canaries %v in %v, want 2 in %s", want, out.Status.CanaryVehicles, got, want)
		}
		// Three canaries: group 0 has two vehicles, the third comes from
		// group 1.
		in.Rollout.Canary.Count = &three
		out = planner.Plan(in)
		got := clustersOf(vs, out.Status.CanaryVehicles)
		if len(out.Status.CanaryVehicles) != 3 || len(got) != 2 || !strings.Contains(fmt.Sprint(got), want) {
			t.Errorf("group 0 = %s, 3 canaries: %v in %v, want both of %s and one more", want, out.Status.CanaryVehicles, got, want)
		}
	}
	// Without groups (clusterSelector: every cluster in group 0) the
	// cohort spreads across clusters as before.
	vs, cs := groupedFleet(now, 2, []int32{0, 0, 0})
	out := planner.Plan(planner.Input{Now: now, Profile: "p", Revision: "p-r2", Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &two}},
		Vehicles: vs, Clusters: cs, Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}})
	if got := clustersOf(vs, out.Status.CanaryVehicles); len(got) != 2 {
		t.Errorf("no decision groups: canaries %v in %v, want two clusters", out.Status.CanaryVehicles, got)
	}
}

// TestStepsMoveGroupByGroup: the steps move every vehicle of decision
// group 0 before any of group 1, and group 1 before group 2, whatever the
// clusters' order by hash; each cluster's rollout status says where it is.
func TestStepsMoveGroupByGroup(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	// c3 is group 0, c1 group 1, c0 and c2 group 2.
	vs, cs := groupedFleet(now, 5, []int32{2, 1, 2, 0})
	one, five, ten := int32(1), int32(5), int32(10)
	all := intstrPercent(100)
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Vehicles: vs, Clusters: cs,
		Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &one}, MaxUnavailable: &all,
			Steps: []v1alpha1.RolloutStep{
				{SetVehicles: &v1alpha1.SetVehiclesStep{Count: &five}},
				{SetVehicles: &v1alpha1.SetVehiclesStep{Count: &ten}},
			}},
		Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
	rollout := func(out planner.Output) {
		// Every vehicle takes and verifies what it is assigned.
		for i := range in.Vehicles {
			in.Vehicles[i].Assigned = out.Assign[in.Vehicles[i].Name]
		}
		for c := range in.Clusters {
			for r := range in.Clusters[c].Reports {
				in.Clusters[c].Reports[r].Revision = out.Assign[in.Clusters[c].Reports[r].Vehicle]
			}
		}
		in.Status = out.Status
		in.Now = in.Now.Add(time.Second)
	}
	out := planner.Plan(in)
	if got := clustersOf(vs, out.Status.CanaryVehicles); fmt.Sprint(got) != "[c3]" {
		t.Fatalf("canary %v in %v, want c3 (group 0)", out.Status.CanaryVehicles, got)
	}
	status := func(out planner.Output) string {
		var b []string
		for _, c := range out.Status.Clusters {
			b = append(b, fmt.Sprintf("%s/%d:%s", c.Name, c.DecisionGroup, c.RolloutStatus))
		}
		return strings.Join(b, " ")
	}
	// The canary assigned, not yet verified: c3 Progressing, the rest ToApply.
	in.Clusters[3].Reports[0].Verified = false
	if got, want := status(planner.Plan(in)), "c0/2:ToApply c1/1:ToApply c2/2:ToApply c3/0:Progressing"; got != want {
		t.Errorf("canary assigned: clusters %s, want %s", got, want)
	}
	in.Clusters[3].Reports[0].Verified = true
	moved := func(out planner.Output) []string {
		var names []string
		for v, rev := range out.Assign {
			if rev == "p-r2" {
				names = append(names, v)
			}
		}
		return clustersOf(vs, names)
	}
	seen := map[int32][]string{*out.Status.CurrentStep: moved(out)}
	for i := 0; i < 20 && out.Status.StableRevision != "p-r2"; i++ {
		rollout(out)
		out = planner.Plan(in)
		if out.Status.CurrentStep != nil {
			seen[*out.Status.CurrentStep] = moved(out)
		}
		if out.Status.CurrentStep != nil && *out.Status.CurrentStep == 1 {
			// Group 0 done, group 1 moving (assigned, not yet verified).
			if got, want := status(out), "c0/2:ToApply c1/1:Progressing c2/2:ToApply c3/0:Succeeded"; got != want {
				t.Errorf("at step 1: clusters %s, want %s", got, want)
			}
		}
	}
	if fmt.Sprint(seen[0]) != "[c3]" || fmt.Sprint(seen[1]) != "[c1 c3]" {
		t.Errorf("moved by step: %v; want step 0 all of c3 (group 0) alone, step 1 c3 and c1 (group 1)", seen)
	}
	if out.Status.StableRevision != "p-r2" {
		t.Fatalf("rollout did not finish: %+v", out.Status)
	}
	rollout(out)
	if got, want := status(planner.Plan(in)), "c0/2:Succeeded c1/1:Succeeded c2/2:Succeeded c3/0:Succeeded"; got != want {
		t.Errorf("after the rollout: clusters %s, want %s", got, want)
	}
}

// TestClusterRolloutStatus: a failed vehicle makes its cluster Failed; a
// vehicle Unreachable past unreachableTimeout that has not verified its
// revision, TimeOut; a cluster that has not reported, ToApply.
func TestClusterRolloutStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	vs, cs := groupedFleet(now, 1, []int32{0, 0, 0})
	all := intstrPercent(100)
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r2", Vehicles: vs, Clusters: cs,
		Rollout: &v1alpha1.RolloutSpec{MaxUnavailable: &all, FailureBudget: &all},
		Status:  v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-r1", StableRevision: "p-r1"}}
	// av-00 (c0) failed; av-01 (c1) silent for an hour; c2 has not reported.
	in.Vehicles[0].Failed, in.Clusters[0].Reports[0].Failed = true, true
	in.Vehicles[1].LastSeen = now.Add(-time.Hour)
	in.Clusters[2].Reports = nil
	in.Vehicles = in.Vehicles[:2]
	out := planner.Plan(in)
	got := map[string]v1alpha1.ClusterRolloutStatus{}
	for _, c := range out.Status.Clusters {
		got[c.Name] = c.RolloutStatus
	}
	want := map[string]v1alpha1.ClusterRolloutStatus{"c0": v1alpha1.ClusterFailed, "c1": v1alpha1.ClusterProgressing, "c2": v1alpha1.ClusterToApply}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rollout started: %v, want %v", got, want)
	}
	// Past unreachableTimeout (counted from the rollout's start).
	in.Status = out.Status
	in.Now = now.Add(in.Rollout.GetUnreachableTimeout() + time.Minute)
	in.Vehicles[0].LastSeen = in.Now
	out = planner.Plan(in)
	for _, c := range out.Status.Clusters {
		got[c.Name] = c.RolloutStatus
	}
	want["c1"] = v1alpha1.ClusterTimeOut
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("past unreachableTimeout: %v, want %v", got, want)
	}
}

// TestPlacementWarnings: the hub's findings on the Placement become the
// PlacementWarnings condition; a profile without a Placement has none.
func TestPlacementWarnings(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	in := planner.Input{Now: now, Profile: "p", Revision: "p-r1", Clusters: []planner.Cluster{},
		Placement: &planner.PlacementFindings{Warnings: []string{"no toleration of cluster.open-cluster-management.io/unreachable"}}}
	st := planner.Plan(in).Status
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPlacementWarnings)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "MissingToleration" || !strings.Contains(c.Message, "/unreachable") {
		t.Fatalf("PlacementWarnings %+v, want True naming the toleration", c)
	}
	if msg, raised := planner.ConditionRaised(nil, st.Conditions, v1alpha1.ConditionPlacementWarnings); !raised || msg != c.Message {
		t.Errorf("raised %v %q", raised, msg)
	}
	if _, raised := planner.ConditionRaised(st.Conditions, st.Conditions, v1alpha1.ConditionPlacementWarnings); raised {
		t.Error("raised again with no change")
	}
	in.Status = st
	in.Placement = &planner.PlacementFindings{}
	if c := meta.FindStatusCondition(planner.Plan(in).Status.Conditions, v1alpha1.ConditionPlacementWarnings); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("tolerations added: %+v, want False", c)
	}
	in.Placement = nil
	if c := meta.FindStatusCondition(planner.Plan(in).Status.Conditions, v1alpha1.ConditionPlacementWarnings); c != nil {
		t.Errorf("clusterSelector: %+v, want no PlacementWarnings", c)
	}
}

// TestClusterMessageFitsTheStatus: a cluster's message quoting a long
// answer of its API server is cut to what status.clusters[].message holds
// (1,024 bytes), or the status patch would be refused.
func TestClusterMessageFitsTheStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	long := "the profile is not applied in the cluster (AppliedManifestFailed: " + strings.Repeat("Get https://127.0.0.1:39669/apis: connection refused; ", 40) + ")"
	st := planner.Plan(planner.Input{Now: now, Profile: "p", Revision: "p-r1", Clusters: []planner.Cluster{{Name: "c0", Message: long}}}).Status
	if n := len(st.Clusters[0].Message); n > 1024 || !strings.HasPrefix(st.Clusters[0].Message, "the profile is not applied") {
		t.Errorf("message of %d bytes: %q", n, st.Clusters[0].Message)
	}
}
