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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/charts"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/addon"
	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/hubtest"
)

const addonNS = "nettune-system"

// TestAddOn: nettune installed into a fleet as an Open Cluster Management
// add-on. A hub (OCM's hub controllers with OCM's add-on manager) and
// three spokes; nettune's add-on manager (as nettune-controller --hub
// --addon-manager runs it) keeps the ClusterManagementAddOn "nettune",
// whose install strategy is a Placement of the clusters labeled
// nettune.io/addon=true (depot-a and depot-b, not depot-c). OCM's add-on manager
// creates their ManagedClusterAddOns; nettune's writes the chart rendered
// for each as the ManifestWork addon-nettune-deploy-0, which OCM's work
// agent applies into the spoke's API server (CRDs, RBAC, DaemonSet,
// Deployment). The spokes have no kubelet, so the Deployment never runs a
// pod: the test runs what that pod would run of the add-on, the Lease
// renewal of nettune-controller --addon-lease, in process against each
// spoke; OCM's registration agent reads the Lease and sets the add-on
// Available. An AddOnDeploymentConfig gives one cluster its own values.
// A profile applied at the hub then goes to depot-a and depot-b
// only, and says why not depot-c. Then chart 0.2.0 (the embedded chart
// with its version raised) rolls out Progressive, maxConcurrency 1: never
// more than one cluster between versions, depot-b waits for depot-a; with
// the gate at 0.2.0 the cluster still at 0.1.0 gets no new profile work and
// the profile says why. Out of the Placement, a cluster loses the add-on
// but keeps nettune's Namespace and CRDs (its profiles).
func TestAddOn(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if missing := hubtest.MissingTools(root); len(missing) > 0 {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("missing %s: run 'make tools'", strings.Join(missing, ", "))
		}
		t.Skipf("missing %s: run 'make tools' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := filepath.Join(root, ".nettune", "hub-addon")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	h, err := hubtest.StartHubWithOptions(dir, hubtest.Options{Logf: t.Logf, AddOnManager: true, AddOnLeaseSyncInterval: 2 * time.Second,
		AddOnLeaseDurationSeconds: 3})
	if err != nil {
		t.Fatalf("starting the hub: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the hub: %v", err)
		}
	})
	names := []string{"depot-a", "depot-b", "depot-c"}
	spokes := make([]*hubtest.Spoke, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spokes[i], errs[i] = h.StartSpoke(n)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("spoke %s: %v", names[i], err)
		}
	}
	t.Logf("TIMING hub and 3 spokes up in %s", time.Since(began).Round(time.Millisecond))

	// The Placement: clusters labeled nettune.io/addon=true, in the global set.
	c := h.Client
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: addonNS}}))
	for _, n := range names[:2] {
		patch := []byte(`{"metadata":{"labels":{"nettune.io/addon":"true"}}}`)
		must(t, c.Patch(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1", Kind: "ManagedCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch(types.MergePatchType, patch)))
	}
	must(t, c.Create(ctx, &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Name: "global", Namespace: addonNS},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "global"}}))
	must(t, c.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "nettune-addon", Namespace: addonNS},
		Spec: clusterv1beta1.PlacementSpec{Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"nettune.io/addon": "true"}}}}}}}))

	// What the spokes' controller pods would run of the add-on: its Lease.
	stopLease := map[string]func(){}
	startLease := func(s *hubtest.Spoke, name string) {
		leaseCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		l := &addon.Lease{Client: s.Client, Name: addon.DefaultName, Namespace: addonNS, Interval: 2 * time.Second}
		go func() { defer close(done); _ = l.Start(leaseCtx) }()
		stopLease[name] = func() { stop(); <-done }
	}
	t.Cleanup(func() {
		for _, stop := range stopLease {
			stop()
		}
	})
	for i, s := range spokes[:2] {
		startLease(s, names[i])
	}

	ch, err := addon.LoadChart(charts.FS, charts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	v1 := ch.Metadata.Version
	stop := startAddOnHub(t, h, addon.Manager{Chart: ch, Namespace: addonNS,
		Placements: []types.NamespacedName{{Namespace: addonNS, Name: "nettune-addon"}},
		Rollout: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}}, v1)

	// Installed: the works in depot-a and depot-b, applied on the spokes,
	// the add-ons Available at v1.
	installStart := time.Now()
	for i, n := range names[:2] {
		waitFor(t, 90*time.Second, "the add-on at "+v1+" and Available in "+n, func() bool {
			a := &addonv1alpha1.ManagedClusterAddOn{}
			if c.Get(ctx, client.ObjectKey{Namespace: n, Name: addon.DefaultName}, a) != nil {
				return false
			}
			return a.Labels[addon.VersionLabel] == v1 && meta.IsStatusConditionTrue(a.Status.Conditions, "Available") &&
				meta.IsStatusConditionTrue(a.Status.Conditions, addon.ConditionChartVersion)
		})
		s := spokes[i]
		d := &appsv1.Deployment{}
		must(t, s.Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-controller"}, d))
		if got := d.Labels["app.kubernetes.io/version"]; got != ch.Metadata.AppVersion {
			t.Errorf("%s: the controller Deployment's version label is %q, want %q", n, got, ch.Metadata.AppVersion)
		}
		ds := &appsv1.DaemonSet{}
		must(t, s.Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-agent"}, ds))
		// What the work agent applied, by its own record on the spoke.
		amws := &workv1.AppliedManifestWorkList{}
		must(t, s.Client.List(ctx, amws))
		kinds := map[string]int{}
		for _, amw := range amws.Items {
			if !strings.HasSuffix(amw.Name, addon.WorkName(addon.DefaultName)) {
				continue
			}
			for _, r := range amw.Status.AppliedResources {
				kinds[r.Resource]++
			}
		}
		for _, k := range []string{"customresourcedefinitions", "clusterroles", "clusterrolebindings", "serviceaccounts", "daemonsets", "deployments"} {
			if kinds[k] == 0 {
				t.Errorf("%s: the work agent applied no %s of the chart (applied: %v)", n, k, kinds)
			}
		}
	}
	t.Logf("TIMING the add-on installed and Available in 2 clusters %s after the manager started", time.Since(installStart).Round(time.Millisecond))

	// Values per cluster: an AddOnDeploymentConfig named in depot-a's
	// ManagedClusterAddOn (OCM's add-on manager resolves it into the
	// add-on's status.configReferences) reaches depot-a's Deployment only.
	must(t, c.Create(ctx, &addonv1alpha1.AddOnDeploymentConfig{ObjectMeta: metav1.ObjectMeta{Name: "three-replicas", Namespace: addonNS},
		Spec: addonv1alpha1.AddOnDeploymentConfigSpec{CustomizedVariables: []addonv1alpha1.CustomizedVariable{{Name: "controller_replicas", Value: "3"}}}}))
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	must(t, c.Get(ctx, client.ObjectKey{Namespace: "depot-a", Name: addon.DefaultName}, mca))
	base := mca.DeepCopy()
	mca.Spec.Configs = []addonv1alpha1.AddOnConfig{{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{Group: addonv1alpha1.GroupName, Resource: "addondeploymentconfigs"},
		ConfigReferent: addonv1alpha1.ConfigReferent{Namespace: addonNS, Name: "three-replicas"}}}
	must(t, c.Patch(ctx, mca, client.MergeFrom(base)))
	waitFor(t, 60*time.Second, "depot-a's controller Deployment at 3 replicas from its AddOnDeploymentConfig", func() bool {
		d := &appsv1.Deployment{}
		return spokes[0].Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-controller"}, d) == nil &&
			d.Spec.Replicas != nil && *d.Spec.Replicas == 3
	})
	if d := (&appsv1.Deployment{}); spokes[1].Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-controller"}, d) != nil ||
		d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("depot-b's controller Deployment: %v replicas, want the chart's 2", d.Spec.Replicas)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "depot-c", Name: addon.DefaultName}, &addonv1alpha1.ManagedClusterAddOn{}); err == nil {
		t.Errorf("depot-c, outside the Placement, has a ManagedClusterAddOn")
	}

	// A profile at the hub: depot-a and depot-b get its work, depot-c does
	// not, and the profile says why.
	p := sample(t, root, "01-xavier-lan-v1.yaml")
	p.Name = "addon-lan"
	must(t, c.Create(ctx, p))
	got := waitAddOnProfile(t, c, "the profile placed in depot-a and depot-b, depot-c skipped", func(p *hubProfile) bool {
		return p.work("depot-a") && p.work("depot-b") && strings.Contains(p.clusterMsg("depot-c"), "not installed")
	})
	if got.work("depot-c") {
		t.Errorf("depot-c, without the add-on, got the profile's work")
	}
	if cond := meta.FindStatusCondition(got.p.Status.Conditions, hub.ConditionAddOnUnavailable); cond == nil || cond.Status != metav1.ConditionTrue ||
		!strings.Contains(cond.Message, "depot-c") || strings.Contains(cond.Message, "depot-a") {
		t.Errorf("condition %s = %+v, want True naming depot-c only", hub.ConditionAddOnUnavailable, cond)
	}
	stop()

	// Chart 0.2.0, Progressive with maxConcurrency 1, the gate at 0.2.0.
	ch2 := *ch
	md := *ch.Metadata
	md.Version, md.AppVersion = "0.2.0", "0.2.0"
	ch2.Metadata = &md
	upStart := time.Now()
	var (
		mu          sync.Mutex
		maxBusy     int
		sawOneAhead bool
	)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			works := &workv1.ManifestWorkList{}
			addons := &addonv1alpha1.ManagedClusterAddOnList{}
			if c.List(sampleCtx, works, client.MatchingLabels{addonv1alpha1.AddonLabelKey: addon.DefaultName}) == nil && c.List(sampleCtx, addons) == nil {
				busy, at2 := 0, 0
				for _, w := range works.Items {
					if w.Labels[addon.VersionLabel] != "0.2.0" {
						continue
					}
					at2++
					for _, a := range addons.Items {
						if a.Namespace == w.Namespace && (a.Labels[addon.VersionLabel] != "0.2.0" || !meta.IsStatusConditionTrue(a.Status.Conditions, "Available")) {
							busy++
						}
					}
				}
				mu.Lock()
				maxBusy = max(maxBusy, busy)
				sawOneAhead = sawOneAhead || (at2 == 1 && len(works.Items) == 2)
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	stop = startAddOnHub(t, h, addon.Manager{Chart: &ch2, Namespace: addonNS,
		Placements: []types.NamespacedName{{Namespace: addonNS, Name: "nettune-addon"}},
		Rollout: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt32(1)}}}, "0.2.0")
	defer stop()
	// While depot-b waits at 0.1.0, the profile skips it (incompatible).
	waitAddOnProfile(t, c, "depot-b skipped as older than 0.2.0 while it waits its turn", func(p *hubProfile) bool {
		return strings.Contains(p.clusterMsg("depot-b"), "older than 0.2.0") || strings.Contains(p.clusterMsg("depot-a"), "older than 0.2.0")
	})
	for _, n := range names[:2] {
		waitFor(t, 90*time.Second, "the add-on at 0.2.0 in "+n, func() bool {
			a := &addonv1alpha1.ManagedClusterAddOn{}
			return c.Get(ctx, client.ObjectKey{Namespace: n, Name: addon.DefaultName}, a) == nil && a.Labels[addon.VersionLabel] == "0.2.0"
		})
	}
	stopSampling()
	<-sampled
	t.Logf("TIMING chart 0.2.0 rolled out to 2 clusters one at a time in %s", time.Since(upStart).Round(time.Millisecond))
	mu.Lock()
	if maxBusy > 1 {
		t.Errorf("%d clusters were between versions at once; maxConcurrency is 1", maxBusy)
	}
	if !sawOneAhead {
		t.Errorf("never saw one cluster at 0.2.0 while the other still had 0.1.0: not progressive")
	}
	mu.Unlock()
	for i, n := range names[:2] {
		d := &appsv1.Deployment{}
		must(t, spokes[i].Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-controller"}, d))
		if d.Labels["app.kubernetes.io/version"] != "0.2.0" {
			t.Errorf("%s: the controller Deployment is at %q after the upgrade, want 0.2.0", n, d.Labels["app.kubernetes.io/version"])
		}
	}
	waitAddOnProfile(t, c, "both clusters admitted again at 0.2.0", func(p *hubProfile) bool {
		return p.work("depot-a") && p.work("depot-b") && !strings.Contains(p.clusterMsg("depot-a")+p.clusterMsg("depot-b"), "no work placed")
	})

	// depot-a's controller reports its vehicles (the test writes what it
	// would, the report of the profile's copy there; OCM's work agent
	// carries it to the hub) and asks no heartbeat: its share's liveness
	// is AddOnLease.
	copyA := &v1alpha1.NetTuningProfile{}
	must(t, spokes[0].Client.Get(ctx, client.ObjectKey{Name: "addon-lan"}, copyA))
	if copyA.Spec.HubAssignment == nil || copyA.Spec.HubAssignment.Liveness != v1alpha1.LivenessAddOnLease {
		t.Errorf("depot-a's copy of the profile: hubAssignment %+v, want liveness %s", copyA.Spec.HubAssignment, v1alpha1.LivenessAddOnLease)
	}
	copyA.Status.VehicleReport = v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: time.Now().Truncate(time.Second), Generation: copyA.Generation},
		[]v1alpha1.VehicleReport{{Vehicle: "depot-a-av-1", Hardware: []string{"xavier"}}, {Vehicle: "depot-a-av-2", Hardware: []string{"xavier"}}})
	must(t, spokes[0].Client.Status().Update(ctx, copyA))
	waitAddOnProfile(t, c, "depot-a's 2 vehicles at the hub", func(p *hubProfile) bool {
		return p.cluster("depot-a").Vehicles == 2 && p.cluster("depot-a").Reachable
	})
	// Its controller stops (the Lease is no longer renewed): OCM's
	// registration agent turns the add-on Available=False, and the hub
	// keeps depot-a in the rollout, not reachable, its work in place.
	silentAt := time.Now()
	stopLease["depot-a"]()
	got = waitAddOnProfile(t, c, "depot-a not reachable once OCM reads its add-on's Lease as stopped", func(p *hubProfile) bool {
		return !p.cluster("depot-a").Reachable && strings.Contains(p.clusterMsg("depot-a"), "not running as OCM reads its add-on's Lease")
	})
	t.Logf("TIMING depot-a's vehicles not reachable %s after its add-on's Lease stopped: %s", time.Since(silentAt).Round(time.Millisecond), got.clusterMsg("depot-a"))
	if !got.work("depot-a") {
		t.Errorf("depot-a's work withdrawn while its add-on is not Available; want it kept")
	}
	startLease(spokes[0], "depot-a")
	waitAddOnProfile(t, c, "depot-a reachable again once its add-on's Lease is renewed", func(p *hubProfile) bool {
		return p.cluster("depot-a").Reachable && p.work("depot-a")
	})

	// Out of the Placement: OCM's add-on manager deletes depot-b's add-on,
	// nettune's its work, and the work agent what it applied there but the
	// Namespace and the CRDs.
	must(t, c.Patch(ctx, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "cluster.open-cluster-management.io/v1", Kind: "ManagedCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: "depot-b"}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"nettune.io/addon":null}}}`))))
	waitFor(t, 60*time.Second, "depot-b's controller Deployment removed by the work agent", func() bool {
		return apierrors.IsNotFound(spokes[1].Client.Get(ctx, client.ObjectKey{Namespace: addonNS, Name: "nettune-controller"}, &appsv1.Deployment{}))
	})
	// The work goes once the work agent has removed what it applied (its
	// finalizer).
	waitFor(t, 60*time.Second, "depot-b's add-on work deleted", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: "depot-b", Name: addon.WorkName(addon.DefaultName)}, &workv1.ManifestWork{}))
	})
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: addonNS}},
		&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
			ObjectMeta: metav1.ObjectMeta{Name: "nettuningprofiles.nettune.io"}}} {
		if err := spokes[1].Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || !obj.GetDeletionTimestamp().IsZero() {
			t.Errorf("depot-b's %s %s after the add-on left: %v (deleting: %t), want kept", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err, err == nil && !obj.GetDeletionTimestamp().IsZero())
		}
	}
	waitAddOnProfile(t, c, "depot-b skipped again, its add-on gone", func(p *hubProfile) bool {
		return strings.Contains(p.clusterMsg("depot-b"), "not installed")
	})
	t.Logf("TIMING whole test %s", time.Since(began).Round(time.Millisecond))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// startAddOnHub runs, in process against the hub, what nettune-controller
