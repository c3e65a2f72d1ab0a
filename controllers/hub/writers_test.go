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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/scheme"
)

// TestWorkWritersWriteTheSame: the number of ManifestWorks a reconcile
// writes at once changes nothing in what it writes. The same rollout (the
// profile created, every cluster reporting, then an edit with a canary of
// 3 and steps of 50 % and 100 %) runs twice against a real kube-apiserver
// and etcd with OCM's hub CRDs, reconcile by reconcile on one clock, once
// with one writer and once with 16: after every reconcile each cluster's
// work has the same spec and generation (so the same writes), and the
// profile's status is the same. The clusters' side is played by the test:
// after each reconcile every cluster reports its vehicles verified on what
// its work's share assigns them, as OCM's work agent carries it back.
func TestWorkWritersWriteTheSame(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := hubAPIServer(t)
	const ns, clusters, perCluster = "nettune-system", 24, 4
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for i := 1; i <= clusters; i++ {
		name := fmt.Sprintf("cluster-%02d", i)
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"fleet": "test"}},
			Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}}
		must(t, c.Create(ctx, mc))
		mc.Status.Conditions = []metav1.Condition{{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAvailable", Message: "played by the test", LastTransitionTime: metav1.Now()}}
		must(t, c.Status().Update(ctx, mc))
	}

	one := rolloutRounds(ctx, t, c, ns, 1)
	if err := resetProfile(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	many := rolloutRounds(ctx, t, c, ns, 16)
	if len(one) != len(many) {
		t.Fatalf("%d reconciles with one writer, %d with 16", len(one), len(many))
	}
	last := one[len(one)-1]
	if !strings.Contains(last.status, `"phase":"Healthy"`) || last.writes < 2*clusters {
		t.Fatalf("the rollout with one writer ended with %d work writes and status %s: want it Healthy after at least %d writes", last.writes, last.status, 2*clusters)
	}
	// The reconcile that ends the rollout (its revision made stable) keeps
	// every work: each already gives its vehicles that revision.
	if done := one[len(one)-2]; last.writes != done.writes {
		t.Errorf("the rollout's last reconcile wrote %d works, want none (EquivalentWork)", last.writes-done.writes)
	}
	for i := range one {
		if one[i].works != many[i].works {
			t.Errorf("reconcile %d: the works with one writer and with 16 differ:\n%s\n%s", i+1, one[i].works, many[i].works)
		}
		if one[i].status != many[i].status {
			t.Errorf("reconcile %d: the profile's status with one writer and with 16 differ:\n%s\n%s", i+1, one[i].status, many[i].status)
		}
	}
	// The hub's status as stored names no vehicle outside its canary, and
	// its managedFields no cluster (status.clusters is atomic).
	p := &v1alpha1.NetTuningProfile{}
	must(t, c.Get(ctx, types.NamespacedName{Name: writersProfile}, p))
	if p.Status.Assignments != nil || len(p.Status.Clusters) != clusters {
		t.Errorf("the hub's status: %d assignments, %d clusters; want none, %d", len(p.Status.Assignments), len(p.Status.Clusters), clusters)
	}
	managed, err := json.Marshal(p.ManagedFields)
	must(t, err)
	if strings.Contains(string(managed), "cluster-01") {
		t.Errorf("the hub profile's managedFields name its clusters one by one: %s", managed)
	}
	staleCache(ctx, t, c, ns, p)
	var per []string
	prev := int64(0)
	for _, rd := range one {
		per = append(per, fmt.Sprint(rd.writes-prev))
		prev = rd.writes
	}
	t.Logf("%d reconciles, %d work writes each way (by reconcile: %s)", len(one), last.writes, strings.Join(per, ", "))
}

// hubAPIServer starts a real kube-apiserver and etcd with OCM's hub CRDs
// (skipping the test when the tools are not built) and returns a client
// with the hub's scheme.
func hubAPIServer(t *testing.T) client.Client {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ocmCRDs := filepath.Join(root, "bin", "crds", "ocm", "hub")
	for _, p := range []string{filepath.Join(root, "bin", "kube-apiserver"), filepath.Join(root, "bin", "etcd"), ocmCRDs} {
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
				t.Fatalf("missing %s: run 'make tools'", p)
			}
			t.Skipf("missing %s: run 'make tools' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", p)
		}
	}
	cp, err := localcp.StartWith(localcp.Options{DieWithProcess: true})
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{ocmCRDs}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing OCM's hub CRDs: %v", err)
	}
	sch, err := scheme.NewHub()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cp.Config, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// reconciled is what one reconcile left: every work (cluster, generation,
// spec) and the profile's status, as JSON; writes sums the generations.
type reconciled struct {
	works, status string
	writes        int64
}

