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

package hub

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// TestFreshness: at a fixed clock, an Available cluster whose report is
// older than unreachableAfter has a stopped controller: its vehicles were
// last seen when the report was written, the planner counts them
// Unreachable (never Failed), the cluster is not reachable and its message
// and event name it; a fresh report's vehicles are last seen when it was
// written, so the planner wakes when it would turn stale; the next report
// of a returning controller moves them on, with an event. A report that
// does not yet answer the copy's generation is said so.
func TestFreshness(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	after := 2 * time.Minute
	available := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "depot-b"}, Status: clusterv1.ManagedClusterStatus{Conditions: []metav1.Condition{{
		Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "x", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
	lines := []v1alpha1.VehicleReport{{Vehicle: "b1", Revision: "lan-r1", Verified: true}, {Vehicle: "b2", Revision: "lan-r2"}}
	observe := func(written time.Time, answers, copyGen int64) Cluster {
		return Observe(available, reportWork(v1alpha1.ReportHeader{Written: written, Generation: answers}, copyGen, lines...), "lan")
	}

	// Written 30 s ago, answering the copy's generation: fresh.
	written := now.Add(-30 * time.Second)
	fresh := Judge([]Cluster{observe(written, 4, 4)}, now, after)
	if c := fresh[0]; !c.Reachable || c.Stale || c.Message != "" || !c.Header.Written.Equal(written) || c.Header.Generation != 4 || c.CopyGeneration != 4 {
		t.Fatalf("a fresh report: %+v", c)
	}
	vs, _, _ := Vehicles(fresh, now)
	for _, v := range vs {
		if !v.LastSeen.Equal(written) {
			t.Errorf("%s of a fresh report: last seen %s, want when the report was written (%s)", v.Name, v.LastSeen, written)
		}
	}
	in := planner.Input{Now: now, Profile: "lan", Revision: "lan-r2", Rollout: &v1alpha1.RolloutSpec{UnreachableAfter: &metav1.Duration{Duration: after}},
		Vehicles: vs, Clusters: []planner.Cluster{}, Status: v1alpha1.NetTuningProfileStatus{CurrentRevision: "lan-r1", StableRevision: "lan-r1"}}
	out := planner.Plan(in)
	if out.Status.Vehicles.Unreachable != 0 {
		t.Errorf("a fresh report: %d unreachable", out.Status.Vehicles.Unreachable)
	}
	if want := written.Add(after).Sub(now) + time.Second; out.RequeueAfter == 0 || out.RequeueAfter > want {
		t.Errorf("a fresh report: requeue after %s, want at most %s (when it turns stale)", out.RequeueAfter, want)
	}
	if ev := FreshnessEvents(nil, fresh, now, after); len(ev) != 0 {
		t.Errorf("a fresh report: events %+v", ev)
	}

	// Its controller is behind: the copy is at generation 5.
	behind := Judge([]Cluster{observe(written, 4, 5)}, now, after)
	if c := behind[0]; !c.Reachable || !strings.Contains(c.Message, "answers generation 4") || !strings.Contains(c.Message, "at 5") {
		t.Errorf("a report behind the copy: %+v", c)
	}

	// Written 3m10s ago: stale.
	written = now.Add(-3*time.Minute - 10*time.Second)
	stale := Judge([]Cluster{observe(written, 4, 5)}, now, after)
	c := stale[0]
	if c.Reachable || !c.Stale || !c.Since.Equal(written) {
		t.Fatalf("a stale report: %+v", c)
	}
	for _, want := range []string{"cluster depot-b", "has not reported since 2026-11-28T07:56:50Z", "unreachableAfter 2m0s", "answers generation 4", "at 5"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("a stale report's message %q does not say %q", c.Message, want)
		}
	}
	vs, _, _ = Vehicles(stale, now)
	for _, v := range vs {
		if !v.LastSeen.Equal(written) {
			t.Errorf("%s of a stale report: last seen %s, want %s", v.Name, v.LastSeen, written)
		}
	}
	in.Vehicles = vs
	in.Clusters = []planner.Cluster{{Name: c.Name, Reachable: c.Reachable, Message: c.Message, Reports: c.Reports}}
	out = planner.Plan(in)
	if out.Status.Vehicles.Unreachable != 2 || out.Status.Vehicles.Failed != 0 || out.Status.Phase == v1alpha1.PhaseRolledBack {
		t.Errorf("a stale report: %+v phase %s; want both vehicles Unreachable, none failed", out.Status.Vehicles, out.Status.Phase)
	}
	if cs := out.Status.Clusters; len(cs) != 1 || cs[0].Reachable || cs[0].Message != c.Message {
		t.Errorf("status.clusters %+v, want depot-b unreachable with the message", cs)
	}
	ev := FreshnessEvents([]v1alpha1.ClusterStatus{{Name: "depot-b", Reachable: true}}, stale, now, after)
	if len(ev) != 1 || !ev[0].Warning || ev[0].Reason != "ClusterControllerSilent" ||
		!strings.Contains(ev[0].Message, "cluster depot-b last reported 3m10s ago (at 2026-11-28T07:56:50Z), longer than unreachableAfter 2m0s") {
		t.Errorf("events as it turns stale: %+v", ev)
	}
	// Still stale a minute later: the same message (no status write), no
	// second event.
	later := Judge([]Cluster{observe(written, 4, 5)}, now.Add(time.Minute), after)
	if later[0].Message != c.Message {
		t.Errorf("the message changes while stale: %q, then %q", c.Message, later[0].Message)
	}
	if ev := FreshnessEvents(out.Status.Clusters, later, now.Add(time.Minute), after); len(ev) != 0 {
		t.Errorf("still stale: events %+v", ev)
	}

	// The controller returns: its next report moves them on.
	back := Judge([]Cluster{observe(now.Add(time.Minute), 5, 5)}, now.Add(time.Minute), after)
	if !back[0].Reachable || back[0].Stale || back[0].Message != "" {
		t.Errorf("a returning controller: %+v", back[0])
	}
	ev = FreshnessEvents(out.Status.Clusters, back, now.Add(time.Minute), after)
	if len(ev) != 1 || ev[0].Warning || ev[0].Reason != "ClusterControllerReturned" || !strings.Contains(ev[0].Message, "depot-b") {
		t.Errorf("events as it returns: %+v", ev)
	}
	vs, _, _ = Vehicles(back, now.Add(time.Minute))
	in.Now, in.Vehicles = now.Add(time.Minute), vs
	in.Clusters = []planner.Cluster{{Name: "depot-b", Reachable: true, Reports: back[0].Reports}}
	if out = planner.Plan(in); out.Status.Vehicles.Unreachable != 0 {
		t.Errorf("a returned controller: %d unreachable", out.Status.Vehicles.Unreachable)
	}

	// A silent ManagedCluster stays judged by its availability; a report
	// without a header (an older controller) is trusted while Available;
	// a report from a clock ahead of the hub's is fresh, last seen now.
	unavailable := available.DeepCopy()
	unavailable.Status.Conditions[0].Status = metav1.ConditionUnknown
	silent := Observe(unavailable, reportWork(v1alpha1.ReportHeader{Written: written, Generation: 4}, 0, lines...), "lan")
	old := Observe(available, reportWork(v1alpha1.ReportHeader{}, 0, lines...), "lan")
	ahead := observe(now.Add(time.Minute), 4, 4)
	js := Judge([]Cluster{silent, old, ahead}, now, after)
	if js[0].Stale || js[0].Reachable || !js[0].Since.Equal(now.Add(-time.Hour)) || !strings.Contains(js[0].Message, "not Available") {
		t.Errorf("a silent cluster: %+v", js[0])
	}
	if js[1].Stale || !js[1].Reachable || js[2].Stale || !js[2].Reachable {
		t.Errorf("no header: %+v; a clock ahead: %+v", js[1], js[2])
	}
	ahead.Name = "depot-c"
	ahead.Reports = []v1alpha1.VehicleReport{{Vehicle: "c1"}}
	if vs, _, _ := Vehicles([]Cluster{ahead}, now); len(vs) != 1 || !vs[0].LastSeen.Equal(now) {
		t.Errorf("a clock ahead: %+v, want last seen now", vs)
	}
}

// TestReportInterval: the heartbeat leaves two status syncs of
// unreachableAfter to OCM, and a quarter of the rest is the interval.
func TestReportInterval(t *testing.T) {
	for _, c := range []struct{ after, sync, want time.Duration }{
		{2 * time.Minute, 10 * time.Second, 25 * time.Second},
		{20 * time.Second, 2 * time.Second, 4 * time.Second},
		{15 * time.Second, 10 * time.Second, time.Second},
	} {
		got := ReportInterval(c.after, c.sync)
		if got != c.want {
			t.Errorf("ReportInterval(%s, %s) = %s, want %s", c.after, c.sync, got, c.want)
		}
		// The oldest a live controller's report gets at the hub.
		if c.want > time.Second && got+c.sync*19/10 >= c.after {
			t.Errorf("%s: a live report reaches %s old, past unreachableAfter %s", c.after, got+c.sync*19/10, c.after)
		}
	}
}
