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

package experiment

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/internal/measure"
	"github.com/nettune/nettune/controllers/internal/retry"
	"github.com/nettune/nettune/internal/text"
)

// Finalizer (on an experiment) deletes its arms' profiles before
// the experiment goes.
const Finalizer = "nettune.io/experiment-cleanup"

// Reconciler runs NetTuningExperiments: it waits for the base
// profile to be stable, draws the cohorts, creates one NetTuningProfile per
// variant (the base patched with the variant, selecting only the arm's
// vehicles, one priority above the base), measures every arm against the
// control of its hardware model with the experiment's judge analysis and
// guards, stops an arm they fail, ranks the arms, and deletes the arms'
// profiles at the end. The arms reach the vehicles through the normal path:
// the profile reconciler assigns their revisions, the node renderer merges
// them, the agents apply, verify and keep their last-known-good.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Backends as for the profiles.
	Backends analysis.Backends
	// EventLog, when set, also receives every experiment event as a JSON
	// line labeled {job="nettune-controller", experiment="<name>"}.
	EventLog eventlog.Log
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
}

// SetupWithManager registers the reconciler: experiments, and the profiles
// they watch (their base and their arms).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	r.Backends = r.Backends.WithDefaults()
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.NetTuningExperiment{}).
		Watches(&v1alpha1.NetTuningProfile{}, handler.EnqueueRequestsFromMapFunc(r.experimentsOf)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: &r.SkipNameValidation, RateLimiter: retry.Limiter()}).
		Named("nettuningexperiment").
		Complete(r)
}

// experimentsOf maps a profile to the experiments it is the base or an arm of.
func (r *Reconciler) experimentsOf(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	if name := o.GetLabels()[v1alpha1.ExperimentLabel]; name != "" {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	var list v1alpha1.NetTuningExperimentList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return out
	}
	for _, e := range list.Items {
		if e.Spec.Profile == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Name}})
		}
	}
	return out
}

// Reconcile advances one experiment and writes its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	exp := &v1alpha1.NetTuningExperiment{}
	if err := r.Get(ctx, req.NamespacedName, exp); err != nil {
		if apierrors.IsNotFound(err) {
			deleteExperimentMetrics(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !exp.DeletionTimestamp.IsZero() {
		if gone, err := r.deleteArms(ctx, exp); err != nil || !gone {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, err
		}
		deleteExperimentMetrics(exp.Name)
		if controllerutil.RemoveFinalizer(exp, Finalizer) {
			return ctrl.Result{}, r.Update(ctx, exp)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(exp, Finalizer) {
		if err := r.Update(ctx, exp); err != nil {
			return ctrl.Result{}, err
		}
	}
	orig := exp.DeepCopy()
	res, stepErr := r.step(ctx, exp)
	r.setConditions(exp, stepErr)
	exp.Status.ObservedGeneration = exp.Generation
	if !apiequality.Semantic.DeepEqual(orig.Status, exp.Status) {
		// With the resourceVersion read: a reconcile that read the
		// experiment from a cache not yet holding this controller's last
		// status write must not write over it (its arms are one list, which
		// a merge patch replaces whole). Seen: an arm stopped at
		// applyTimeout, its profile deleted, and the reconcile woken by the
		// deletion, still seeing the arm Applying, rewrote its stop reason
		// to "its profile was deleted". It gets a 409 and runs again.
		patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
		if err := r.Status().Patch(ctx, exp, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("patching experiment status: %w", err)
		}
	}
	recordExperimentMetrics(exp)
	if stepErr != nil {
		var stall stalled
		if errors.As(stepErr, &stall) {
			return ctrl.Result{RequeueAfter: time.Minute}, nil
		}
		return ctrl.Result{}, stepErr
	}
	return res, nil
}

// stalled is an error only a change of the experiment, its base profile or
// the fleet can cure; it is reported, not retried at once.
type stalled struct {
	reason string
	err    error
}

func (s stalled) Error() string { return s.err.Error() }

// setConditions sets Ready, Reconciling and Stalled from the phase and the
// step's error.
func (r *Reconciler) setConditions(exp *v1alpha1.NetTuningExperiment, stepErr error) {
	st := &exp.Status
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		if msg == "" {
			msg = reason
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason,
			Message: text.Truncate(msg, 1024), ObservedGeneration: exp.Generation, LastTransitionTime: metav1.NewTime(r.Now())})
	}
	var stall stalled
	switch {
	case errors.As(stepErr, &stall):
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, stall.reason, stall.Error())
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, stall.reason, "")
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, stall.reason, stall.Error())
		return
	case stepErr != nil:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, "Error", stepErr.Error())
		return
	}
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
	switch st.Phase {
	case v1alpha1.ExperimentCompleted:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ExperimentCompleted, st.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ExperimentCompleted, "")
	case v1alpha1.ExperimentAborted:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ExperimentAborted, st.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ExperimentAborted, "")
	default:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, st.Phase, st.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, st.Phase, st.Message)
	}
}

