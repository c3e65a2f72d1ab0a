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
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/hubtest"
)

// TestHubPlacement: a hub profile whose clusters are the decisions of an
// OCM Placement (the hub's real placement controller), over three spoke
// clusters in the ManagedClusterSet "depots", bound to the Placement's
// namespace. The Placement's first decision group is depot-a: the canary
// cohort is both its vehicles (by the hash order alone it would span two
// clusters), then the steps move the other clusters as a group, and
// status.clusters says each cluster's group and rollout status. Then the
// bad inputs, each a Stalled condition naming it and no ManifestWork: a
// missing Placement, one deciding no cluster, one naming a set not bound
// to its namespace, and the rolled-out profile's own Placement emptied
// (its works stay).
//
// No vehicle kernels: each spoke's cluster controller is played by the
// test, which reads the profile copy OCM's work agent applied and reports
// every vehicle Verified on the revision the hub assigned it (the
// vehicleReport the work agent carries back as status feedback).
func TestHubPlacement(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if m := hubtest.MissingTools(root); len(m) > 0 {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("missing %s: run 'make tools'", strings.Join(m, ", "))
		}
		t.Skipf("missing %s: run 'make tools' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(m, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := filepath.Join(root, ".nettune", "hub-placement")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "hub-reconciler.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	ctrl.SetLogger(zap.New(zap.WriteTo(logf), zap.UseDevMode(true)))
	h, err := hubtest.StartHubWithOptions(dir, hubtest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the hub: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the hub: %v", err)
		}
	})
	const ns = "nettune-system"
	vehicles := map[string][]string{}
	for _, name := range []string{"depot-a", "depot-b", "depot-c"} {
		s, err := h.StartSpoke(name)
		if err != nil {
			t.Fatalf("spoke %s: %v", name, err)
		}
		// The ControllerRevisions the hub places go to nettune's namespace.
		if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		vehicles[name] = []string{"av-" + name[len(name)-1:] + "1", "av-" + name[len(name)-1:] + "2"}
		go reportVehicles(ctx, s, vehicles[name])
		// Members of the set "depots"; depot-a in the decision group "first".
		lbls := map[string]string{clusterv1beta2.ClusterSetLabel: "depots"}
		if name == "depot-a" {
			lbls["nettune.io/rollout-group"] = "first"
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": lbls}})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Client.Patch(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{ns, "fleet"} {
		if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	startHubReconciler(ctx, t, h, ns)
	t.Logf("TIMING hub, 3 spokes and the hub's reconciler up in %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- hub reconciler log:\n%s", tailFile(logf.Name(), 40))
			t.Logf("--- ocm hub log:\n%s", tailFile(h.LogPath("ocm-hub"), 20))
		}
	})

	// The documented set, binding and Placement, as they are.
	for _, o := range sampleObjects(t, filepath.Join(root, "config", "samples", "hub", "depots-placement.yaml")) {
		if err := h.Client.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	var decisions []hub.Decision
	waitFor(t, time.Minute, "the Placement fleet/depots to decide the 3 clusters", func() bool {
		decisions, err = hub.PlacementDecisions(ctx, h.Client, "fleet", "depots")
		return err == nil && len(decisions) == 3
	})
	if got := fmt.Sprint(decisions); got != "[{depot-a 0 first} {depot-b 1 } {depot-c 1 }]" {
		t.Fatalf("decisions %s: want depot-a in group 0 (first), depot-b and depot-c in group 1", got)
	}

	// The documented profile; its second step moves 4 vehicles (the first
	// group and one cluster of the next), so that the step shows whole
	// clusters moving in group order.
	p := &v1alpha1.NetTuningProfile{}
	raw, err := os.ReadFile(filepath.Join(root, "config", "samples", "xavier-lan-placement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, p); err != nil {
		t.Fatal(err)
	}
	four := int32(4)
	p.Spec.Rollout.Steps[1].SetVehicles = &v1alpha1.SetVehiclesStep{Count: &four}
	// spec.placement and clusterSelector exclude each other (CEL), the
	// field named.
	both := p.DeepCopy()
	both.Spec.ClusterSelector = &v1alpha1.LabelSelector{}
	if err := h.Client.Create(ctx, both); err == nil || !strings.Contains(err.Error(), "spec.placement") {
		t.Errorf("a profile with placement and clusterSelector: %v, want a refusal naming spec.placement", err)
	}
	// First the content as it stands, to every vehicle at once (no
	// rollout): the hub learns the clusters' vehicles from their reports
	// (a canary is chosen among the vehicles known when a rollout starts).
	first := p.DeepCopy()
	first.Spec.Rollout = nil
	first.Spec.Defaults.Initcwnd = ptrTo(int32(20))
	if err := h.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	v1 := waitNamed(t, h, p.Name, 2*time.Minute, "the first content on every vehicle", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision != "" && p.Status.Vehicles.Verified == 6
	})
	t.Logf("TIMING first content (%s) on the 6 vehicles, %s into the test", v1.Status.StableRevision, time.Since(began).Round(time.Millisecond))
	// Then the sample's content with its rollout.
	applied := time.Now()
	// The hub's controller writes the status at any time: an update that
	// lost that race is made again on the profile as it is now.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.NetTuningProfile{}
		if err := h.Client.Get(ctx, client.ObjectKey{Name: p.Name}, cur); err != nil {
			return err
		}
		cur.Spec = p.Spec
		return h.Client.Update(ctx, cur)
	}); err != nil {
		t.Fatalf("updating %s with its rollout: %v", p.Name, err)
	}
	clusters := func(p *v1alpha1.NetTuningProfile) string {
		var out []string
		for _, c := range p.Status.Clusters {
			out = append(out, fmt.Sprintf("%s/%d:%s", c.Name, c.DecisionGroup, c.RolloutStatus))
		}
		return strings.Join(out, " ")
	}
	p = waitNamed(t, h, p.Name, 2*time.Minute, "the canaries verified", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision != v1.Status.StableRevision && p.Status.CurrentStep != nil && *p.Status.CurrentStep == 0 && len(p.Status.Clusters) == 3 &&
			p.Status.Clusters[0].RolloutStatus == v1alpha1.ClusterSucceeded
	})
	rev := p.Status.CurrentRevision
	if got := strings.Join(p.Status.CanaryVehicles, ","); got != "av-a1,av-a2" {
		t.Errorf("canaries %s: want both vehicles of depot-a (decision group 0)", got)
	}
	if got, want := clusters(p), "depot-a/0:Succeeded depot-b/1:ToApply depot-c/1:ToApply"; got != want {
		t.Errorf("at the canary step: clusters %s, want %s", got, want)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionPlacementWarnings); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("the sample Placement tolerates a silent cluster's taints: PlacementWarnings %+v, want False", c)
	}
	t.Logf("TIMING canaries %v verified %s after the edit", p.Status.CanaryVehicles, time.Since(applied).Round(time.Millisecond))

	promote(ctx, t, h, p, 0)
	p = waitNamed(t, h, p.Name, 2*time.Minute, "the second group's first cluster verified", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentStep != nil && *p.Status.CurrentStep == 2 && p.Status.Vehicles.Verified == 4
	})
	// The hub's decision is in each cluster's work (its share), not in the
	// profile's status.
	moved := map[string]bool{}
	for _, a := range sharedAssignments(t, h, p.Name) {
		if a.Revision == rev {
			for _, v := range a.Vehicles {
				moved[v] = true
			}
		}
	}
	if p.Status.Assignments != nil {
		t.Errorf("the hub profile's status names vehicles: %v, want no status.assignments at a hub", p.Status.Assignments)
	}
	var movedClusters []string
	for name, vs := range vehicles {
		if moved[vs[0]] && moved[vs[1]] {
			movedClusters = append(movedClusters, name)
		}
	}
	sort.Strings(movedClusters)
	if len(moved) != 4 || len(movedClusters) != 2 || movedClusters[0] != "depot-a" {
		t.Errorf("after setVehicles 4: %v moved (clusters %v), want depot-a and one whole cluster of group 1", keys(moved), movedClusters)
	}
	want := map[string]string{"depot-a": "depot-a/0:Succeeded"}
	for _, name := range []string{"depot-b", "depot-c"} {
		want[name] = name + "/1:ToApply"
		if len(movedClusters) == 2 && movedClusters[1] == name {
			want[name] = name + "/1:Succeeded"
		}
	}
	if got, w := clusters(p), want["depot-a"]+" "+want["depot-b"]+" "+want["depot-c"]; got != w {
		t.Errorf("at step 2: clusters %s, want %s", got, w)
	}
	promote(ctx, t, h, p, 2)
	p = waitNamed(t, h, p.Name, 2*time.Minute, "the profile Healthy on every vehicle", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision == rev && p.Status.Vehicles.Verified == 6
	})
	if got, want := clusters(p), "depot-a/0:Succeeded depot-b/1:Succeeded depot-c/1:Succeeded"; got != want {
		t.Errorf("after the rollout: clusters %s, want %s", got, want)
	}
	t.Logf("TIMING rollout over the 3 clusters group by group done %s after the edit (two promotes)", time.Since(applied).Round(time.Millisecond))

	// Bad input: each a Stalled condition naming it, and no work.
	bad := []struct{ profile, placement, reason, says string }{
		{"no-placement", "missing", "PlacementNotFound", "Placement fleet/missing not found"},
		{"selects-nothing", "nothing", "PlacementSelectsNoCluster", "Placement fleet/nothing decides no managed cluster"},
		{"unbound-set", "unbound", "ClusterSetNotBound", "ManagedClusterSet(s) elsewhere, not bound to namespace fleet"},
	}
	if err := h.Client.Create(ctx, &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	tolerate := []clusterv1beta1.Toleration{{Key: hub.TaintUnreachable, Operator: clusterv1beta1.TolerationOpExists}, {Key: hub.TaintUnavailable, Operator: clusterv1beta1.TolerationOpExists}}
	for _, pl := range []*clusterv1beta1.Placement{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "nothing"}, Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{"depots"}, Tolerations: tolerate,
			Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
				LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"nettune.io/no-such-label": "x"}}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "unbound"}, Spec: clusterv1beta1.PlacementSpec{ClusterSets: []string{"elsewhere"}, Tolerations: tolerate}},
	} {
		if err := h.Client.Create(ctx, pl); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bad {
		q := p.DeepCopy()
		q.ObjectMeta = metav1.ObjectMeta{Name: b.profile}
		q.Status = v1alpha1.NetTuningProfileStatus{}
		q.Spec.Placement = &v1alpha1.PlacementRef{Namespace: "fleet", Name: b.placement}
		if err := h.Client.Create(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bad {
		q := waitNamed(t, h, b.profile, time.Minute, b.profile+" Stalled ("+b.reason+")", func(p *v1alpha1.NetTuningProfile) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionStalled)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == b.reason
		})
		c := meta.FindStatusCondition(q.Status.Conditions, v1alpha1.ConditionStalled)
		if !strings.Contains(c.Message, b.says) || !strings.HasPrefix(c.Message, "spec.placement: ") {
			t.Errorf("%s: Stalled %q, want it to name spec.placement and say %q", b.profile, c.Message, b.says)
		}
		if w := worksOf(t, h, b.profile); len(w) != 0 {
			t.Errorf("%s (%s): works %v written, want none", b.profile, b.reason, w)
		}
		t.Logf("%s: %s: %s", b.profile, c.Reason, c.Message)
	}

	// The rolled-out profile's Placement emptied: the profile says so, and
	// its works stay as they are.
	before := worksOf(t, h, p.Name)
	if len(before) != 3 {
		t.Fatalf("works of %s: %v, want 3", p.Name, before)
	}
	// OCM's placement controller writes the Placement's status at any
	// time: an update that lost that race is made again.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pl := &clusterv1beta1.Placement{}
		if err := h.Client.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "depots"}, pl); err != nil {
			return err
		}
		pl.Spec.Predicates = []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"nettune.io/no-such-label": "x"}}}}}
		return h.Client.Update(ctx, pl)
	}); err != nil {
		t.Fatalf("emptying the Placement fleet/depots: %v", err)
	}
	waitNamed(t, h, p.Name, time.Minute, p.Name+" Stalled once its Placement decides no cluster", func(p *v1alpha1.NetTuningProfile) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "PlacementSelectsNoCluster"
	})
	if after := worksOf(t, h, p.Name); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("works of %s after its Placement emptied: %v, want them as they were: %v", p.Name, after, before)
	}
	t.Logf("TIMING whole test %s", time.Since(began).Round(time.Millisecond))
}

