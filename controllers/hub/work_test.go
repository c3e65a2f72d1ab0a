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
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

func profile() *v1alpha1.NetTuningProfile {
	ssthresh := int32(20)
	after := metav1.Duration{Duration: 40 * time.Second}
	return &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "lan", Generation: 4},
		Spec: v1alpha1.NetTuningProfileSpec{
			VehicleLabel: "nettune.io/vehicle", Defaults: &v1alpha1.TCPParameters{Ssthresh: &ssthresh},
			ClusterSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"region": "eu"}},
			Rollout:         &v1alpha1.RolloutSpec{UnreachableAfter: &after, Steps: []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}}},
		},
	}
}

func TestShare(t *testing.T) {
	assign := map[string]string{"a1": "lan-r2", "a2": "lan-r1", "b1": "lan-r2", "a3": "lan-r3"}
	cluster := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b"}
	got := Share(assign, cluster, "a", "lan-r1")
	if got.Stable != "lan-r1" || fmt.Sprint(got.Assignments) != "[{lan-r2 [a1]} {lan-r3 [a3]}]" {
		t.Errorf("share of a: %+v", got)
	}
	if got := Share(assign, cluster, "c", "lan-r1"); got.Stable != "lan-r1" || len(got.Assignments) != 0 {
		t.Errorf("a cluster with no known vehicle gets the stable revision only: %+v", got)
	}
}

// TestShares: one pass over the decision gives every cluster the share a
// Share of its own gives it; a vehicle of no known cluster goes nowhere,
// and a share handed out is the caller's (a second one is not changed by
// changes to the first).
func TestShares(t *testing.T) {
	assign := map[string]string{"a1": "lan-r2", "a2": "lan-r1", "b2": "lan-r2", "b1": "lan-r2", "a3": "lan-r3", "c1": "lan-r1", "x1": "lan-r2"}
	cluster := map[string]string{"a1": "a", "a2": "a", "a3": "a", "b1": "b", "b2": "b", "c1": "c"}
	shares := Shares(assign, cluster, "lan-r1")
	want := map[string]string{
		"a": "[{lan-r2 [a1]} {lan-r3 [a3]}]",
		"b": "[{lan-r2 [b1 b2]}]",
		"c": "[]",
		"d": "[]",
	}
	for name, w := range want {
		got := shares(name)
		if got.Stable != "lan-r1" || fmt.Sprint(got.Assignments) != w {
			t.Errorf("share of %s: %+v, want stable lan-r1 and %s", name, got, w)
		}
		if one := Share(assign, cluster, name, "lan-r1"); !reflect.DeepEqual(one, got) {
			t.Errorf("share of %s: Shares %+v, Share %+v", name, got, one)
		}
	}
	first := shares("b")
	first.Assignments[0].Vehicles[0] = "changed"
	if again := shares("b"); fmt.Sprint(again.Assignments) != "[{lan-r2 [b1 b2]}]" {
		t.Errorf("a second share of b: %+v", again)
	}
}

// TestEquivalentWork: a work that names the rollout's revision for every
// vehicle of the cluster is kept when that revision becomes the stable one
// (same vehicles, same revisions), but not when a known vehicle would
// render another revision, when the hub knows no vehicle of the cluster,
// or when anything else of the work differs (here the liveness asked).
func TestEquivalentWork(t *testing.T) {
	p := profile()
	own := revision.Name(p)
	old := revision.Content(p)
	old.Defaults.Ssthresh = ptr(int32(10))
	contents := func(name string) (*v1alpha1.NetTuningProfileSpec, error) {
		switch name {
		case "lan-stable":
			return old, nil
		case own:
			return revision.Content(p), nil
		}
		return nil, nil
	}
	moved := &v1alpha1.HubAssignment{Stable: "lan-stable", Assignments: []v1alpha1.RevisionAssignment{{Revision: own, Vehicles: []string{"a1", "a2"}}}}
	w, err := Work(p, "cluster-a", "nettune-system", moved, contents)
	if err != nil {
		t.Fatal(err)
	}
	done := &v1alpha1.HubAssignment{Stable: own}
	if !EquivalentWork(p, "cluster-a", "nettune-system", done, contents, w, []string{"a1", "a2"}) {
		t.Errorf("every known vehicle on %s, then %s stable: want the work kept", own, own)
	}
	if EquivalentWork(p, "cluster-a", "nettune-system", done, contents, w, []string{"a1", "a2", "a3"}) {
		t.Errorf("a3 renders lan-stable by the work, %s by the share: want the work rewritten", own)
	}
	if EquivalentWork(p, "cluster-a", "nettune-system", done, contents, w, nil) {
		t.Errorf("no known vehicle: want the work rewritten")
	}
	if EquivalentWork(p, "cluster-a", "nettune-system", &v1alpha1.HubAssignment{Stable: "lan-stable"}, contents, w, []string{"a1", "a2"}) {
		t.Errorf("a rollback to lan-stable: want the work rewritten")
	}
	byAddOn := *done
	byAddOn.Liveness = v1alpha1.LivenessAddOnLease
	if EquivalentWork(p, "cluster-a", "nettune-system", &byAddOn, contents, w, []string{"a1", "a2"}) {
		t.Errorf("another liveness: want the work rewritten")
	}
}

