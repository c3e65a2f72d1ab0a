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

package profile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/internal/measure"
	"github.com/nettune/nettune/controllers/internal/retry"
	"github.com/nettune/nettune/controllers/internal/round"
	"github.com/nettune/nettune/controllers/liveness"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/maintenance"
)

// Reconciler rolls a NetTuningProfile out, one round (round.Run) per
// reconcile: it keeps its revisions, asks the planner which vehicle gets
// which revision, runs the analyses the planner asks for, and writes the
// status the planner returns (the decision in status.assignments). It writes
// nothing but its own profile's status and revisions: the node renderer merges
// every profile's assignments into the NodeNetTunings, so profiles are
// reconciled concurrently.
type Reconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// APIReader reads the profile past the cache (mgr.GetAPIReader()): the
	// rollout decision must start from the status the last reconcile wrote,
	// never from a stale copy. The Client is used when nil.
	APIReader client.Reader
	// Namespace holds the ControllerRevisions.
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Backends says where analyses query and with which credentials.
	Backends analysis.Backends
	// EventLog, when set, also receives every rollout event as a JSON line
	// (see eventlog.RolloutLine), e.g. to ship them to Loki. It never changes a
	// decision.
	EventLog eventlog.Log
	// Reports brings the node renderer's conflicts and warnings into the
	// profile's conditions (and wakes the profile when they change); nil
	// reports none.
	Reports *noderender.Reports
	// Liveness says when each node's agent was last seen, from the agents'
	// Leases by the controller's clock, and wakes a profile when a vehicle
	// turns Unreachable (controllers.Setup makes one); nil judges by the status
	// heartbeats and requeues each profile for the next vehicle that can
	// turn Unreachable.
	Liveness *liveness.Liveness
	// MaxConcurrentReconciles is the number of profiles reconciled at once
	// (4 when 0).
	MaxConcurrentReconciles int
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
	// store reads the Nodes and NodeNetTunings of each plan straight from
	// the manager cache's informers (SetupWithManager).
	store *fleetStore
	// checks caches the analyses' rate checks (analysisFindings).
	checks analysisChecks
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	r.Backends = r.Backends.WithDefaults()
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 4
	}
	r.store = newFleetStore(context.Background(), mgr.GetCache(), r.Client)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.NetTuningProfile{}).
		Watches(&corev1.Node{}, r.allProfiles(), builder.WithPredicates(noderender.NodePredicate())).
		Watches(&v1alpha1.NodeNetTuning{}, r.allProfiles(), builder.WithPredicates(liveness.NodeNetTuningPredicate(r.Liveness))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, SkipNameValidation: &r.SkipNameValidation, RateLimiter: retry.Limiter()})
	if r.Reports != nil {
		b = b.WatchesRawSource(source.Channel(r.Reports.Changes, &handler.EnqueueRequestForObject{}))
	}
	if r.Liveness != nil {
		if r.Liveness.List == nil && r.APIReader != nil {
			r.Liveness.List = liveness.ListLeases(r.APIReader, r.Namespace)
		}
		b = b.WatchesRawSource(source.Channel(r.Liveness.Changes, &handler.EnqueueRequestForObject{}))
		if err := mgr.Add(r.Liveness); err != nil {
			return err
		}
	}
	return b.Complete(r)
}