// reportVehicles plays a spoke's nettune controller for TestHubPlacement:
// every vehicle reports Verified on the revision the hub's share assigns
// it (none before the profile's first rollout reaches it).
func reportVehicles(ctx context.Context, s *hubtest.Spoke, vehicles []string) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list := &v1alpha1.NetTuningProfileList{}
		if err := s.Client.List(ctx, list); err != nil {
			continue
		}
		for i := range list.Items {
			p := &list.Items[i]
			share := p.Spec.HubAssignment
			if share == nil {
				continue
			}
			revisionFor := share.RevisionFor()
			var rs []v1alpha1.VehicleReport
			for _, v := range vehicles {
				rev := revisionFor(v)
				rs = append(rs, v1alpha1.VehicleReport{Vehicle: v, Revision: rev, Verified: rev != "", Hardware: []string{"xavier"}, Counters: []string{}})
			}
			// No header: the hub reads a report without one as it did before
			// reports carried their time (never stale).
			if enc := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{}, rs); enc != p.Status.VehicleReport {
				p.Status.VehicleReport = enc
				_ = s.Client.Status().Update(ctx, p)
			}
		}
	}
}

// startHubReconciler runs the hub's reconciler (controllers.SetupHub, as
// `nettune-controller --hub` does) in the test's process.
func startHubReconciler(ctx context.Context, t *testing.T, h *hubtest.Hub, ns string) {
	t.Helper()
	mgr, err := ctrl.NewManager(h.Config, ctrl.Options{Scheme: h.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupHub(mgr, controllers.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("nettune-controller"), Namespace: ns, SkipNameValidation: true}, ns); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("hub reconciler: %v", err)
		}
	})
}

