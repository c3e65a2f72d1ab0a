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

package noderender

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetcache"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/internal/retry"
	"github.com/nettune/nettune/controllers/render"
	"github.com/nettune/nettune/controllers/revision"
)

// vehicleIndex indexes Nodes by the default vehicle label's value.
const vehicleIndex = "nettune.io/vehicle"

// Reconciler (the node renderer) writes one node's NodeNetTuning from the decisions of every
// profile (status.assignments): the profile reconciler decides which revision
// each vehicle gets, the node renderer merges them. It is keyed by node, so an
// edit re-renders only the nodes whose inputs changed: the nodes of vehicles
// whose assignment moved, the nodes of a vehicle whose node changed, a node
// whose NodeNetTuning was edited.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// Namespace holds the ControllerRevisions.
	Namespace string
	// Reports receives each node's conflicts and warnings (may be shared with
	// the profile reconciler); nil keeps none.
	Reports *Reports
	// MaxConcurrentReconciles is the number of nodes rendered at once
	// (DefaultWorkers when 0).
	MaxConcurrentReconciles int
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool

	contents sync.Map // revision name -> *v1alpha1.NetTuningProfileSpec (immutable)
	indexes  sync.Map // profile UID -> profileIndex
}

// profileIndex is what rendering reads of a profile, parsed once per
// resourceVersion: its selection and its status.assignments by vehicle.
type profileIndex struct {
	resourceVersion string
	selector        labels.Selector
	vehicleLabel    string
	selErr          error
	byVehicle       map[string]string
}

// SetupWithManager registers the renderer, its node index and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Node{}, vehicleIndex, func(o client.Object) []string {
		if v := o.GetLabels()[v1alpha1.DefaultVehicleLabel]; v != "" {
			return []string{v}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index nodes by vehicle: %w", err)
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = DefaultWorkers
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("noderenderer").
		For(&corev1.Node{}, builder.WithPredicates(NodePredicate())).
		Watches(&corev1.Node{}, r.vehiclePeers(), builder.WithPredicates(NodePredicate())).
		Watches(&v1alpha1.NetTuningProfile{}, r.assignmentChanges()).
		Watches(&v1alpha1.NodeNetTuning{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: &r.SkipNameValidation, RateLimiter: retry.Limiter()}).
		Complete(r)
}

