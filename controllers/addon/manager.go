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

package addon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nettune/nettune/controllers/hub"
)

// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=clustermanagementaddons,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=managedclusteraddons/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=addon.open-cluster-management.io,resources=addondeploymentconfigs,verbs=get;list;watch

const (
	// DefaultName is the add-on's name: the ClusterManagementAddOn, every
	// ManagedClusterAddOn, the Lease its health is read from.
	DefaultName = "nettune"
	// VersionLabel is, on a ManifestWork, the chart version it carries, and
	// on a ManagedClusterAddOn the chart version the cluster runs (from the
	// work's status feedback; absent until known).
	VersionLabel = "addon.nettune.io/version"
	// FeedbackVersion and FeedbackReplicas name the work's status feedback
	// of the controller Deployment.
	FeedbackVersion = "version"
	// ConditionChartVersion on a ManagedClusterAddOn says whether the
	// cluster runs the manager's chart version, or why not yet.
	ConditionChartVersion = "ChartVersion"
)

// WorkName is the add-on's ManifestWork in every cluster namespace (OCM's
// convention: addon-<name>-deploy-<index>).
func WorkName(addon string) string { return "addon-" + addon + "-deploy-0" }

// Manager is nettune's add-on manager on an OCM hub: it keeps the
// ClusterManagementAddOn, and for every ManagedClusterAddOn of that name
// writes the chart rendered for the cluster as a ManifestWork, a new chart
// version by the install strategy's rollout strategy, and reports per
// cluster what runs there.
type Manager struct {
	client.Client
	Recorder events.EventRecorder
	// Chart is the spoke part (charts.FS by default).
	Chart *chart.Chart
	// Name is the add-on's name (DefaultName when empty).
	Name string
	// Namespace is the install namespace in every cluster.
	Namespace string
	// Placements, when set, are the install strategy (OCM's add-on manager
	// creates a ManagedClusterAddOn in every cluster they decide);
	// otherwise the strategy is Manual.
	Placements []types.NamespacedName
	// Rollout is each placement's rollout strategy.
	Rollout clusterv1alpha1.RolloutStrategy
	// Values are the chart values every cluster gets (an
	// AddOnDeploymentConfig's customizedVariables go over them).
	Values map[string]any
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
}

func (m *Manager) name() string {
	if m.Name == "" {
		return DefaultName
	}
	return m.Name
}

// Version is the chart version the manager installs.
func (m *Manager) Version() string { return m.Chart.Metadata.Version }

// SetupWithManager registers the manager: one reconcile for the whole
// add-on (a rollout counts clusters), on any change of the
// ClusterManagementAddOn, a ManagedClusterAddOn of its name, or one of its
// works.
func (m *Manager) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetName() != m.name() && o.GetLabels()[addonv1alpha1.AddonLabelKey] != m.name() {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: m.name()}}}
	})
	// One reconcile at start: the ClusterManagementAddOn may not exist
	// yet, and nothing else would trigger it.
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &addonv1alpha1.ClusterManagementAddOn{ObjectMeta: metav1.ObjectMeta{Name: m.name()}}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("addonmanager").
		WatchesRawSource(source.Channel(start, one)).
		Watches(&addonv1alpha1.ClusterManagementAddOn{}, one).
		Watches(&addonv1alpha1.ManagedClusterAddOn{}, one).
		Watches(&workv1.ManifestWork{}, one).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &m.SkipNameValidation}).
		Complete(m)
}

// desired is the ClusterManagementAddOn's spec the manager owns.
func (m *Manager) desired() addonv1alpha1.ClusterManagementAddOnSpec {
	spec := addonv1alpha1.ClusterManagementAddOnSpec{
		AddOnMeta: addonv1alpha1.AddOnMeta{DisplayName: "nettune",
			Description: "Per-host-pair TCP tuning for vehicle fleets: nettune's controller, node agents and CRDs (chart " + m.Version() + ")"},
		SupportedConfigs: []addonv1alpha1.ConfigMeta{{ConfigGroupResource: addonv1alpha1.ConfigGroupResource{
			Group: addonv1alpha1.GroupName, Resource: "addondeploymentconfigs"}}},
		InstallStrategy: addonv1alpha1.InstallStrategy{Type: addonv1alpha1.AddonInstallStrategyManual},
	}
	if len(m.Placements) > 0 {
		spec.InstallStrategy.Type = addonv1alpha1.AddonInstallStrategyPlacements
		for _, p := range m.Placements {
			spec.InstallStrategy.Placements = append(spec.InstallStrategy.Placements, addonv1alpha1.PlacementStrategy{
				PlacementRef: addonv1alpha1.PlacementRef{Namespace: p.Namespace, Name: p.Name}, RolloutStrategy: m.Rollout})
		}
	}
	return spec
}

