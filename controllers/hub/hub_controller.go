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
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/internal/measure"
	"github.com/nettune/nettune/controllers/internal/retry"
	"github.com/nettune/nettune/controllers/internal/round"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/maintenance"
)

// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=work.open-cluster-management.io,resources=manifestworks,verbs=get;list;watch;create;update;patch;delete

// Reconciler rolls a hub's NetTuningProfiles out across the vehicles of the
// managed clusters they select.
type Reconciler struct {
	client.Client
	// intervals keeps each work generation's reportInterval for the
	// heartbeat filter (workHandler).
	intervals ReportIntervals
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// APIReader reads the profile past the cache, as a cluster's profile
	// reconciler does; the Client when nil.
	APIReader client.Reader
	// Namespace holds the hub's ControllerRevisions.
	Namespace string
	// ClusterNamespace is nettune's namespace in every managed cluster,
	// where the revisions the hub places go.
	ClusterNamespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Backends: the fleet's central Loki or Prometheus, which the judge
	// reads, and the credentials it asks for (several tenants joined by |
	// read every cluster's vehicles in one query).
	Backends analysis.Backends
	// EventLog, when set, also receives every rollout event as a JSON line.
	EventLog eventlog.Log
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
	// WorkWriters is how many ManifestWorks a reconcile writes at once
	// (DefaultWorkWriters when 0).
	WorkWriters int
	// WorkStatusSync is the work agents' --status-sync-interval
	// (DefaultWorkStatusSync when 0): the clusters' heartbeat leaves room
	// for it (ReportInterval).
	WorkStatusSync time.Duration
	// AddOn, when set, places profiles only in clusters where nettune's
	// OCM add-on is available at a compatible version (addongate.go).
	AddOn *AddOnGate

	// written remembers the works this reconciler wrote last (written.go),
	// so that a reconcile that runs before the cache has seen those writes
	// does not write them again.
	written writtenWorks
}

// DefaultWorkWriters is how many ManifestWorks a reconcile writes at once.
const DefaultWorkWriters = 16

func (r *Reconciler) statusSync() time.Duration {
	if r.WorkStatusSync > 0 {
		return r.WorkStatusSync
	}
	return DefaultWorkStatusSync
}

func (r *Reconciler) workers() int {
	if r.WorkWriters > 0 {
		return r.WorkWriters
	}
	return DefaultWorkWriters
}

// workHandler enqueues the profile of a ManifestWork that changed. A change
// of the report's time alone (HeartbeatOnly, about 40 a second at 1,000
// clusters) enqueues nothing: the planner's requeue at the oldest report's
// staleness reads the times then. A heartbeat that ends a silence
// (HeartbeatEndsSilence) is enqueued at once, so that a cluster's
// controller coming back is seen when its report arrives.
func (r *Reconciler) workHandler() handler.EventHandler {
	profile := func(o client.Object) (reconcile.Request, bool) {
		if o.GetLabels()[ManagedByLabel] != ManagedBy || o.GetAnnotations()[ProfileAnnotation] == "" {
			return reconcile.Request{}, false
		}
		return reconcile.Request{NamespacedName: types.NamespacedName{Name: o.GetAnnotations()[ProfileAnnotation]}}, true
	}
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if req, ok := profile(o); ok {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.intervals.forget(e.Object.GetUID())
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			req, ok := profile(e.ObjectNew)
			if !ok {
				return
			}
			old, _ := e.ObjectOld.(*workv1.ManifestWork)
			cur, _ := e.ObjectNew.(*workv1.ManifestWork)
			if HeartbeatOnly(old, cur) && !HeartbeatEndsSilence(old, cur, req.Name, r.statusSync(), &r.intervals) {
				return
			}
			q.Add(req)
		},
	}
}

// SetupWithManager registers the reconciler and its watches: the hub's
// profiles, their ManifestWorks (status feedback), the managed clusters
// (availability, and clusters that join or leave), and the Placements,
// PlacementDecisions and ManagedClusterSetBindings of the profiles with a
// spec.placement.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	r.Backends = r.Backends.WithDefaults()
	if r.ClusterNamespace == "" {
		r.ClusterNamespace = "nettune-system"
	}
	return r.watchAddOns(ctrl.NewControllerManagedBy(mgr)).
		Named("hubprofile").
		For(&v1alpha1.NetTuningProfile{}).
		Watches(&workv1.ManifestWork{}, r.workHandler()).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.allProfiles)).
		Watches(&clusterv1beta1.Placement{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.placementProfiles(ctx, o.GetNamespace(), o.GetName())
		})).
		Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			name, ok := o.GetLabels()[clusterv1beta1.PlacementLabel]
			if !ok {
				return nil
			}
			return r.placementProfiles(ctx, o.GetNamespace(), name)
		})).
		Watches(&clusterv1beta2.ManagedClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.placementProfiles(ctx, o.GetNamespace(), "")
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: &r.SkipNameValidation, RateLimiter: retry.Limiter()}).
		Complete(r)
}