// --hub --addon-manager runs: the add-on manager m and the profile
// reconciler with the add-on gate at minVersion.
func startAddOnHub(t *testing.T, h *hubtest.Hub, m addon.Manager, minVersion string) func() {
	t.Helper()
	mgr, err := ctrl.NewManager(rest.CopyConfig(h.Config), ctrl.Options{Scheme: h.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	m.Client, m.Recorder, m.SkipNameValidation = mgr.GetClient(), mgr.GetEventRecorder("nettune-addon-manager"), true
	if err := m.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupHub(mgr, controllers.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("nettune-controller"), Namespace: addonNS, SkipNameValidation: true,
		AddOnGate: &hub.AddOnGate{Name: addon.DefaultName, VersionLabel: addon.VersionLabel, MinVersion: minVersion}}, addonNS); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("hub manager: %v", err)
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

type hubProfile struct {
	p     *v1alpha1.NetTuningProfile
	works map[string]bool
}

func (h *hubProfile) work(cluster string) bool { return h.works[cluster] }

func (h *hubProfile) cluster(name string) v1alpha1.ClusterStatus {
	for _, cs := range h.p.Status.Clusters {
		if cs.Name == name {
			return cs
		}
	}
	return v1alpha1.ClusterStatus{}
}

func (h *hubProfile) clusterMsg(cluster string) string {
	for _, cs := range h.p.Status.Clusters {
		if cs.Name == cluster {
			return cs.Message
		}
	}
	return ""
}

func waitAddOnProfile(t *testing.T, c client.Client, what string, cond func(*hubProfile) bool) *hubProfile {
	t.Helper()
	var last *hubProfile
	waitFor(t, 90*time.Second, what, func() bool {
		p := &v1alpha1.NetTuningProfile{}
		if c.Get(context.Background(), client.ObjectKey{Name: "addon-lan"}, p) != nil {
			return false
		}
		works := &workv1.ManifestWorkList{}
		if c.List(context.Background(), works, client.MatchingLabels{hub.ManagedByLabel: hub.ManagedBy}) != nil {
			return false
		}
		last = &hubProfile{p: p, works: map[string]bool{}}
		for _, w := range works.Items {
			if w.Annotations[hub.ProfileAnnotation] == "addon-lan" {
				last.works[w.Namespace] = true
			}
		}
		return cond(last)
	})
	return last
}