// ensureCMA creates the ClusterManagementAddOn, or puts back the parts of
// its spec the manager's flags own.
func (m *Manager) ensureCMA(ctx context.Context) (*addonv1alpha1.ClusterManagementAddOn, error) {
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	err := m.Get(ctx, client.ObjectKey{Name: m.name()}, cma)
	if apierrors.IsNotFound(err) {
		cma = &addonv1alpha1.ClusterManagementAddOn{
			ObjectMeta: metav1.ObjectMeta{Name: m.name(), Annotations: map[string]string{
				addonv1alpha1.AddonLifecycleAnnotationKey: addonv1alpha1.AddonLifecycleAddonManagerAnnotationValue}},
			Spec: m.desired(),
		}
		if err := m.Create(ctx, cma); err != nil {
			return nil, fmt.Errorf("create ClusterManagementAddOn %s: %w", m.name(), err)
		}
		return cma, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get ClusterManagementAddOn %s: %w", m.name(), err)
	}
	want := m.desired()
	if apiequality.Semantic.DeepEqual(cma.Spec.AddOnMeta, want.AddOnMeta) &&
		apiequality.Semantic.DeepEqual(cma.Spec.SupportedConfigs, want.SupportedConfigs) &&
		apiequality.Semantic.DeepEqual(cma.Spec.InstallStrategy, want.InstallStrategy) {
		return cma, nil
	}
	base := cma.DeepCopy()
	cma.Spec.AddOnMeta, cma.Spec.SupportedConfigs, cma.Spec.InstallStrategy = want.AddOnMeta, want.SupportedConfigs, want.InstallStrategy
	if err := m.Patch(ctx, cma, client.MergeFrom(base)); err != nil {
		return nil, fmt.Errorf("update ClusterManagementAddOn %s: %w", m.name(), err)
	}
	return cma, nil
}

// strategy is the rollout strategy of the ClusterManagementAddOn's first
// placement (All with the Manual strategy).
func strategy(cma *addonv1alpha1.ClusterManagementAddOn, total int) (Strategy, error) {
	if cma.Spec.InstallStrategy.Type != addonv1alpha1.AddonInstallStrategyPlacements || len(cma.Spec.InstallStrategy.Placements) == 0 {
		return Strategy{}, nil
	}
	return StrategyFrom(&cma.Spec.InstallStrategy.Placements[0].RolloutStrategy, total, "spec.installStrategy.placements[0].rolloutStrategy")
}