// sampleObjects reads the documents of a multi-document YAML file.
func sampleObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

func waitNamed(t *testing.T, h *hubtest.Hub, name string, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{}
	waitFor(t, timeout, what, func() bool {
		p = &v1alpha1.NetTuningProfile{}
		return h.Client.Get(context.Background(), client.ObjectKey{Name: name}, p) == nil && cond(p)
	})
	return p
}

// promote writes the plugin's promote annotation for step of p's rollout.
func promote(ctx context.Context, t *testing.T, h *hubtest.Hub, p *v1alpha1.NetTuningProfile, step int32) {
	t.Helper()
	rev := p.Status.CurrentRevision
	v := fleetmodel.PromoteValue(rev, step, planner.RolloutStarted(&p.Status, rev))
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.PromoteAnnotation, v))
	if err := h.Client.Patch(ctx, &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// sharedAssignments are the vehicles the hub names in the shares of every
// cluster's work of profile (those not on the share's stable revision).
func sharedAssignments(t *testing.T, h *hubtest.Hub, profile string) []v1alpha1.RevisionAssignment {
	t.Helper()
	list := &workv1.ManifestWorkList{}
	if err := h.Client.List(context.Background(), list, client.MatchingLabels{hub.ManagedByLabel: hub.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	var out []v1alpha1.RevisionAssignment
	for i := range list.Items {
		if list.Items[i].Annotations[hub.ProfileAnnotation] != profile {
			continue
		}
		share, err := hub.ShareOf(&list.Items[i], profile)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, share.Assignments...)
	}
	return out
}

// worksOf are the ManifestWorks of a hub profile, "namespace/name" to generation.
func worksOf(t *testing.T, h *hubtest.Hub, profile string) map[string]int64 {
	t.Helper()
	list := &workv1.ManifestWorkList{}
	if err := h.Client.List(context.Background(), list, client.MatchingLabels{hub.ManagedByLabel: hub.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, w := range list.Items {
		if w.Annotations[hub.ProfileAnnotation] == profile {
			out[w.Namespace+"/"+w.Name] = w.Generation
		}
	}
	return out
}
