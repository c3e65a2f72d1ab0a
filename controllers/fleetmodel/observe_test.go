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

package fleetmodel

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// report is a NodeNetTuning for profile p at revision rev, verified or not,
// last heard from at seen (zero: never).
func report(name, rev string, verified bool, seen time.Time) *v1alpha1.NodeNetTuning {
	n := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3}}
	n.Spec.Revision = "r-" + rev
	n.Spec.Profiles = []v1alpha1.SourceProfile{{Name: "p", Revision: rev}}
	if !seen.IsZero() {
		n.Status.LastHeartbeatTime = &metav1.Time{Time: seen}
	}
	if verified {
		n.Status.ObservedGeneration = 3
		n.Status.AppliedRevision = n.Spec.Revision
		n.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, ObservedGeneration: 3}}
	}
	return n
}

func TestObserve(t *testing.T) {
	p, nodes := avFleet()
	f, err := Select(p, nodes)
	if err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	nnts := map[string]*v1alpha1.NodeNetTuning{
		"av-1-a": report("av-1-a", "p-1", true, now.Add(-time.Second)),
		"av-1-b": report("av-1-b", "p-2", false, now.Add(-time.Minute)),
		"av-2-a": report("av-2-a", "p-1", true, now),
		// av-2-b never reported: no revision there, so av-2 is mixed
	}
	vs := f.Observe("p", nnts, nil)
	if len(vs) != 2 || vs[0].Name != "av-1" || vs[1].Name != "av-2" {
		t.Fatalf("vehicles %+v", vs)
	}
	a, b := vs[0], vs[1]
	if !a.Mixed || a.Verified || a.Nodes != 2 || a.VerifiedNodes != 1 || !a.LastSeen.Equal(now.Add(-time.Minute)) ||
		!reflect.DeepEqual(a.Hardware, []string{"xavier"}) || a.Labels.Has("zone") || a.Labels.Get("role") != "av" {
		t.Errorf("av-1 %+v", a)
	}
	if !b.Mixed || b.Assigned != "p-1" || b.Verified || b.VerifiedNodes != 1 || !b.LastSeen.IsZero() ||
		!reflect.DeepEqual(b.Hardware, []string{"orin", "xavier"}) || b.Labels.Get("zone") != "x" || !b.Labels.Has("zone") {
		t.Errorf("av-2 %+v", b)
	}
}

func TestNodeReport(t *testing.T) {
	now := time.Now()
	n := report("a", "p-1", true, now)
	if v, f, seen := NodeReport(n); !v || f || !seen.Equal(now) {
		t.Errorf("verified report: %v %v %v", v, f, seen)
	}
	stale := n.DeepCopy()
	stale.Generation = 4 // a new spec the agent has not seen
	if v, _, _ := NodeReport(stale); v {
		t.Error("a report on an older generation counts as verified")
	}
	failed := n.DeepCopy()
	failed.Status.Conditions = append(failed.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionTrue, ObservedGeneration: 3})
	if _, f, _ := NodeReport(failed); !f {
		t.Error("a RolledBack report is not failed")
	}
	if v, f, seen := NodeReport(nil); v || f || !seen.IsZero() {
		t.Error("no report is not empty")
	}
}

// BenchmarkPlanFleet is one profile reconcile's decision over a
// 30,000-node fleet (6,000 vehicles of 5 nodes) in the middle of a staged
// rollout: the selection, the observation of every node's report and the
// planner, as the profile reconciler's plan runs them. It reports the time and the
// allocations of one decision (go test ./controllers/fleetmodel -run '^$'
// -bench PlanFleet -benchmem).
func BenchmarkPlanFleet(b *testing.B) {
	const vehicles, hosts = 6000, 5
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	p.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "orin"}}
	count, half, all := int32(2), int32(50), intstr.FromString("100%")
	p.Spec.Rollout = &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &count}, MaxUnavailable: &all,
		Steps: []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &half}}}}
	var nodes []*corev1.Node
	nnts := map[string]*v1alpha1.NodeNetTuning{}
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for v := range vehicles {
		for h := range hosts {
			n := node(fmt.Sprintf("av-%05d-h%d", v, h), fmt.Sprintf("av-%05d", v), "orin", map[string]string{v1alpha1.DefaultHostLabel: fmt.Sprintf("h%d", h)})
			nodes = append(nodes, &n)
			nnts[n.Name] = report(n.Name, "p-1", true, now)
		}
	}
	in := func(f *Fleet, st v1alpha1.NetTuningProfileStatus) planner.Input {
		return planner.Input{Now: now, Profile: p.Name, Revision: "p-2", Generation: p.Generation, Rollout: p.Spec.Rollout,
			Status: st, Vehicles: f.Observe(p.Name, nnts, nil), LivenessTimer: true}
	}
	f, err := SelectNodes(p, nodes)
	if err != nil {
		b.Fatal(err)
	}
	// The rollout of p-2 starts over a fleet stable on p-1.
	st := planner.Plan(in(f, v1alpha1.NetTuningProfileStatus{CurrentRevision: "p-1", StableRevision: "p-1"})).Status
	if st.CurrentRevision != "p-2" || len(st.CanaryVehicles) != 2 {
		b.Fatalf("the rollout of p-2 did not start: current %s, canaries %v", st.CurrentRevision, st.CanaryVehicles)
	}
	for b.Loop() {
		f, err := SelectNodes(p, nodes)
		if err != nil {
			b.Fatal(err)
		}
		out := planner.Plan(in(f, st))
		if out.Status.CurrentRevision != "p-2" {
			b.Fatalf("current revision %s", out.Status.CurrentRevision)
		}
	}
}