// step gathers what the experiment's decision needs, decides (Plan) and
// applies the decision.
func (r *Reconciler) step(ctx context.Context, exp *v1alpha1.NetTuningExperiment) (ctrl.Result, error) {
	in, err := r.gather(ctx, exp)
	if err != nil {
		return ctrl.Result{}, err
	}
	out := Plan(in)
	if len(out.Create) > 0 {
		if failed, err := r.createArms(ctx, in, out.Create); err != nil {
			return r.apply(ctx, exp, failed, err)
		}
	}
	if out.Measure != nil {
		kernels, err := r.kernels(ctx, out.Measure.VehicleLabel)
		if err != nil {
			out.Measure = nil
			return r.apply(ctx, exp, out, err)
		}
		taken := make([]analysis.Measurement, len(out.Measure.Due))
		for i, d := range out.Measure.Due {
			d.Canary.Kernels, d.Baseline.Kernels = kernels(d.Canary.Vehicles), kernels(d.Baseline.Vehicles)
			taken[i] = measure.Take(ctx, r.Backends, "its address", d.Profile, d.Spec, d.Canary, d.Baseline, in.Now)
		}
		out = Conclude(in, out, taken)
	}
	return r.apply(ctx, exp, out, nil)
}

// gather reads what Plan needs: the base profile; for a start the other
// experiments and the nodes; for a running experiment its arms' profiles.
func (r *Reconciler) gather(ctx context.Context, exp *v1alpha1.NetTuningExperiment) (Input, error) {
	in := Input{Now: r.Now(), Experiment: exp}
	st := &exp.Status
	if st.Phase == v1alpha1.ExperimentCompleted || st.Phase == v1alpha1.ExperimentAborted {
		return in, nil
	}
	base := &v1alpha1.NetTuningProfile{}
	err := r.Get(ctx, client.ObjectKey{Name: exp.Spec.Profile}, base)
	if apierrors.IsNotFound(err) {
		return in, nil
	}
	if err != nil {
		return in, err
	}
	in.Base = base
	if st.Phase != v1alpha1.ExperimentRunning {
		var others v1alpha1.NetTuningExperimentList
		if err := r.List(ctx, &others); err != nil {
			return in, err
		}
		for _, o := range others.Items {
			if o.Name != exp.Name && o.Spec.Profile == exp.Spec.Profile && o.Status.Phase == v1alpha1.ExperimentRunning {
				in.Running = o.Name
				break
			}
		}
		var nodes corev1.NodeList
		if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil { // read only
			return in, err
		}
		in.Nodes = nodes.Items
		return in, nil
	}
	in.Arms = map[string]*v1alpha1.NetTuningProfile{}
	for _, arm := range st.Arms {
		if arm.Name == v1alpha1.ControlArm {
			continue
		}
		p := &v1alpha1.NetTuningProfile{}
		err := r.Get(ctx, client.ObjectKey{Name: arm.Profile}, p)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return in, err
		}
		in.Arms[arm.Profile] = p
	}
	return in, nil
}