// placementProfiles are the profiles whose spec.placement is the
// Placement namespace/name (any Placement of namespace when name is "").
func (r *Reconciler) placementProfiles(ctx context.Context, namespace, name string) []reconcile.Request {
	list := &v1alpha1.NetTuningProfileList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		ref := list.Items[i].Spec.Placement
		if ref != nil && ref.Namespace == namespace && (name == "" || ref.Name == name) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return out
}

func (r *Reconciler) allProfiles(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &v1alpha1.NetTuningProfileList{}
	if err := r.List(ctx, list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return out
}

// Reconcile runs one rollout round for a hub profile over every vehicle of
// its clusters, writes the ManifestWorks whose share changed, and patches
// the profile's status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	p := &v1alpha1.NetTuningProfile{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, p)
	}
	if !controllerutil.ContainsFinalizer(p, v1alpha1.CleanupFinalizer) {
		patch := client.MergeFrom(p.DeepCopy())
		controllerutil.AddFinalizer(p, v1alpha1.CleanupFinalizer)
		if err := r.Patch(ctx, p, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	base := p.DeepCopy()
	if err := maintenance.Check(p.Spec.Rollout.GetApply()); err != nil {
		// No vehicle of any cluster could open such a window: no work is
		// written, and the profile says which field.
		planner.Stall(&p.Status, p.Generation, "InvalidApplyPolicy", err.Error(), r.Now())
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "InvalidApplyPolicy", "Rollout", "%s", err.Error())
		return ctrl.Result{}, errors.Join(reconcile.TerminalError(err), r.patchStatus(ctx, base, p))
	}
	sel, err := r.selectClusters(ctx, p)
	if pp, ok := isPlacementProblem(err); ok {
		// A Placement that cannot be used, or decides no cluster: no work
		// is written or removed (a Placement emptied by mistake must not
		// take the profile from every cluster), and the profile says why.
		// Its watches bring the profile back when the Placement, its
		// decisions or the namespace's bindings change.
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Message != pp.Message {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, pp.Reason, "Placement", "%s", pp.Message)
		}
		planner.Stall(&p.Status, p.Generation, pp.Reason, pp.Message, r.Now())
		return ctrl.Result{}, r.patchStatus(ctx, base, p)
	}
	var changing *decisionsChanging
	if errors.As(err, &changing) {
		// OCM is rewriting the Placement's decisions: the next look, or
		// the watches, see them whole.
		logger.V(1).Info("waiting for the Placement's decisions", "why", changing.msg)
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		planner.Stall(&p.Status, p.Generation, "ReconcileError", err.Error(), r.Now())
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, base, p))
	}
	out, taken, err := r.plan(ctx, p, sel)
	if err != nil {
		planner.Stall(&p.Status, p.Generation, "ReconcileError", err.Error(), r.Now())
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, base, p))
	}
	p.Status = out.Status
	if err := r.patchStatus(ctx, base, p); err != nil {
		return ctrl.Result{}, err
	}
	if msg, raised := planner.ConditionRaised(base.Status.Conditions, p.Status.Conditions, v1alpha1.ConditionPlacementWarnings); raised {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "PlacementWarnings", "Placement", "%s", msg)
	}
	for _, t := range taken {
		typ, reason, msg := t.Event()
		r.Recorder.Eventf(p, nil, typ, reason, "Analysis", "%s", msg)
	}
	for _, e := range out.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(p, nil, typ, e.Reason, "Rollout", "%s", e.Message)
		eventlog.Rollout(r.EventLog, p, e, r.Now())
	}
	logger.V(1).Info("planned", "revision", p.Status.CurrentRevision, "phase", p.Status.Phase, "clusters", len(p.Status.Clusters), "requeueAfter", out.RequeueAfter)
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
}