// Reconcile runs one rollout round for a profile and patches its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	p := &v1alpha1.NetTuningProfile{}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) && r.Liveness != nil {
			r.Liveness.Untrack(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		if r.Liveness != nil {
			r.Liveness.Untrack(p.Name)
		}
		return r.finalize(ctx, p)
	}
	if !controllerutil.ContainsFinalizer(p, v1alpha1.CleanupFinalizer) {
		patch := client.MergeFrom(p.DeepCopy())
		controllerutil.AddFinalizer(p, v1alpha1.CleanupFinalizer)
		if err := r.Patch(ctx, p, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	if r.Liveness != nil && !r.Liveness.Synced() {
		// The agents' Leases are not listed yet (the controller just
		// started): every vehicle would be judged by its status heartbeat,
		// which an agent with a Lease refreshes only every 5 minutes.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	base := p.DeepCopy()
	ro := p.Spec.Rollout
	if p.Spec.HubAssignment != nil {
		ro = p.Spec.HubAssignment.Rollout() // a hub's copy: the hub's policy
	}
	if err := maintenance.Check(ro.GetApply()); err != nil {
		// No vehicle could open such a window: the rollout stops here,
		// saying which field, until the profile changes.
		planner.Stall(&p.Status, p.Generation, "InvalidApplyPolicy", err.Error(), r.Now())
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "InvalidApplyPolicy", "Rollout", "%s", err.Error())
		return ctrl.Result{}, errors.Join(reconcile.TerminalError(err), r.patchStatus(ctx, base, p))
	}
	started := r.Now()
	out, emit, err := r.plan(ctx, p)
	if err != nil {
		planner.Stall(&p.Status, p.Generation, "ReconcileError", err.Error(), r.Now())
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, base, p))
	}
	p.Status = out.Status
	if err := r.patchStatus(ctx, base, p); err != nil {
		// Nothing is announced for a status that was not written: the retry
		// decides again and announces once.
		return ctrl.Result{}, err
	}
	for _, e := range emit {
		e()
	}
	for _, e := range out.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(p, nil, typ, e.Reason, "Rollout", "%s", e.Message)
		eventlog.Rollout(r.EventLog, p, e, r.Now())
		if e.Reason == v1alpha1.ReasonRolledBack {
			rollbacksTotal.WithLabelValues(p.Name, rollbackReason(p)).Inc()
		}
	}
	recordMetrics(p)
	logger.V(1).Info("planned", "revision", p.Status.CurrentRevision, "phase", p.Status.Phase,
		"step", p.Status.CurrentStep, "requeueAfter", out.RequeueAfter, "took", r.Now().Sub(started))
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
}

// patchStatus writes p's status (the planner's, or planner.Stall's) when
// it differs from base's, with the optimistic lock: a status computed from
// an outdated profile is refused (and the reconcile retried) rather than
// merged.
func (r *Reconciler) patchStatus(ctx context.Context, base, p *v1alpha1.NetTuningProfile) error {
	if equalStatus(base.Status, p.Status) {
		return nil
	}
	// Unchanged assignments are left out of the patch's computation. They
	// are an atomic list, so the patch would not carry them anyway, but a
	// merge patch is computed by encoding both objects and decoding them
	// again, and at 6,000 vehicles their names were most of that (1.3 GB of
	// the allocations of a 30,000-node rollout). The API server keeps them,
	// and its answer, decoded into p, carries them.
	from, kept := base, p.Status.Assignments
	if fleetmodel.EqualAssignments(base.Status.Assignments, kept) {
		trimmed := *base
		trimmed.Status.Assignments, p.Status.Assignments = nil, nil
		from = &trimmed
	}
	patch := client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})
	if err := r.Status().Patch(ctx, p, patch); err != nil {
		p.Status.Assignments = kept // not decoded from an answer
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// plan runs one rollout round (round.Run) on the observed state: the
// fleet from the cache, the agents' liveness, the renderer's findings and
// the vehicles' kernels. The planner writes the whole status. emit
// announces what was done (events, metrics); it runs only once the status
// is written.
func (r *Reconciler) plan(ctx context.Context, p *v1alpha1.NetTuningProfile) (out planner.Output, emit []func(), err error) {
	rd := round.Round{
		Revisions: revision.NewStore(r.Client, r.Namespace), Scheme: r.Scheme, Backends: r.measureConfig(),
		Observe: func(ctx context.Context, in *planner.Input) (measure.Kernels, error) { return r.observe(ctx, p, in) },
		// A measurement is taken at the time it is taken, not the plan's.
		MeasureClock: r.Now,
		// The findings the renderer reported meanwhile go into the plan
		// that records the measurements.
		Replan: func(in *planner.Input) { in.Render = r.findings(p.Name) },
	}
	res, err := rd.Run(ctx, p)
	if err != nil {
		return planner.Output{}, nil, err
	}
	for _, t := range res.Taken {
		emit = append(emit, r.announce(p, t))
	}
	if msg, raised := planner.AnalysisWarningsRaised(p.Status.Conditions, res.Status.Conditions); raised {
		emit = append(emit, func() {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "AnalysisWarnings", "Check", "%s", msg)
		})
	}
	if msg, raised := planner.RenderWarningsRaised(p.Status.Conditions, res.Status.Conditions); raised {
		emit = append(emit, func() {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "RenderWarnings", "Render", "%s", msg)
		})
	}
	return res.Output, emit, nil
}