const writersProfile = "writers"

// rolloutRounds runs the rollout with writers, one reconcile at a time
// (reports in between), and returns what each reconcile left.
func rolloutRounds(ctx context.Context, t *testing.T, c client.Client, ns string, writers int) []reconciled {
	t.Helper()
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(1000), Namespace: ns, ClusterNamespace: ns,
		Now: func() time.Time { return now }, WorkWriters: writers}
	lock := true
	spec := func(cwnd int32, rollout *v1alpha1.RolloutSpec) v1alpha1.NetTuningProfileSpec {
		return v1alpha1.NetTuningProfileSpec{
			ClusterSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"fleet": "test"}},
			Defaults:        &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: cwnd, Lock: &lock}},
			Rollout:         rollout,
		}
	}
	must(t, c.Create(ctx, &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: writersProfile}, Spec: spec(30, nil)}))
	var out []reconciled
	reconcile := func() v1alpha1.NetTuningProfileStatus {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: writersProfile}}); err != nil {
			t.Fatalf("reconcile %d with %d writer(s): %v", len(out)+1, writers, err)
		}
		rd, st := snapshot(ctx, t, c)
		out = append(out, rd)
		if err := reportAll(ctx, c, now); err != nil {
			t.Fatalf("reports after reconcile %d: %v", len(out), err)
		}
		return st
	}
	// The profile's first revision reaches every vehicle.
	for i := 0; ; i++ {
		if st := reconcile(); st.Phase == v1alpha1.PhaseHealthy && st.Vehicles.Total == 24*4 && st.Vehicles.Verified == st.Vehicles.Total {
			break
		}
		if i == 5 {
			t.Fatalf("with %d writer(s): the first revision not on every vehicle after %d reconciles", writers, i+1)
		}
	}
	// An edit rolled out: a canary of 3, then half, then every vehicle.
	three, half, whole, all := int32(3), int32(50), int32(100), intstr.FromString("100%")
	p := &v1alpha1.NetTuningProfile{}
	must(t, c.Get(ctx, types.NamespacedName{Name: writersProfile}, p))
	p.Spec = spec(25, &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &three}, MaxUnavailable: &all,
		Steps: []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &half}}, {SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &whole}}}})
	must(t, c.Update(ctx, p))
	for i := 0; ; i++ {
		if st := reconcile(); st.Phase == v1alpha1.PhaseHealthy && st.StableRevision == st.CurrentRevision && st.Vehicles.Verified == 24*4 {
			break
		}
		if i == 12 {
			t.Fatalf("with %d writer(s): the edit not on every vehicle after %d reconciles", writers, i+1)
		}
	}
	return out
}

// snapshot reads every work of the profile and its status.
func snapshot(ctx context.Context, t *testing.T, c client.Client) (reconciled, v1alpha1.NetTuningProfileStatus) {
	t.Helper()
	list := &workv1.ManifestWorkList{}
	must(t, c.List(ctx, list, client.MatchingLabels{ManagedByLabel: ManagedBy}))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Namespace < list.Items[j].Namespace })
	var b strings.Builder
	var rd reconciled
	for _, w := range list.Items {
		// The manifests as values (the API server may reorder their keys).
		var manifests []any
		for _, m := range w.Spec.Workload.Manifests {
			var v any
			must(t, json.Unmarshal(m.Raw, &v))
			manifests = append(manifests, v)
		}
		raw, err := json.Marshal(map[string]any{"manifests": manifests, "configs": w.Spec.ManifestConfigs})
		must(t, err)
		fmt.Fprintf(&b, "%s %d %s\n", w.Namespace, w.Generation, raw)
		rd.writes += w.Generation
	}
	p := &v1alpha1.NetTuningProfile{}
	must(t, c.Get(ctx, types.NamespacedName{Name: writersProfile}, p))
	st, err := json.Marshal(p.Status)
	must(t, err)
	rd.works, rd.status = b.String(), string(st)
	return rd, p.Status
}

