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
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nettune/nettune/api/v1alpha1"
)

// TestLivenessByAddOn: with the add-on gate, a hub asks no heartbeat of
// the clusters (each share's liveness is AddOnLease) and reads whether a
// cluster's controller runs from its ManagedClusterAddOn's Available
// condition, which OCM's registration agent keeps from the add-on's Lease.
// Against a real kube-apiserver and etcd with OCM's hub CRDs, reconcile by
// reconcile on a test clock, the test plays the clusters' reports:
//   - reports an hour old keep their vehicles reachable while the add-ons
//     are Available (the same reports would be stale by their age);
//   - a cluster whose add-on turns Available=False stays in the rollout,
//     not reachable, its message and a warning event naming it; its work is
//     neither rewritten by an edit nor withdrawn; unreachableAfter later
//     its vehicles count Unreachable;
//   - Available again: reachable, an event, and the edit's share reaches it.
func TestLivenessByAddOn(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := hubAPIServer(t)
	const ns, versionLabel, perCluster = "nettune-system", "addon.nettune.io/version", 4
	clusters := []string{"cluster-01", "cluster-02", "cluster-03"}
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	now := t0
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	setAddOn := func(cluster string, status metav1.ConditionStatus, reason string) {
		t.Helper()
		a := &addonv1alpha1.ManagedClusterAddOn{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: "nettune"}, a); err != nil {
			t.Fatalf("add-on of %s: %v", cluster, err)
		}
		meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable, Status: status,
			Reason: reason, Message: "played by the test", LastTransitionTime: metav1.NewTime(now)})
		must(t, c.Status().Update(ctx, a))
	}
	for _, name := range clusters {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"fleet": "test"}},
			Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
		must(t, c.Create(ctx, mc))
		mc.Status.Conditions = []metav1.Condition{{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAvailable", Message: "played by the test", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
		must(t, c.Status().Update(ctx, mc))
		must(t, c.Create(ctx, &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "nettune", Namespace: name,
			Labels: map[string]string{versionLabel: "0.3.0"}}}))
		setAddOn(name, metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated")
	}
	rec := events.NewFakeRecorder(1000)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: rec, Namespace: ns, ClusterNamespace: ns, Now: func() time.Time { return now },
		AddOn: &AddOnGate{Name: "nettune", VersionLabel: versionLabel, MinVersion: "0.3.0"}}
	lock := true
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: writersProfile}, Spec: v1alpha1.NetTuningProfileSpec{
		ClusterSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"fleet": "test"}},
		Defaults:        &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 30, Lock: &lock}},
	}}
	must(t, c.Create(ctx, p))
	reconcile := func(what string) v1alpha1.NetTuningProfileStatus {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: writersProfile}}); err != nil {
			t.Fatalf("reconcile (%s): %v", what, err)
		}
		_, st := snapshot(ctx, t, c)
		return st
	}
	work := func(cluster string) *workv1.ManifestWork {
		t.Helper()
		w := &workv1.ManifestWork{}
		must(t, c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: WorkName(writersProfile)}, w))
		return w
	}
	clusterStatus := func(st v1alpha1.NetTuningProfileStatus, name string) v1alpha1.ClusterStatus {
		t.Helper()
		for _, cs := range st.Clusters {
			if cs.Name == name {
				return cs
			}
		}
		t.Fatalf("status.clusters has no %s: %+v", name, st.Clusters)
		return v1alpha1.ClusterStatus{}
	}
	drain := func() string {
		var b strings.Builder
		for {
			select {
			case e := <-rec.Events:
				b.WriteString(e + "\n")
			default:
				return b.String()
			}
		}
	}

	// The first revision on every vehicle, the clusters reporting once.
	var st v1alpha1.NetTuningProfileStatus
	for i := 0; ; i++ {
		st = reconcile("first revision")
		if st.Phase == v1alpha1.PhaseHealthy && st.Vehicles.Total == int32(len(clusters)*perCluster) && st.Vehicles.Verified == st.Vehicles.Total {
			break
		}
		if i == 5 {
			t.Fatalf("the first revision not on every vehicle after %d reconciles: %+v", i+1, st.Vehicles)
		}
		must(t, reportAll(ctx, c, now))
	}
	for _, name := range clusters {
		share, err := ShareOf(work(name), writersProfile)
		must(t, err)
		if share.Liveness != v1alpha1.LivenessAddOnLease || share.Heartbeat() {
			t.Errorf("%s's share: liveness %q, want %q (no heartbeat)", name, share.Liveness, v1alpha1.LivenessAddOnLease)
		}
	}
	drain()

	// An hour without a report: the add-ons say the controllers run.
	now = t0.Add(time.Hour)
	st = reconcile("an hour later")
	for _, name := range clusters {
		if cs := clusterStatus(st, name); !cs.Reachable || cs.Message != "" {
			t.Errorf("an hour after the last report, add-on Available: %s reachable %v message %q; want reachable, no message", name, cs.Reachable, cs.Message)
		}
	}
	if st.Vehicles.Unreachable != 0 || st.Vehicles.Verified != st.Vehicles.Total {
		t.Errorf("an hour after the last report, add-ons Available: vehicles %+v, want every one verified, none Unreachable", st.Vehicles)
	}
	if ev := drain(); strings.Contains(ev, "ClusterControllerSilent") {
		t.Errorf("an hour after the last report, add-ons Available: %s", ev)
	}

	// cluster-02's controller stops: OCM turns its add-on Available=False.
	setAddOn("cluster-02", metav1.ConditionFalse, "ManagedClusterAddOnLeaseUpdateStopped")
	gen02 := work("cluster-02").Generation
	st = reconcile("cluster-02's add-on not Available")
	cs := clusterStatus(st, "cluster-02")
	if cs.Reachable || !strings.Contains(cs.Message, "cluster-02") || !strings.Contains(cs.Message, "ManagedClusterAddOnLeaseUpdateStopped") {
		t.Errorf("cluster-02 with its add-on not Available: reachable %v message %q; want not reachable, the message naming it and OCM's reason", cs.Reachable, cs.Message)
	}
	if ev := drain(); !strings.Contains(ev, "ClusterControllerSilent") || !strings.Contains(ev, "cluster-02") {
		t.Errorf("events when cluster-02's add-on turned not Available: %q, want ClusterControllerSilent naming cluster-02", ev)
	}
	if cond := meta.FindStatusCondition(st.Conditions, ConditionAddOnUnavailable); cond == nil || strings.Contains(cond.Message, "cluster-02") {
		t.Errorf("condition %s = %+v: cluster-02 keeps its work and is not skipped", ConditionAddOnUnavailable, cond)
	}

	// An edit at once: the live clusters' works change, cluster-02's not.
	must(t, c.Get(ctx, types.NamespacedName{Name: writersProfile}, p))
	p.Spec.Defaults.Cwnd.Value = 40
	must(t, c.Update(ctx, p))
	gen01 := work("cluster-01").Generation
	for i := 0; i < 3; i++ {
		reconcile(fmt.Sprintf("the edit, round %d", i+1))
		must(t, reportAll(ctx, c, now, "cluster-02"))
	}
	if g := work("cluster-01").Generation; g <= gen01 {
		t.Errorf("cluster-01's work after the edit: generation %d, want past %d", g, gen01)
	}
	if g := work("cluster-02").Generation; g != gen02 {
		t.Errorf("cluster-02's work, its add-on not Available, after the edit: generation %d, want %d (neither rewritten nor withdrawn)", g, gen02)
	}

	// unreachableAfter after OCM said so, its vehicles count Unreachable.
	now = now.Add(v1alpha1.DefaultUnreachableAfter + time.Second)
	st = reconcile("unreachableAfter later")
	if st.Vehicles.Unreachable != perCluster {
		t.Errorf("unreachableAfter after cluster-02's add-on turned not Available: %d vehicles Unreachable, want its %d", st.Vehicles.Unreachable, perCluster)
	}
	if st.Vehicles.Failed != 0 {
		t.Errorf("%d vehicles Failed, want none (a silent cluster's vehicles are Unreachable, never Failed)", st.Vehicles.Failed)
	}

	// Back: reachable, an event, and the edit's share reaches it.
	setAddOn("cluster-02", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated")
	st = reconcile("cluster-02's add-on Available again")
	if cs := clusterStatus(st, "cluster-02"); !cs.Reachable {
		t.Errorf("cluster-02 with its add-on Available again: not reachable (%q)", cs.Message)
	}
	if ev := drain(); !strings.Contains(ev, "ClusterControllerReturned") || !strings.Contains(ev, "cluster-02") {
		t.Errorf("events when cluster-02's add-on is Available again: %q, want ClusterControllerReturned naming cluster-02", ev)
	}
	if g := work("cluster-02").Generation; g <= gen02 {
		t.Errorf("cluster-02's work once its add-on is Available again: generation %d, want past %d (the edit's share)", g, gen02)
	}
}