// plan runs one rollout round (round.Run) over the vehicles of the
// clusters the profile selects, and writes each cluster's ManifestWork with
// its share of the decision; the planner writes the whole status, the
// clusters' summary included.
func (r *Reconciler) plan(ctx context.Context, p *v1alpha1.NetTuningProfile, sel *selection) (planner.Output, []measure.Taken, error) {
	revs := revision.NewStore(r.Client, r.Namespace)
	var (
		clusters  []Cluster
		placed    []Cluster
		clusterOf map[string]string
		dup       []string
		existing  map[string]*workv1.ManifestWork
		skipped   map[string]string
	)
	rd := round.Round{
		Revisions: revs, Scheme: r.Scheme, Backends: r.Backends,
		Observe: func(ctx context.Context, in *planner.Input) (measure.Kernels, error) {
			var err error
			clusters, existing, err = r.observe(ctx, p, sel)
			if err != nil {
				return nil, err
			}
			var all []Cluster
			all, clusters = clusters, nil
			if clusters, skipped, err = r.AddOn.admit(ctx, r.Client, all, existing, r.Now()); err != nil {
				return nil, err
			}
			placed = make([]Cluster, 0, len(clusters))
			for _, c := range clusters {
				if c.AddOnDown == "" {
					placed = append(placed, c)
				}
			}
			in.Placement = sel.placement
			in.Now, in.Rollout = r.Now(), p.Spec.Rollout
			clusters = Judge(clusters, in.Now, p.Spec.Rollout.GetUnreachableAfter())
			in.Vehicles, clusterOf, dup = Vehicles(clusters, in.Now)
			in.Clusters = make([]planner.Cluster, 0, len(clusters))
			for _, c := range clusters {
				in.Clusters = append(in.Clusters, planner.Cluster{Name: c.Name, Reachable: c.Reachable, Message: c.Message, Reports: c.Reports,
					DecisionGroup: sel.group[c.Name]})
			}
			for _, c := range all {
				if why, ok := skipped[c.Name]; ok {
					in.Clusters = append(in.Clusters, planner.Cluster{Name: c.Name, Reachable: c.Reachable, Message: "no work placed: " + why, DecisionGroup: sel.group[c.Name]})
				}
			}
			return Kernels(in.Vehicles), nil
		},
		Apply: func(ctx context.Context, out planner.Output) error {
			return r.placeAll(ctx, p, revs, out, placed, clusterOf, existing, sel.silent)
		},
	}
	res, err := rd.Run(ctx, p)
	if err != nil {
		return planner.Output{}, nil, err
	}
	res.Events = append(res.Events, FreshnessEvents(p.Status.Clusters, clusters, r.Now(), p.Spec.Rollout.GetUnreachableAfter())...)
	if r.AddOn != nil {
		skippedClusters(&res.Status, p.Generation, skipped, metav1.NewTime(r.Now()))
	}
	if len(dup) > 0 {
		res.Events = append(res.Events, planner.Event{Warning: true, Reason: "DuplicateVehicle",
			Message: "vehicles reported by more than one cluster, kept in the first: " + strings.Join(dup, ", ")})
	}
	return res.Output, res.Taken, nil
}

// observe reads the managed clusters the profile selects, each with the
// profile's ManifestWork in it, and returns the profile's works by cluster
// (those of clusters no longer selected included).
func (r *Reconciler) observe(ctx context.Context, p *v1alpha1.NetTuningProfile, sel *selection) ([]Cluster, map[string]*workv1.ManifestWork, error) {
	selected := sel.clusters
	works := &workv1.ManifestWorkList{}
	if err := r.List(ctx, works, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		return nil, nil, fmt.Errorf("list ManifestWorks: %w", err)
	}
	existing := map[string]*workv1.ManifestWork{}
	for i := range works.Items {
		w := &works.Items[i]
		if w.Annotations[ProfileAnnotation] == p.Name {
			existing[w.Namespace] = w
		}
	}
	clusters := make([]Cluster, 0, len(selected))
	for _, mc := range selected {
		clusters = append(clusters, Observe(mc, existing[mc.Name], p.Name))
	}
	return clusters, existing, nil
}

// placeAll writes each selected cluster's ManifestWork with the cluster's
// share of out's decision, and removes the profile's works from the
// clusters no longer selected, but for those silent now (not Available):
// theirs is kept, as it is, until they are Available again.
func (r *Reconciler) placeAll(ctx context.Context, p *v1alpha1.NetTuningProfile, revs *revision.Store, out planner.Output,
	clusters []Cluster, clusterOf map[string]string, existing map[string]*workv1.ManifestWork, silent map[string]bool) error {
	rev := revision.Name(p)
	contents := func(name string) (*v1alpha1.NetTuningProfileSpec, error) {
		if name == rev {
			return revision.Content(p), nil
		}
		return revs.Read(ctx, name)
	}
	errs := make([]error, len(clusters))
	// The works are written concurrently: each write waits for the API
	// server's answer, and one after the other they held a reconcile (its
	// status, and the rollout's next step) for 22 ms per cluster
	// (docs/bench-hub.md).
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.workers())
	shares := Shares(out.Assign, clusterOf, out.Status.StableRevision)
	vehiclesOf := map[string][]string{}
	for v, c := range clusterOf {
		vehiclesOf[c] = append(vehiclesOf[c], v)
	}
	for i, c := range clusters {
		share := shares(c.Name)
		share.ReportInterval = &metav1.Duration{Duration: ReportInterval(p.Spec.Rollout.GetUnreachableAfter(), r.statusSync())}
		if c.ByAddOn {
			// The add-on's Lease says the controller runs: no heartbeat.
			share.Liveness = v1alpha1.LivenessAddOnLease
		}
		w := existing[c.Name]
		delete(existing, c.Name)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.place(ctx, p, c.Name, share, contents, w, vehiclesOf[c.Name])
		}()
	}
	wg.Wait()
	// Clusters no longer selected (or gone) lose the profile. A silent
	// cluster keeps its work until it is Available again: OCM drops a
	// silent cluster from the decisions of a Placement that does not
	// tolerate its taints, and puts it back when it returns; removing its
	// work meanwhile would take the profile from its vehicles when it
	// returns, and give it back a moment later.
	for ns, w := range existing {
		if silent[ns] {
			continue
		}
		if err := r.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove the work from cluster %s: %w", ns, err))
			continue
		}
		r.written.forget(client.ObjectKeyFromObject(w))
	}
	return errors.Join(errs...)
}