// createArms creates the arms' profiles, all or none: every one is checked
// by the API server (dry run) before any is created, so that a variant the
// profile's validation refuses (e.g. an initcwnd above its cwnd) starts no
// arm. On failure it returns the decision to apply instead and the error.
func (r *Reconciler) createArms(ctx context.Context, in Input, arms []ArmProfile) (Output, error) {
	for _, a := range arms {
		if err := controllerutil.SetControllerReference(in.Experiment, a.Profile, r.Scheme()); err != nil {
			return NotStarted(in), err
		}
		if err := r.Create(ctx, a.Profile.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			refused := Refused(in, a.Variant, err)
			return refused, stalled{reason: refused.Stalled.Reason, err: errors.New(refused.Stalled.Message)}
		}
	}
	for _, a := range arms {
		if err := r.Create(ctx, a.Profile); err != nil && !apierrors.IsAlreadyExists(err) {
			return NotStarted(in), fmt.Errorf("creating arm profile %s: %w", a.Profile.Name, err)
		}
	}
	return Output{}, nil
}

// apply writes the decision into the experiment's status (Reconcile patches
// it), emits its events and deletes the profiles it says. stepErr, when
// set, is the error that cut the step short.
func (r *Reconciler) apply(ctx context.Context, exp *v1alpha1.NetTuningExperiment, out Output, stepErr error) (ctrl.Result, error) {
	was := exp.Status.Phase
	exp.Status = out.Status
	for _, e := range out.Events {
		r.event(exp, e.Type, e.Reason, e.Action, e.Message)
	}
	if out.Status.Phase == v1alpha1.ExperimentCompleted && was != v1alpha1.ExperimentCompleted {
		log.FromContext(ctx).Info("experiment completed", "experiment", exp.Name, "winners", Winners(&out.Status))
	}
	for _, p := range out.Delete {
		if err := r.deleteProfile(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
	}
	if stepErr != nil {
		return ctrl.Result{}, stepErr
	}
	res := ctrl.Result{RequeueAfter: out.Requeue}
	if out.DeleteArms {
		gone, err := r.deleteArms(ctx, exp)
		if err != nil || !gone {
			res.RequeueAfter = settleRequeue
		}
		if err != nil {
			return res, err
		}
	}
	if out.Stalled != nil {
		return res, stalled{reason: out.Stalled.Reason, err: errors.New(out.Stalled.Message)}
	}
	return res, nil
}

// deleteArms deletes the experiment's arm profiles; gone reports that none
// is left.
func (r *Reconciler) deleteArms(ctx context.Context, exp *v1alpha1.NetTuningExperiment) (gone bool, err error) {
	var list v1alpha1.NetTuningProfileList
	if err := r.List(ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: exp.Name}); err != nil {
		return false, err
	}
	for i := range list.Items {
		if err := r.deleteProfile(ctx, &list.Items[i]); err != nil {
			return false, err
		}
	}
	return len(list.Items) == 0, nil
}

func (r *Reconciler) deleteProfile(ctx context.Context, p *v1alpha1.NetTuningProfile) error {
	if !p.DeletionTimestamp.IsZero() {
		return nil
	}
	if err := r.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting arm profile %s: %w", p.Name, err)
	}
	return nil
}

// kernels returns what the nodes of given vehicles (by vehicleLabel)
// reported of their kernels, for an analysis to check what each cohort can
// measure.
func (r *Reconciler) kernels(ctx context.Context, vehicleLabel string) (func(vehicles []string) map[string][]analysis.NodeKernel, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil, err
	}
	var nnts v1alpha1.NodeNetTuningList
	if err := r.List(ctx, &nnts, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil, err
	}
	reported := make(map[string]*v1alpha1.KernelFeatures, len(nnts.Items))
	for i := range nnts.Items {
		reported[nnts.Items[i].Name] = nnts.Items[i].Status.Kernel
	}
	byVehicle := map[string][]analysis.NodeKernel{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if v := n.Labels[vehicleLabel]; v != "" {
			byVehicle[v] = append(byVehicle[v], analysis.NodeKernel{Node: n.Name, Kernel: reported[n.Name]})
		}
	}
	return func(vehicles []string) map[string][]analysis.NodeKernel {
		out := make(map[string][]analysis.NodeKernel, len(vehicles))
		for _, v := range vehicles {
			out[v] = byVehicle[v]
		}
		return out
	}, nil
}

func (r *Reconciler) event(exp *v1alpha1.NetTuningExperiment, typ, reason, action, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(exp, nil, typ, reason, action, "%s", text.Truncate(msg, 1024))
	}
	eventlog.Experiment(r.EventLog, exp, typ, reason, msg, r.Now())
}