// Reconcile renders one node.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			// The NodeNetTuning is owned by the Node: garbage collection
			// removes it.
			r.report(req.Name, nil)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	var nnt *v1alpha1.NodeNetTuning
	cur := &v1alpha1.NodeNetTuning{}
	switch err := r.Get(ctx, client.ObjectKey{Name: node.Name}, cur); {
	case err == nil:
		nnt = cur
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	// The cache's own profiles, read only: a deep copy per node of every
	// profile's status.assignments (every vehicle's name) was most of the
	// renderer's allocations.
	profiles := &v1alpha1.NetTuningProfileList{}
	if err := r.List(ctx, profiles, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list profiles: %w", err)
	}
	inputs, pending, err := r.inputs(ctx, node, nnt, profiles.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pending != "" {
		// A revision not yet in the cache (just created): leave the node
		// as it is and look again.
		log.FromContext(ctx).V(1).Info("revision content not readable yet; node left unchanged", "revision", pending)
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	if nnt == nil && len(inputs) == 0 {
		r.report(node.Name, nil)
		return ctrl.Result{}, nil
	}
	peers, err := r.vehicleNodes(ctx, node, profiles.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := render.Render(render.NodeFromCore(node), peers, inputs)
	if err := r.write(ctx, node, nnt, res.Spec); err != nil {
		return ctrl.Result{}, err
	}
	var names []string
	for _, in := range inputs {
		names = append(names, in.Profile)
	}
	f := findingsOf(node.Name, names, res)
	r.report(node.Name, &f)
	return ctrl.Result{}, nil
}

func (r *Reconciler) report(node string, f *nodeFindings) {
	if r.Reports == nil {
		return
	}
	r.Reports.notify(r.Reports.set(node, f))
}

// inputs are the revisions assigned to node's vehicle by every live profile
// that selects it. pending names a revision whose content cannot be read yet.
func (r *Reconciler) inputs(ctx context.Context, node *corev1.Node, nnt *v1alpha1.NodeNetTuning, profiles []v1alpha1.NetTuningProfile) ([]render.Input, string, error) {
	var out []render.Input
	for i := range profiles {
		p := &profiles[i]
		rev, err := r.revisionFor(p, node, nnt)
		if err != nil {
			// An invalid selector selects nothing (the profile's own
			// reconcile reports it as Stalled).
			continue
		}
		if rev == "" {
			continue
		}
		spec, err := r.content(ctx, rev)
		if err != nil {
			return nil, "", err
		}
		if spec == nil {
			return nil, rev, nil
		}
		in := render.Input{Profile: p.Name, Revision: rev, Spec: spec,
			Rollback: p.Status.Phase == v1alpha1.PhaseRolledBack && rev == p.Status.StableRevision}
		switch {
		case p.Spec.HubAssignment != nil:
			// A hub's copy: the hub's apply policy.
			in.Apply = p.Spec.HubAssignment.Apply
		case p.Spec.Rollout != nil:
			in.Apply = p.Spec.Rollout.Apply
		}
		out = append(out, in)
	}
	return out, "", nil
}

// revisionFor is the revision of p assigned to node's vehicle ("" = none).
func (r *Reconciler) revisionFor(p *v1alpha1.NetTuningProfile, node *corev1.Node, nnt *v1alpha1.NodeNetTuning) (string, error) {
	if !p.DeletionTimestamp.IsZero() {
		return "", nil
	}
	idx := r.indexOf(p)
	if idx.selErr != nil {
		return "", idx.selErr
	}
	vehicle := node.Labels[idx.vehicleLabel]
	if vehicle == "" || !idx.selector.Matches(labels.Set(node.Labels)) {
		return "", nil
	}
	if len(p.Status.Assignments) == 0 && len(p.Status.RevisionVehicles) > 0 && nnt != nil {
		// A status written before assignments were recorded: keep what the
		// node has until the profile's reconcile records its decision.
		return fleetmodel.AssignedRevision(nnt, p.Name), nil
	}
	return idx.byVehicle[vehicle], nil
}

// indexOf parses p's selection and indexes its assignments, once per
// resourceVersion (not once per node).
func (r *Reconciler) indexOf(p *v1alpha1.NetTuningProfile) profileIndex {
	if v, ok := r.indexes.Load(p.UID); ok {
		if idx := v.(profileIndex); idx.resourceVersion == p.ResourceVersion {
			return idx
		}
	}
	idx := profileIndex{resourceVersion: p.ResourceVersion, byVehicle: fleetmodel.AssignmentsByVehicle(p.Status.Assignments)}
	idx.selector, idx.vehicleLabel, idx.selErr = fleetmodel.Selection(p)
	r.indexes.Store(p.UID, idx)
	return idx
}

// content reads a revision's content (nil when it does not exist, or not
// yet in the cache). Contents are immutable, so they are kept.
func (r *Reconciler) content(ctx context.Context, name string) (*v1alpha1.NetTuningProfileSpec, error) {
	if v, ok := r.contents.Load(name); ok {
		return v.(*v1alpha1.NetTuningProfileSpec), nil
	}
	spec, err := revision.NewStore(r.Client, r.Namespace).Read(ctx, name)
	if err != nil || spec == nil {
		return nil, err
	}
	r.contents.Store(name, spec)
	return spec, nil
}

// vehicleNodes are the nodes that share node's vehicle under the vehicle
// label of any profile (Render keeps, per profile, those of its label).
func (r *Reconciler) vehicleNodes(ctx context.Context, node *corev1.Node, profiles []v1alpha1.NetTuningProfile) ([]render.Node, error) {
	seen := map[string]bool{}
	var out []render.Node
	for _, l := range vehicleLabels(profiles) {
		v := node.Labels[l]
		if v == "" {
			continue
		}
		nodes, err := r.nodesOfVehicle(ctx, l, v)
		if err != nil {
			return nil, err
		}
		for i := range nodes {
			if !seen[nodes[i].Name] {
				seen[nodes[i].Name] = true
				out = append(out, render.NodeFromCore(&nodes[i]))
			}
		}
	}
	return out, nil
}

// nodesOfVehicle lists the nodes whose label l is vehicle.
func (r *Reconciler) nodesOfVehicle(ctx context.Context, l, vehicle string) ([]corev1.Node, error) {
	list := &corev1.NodeList{}
	var err error
	// The cache's own Nodes, read only (every caller reads names and
	// labels).
	if l == v1alpha1.DefaultVehicleLabel {
		err = r.List(ctx, list, client.MatchingFields{vehicleIndex: vehicle}, client.UnsafeDisableDeepCopy)
	} else {
		err = r.List(ctx, list, client.MatchingLabels{l: vehicle}, client.UnsafeDisableDeepCopy)
	}
	if err != nil {
		return nil, fmt.Errorf("list nodes of vehicle %s: %w", vehicle, err)
	}
	return list.Items, nil
}

// vehicleLabels are the vehicle labels in use: the default and every
// profile's own, sorted.
func vehicleLabels(profiles []v1alpha1.NetTuningProfile) []string {
	ls := []string{v1alpha1.DefaultVehicleLabel}
	for i := range profiles {
		ls = append(ls, profiles[i].Spec.GetVehicleLabel())
	}
	sort.Strings(ls)
	return slices.Compact(ls)
}

// write creates or updates a node's NodeNetTuning when its spec changed.
func (r *Reconciler) write(ctx context.Context, node *corev1.Node, nnt *v1alpha1.NodeNetTuning, spec v1alpha1.NodeNetTuningSpec) error {
	if nnt == nil {
		nnt = &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: node.Name}, Spec: spec}
		if err := controllerutil.SetOwnerReference(node, nnt, r.Scheme); err != nil {
			return fmt.Errorf("nodenettuning %s: %w", node.Name, err)
		}
		if err := r.Create(ctx, nnt); err != nil {
			return fmt.Errorf("create nodenettuning %s: %w", node.Name, err)
		}
		nodesRendered.Inc()
		return nil
	}
	if fleetcache.SameSpec(nnt, spec) {
		return nil
	}
	patch, err := specReplace(spec)
	if err != nil {
		return fmt.Errorf("nodenettuning %s: %w", node.Name, err)
	}
	if err := r.Patch(ctx, nnt, patch); err != nil {
		return fmt.Errorf("update nodenettuning %s: %w", node.Name, err)
	}
	nodesRendered.Inc()
	return nil
}

// specReplace is a JSON patch that replaces a NodeNetTuning's spec with
// spec whole: a merge patch computed from the cached object would leave in
// place a list the cache dropped (trimSpecBody) and the new spec no longer
// has.
func specReplace(spec v1alpha1.NodeNetTuningSpec) (client.Patch, error) {
	b, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec", "value": spec}})
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, b), nil
}