// Reconcile writes every cluster's work the rollout lets through and every
// ManagedClusterAddOn's status.
func (m *Manager) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	cma, err := m.ensureCMA(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	addons, works, err := m.observe(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	version := m.Version()
	st, err := strategy(cma, len(addons))
	if err != nil {
		// Nothing is written while the strategy cannot be read.
		m.Recorder.Eventf(cma, nil, corev1.EventTypeWarning, "InvalidRolloutStrategy", "Rollout", "%s", err.Error())
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	installed := make([]Installed, 0, len(addons))
	for _, a := range addons {
		installed = append(installed, observed(a, works[a.Namespace]))
	}
	write, waiting := Plan(version, st, installed)
	toWrite := map[string]bool{}
	for _, c := range write {
		toWrite[c] = true
	}
	isWaiting := map[string]bool{}
	for _, c := range waiting {
		isWaiting[c] = true
	}
	var errs []error
	for i, a := range addons {
		w := works[a.Namespace]
		delete(works, a.Namespace)
		// A cluster at the manager's version keeps its work in step (a
		// changed AddOnDeploymentConfig or cluster version goes at once).
		if toWrite[a.Namespace] || installed[i].Work == version {
			if err := m.place(ctx, a, w); err != nil {
				errs = append(errs, err)
			}
		}
		if err := m.status(ctx, a, w, installed[i], version, st, isWaiting[a.Namespace]); err != nil {
			errs = append(errs, err)
		}
	}
	// Works of clusters whose add-on is gone: the hub may have no garbage
	// collector for the owner reference, so they are removed here.
	for ns, w := range works {
		if err := m.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster %s: remove the add-on's work: %w", ns, err))
		}
	}
	logger.V(1).Info("add-on reconciled", "version", version, "clusters", len(addons), "written", len(write), "waiting", len(waiting))
	if len(waiting) > 0 {
		// The clusters upgrading report through their works and add-ons,
		// which are watched; this is a backstop.
		return ctrl.Result{RequeueAfter: 30 * time.Second}, errors.Join(errs...)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

func (m *Manager) observe(ctx context.Context) ([]*addonv1alpha1.ManagedClusterAddOn, map[string]*workv1.ManifestWork, error) {
	list := &addonv1alpha1.ManagedClusterAddOnList{}
	if err := m.List(ctx, list); err != nil {
		return nil, nil, fmt.Errorf("list ManagedClusterAddOns: %w", err)
	}
	var addons []*addonv1alpha1.ManagedClusterAddOn
	for i := range list.Items {
		a := &list.Items[i]
		if a.Name == m.name() && a.DeletionTimestamp.IsZero() {
			addons = append(addons, a)
		}
	}
	sort.Slice(addons, func(i, j int) bool { return addons[i].Namespace < addons[j].Namespace })
	wl := &workv1.ManifestWorkList{}
	if err := m.List(ctx, wl, client.MatchingLabels{addonv1alpha1.AddonLabelKey: m.name()}); err != nil {
		return nil, nil, fmt.Errorf("list ManifestWorks: %w", err)
	}
	works := map[string]*workv1.ManifestWork{}
	for i := range wl.Items {
		if wl.Items[i].Name == WorkName(m.name()) {
			works[wl.Items[i].Namespace] = &wl.Items[i]
		}
	}
	return addons, works, nil
}

// observed reads what a cluster runs: the version its work carries, the
// version the applied Deployment reports for the work's current generation,
// and the add-on's Available condition.
func observed(a *addonv1alpha1.ManagedClusterAddOn, w *workv1.ManifestWork) Installed {
	in := Installed{Cluster: a.Namespace, Available: meta.IsStatusConditionTrue(a.Status.Conditions, addonv1alpha1.ManagedClusterAddOnConditionAvailable)}
	if w == nil {
		return in
	}
	in.Work = w.Labels[VersionLabel]
	applied := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied)
	if applied == nil || applied.Status != metav1.ConditionTrue || applied.ObservedGeneration != w.Generation {
		return in
	}
	for _, mc := range w.Status.ResourceStatus.Manifests {
		if mc.ResourceMeta.Kind != "Deployment" {
			continue
		}
		for _, v := range mc.StatusFeedbacks.Values {
			if v.Name == FeedbackVersion && v.Value.String != nil {
				in.Version = *v.Value.String
			}
		}
	}
	return in
}

// values are the chart values for one cluster: the manager's, the add-on's
// Lease, then its AddOnDeploymentConfig's customizedVariables (as Helm's
// --set PATH=VALUE, PATH the name with its underscores as dots) and
// nodePlacement (the controller's and the agents'
// nodeSelector and tolerations).
func (m *Manager) values(ctx context.Context, a *addonv1alpha1.ManagedClusterAddOn) (Release, error) {
	rel := Release{Name: m.name(), Namespace: m.Namespace, Values: map[string]any{}}
	raw, err := json.Marshal(m.Values)
	if err != nil {
		return rel, err
	}
	if err := json.Unmarshal(raw, &rel.Values); err != nil {
		return rel, err
	}
	rel.Set = append(rel.Set, "controller.addOnLease="+m.name())
	for _, ref := range a.Status.ConfigReferences {
		if ref.Group != addonv1alpha1.GroupName || ref.Resource != "addondeploymentconfigs" {
			continue
		}
		key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
		if ref.DesiredConfig != nil {
			key = client.ObjectKey{Namespace: ref.DesiredConfig.Namespace, Name: ref.DesiredConfig.Name}
		}
		adc := &addonv1alpha1.AddOnDeploymentConfig{}
		if err := m.Get(ctx, key, adc); err != nil {
			return rel, fmt.Errorf("AddOnDeploymentConfig %s: %w", key, err)
		}
		// OCM allows no dots in a variable's name: its underscores stand
		// for the dots of the value's path (controller_replicas is
		// controller.replicas; the chart's keys have no underscores).
		for _, v := range adc.Spec.CustomizedVariables {
			rel.Set = append(rel.Set, strings.ReplaceAll(v.Name, "_", ".")+"="+v.Value)
		}
		if np := adc.Spec.NodePlacement; np != nil {
			var place map[string]any
			raw, _ := json.Marshal(map[string]any{"nodeSelector": np.NodeSelector, "tolerations": np.Tolerations})
			_ = json.Unmarshal(raw, &place)
			for _, part := range []string{"controller", "agent"} {
				sub, _ := rel.Values[part].(map[string]any)
				if sub == nil {
					sub = map[string]any{}
				}
				for k, v := range place {
					if v != nil {
						sub[k] = v
					}
				}
				rel.Values[part] = sub
			}
		}
	}
	return rel, nil
}

// Work is the add-on's ManifestWork for one cluster: the rendered chart,
// its CRDs and namespace left in place when the work goes (the cluster's
// profiles and NodeNetTunings outlive the add-on), and status feedback of
// the controller Deployment (its version label and well-known status).
func (m *Manager) Work(cluster string, objs []map[string]any) (*workv1.ManifestWork, error) {
	w := &workv1.ManifestWork{
		TypeMeta: metav1.TypeMeta{APIVersion: workv1.GroupVersion.String(), Kind: "ManifestWork"},
		ObjectMeta: metav1.ObjectMeta{Name: WorkName(m.name()), Namespace: cluster,
			Labels: map[string]string{addonv1alpha1.AddonLabelKey: m.name(), VersionLabel: m.Version()}},
		Spec: workv1.ManifestWorkSpec{DeleteOption: &workv1.DeleteOption{PropagationPolicy: workv1.DeletePropagationPolicyTypeSelectivelyOrphan,
			SelectivelyOrphan: &workv1.SelectivelyOrphan{}}},
	}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		w.Spec.Workload.Manifests = append(w.Spec.Workload.Manifests, workv1.Manifest{RawExtension: runtime.RawExtension{Raw: raw}})
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		switch kind {
		case "CustomResourceDefinition":
			w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules = append(w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules,
				workv1.OrphaningRule{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: name})
		case "Namespace":
			w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules = append(w.Spec.DeleteOption.SelectivelyOrphan.OrphaningRules,
				workv1.OrphaningRule{Resource: "namespaces", Name: name})
		}
	}
	w.Spec.ManifestConfigs = []workv1.ManifestConfigOption{{
		ResourceIdentifier: workv1.ResourceIdentifier{Group: "apps", Resource: "deployments", Name: m.name() + "-controller", Namespace: m.Namespace},
		FeedbackRules: []workv1.FeedbackRule{
			{Type: workv1.WellKnownStatusType},
			{Type: workv1.JSONPathsType, JsonPaths: []workv1.JsonPath{{Name: FeedbackVersion, Path: `.metadata.labels.app\.kubernetes\.io/version`}}},
		},
	}}
	return w, nil
}

// place renders the chart for a's cluster and writes the work when it
// differs from w.
func (m *Manager) place(ctx context.Context, a *addonv1alpha1.ManagedClusterAddOn, w *workv1.ManifestWork) error {
	rel, err := m.values(ctx, a)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", a.Namespace, err)
	}
	mc := &clusterv1.ManagedCluster{}
	if err := m.Get(ctx, client.ObjectKey{Name: a.Namespace}, mc); err == nil {
		rel.KubeVersion = mc.Status.Version.Kubernetes
	}
	objs, err := Render(m.Chart, rel)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", a.Namespace, err)
	}
	plain := make([]map[string]any, len(objs))
	for i, o := range objs {
		plain[i] = o.Object
	}
	want, err := m.Work(a.Namespace, plain)
	if err != nil {
		return err
	}
	owner := metav1.NewControllerRef(a, addonv1alpha1.GroupVersion.WithKind("ManagedClusterAddOn"))
	owner.BlockOwnerDeletion = nil
	want.OwnerReferences = []metav1.OwnerReference{*owner}
	if w == nil {
		if err := m.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %s: create the add-on's work: %w", a.Namespace, err)
		}
		return nil
	}
	if w.Labels[VersionLabel] == want.Labels[VersionLabel] && hub.SameSpec(want, w) {
		return nil
	}
	patched := w.DeepCopy()
	patched.Spec = want.Spec
	patched.Labels = want.Labels
	if err := m.Patch(ctx, patched, client.MergeFrom(w)); err != nil {
		return fmt.Errorf("cluster %s: update the add-on's work: %w", a.Namespace, err)
	}
	return nil
}