// observe completes a round's input with the fleet the profile selects,
// as of now: its vehicles (with the tcp_info counters of each for a copy
// following a hub, which reports them), the agents' liveness and the
// renderer's findings; it returns the vehicles' kernels.
func (r *Reconciler) observe(ctx context.Context, p *v1alpha1.NetTuningProfile, in *planner.Input) (measure.Kernels, error) {
	// The cache's own objects, read only (fleetmodel copies what it keeps):
	// deep-copying every Node and NodeNetTuning of a 5,000-node fleet on
	// every reconcile was most of its allocations, and a List even without
	// deep copies copies every object's struct (5 of the 13 GB allocated
	// by a first rollout to 10,000 nodes): the informers' stores are read
	// in place.
	nodes, nnts, err := r.store.fleet(ctx)
	if err != nil {
		return nil, err
	}
	f, err := fleetmodel.SelectNodes(p, nodes)
	if err != nil {
		return nil, err
	}

	rollout := p.Spec.Rollout
	if p.Spec.HubAssignment != nil {
		// A hub's copy: the hub rolls it out; only its unreachableAfter
		// applies here.
		rollout = p.Spec.HubAssignment.Rollout()
	}
	var live fleetmodel.Liveness
	if r.Liveness != nil {
		r.Liveness.Track(p.Name, rollout.GetUnreachableAfter())
		live = r.Liveness
	}
	in.Now, in.Rollout = r.Now(), rollout
	in.Vehicles = f.ObserveWith(p.Name, nnts, live)
	in.LivenessTimer, in.Render, in.Hub = r.Liveness != nil, r.findings(p.Name), p.Spec.HubAssignment
	in.Analysis = r.analysisFindings(ctx, p, f)
	if p.Spec.HubAssignment != nil {
		vs := in.Vehicles
		for i := range vs {
			vs[i].Counters = f.Counters(vs[i].Name, nnts)
		}
	}
	return func(vehicles []string) map[string][]analysis.NodeKernel { return f.Kernels(vehicles, nnts) }, nil
}

// findings are the node renderer's conflicts and warnings for profile
// (none without Reports).
func (r *Reconciler) findings(profile string) *planner.RenderFindings {
	var f planner.RenderFindings
	if r.Reports != nil {
		f.Conflicts, f.Warnings = r.Reports.For(profile)
	}
	return &f
}

func (r *Reconciler) measureConfig() measure.Config {
	return r.Backends
}

// announce records a measurement taken in the metrics and as an event.
func (r *Reconciler) announce(p *v1alpha1.NetTuningProfile, t measure.Taken) func() {
	return func() {
		recordMeasurement(p.Name, t.Spec, t.Measurement)
		typ, reason, msg := t.Event()
		r.Recorder.Eventf(p, nil, typ, reason, "Analysis", "%s", msg)
	}
}

// finalize lets a deleted profile go once no NodeNetTuning carries it any
// more (the node renderer drops a profile being deleted from every node).
func (r *Reconciler) finalize(ctx context.Context, p *v1alpha1.NetTuningProfile) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(p, v1alpha1.CleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	nntList := &v1alpha1.NodeNetTuningList{}
	if err := r.List(ctx, nntList, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list nodenettunings: %w", err)
	}
	left := 0
	for i := range nntList.Items {
		if fleetmodel.AssignedRevision(&nntList.Items[i], p.Name) != "" {
			left++
		}
	}
	if left > 0 {
		log.FromContext(ctx).V(1).Info("waiting for the profile to leave its nodes", "nodes", left)
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, v1alpha1.CleanupFinalizer)
	if err := r.Patch(ctx, p, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	n := 0
	for _, a := range p.Status.Assignments {
		n += len(a.Vehicles)
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Removed", "Delete", "profile removed from every node (%d vehicle(s) were assigned)", n)
	deleteMetrics(p.Name)
	return ctrl.Result{}, nil
}

func rollbackReason(p *v1alpha1.NetTuningProfile) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c != nil {
		return c.Reason
	}
	return "Unknown"
}

// equalStatus compares statuses ignoring condition transition times.
func equalStatus(a, b v1alpha1.NetTuningProfileStatus) bool {
	// a and b are copies of the structs: the assignments (every vehicle's
	// name) are compared as strings, without reflection, and the conditions
	// are copied before their times are cleared.
	if !fleetmodel.EqualAssignments(a.Assignments, b.Assignments) {
		return false
	}
	a.Assignments, b.Assignments = nil, nil
	a.Conditions, b.Conditions = withoutTransitionTimes(a.Conditions), withoutTransitionTimes(b.Conditions)
	return apiequality.Semantic.DeepEqual(a, b)
}

// withoutTransitionTimes is a copy of cs with every lastTransitionTime zero.
func withoutTransitionTimes(cs []metav1.Condition) []metav1.Condition {
	if cs == nil {
		return nil
	}
	out := slices.Clone(cs)
	for i := range out {
		out[i].LastTransitionTime = metav1.Time{}
	}
	return out
}