// NodePredicate passes the node changes rendering depends on: every
// field render.NodeFromCore reads (labels, the address and device
// annotations, the addresses), not kubelet heartbeats.
func NodePredicate() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			if !ok1 || !ok2 {
				return true
			}
			return !reflect.DeepEqual(render.NodeFromCore(o), render.NodeFromCore(n))
		},
	}
}

// vehiclePeers enqueues the other nodes of a changed node's vehicle (old and
// new): their routes to it carry its address.
func (r *Reconciler) vehiclePeers() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		profiles := &v1alpha1.NetTuningProfileList{}
		if err := r.List(ctx, profiles, client.UnsafeDisableDeepCopy); err != nil { // read only
			log.FromContext(ctx).Error(err, "list profiles")
			return
		}
		for _, l := range vehicleLabels(profiles.Items) {
			for _, o := range objs {
				v := o.GetLabels()[l]
				if v == "" {
					continue
				}
				nodes, err := r.nodesOfVehicle(ctx, l, v)
				if err != nil {
					log.FromContext(ctx).Error(err, "list nodes of vehicle", "vehicle", v)
					continue
				}
				for _, n := range nodes {
					if n.Name != o.GetName() {
						q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
					}
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// assignmentChanges enqueues the nodes a profile change can re-render: the
// nodes of the vehicles whose assigned revision changed and, when the spec
// changed (selector, vehicle label) or the profile goes away, every node it
// was or is rendered on.
func (r *Reconciler) assignmentChanges() handler.EventHandler {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], old, cur *v1alpha1.NetTuningProfile) {
		var vehicles []string
		everything := cur == nil || old == nil || old.Generation != cur.Generation || !cur.DeletionTimestamp.IsZero()
		var oldA, curA []v1alpha1.RevisionAssignment
		if old != nil {
			oldA = old.Status.Assignments
		}
		if cur != nil {
			curA = cur.Status.Assignments
		}
		if everything {
			vehicles = fleetmodel.AssignedVehicles(oldA, curA)
		} else {
			vehicles = fleetmodel.ChangedVehicles(oldA, curA)
		}
		for _, p := range []*v1alpha1.NetTuningProfile{old, cur} {
			if p == nil {
				continue
			}
			l := p.Spec.GetVehicleLabel()
			for _, v := range vehicles {
				nodes, err := r.nodesOfVehicle(ctx, l, v)
				if err != nil {
					log.FromContext(ctx).Error(err, "list nodes of vehicle", "vehicle", v)
					continue
				}
				for _, n := range nodes {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
				}
			}
		}
		if everything {
			name := ""
			if cur != nil {
				name = cur.Name
			} else if old != nil {
				name = old.Name
			}
			nnts := &v1alpha1.NodeNetTuningList{}
			if err := r.List(ctx, nnts, client.UnsafeDisableDeepCopy); err != nil { // read only
				log.FromContext(ctx).Error(err, "list nodenettunings")
				return
			}
			for i := range nnts.Items {
				if fleetmodel.AssignedRevision(&nnts.Items[i], name) != "" {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: nnts.Items[i].Name}})
				}
			}
		}
	}
	profile := func(o client.Object) *v1alpha1.NetTuningProfile {
		p, _ := o.(*v1alpha1.NetTuningProfile)
		return p
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, nil, profile(e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, profile(e.ObjectOld), profile(e.ObjectNew))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, profile(e.Object), nil)
		},
	}
}

// DefaultWorkers is how many nodes the renderer renders and writes at
// once. Each worker waits for the API server's answer to its write: with 4,
// a loaded 2-core API server's latency, not its CPU, bounded a 5,000-node
// rollback (about 100 nodes a second).
const DefaultWorkers = 16