// status writes, in one patch, a's status as the manager sees it (the
// install namespace, Lease health, ManifestApplied from the work, and
// ChartVersion: the version it runs or why not yet), and its VersionLabel.
func (m *Manager) status(ctx context.Context, a *addonv1alpha1.ManagedClusterAddOn, w *workv1.ManifestWork, in Installed,
	version string, st Strategy, waiting bool) error {
	base := a.DeepCopy()
	a.Status.Namespace = m.Namespace
	a.Status.HealthCheck = addonv1alpha1.HealthCheck{Mode: addonv1alpha1.HealthCheckModeLease}
	if w != nil {
		if c := meta.FindStatusCondition(w.Status.Conditions, workv1.WorkApplied); c != nil {
			meta.SetStatusCondition(&a.Status.Conditions, metav1.Condition{Type: addonv1alpha1.ManagedClusterAddOnManifestApplied,
				Status: c.Status, Reason: "ManifestWork" + c.Reason, Message: c.Message, ObservedGeneration: a.Generation})
		}
	}
	cond := metav1.Condition{Type: ConditionChartVersion, ObservedGeneration: a.Generation}
	switch {
	case in.Done(version):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Installed", "runs chart "+version
	case waiting:
		cond.Status, cond.Reason = metav1.ConditionFalse, "UpgradeWaiting"
		cond.Message = fmt.Sprintf("runs chart %s; %s waits for its turn (Progressive, maxConcurrency %d)", orUnknown(in.Version), version, st.MaxConcurrency)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, "Installing"
		cond.Message = fmt.Sprintf("chart %s placed; the cluster runs %s, add-on available: %t", version, orUnknown(in.Version), in.Available)
	}
	meta.SetStatusCondition(&a.Status.Conditions, cond)
	if !apiequality.Semantic.DeepEqual(base.Status, a.Status) {
		// With the optimistic lock: a merge patch replaces the whole
		// conditions list, and the registration agent writes Available.
		if err := m.Status().Patch(ctx, a, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %s: patch the add-on's status: %w", a.Namespace, err)
		}
	}
	if in.Version != "" && a.Labels[VersionLabel] != in.Version {
		lb := a.DeepCopy()
		if lb.Labels == nil {
			lb.Labels = map[string]string{}
		}
		lb.Labels[VersionLabel] = in.Version
		if err := m.Patch(ctx, lb, client.MergeFrom(a)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %s: label the add-on's version: %w", a.Namespace, err)
		}
	}
	return nil
}

func orUnknown(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}

// Placements parses --addon-placement values (NAMESPACE/NAME).
func Placements(vals []string) ([]types.NamespacedName, error) {
	var out []types.NamespacedName
	for _, v := range vals {
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--addon-placement %q: want NAMESPACE/NAME", v)
		}
		out = append(out, types.NamespacedName{Namespace: ns, Name: name})
	}
	return out, nil
}