// place writes the cluster's ManifestWork when its share changed.
// A work that already gives each of the cluster's known vehicles
// (vehicles) the revision share gives it, and is otherwise what share
// would make, is kept (EquivalentWork): the end of a rollout, which makes
// the rollout's revision the stable one, rewrote every cluster's work for
// the same vehicles on the same revision (half of a staged rollout's work
// writes at 3,500 clusters, docs/bench-hub.md).
func (r *Reconciler) place(ctx context.Context, p *v1alpha1.NetTuningProfile, cluster string, share *v1alpha1.HubAssignment,
	contents Contents, existing *workv1.ManifestWork, vehicles []string) error {
	w, err := Work(p, cluster, r.ClusterNamespace, share, contents)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", cluster, err)
	}
	key := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	want := specHash(w)
	if last, ok := r.written.get(key); ok && (existing == nil || existing.Generation < last.generation) {
		// The cache has not seen this reconciler's last write of the work
		// yet: that write, not the cache, says what the work holds.
		if want != "" && last.hash == want {
			return nil
		}
		// The patch carries the whole spec (from an empty one): the
		// cache's is not the work's.
		base := &workv1.ManifestWork{ObjectMeta: *w.ObjectMeta.DeepCopy()}
		if existing != nil {
			base = existing.DeepCopy()
			base.Spec = workv1.ManifestWorkSpec{}
		}
		existing = base
	} else if existing == nil {
		if err := r.Create(ctx, w); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Made by an earlier reconcile the cache has not seen:
				// the next reconcile, once it has, writes the share.
				return nil
			}
			return fmt.Errorf("cluster %s: create work: %w", cluster, err)
		}
		r.written.set(key, w.Generation, want)
		worksWritten.WithLabelValues("create").Inc()
		return nil
	} else if SameSpec(w, existing) || EquivalentWork(p, cluster, r.ClusterNamespace, share, contents, existing, vehicles) {
		return nil
	}
	// A patch of the spec, not an update: the work agent's status writes
	// change the resourceVersion an update would have to match.
	patched := existing.DeepCopy()
	patched.Spec = w.Spec
	if err := r.Patch(ctx, patched, client.MergeFrom(existing)); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.forget(key)
		}
		return fmt.Errorf("cluster %s: update work: %w", cluster, err)
	}
	r.written.set(key, patched.Generation, want)
	worksWritten.WithLabelValues("update").Inc()
	return nil
}

// patchStatus writes p's status (the planner's, or planner.Stall's) when
// it differs from base's, with the optimistic lock (as a cluster's profile
// reconciler does).
func (r *Reconciler) patchStatus(ctx context.Context, base, p *v1alpha1.NetTuningProfile) error {
	if apiequality.Semantic.DeepEqual(base.Status, p.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// finalize removes the profile from every cluster (its works) before the
// profile goes.
func (r *Reconciler) finalize(ctx context.Context, p *v1alpha1.NetTuningProfile) error {
	works := &workv1.ManifestWorkList{}
	if err := r.List(ctx, works, client.MatchingLabels{ManagedByLabel: ManagedBy}); err != nil {
		return fmt.Errorf("list ManifestWorks: %w", err)
	}
	for i := range works.Items {
		w := &works.Items[i]
		if w.Annotations[ProfileAnnotation] != p.Name {
			continue
		}
		if err := r.Delete(ctx, w); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove the work from cluster %s: %w", w.Namespace, err)
		}
		r.written.forget(client.ObjectKeyFromObject(w))
	}
	if !controllerutil.ContainsFinalizer(p, v1alpha1.CleanupFinalizer) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, v1alpha1.CleanupFinalizer)
	return client.IgnoreNotFound(r.Patch(ctx, p, patch))
}