// TestWork: the work carries the revisions the share names other than the
// profile's own content, then the profile's copy with the share, the
// profile's unreachableAfter and nothing else of its rollout nor its
// cluster selector; the copy's revision name is the hub's.
func TestWork(t *testing.T) {
	p := profile()
	own := revision.Name(p)
	stableContent := revision.Content(p)
	stableContent.Defaults.Ssthresh = ptr(int32(10))
	contents := func(name string) (*v1alpha1.NetTuningProfileSpec, error) {
		switch name {
		case "lan-stable":
			return stableContent, nil
		case own:
			return revision.Content(p), nil
		}
		return nil, nil
	}
	share := &v1alpha1.HubAssignment{Stable: "lan-stable", Assignments: []v1alpha1.RevisionAssignment{{Revision: own, Vehicles: []string{"a1"}}}}
	w, err := Work(p, "cluster-a", "nettune-system", share, contents)
	if err != nil {
		t.Fatal(err)
	}
	if w.Namespace != "cluster-a" || w.Name != "nettune-lan" || w.Annotations[ProfileAnnotation] != "lan" || len(w.Spec.Workload.Manifests) != 3 {
		t.Fatalf("work %s/%s %v with %d manifests", w.Namespace, w.Name, w.Annotations, len(w.Spec.Workload.Manifests))
	}
	var cr struct {
		Kind     string
		Metadata metav1.ObjectMeta
		Data     json.RawMessage
	}
	stableAt := 1
	if own > "lan-stable" {
		stableAt = 0
	}
	if err := json.Unmarshal(w.Spec.Workload.Manifests[stableAt].Raw, &cr); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(stableContent)
	if cr.Kind != "ControllerRevision" || cr.Metadata.Name != "lan-stable" || cr.Metadata.Namespace != "nettune-system" || string(cr.Data) != string(want) {
		t.Errorf("revision manifest %s %s/%s data %s", cr.Kind, cr.Metadata.Namespace, cr.Metadata.Name, cr.Data)
	}
	cp := &v1alpha1.NetTuningProfile{}
	if err := json.Unmarshal(w.Spec.Workload.Manifests[2].Raw, cp); err != nil {
		t.Fatal(err)
	}
	if cp.Kind != "NetTuningProfile" || cp.Spec.ClusterSelector != nil || cp.Spec.HubAssignment == nil || cp.Spec.Rollout != nil ||
		cp.Spec.HubAssignment.UnreachableAfter == nil || cp.Spec.HubAssignment.UnreachableAfter.Duration != 40*time.Second {
		t.Errorf("the copy: %+v", cp.Spec)
	}
	if revision.Name(cp) != own {
		t.Errorf("the copy's revision %s, the hub's %s", revision.Name(cp), own)
	}
	if cp.Spec.HubAssignment.Apply != nil {
		t.Errorf("a profile without an apply policy: the copy carries %+v", cp.Spec.HubAssignment.Apply)
	}
	// The hub profile's apply policy reaches the cluster with the share,
	// and does not change the content's revision.
	gated := p.DeepCopy()
	gated.Spec.Rollout.Apply = &v1alpha1.ApplyPolicy{Gate: v1alpha1.ApplyGateRequired,
		MaintenanceWindows: []v1alpha1.MaintenanceWindow{{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "UTC"}}}
	gw, err := Work(gated, "cluster-a", "nettune-system", share, contents)
	if err != nil {
		t.Fatal(err)
	}
	gcp := &v1alpha1.NetTuningProfile{}
	if err := json.Unmarshal(gw.Spec.Workload.Manifests[2].Raw, gcp); err != nil {
		t.Fatal(err)
	}
	if a := gcp.Spec.HubAssignment.Rollout().GetApply(); a == nil || a.Gate != v1alpha1.ApplyGateRequired || len(a.MaintenanceWindows) != 1 || revision.Name(gcp) != own {
		t.Errorf("the copy of a gated profile: apply %+v, revision %s (want %s)", a, revision.Name(gcp), own)
	}
	if fb := w.Spec.ManifestConfigs[0].FeedbackRules[0].JsonPaths[0]; fb.Path != ".status.vehicleReport" || fb.Name != FeedbackName {
		t.Errorf("feedback rule %+v", fb)
	}
	// The revisions are created only where missing: the cluster may hold
	// them already, under the same name, with the same content.
	for _, c := range w.Spec.ManifestConfigs[1:] {
		if c.ResourceIdentifier.Resource != "controllerrevisions" || c.UpdateStrategy == nil || c.UpdateStrategy.Type != workv1.UpdateStrategyTypeCreateOnly {
			t.Errorf("revision config %+v", c)
		}
	}
	if len(w.Spec.ManifestConfigs) != 3 {
		t.Errorf("%d manifest configs, want the profile's and one per revision", len(w.Spec.ManifestConfigs))
	}

	// The API server hands the manifests back with their keys sorted.
	back := w.DeepCopy()
	for i, m := range back.Spec.Workload.Manifests {
		var v any
		_ = json.Unmarshal(m.Raw, &v)
		back.Spec.Workload.Manifests[i].Raw, _ = json.Marshal(v)
	}
	if string(back.Spec.Workload.Manifests[2].Raw) == string(w.Spec.Workload.Manifests[2].Raw) {
		t.Fatalf("the re-encoding kept the key order: the comparison below proves nothing")
	}
	if !SameSpec(w, back) {
		t.Errorf("the same work re-encoded compares different")
	}
	moved := &v1alpha1.HubAssignment{Stable: "lan-stable", Assignments: []v1alpha1.RevisionAssignment{{Revision: own, Vehicles: []string{"a1", "a2"}}}}
	w2, _ := Work(p, "cluster-a", "nettune-system", moved, contents)
	if SameSpec(w, w2) {
		t.Errorf("a vehicle moved and the works compare the same")
	}
	// A cluster none of whose vehicles moves keeps the stable content: an
	// edit does not rewrite its work.
	still, err := Work(p, "cluster-a", "nettune-system", &v1alpha1.HubAssignment{Stable: "lan-stable"}, contents)
	if err != nil {
		t.Fatal(err)
	}
	held := &v1alpha1.NetTuningProfile{}
	if err := json.Unmarshal(still.Spec.Workload.Manifests[len(still.Spec.Workload.Manifests)-1].Raw, held); err != nil {
		t.Fatal(err)
	}
	if *held.Spec.Defaults.Ssthresh != 10 || len(still.Spec.Workload.Manifests) != 2 {
		t.Errorf("a cluster on stable only: copy ssthresh %d with %d manifests, want the stable content (10) and its revision", *held.Spec.Defaults.Ssthresh, len(still.Spec.Workload.Manifests))
	}
	edited := p.DeepCopy()
	edited.Spec.Defaults.Ssthresh = ptr(int32(30))
	// An edit that adds the rollout's default unreachableAfter (the API
	// server defaults it when a rollout is added) changes nothing here.
	edited.Spec.Rollout.UnreachableAfter = &metav1.Duration{Duration: v1alpha1.DefaultUnreachableAfter}
	p.Spec.Rollout = nil
	still, _ = Work(p, "cluster-a", "nettune-system", &v1alpha1.HubAssignment{Stable: "lan-stable"}, contents)
	if again, _ := Work(edited, "cluster-a", "nettune-system", &v1alpha1.HubAssignment{Stable: "lan-stable"}, contents); !SameSpec(still, again) {
		t.Errorf("an edit rewrote the work of a cluster whose vehicles all stay on stable")
	}
	if _, err := Work(p, "cluster-a", "nettune-system", &v1alpha1.HubAssignment{Stable: "lan-gone"}, contents); err == nil || !strings.Contains(err.Error(), "lan-gone") {
		t.Errorf("a revision without content: %v", err)
	}
}