// reportAll plays every cluster's nettune controller and OCM's work agent:
// each vehicle verified on what its cluster's share assigns it, carried
// back as the work's status feedback for the work's generation.
// The clusters named in silent report nothing (their controller stopped).
func reportAll(ctx context.Context, c client.Client, now time.Time, silent ...string) error {
	list := &workv1.ManifestWorkList{}
	if err := c.List(ctx, list, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		return err
	}
	for i := range list.Items {
		w := &list.Items[i]
		if slices.Contains(silent, w.Namespace) {
			continue
		}
		share, err := ShareOf(w, writersProfile)
		if err != nil {
			return err
		}
		revisionFor := share.RevisionFor()
		var rs []v1alpha1.VehicleReport
		for j := 1; j <= 4; j++ {
			v := fmt.Sprintf("%s-av-%d", w.Namespace, j)
			rev := revisionFor(v)
			rs = append(rs, v1alpha1.VehicleReport{Vehicle: v, Revision: rev, Verified: rev != "", Hardware: []string{"xavier"}, Counters: []string{}})
		}
		report := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: now, Generation: w.Generation}, rs)
		gen := w.Generation
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta: workv1.ManifestResourceMeta{Group: v1alpha1.GroupVersion.Group, Version: v1alpha1.GroupVersion.Version, Kind: "NetTuningProfile",
				Resource: "nettuningprofiles", Name: writersProfile},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
				{Name: FeedbackName, Value: workv1.FieldValue{Type: workv1.String, String: &report}},
				{Name: GenerationFeedbackName, Value: workv1.FieldValue{Type: workv1.Integer, Integer: &gen}}}},
			Conditions: []metav1.Condition{{Type: workv1.ManifestApplied, Status: metav1.ConditionTrue, Reason: "Applied", LastTransitionTime: metav1.NewTime(now)}},
		}}
		if err := c.Status().Update(ctx, w); err != nil {
			return fmt.Errorf("work %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	return nil
}

// resetProfile removes the profile, its works and its revisions, and
// waits until the API server has none of them left.
func resetProfile(ctx context.Context, c client.Client, ns string) error {
	p := &v1alpha1.NetTuningProfile{}
	if err := c.Get(ctx, types.NamespacedName{Name: writersProfile}, p); err != nil {
		return err
	}
	p.Finalizers = nil
	if err := c.Update(ctx, p); err != nil {
		return fmt.Errorf("the profile's finalizer: %w", err)
	}
	if err := c.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	works := &workv1.ManifestWorkList{}
	if err := c.List(ctx, works); err != nil {
		return err
	}
	for i := range works.Items {
		if err := c.Delete(ctx, &works.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := c.DeleteAllOf(ctx, &appsv1.ControllerRevision{}, client.InNamespace(ns)); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		left := []string{}
		if err := c.Get(ctx, types.NamespacedName{Name: writersProfile}, &v1alpha1.NetTuningProfile{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("the profile (%v)", err))
		}
		if err := c.List(ctx, works); err != nil || len(works.Items) > 0 {
			left = append(left, fmt.Sprintf("%d works (%v)", len(works.Items), err))
		}
		revs := &appsv1.ControllerRevisionList{}
		if err := c.List(ctx, revs, client.InNamespace(ns)); err != nil || len(revs.Items) > 0 {
			left = append(left, fmt.Sprintf("%d ControllerRevisions (%v)", len(revs.Items), err))
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still there a minute after the reset: %s", strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// staleCache: a reconcile whose cache has not yet seen the reconciler's
// last write of a work compares with that write, not with the cache: the
// same share is not written again, another one is.
func staleCache(ctx context.Context, t *testing.T, c client.Client, ns string, p *v1alpha1.NetTuningProfile) {
	t.Helper()
	r := &Reconciler{Client: c, Scheme: c.Scheme(), Namespace: ns, ClusterNamespace: ns}
	revs := revision.NewStore(c, ns)
	contents := func(name string) (*v1alpha1.NetTuningProfileSpec, error) {
		if name == revision.Name(p) {
			return revision.Content(p), nil
		}
		return revs.Read(ctx, name)
	}
	stale := &workv1.ManifestWork{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: "cluster-01", Name: WorkName(writersProfile)}, stale))
	share, err := ShareOf(stale, writersProfile)
	must(t, err)
	share.UnreachableAfter, share.Apply = nil, nil
	changed := share.DeepCopy()
	changed.ReportInterval = &metav1.Duration{Duration: 7 * time.Second}
	updates := func() float64 { return testutil.ToFloat64(worksWritten.WithLabelValues("update")) }
	before := updates()
	for i, step := range []struct {
		share  *v1alpha1.HubAssignment
		writes float64
	}{{changed, 1}, {changed, 1}, {share, 2}} {
		must(t, r.place(ctx, p, "cluster-01", step.share, contents, stale, nil))
		if got := updates() - before; got != step.writes {
			t.Errorf("place %d on a cache at generation %d: %v work updates in all, want %v", i+1, stale.Generation, got, step.writes)
		}
	}
	now := &workv1.ManifestWork{}
	must(t, c.Get(ctx, types.NamespacedName{Namespace: "cluster-01", Name: WorkName(writersProfile)}, now))
	if now.Generation != stale.Generation+2 || !SameSpec(now, stale) {
		t.Errorf("the work after two writes from generation %d: generation %d, spec as before %v; want %d, true",
			stale.Generation, now.Generation, SameSpec(now, stale), stale.Generation+2)
	}
}