// TestObserveAndVehicles: a silent cluster's vehicles were last seen when it
// went silent; a reachable one's now; a vehicle its cluster already counts
// Unreachable keeps that time; duplicates stay in the first cluster.
func TestObserveAndVehicles(t *testing.T) {
	now := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	down := now.Add(-3 * time.Minute)
	silentVehicle := now.Add(-time.Hour)
	// Reports without a header (older controllers): trusted while the
	// cluster is Available (TestFreshness has the header's).
	report := func(rs ...v1alpha1.VehicleReport) *workv1.ManifestWork {
		return reportWork(v1alpha1.ReportHeader{}, 0, rs...)
	}
	mc := func(name string, available metav1.ConditionStatus, since time.Time) *clusterv1.ManagedCluster {
		return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: clusterv1.ManagedClusterStatus{Conditions: []metav1.Condition{{
			Type: clusterv1.ManagedClusterConditionAvailable, Status: available, Reason: "x", LastTransitionTime: metav1.NewTime(since)}}}}
	}
	a := Observe(mc("a", metav1.ConditionTrue, now), report(
		v1alpha1.VehicleReport{Vehicle: "a1", Revision: "lan-r1", Verified: true, Hardware: []string{"xavier"}},
		v1alpha1.VehicleReport{Vehicle: "a2", Revision: "lan-r1", UnreachableSince: silentVehicle},
		v1alpha1.VehicleReport{Vehicle: "a3", Revision: "lan-r2", Deferred: true, GateClosed: true}), "lan")
	b := Observe(mc("b", metav1.ConditionUnknown, down), report(
		v1alpha1.VehicleReport{Vehicle: "b1", Revision: "lan-r1", Verified: true},
		v1alpha1.VehicleReport{Vehicle: "a1", Revision: "lan-r1"}), "lan")
	c := Observe(mc("c", metav1.ConditionTrue, now), nil, "lan")
	if !a.Reachable || b.Reachable || !b.Since.Equal(down) || c.Reports != nil || !strings.Contains(c.Message, "no work") {
		t.Fatalf("observed a %+v b %+v c %+v", a, b, c)
	}
	vs, clusterOf, dup := Vehicles([]Cluster{a, b, c}, now)
	if len(vs) != 4 || fmt.Sprint(dup) != "[a1]" || clusterOf["a1"] != "a" || clusterOf["b1"] != "b" {
		t.Fatalf("vehicles %v dup %v clusters %v", vs, dup, clusterOf)
	}
	seen := map[string]time.Time{}
	for _, v := range vs {
		seen[v.Name] = v.LastSeen
		if deferred := v.Name == "a3"; v.Deferred != deferred || v.GateClosed != deferred {
			t.Errorf("%s: deferred %t gate closed %t, want %t as its cluster reported", v.Name, v.Deferred, v.GateClosed, deferred)
		}
		if v.Labels.Get(ClusterLabel) != v.Group {
			t.Errorf("%s: cluster label %q, group %q", v.Name, v.Labels.Get(ClusterLabel), v.Group)
		}
	}
	if !seen["a1"].Equal(now) || !seen["a2"].Equal(silentVehicle) || !seen["b1"].Equal(down) {
		t.Errorf("last seen %v", seen)
	}
}

// reportWork is a work whose status carries a vehicle report and, when
// copyGeneration is not 0, the copy's generation.
func reportWork(h v1alpha1.ReportHeader, copyGeneration int64, rs ...v1alpha1.VehicleReport) *workv1.ManifestWork {
	s := v1alpha1.EncodeVehicleReports(h, rs)
	values := []workv1.FeedbackValue{{Name: FeedbackName, Value: workv1.FieldValue{Type: workv1.String, String: &s}}}
	if copyGeneration != 0 {
		values = append(values, workv1.FeedbackValue{Name: GenerationFeedbackName, Value: workv1.FieldValue{Type: workv1.Integer, Integer: &copyGeneration}})
	}
	return &workv1.ManifestWork{Status: workv1.ManifestWorkStatus{ResourceStatus: workv1.ManifestResourceStatus{Manifests: []workv1.ManifestCondition{{
		ResourceMeta:    workv1.ManifestResourceMeta{Resource: "nettuningprofiles", Name: "lan"},
		StatusFeedbacks: workv1.StatusFeedbackResult{Values: values},
	}}}}}
}

func ptr[T any](v T) *T { return &v }
