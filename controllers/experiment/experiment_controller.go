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
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	"github.com/nettune/nettune/controllers/fleetmodel"
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
	// Queriers, LokiAddress and PrometheusAddress as for the profiles.
	Queriers          analysis.QuerierFactory
	LokiAddress       string
	PrometheusAddress string
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
	if r.Queriers == nil {
		return errors.New("experiment reconciler: no Queriers")
	}
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

func stall(reason string, format string, args ...any) error {
	return stalled{reason: reason, err: fmt.Errorf(format, args...)}
}

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

// defaultApplyTimeout is spec.applyTimeout's default (the CRD's too).
const defaultApplyTimeout = 10 * time.Minute

// applyTimeout is how long the arms may take to be verified.
func applyTimeout(exp *v1alpha1.NetTuningExperiment) time.Duration {
	if t := exp.Spec.ApplyTimeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return defaultApplyTimeout
}

// step advances the experiment by what can be decided now.
func (r *Reconciler) step(ctx context.Context, exp *v1alpha1.NetTuningExperiment) (ctrl.Result, error) {
	st := &exp.Status
	if st.Phase == v1alpha1.ExperimentCompleted || st.Phase == v1alpha1.ExperimentAborted {
		if gone, err := r.deleteArms(ctx, exp); err != nil || !gone {
			return ctrl.Result{RequeueAfter: 2 * time.Second}, err
		}
		return ctrl.Result{}, nil
	}
	base := &v1alpha1.NetTuningProfile{}
	err := r.Get(ctx, client.ObjectKey{Name: exp.Spec.Profile}, base)
	if apierrors.IsNotFound(err) {
		if st.Phase == v1alpha1.ExperimentRunning {
			return r.abort(ctx, exp, fmt.Sprintf("the base profile %s was deleted", exp.Spec.Profile))
		}
		st.Phase = v1alpha1.ExperimentPending
		return ctrl.Result{}, stall("ProfileNotFound", "profile %s does not exist", exp.Spec.Profile)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.Phase != v1alpha1.ExperimentRunning {
		return r.start(ctx, exp, base)
	}
	if st.ObservedGeneration != 0 && st.ObservedGeneration != exp.Generation {
		return r.abort(ctx, exp, fmt.Sprintf("the spec changed while the experiment ran (generation %d to %d): its cohorts were measured under the old one; create a new experiment", st.ObservedGeneration, exp.Generation))
	}
	if base.Status.StableRevision != st.BaseRevision || base.Status.CurrentRevision != st.BaseRevision {
		return r.abort(ctx, exp, fmt.Sprintf("the base profile %s moved from revision %s (stable %s, current %s): the control no longer runs what the variants patch",
			base.Name, st.BaseRevision, base.Status.StableRevision, base.Status.CurrentRevision))
	}
	return r.run(ctx, exp)
}

// stableBase says why base is not ready to be experimented on, "" when it is.
func stableBase(base *v1alpha1.NetTuningProfile) string {
	s := base.Status
	switch {
	case s.ObservedGeneration != base.Generation:
		return fmt.Sprintf("profile %s: generation %d not yet observed", base.Name, base.Generation)
	case s.StableRevision == "" || s.CurrentRevision != s.StableRevision:
		return fmt.Sprintf("profile %s is rolling out (current %s, stable %s): an experiment starts from a stable revision", base.Name, s.CurrentRevision, s.StableRevision)
	case s.Vehicles.Total == 0:
		return fmt.Sprintf("profile %s selects no vehicles", base.Name)
	}
	return ""
}

// start draws the cohorts and creates the arms' profiles, all or none.
func (r *Reconciler) start(ctx context.Context, exp *v1alpha1.NetTuningExperiment, base *v1alpha1.NetTuningProfile) (ctrl.Result, error) {
	st := &exp.Status
	st.Phase = v1alpha1.ExperimentPending
	if why := stableBase(base); why != "" {
		st.Message = "waiting: " + why
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if base.Spec.Priority >= 1000 {
		return ctrl.Result{}, stall("PriorityTooHigh", "profile %s has priority %d: the arms need one above it (at most 1000)", base.Name, base.Spec.Priority)
	}
	var others v1alpha1.NetTuningExperimentList
	if err := r.List(ctx, &others); err != nil {
		return ctrl.Result{}, err
	}
	for _, o := range others.Items {
		if o.Name != exp.Name && o.Spec.Profile == exp.Spec.Profile && o.Status.Phase == v1alpha1.ExperimentRunning {
			st.Message = fmt.Sprintf("waiting: experiment %s is running on profile %s", o.Name, base.Name)
			return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
		}
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil { // read only
		return ctrl.Result{}, err
	}
	fleet, err := fleetmodel.Select(base, nodes.Items)
	if err != nil {
		return ctrl.Result{}, stall("InvalidSelector", "profile %s: %v", base.Name, err)
	}
	only := labels.Everything()
	if exp.Spec.Selector != nil {
		if only, err = metav1.LabelSelectorAsSelector(exp.Spec.Selector); err != nil {
			return ctrl.Result{}, stall("InvalidSelector", "spec.selector: %v", err)
		}
	}
	var eligible []Vehicle
	for name, vnodes := range fleet.Vehicles {
		ok := true
		for _, n := range vnodes {
			ok = ok && only.Matches(labels.Set(n.Labels))
		}
		if ok {
			eligible = append(eligible, Vehicle{Name: name, Hardware: HardwareModel(vnodes, fleet.HardwareLabel)})
		}
	}
	var variants []string
	for _, v := range exp.Spec.Variants {
		variants = append(variants, v.Name)
	}
	perArm := 0
	if exp.Spec.VehiclesPerArm != nil {
		perArm = int(*exp.Spec.VehiclesPerArm)
	}
	maxPercent := 20
	if exp.Spec.MaxPercent != nil {
		maxPercent = int(*exp.Spec.MaxPercent)
	}
	draw := Assign(len(fleet.Vehicles), eligible, variants, maxPercent, perArm, string(exp.UID))
	if draw.Used == 0 {
		return ctrl.Result{}, stall("TooFewVehicles", "%d of profile %s's %d vehicles are eligible; maxPercent %d%% allows %d vehicles, fewer than one per arm (%d arms with the control) for every hardware model",
			len(eligible), base.Name, len(fleet.Vehicles), maxPercent, draw.Budget, len(variants)+1)
	}

	// Every arm's profile is checked by the API server (dry run) before
	// any is created: a variant the profile's validation refuses (e.g. an
	// initcwnd above its cwnd) starts no arm.
	arms := make([]*v1alpha1.NetTuningProfile, 0, len(exp.Spec.Variants))
	for _, v := range exp.Spec.Variants {
		p, err := r.armProfile(exp, base, fleet.VehicleLabel, v, draw.Cohorts[v.Name])
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, p.DeepCopy(), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, stall("InvalidVariant", "variant %s (%s) on profile %s: %v", v.Name, Describe(v.Parameters), base.Name, err)
		}
		arms = append(arms, p)
	}
	for _, p := range arms {
		if err := r.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("creating arm profile %s: %w", p.Name, err)
		}
	}
	now := metav1.NewTime(r.Now())
	st.Phase, st.BaseRevision, st.Started = v1alpha1.ExperimentRunning, base.Status.StableRevision, &now
	st.MeasuringSince, st.LastMeasured, st.Finished, st.Results = nil, nil, nil, nil
	st.Arms = []v1alpha1.ExperimentArm{{Name: v1alpha1.ControlArm, Phase: v1alpha1.ArmMeasuring, Verified: &now, Cohorts: cohorts(draw.Cohorts[v1alpha1.ControlArm])}}
	for i, v := range exp.Spec.Variants {
		st.Arms = append(st.Arms, v1alpha1.ExperimentArm{Name: v.Name, Profile: arms[i].Name, Phase: v1alpha1.ArmApplying, Cohorts: cohorts(draw.Cohorts[v.Name])})
	}
	st.Message = fmt.Sprintf("%d vehicles drawn (%d allowed by maxPercent %d%% of %d)", draw.Used, draw.Budget, maxPercent, len(fleet.Vehicles))
	if len(draw.Skipped) > 0 {
		st.Message += fmt.Sprintf("; too few vehicles for one per arm: %s", strings.Join(draw.Skipped, ", "))
	}
	r.event(exp, corev1.EventTypeNormal, "Started", "Start", st.Message)
	return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
}

func cohorts(byModel map[string][]string) []v1alpha1.ExperimentCohort {
	var out []v1alpha1.ExperimentCohort
	for m, vs := range byModel {
		out = append(out, v1alpha1.ExperimentCohort{Hardware: m, Vehicles: vs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hardware < out[j].Hardware })
	return out
}

// armProfile is a variant's profile: the base patched with the variant, for
// the arm's vehicles only, one priority above the base, applied at once.
func (r *Reconciler) armProfile(exp *v1alpha1.NetTuningExperiment, base *v1alpha1.NetTuningProfile, vehicleLabel string,
	v v1alpha1.ExperimentVariant, byModel map[string][]string) (*v1alpha1.NetTuningProfile, error) {
	var vehicles []string
	for _, vs := range byModel {
		vehicles = append(vehicles, vs...)
	}
	spec := Overlay(&base.Spec, v.Parameters)
	spec.NodeSelector = ArmSelector(base.Spec.NodeSelector, vehicleLabel, vehicles)
	spec.Priority = base.Spec.Priority + 1
	spec.Rollout = nil
	p := &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{
			Name:   ArmProfileName(exp.Name, v.Name),
			Labels: map[string]string{v1alpha1.ExperimentLabel: exp.Name},
			Annotations: map[string]string{
				"nettune.io/variant": Describe(v.Parameters),
			},
		},
		Spec: *spec,
	}
	if err := controllerutil.SetControllerReference(exp, p, r.Scheme()); err != nil {
		return nil, err
	}
	return p, nil
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

func (r *Reconciler) abort(ctx context.Context, exp *v1alpha1.NetTuningExperiment, why string) (ctrl.Result, error) {
	st := &exp.Status
	now := metav1.NewTime(r.Now())
	st.Phase, st.Message, st.Finished = v1alpha1.ExperimentAborted, why, &now
	for i := range st.Arms {
		if st.Arms[i].Phase == v1alpha1.ArmApplying || st.Arms[i].Phase == v1alpha1.ArmMeasuring {
			st.Arms[i].Phase = v1alpha1.ArmFinished
		}
	}
	r.event(exp, corev1.EventTypeWarning, v1alpha1.ExperimentAborted, "Abort", why)
	_, err := r.deleteArms(ctx, exp)
	return ctrl.Result{RequeueAfter: 2 * time.Second}, err
}

// run advances a running experiment: arms verified, measurements due,
// arms stopped, the end.
func (r *Reconciler) run(ctx context.Context, exp *v1alpha1.NetTuningExperiment) (ctrl.Result, error) {
	st := &exp.Status
	now := r.Now()
	requeue := time.Duration(0)
	soon := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}
	revisions := map[string]string{v1alpha1.ControlArm: st.BaseRevision}
	vehicleLabel := v1alpha1.DefaultVehicleLabel
	applying := 0
	for i := range st.Arms {
		arm := &st.Arms[i]
		if arm.Name == v1alpha1.ControlArm {
			continue
		}
		p := &v1alpha1.NetTuningProfile{}
		err := r.Get(ctx, client.ObjectKey{Name: arm.Profile}, p)
		switch {
		case apierrors.IsNotFound(err):
			if arm.Phase == v1alpha1.ArmApplying || arm.Phase == v1alpha1.ArmMeasuring {
				r.stopArm(exp, arm, fmt.Sprintf("its profile %s was deleted", arm.Profile))
			}
			continue
		case err != nil:
			return ctrl.Result{}, err
		}
		revisions[arm.Name] = p.Status.CurrentRevision
		vehicleLabel = p.Spec.GetVehicleLabel()
		switch arm.Phase {
		case v1alpha1.ArmStopped, v1alpha1.ArmFinished:
			if err := r.deleteProfile(ctx, p); err != nil {
				return ctrl.Result{}, err
			}
		case v1alpha1.ArmApplying:
			want := int32(0)
			for _, c := range arm.Cohorts {
				want += int32(len(c.Vehicles))
			}
			v := p.Status.Vehicles
			switch {
			case p.Status.ObservedGeneration == p.Generation && v.Failed > 0:
				r.stopArm(exp, arm, fmt.Sprintf("%d of its %d vehicles failed to apply the variant (their agents reverted to the last-known-good)", v.Failed, want))
				if err := r.deleteProfile(ctx, p); err != nil {
					return ctrl.Result{}, err
				}
			case p.Status.ObservedGeneration == p.Generation && p.Status.StableRevision != "" && v.Total == want && v.Verified == want:
				t := metav1.NewTime(now)
				arm.Phase, arm.Verified = v1alpha1.ArmMeasuring, &t
				r.event(exp, corev1.EventTypeNormal, "ArmVerified", "Verify",
					fmt.Sprintf("arm %s: %d vehicles verified on %s", arm.Name, want, p.Status.CurrentRevision))
			case st.Started != nil && !now.Before(st.Started.Add(applyTimeout(exp))):
				r.stopArm(exp, arm, fmt.Sprintf("%d of its %d vehicles verified the variant within applyTimeout %s (%d unreachable)",
					v.Verified, want, applyTimeout(exp), v.Unreachable))
				if err := r.deleteProfile(ctx, p); err != nil {
					return ctrl.Result{}, err
				}
			default:
				applying++
				soon(5 * time.Second)
				if st.Started != nil {
					soon(st.Started.Add(applyTimeout(exp)).Sub(now))
				}
			}
		}
	}
	measuring := 0
	for _, a := range st.Arms {
		if a.Name != v1alpha1.ControlArm && a.Phase == v1alpha1.ArmMeasuring {
			measuring++
		}
	}
	if applying == 0 && st.MeasuringSince == nil {
		t := metav1.NewTime(now)
		st.MeasuringSince = &t
	}
	if applying == 0 && measuring == 0 {
		return r.finish(ctx, exp, "every variant was stopped")
	}

	spec := &exp.Spec.Analysis
	interval := analysis.Interval(spec)
	var end time.Time
	if st.MeasuringSince != nil {
		end = st.MeasuringSince.Add(exp.Spec.Duration.Duration)
	}
	ending := !end.IsZero() && !now.Before(end)
	due := st.LastMeasured == nil || !now.Before(st.LastMeasured.Add(interval)) || ending
	if due && measuring > 0 {
		kernels, err := r.kernels(ctx, vehicleLabel)
		if err != nil {
			return ctrl.Result{}, err
		}
		r.measure(ctx, exp, revisions, kernels, now)
		t := metav1.NewTime(now)
		st.LastMeasured = &t
	}
	st.Results = r.rank(exp)
	switch {
	case ending:
		return r.finish(ctx, exp, fmt.Sprintf("measured for %s", exp.Spec.Duration.Duration))
	case st.MeasuringSince != nil && r.sampleTargetMet(exp):
		return r.finish(ctx, exp, fmt.Sprintf("every arm and model reached sampleTarget %d messages", *exp.Spec.SampleTarget))
	}
	if st.LastMeasured != nil {
		soon(st.LastMeasured.Add(interval).Sub(now))
	}
	if !end.IsZero() {
		soon(end.Sub(now))
	}
	st.Message = r.progress(exp, applying, measuring, end)
	if requeue == 0 {
		requeue = interval
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *Reconciler) progress(exp *v1alpha1.NetTuningExperiment, applying, measuring int, end time.Time) string {
	s := fmt.Sprintf("%d arm(s) applying, %d measuring", applying, measuring)
	if !end.IsZero() {
		s += fmt.Sprintf(", ends %s", end.UTC().Format(time.RFC3339))
	}
	for _, res := range exp.Status.Results {
		s += fmt.Sprintf("; %s: leading %s", res.Hardware, leader(res))
	}
	return s
}

func leader(res v1alpha1.ExperimentResult) string {
	if len(res.Ranking) == 0 || res.Ranking[0].Rank == 0 {
		return "(no messages yet)"
	}
	return res.Ranking[0].Arm
}

// experimentSpec is the analysis as an experiment runs it: over everything
// since the arm was verified, and never finished by its measurement or
// inconclusive counts (only a Failed result stops an arm).
func experimentSpec(spec *v1alpha1.AnalysisSpec, d time.Duration) *v1alpha1.AnalysisSpec {
	s := spec.DeepCopy()
	s.Window = &metav1.Duration{Duration: d + 2*analysis.Interval(spec)}
	huge := int32(math.MaxInt32)
	s.Measurements, s.InconclusiveLimit, s.ConsecutiveErrorLimit = &huge, &huge, &huge
	return s
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

// measure takes one measurement of every measuring arm and model against
// the control of that model, and stops the arms an analysis fails. kernels
// says what the given vehicles' kernels reported.
func (r *Reconciler) measure(ctx context.Context, exp *v1alpha1.NetTuningExperiment, revisions map[string]string,
	kernels func(vehicles []string) map[string][]analysis.NodeKernel, now time.Time) {
	st := &exp.Status
	control := map[string][]string{}
	var controlArm *v1alpha1.ExperimentArm
	for i := range st.Arms {
		if st.Arms[i].Name == v1alpha1.ControlArm {
			controlArm = &st.Arms[i]
			for _, c := range controlArm.Cohorts {
				control[c.Hardware] = c.Vehicles
			}
		}
	}
	specs := []*v1alpha1.AnalysisSpec{experimentSpec(&exp.Spec.Analysis, exp.Spec.Duration.Duration)}
	for i := range exp.Spec.Guards {
		specs = append(specs, experimentSpec(&exp.Spec.Guards[i], exp.Spec.Duration.Duration))
	}
	// The control's own counts come from the measurement with the longest
	// window (the arm verified first).
	longest := map[string]time.Time{}
	for i := range st.Arms {
		arm := &st.Arms[i]
		if arm.Name == v1alpha1.ControlArm || arm.Phase != v1alpha1.ArmMeasuring {
			continue
		}
		var failed []string
		for j := range arm.Cohorts {
			c := &arm.Cohorts[j]
			ctrlVehicles := control[c.Hardware]
			if len(ctrlVehicles) == 0 || len(c.Vehicles) == 0 {
				continue
			}
			since := arm.Verified.Time
			canary := analysis.Cohort{Vehicles: c.Vehicles, Revision: revisions[arm.Name], Since: since, Kernels: kernels(c.Vehicles)}
			baseline := analysis.Cohort{Vehicles: ctrlVehicles, Revision: st.BaseRevision, Since: since, Kernels: kernels(ctrlVehicles)}
			for k, spec := range specs {
				prev := v1alpha1.AnalysisResult{}
				idx := -1
				for n, a := range c.Analysis {
					if a.Name == spec.Name {
						prev, idx = a, n
					}
				}
				if v1alpha1.AnalysisTerminal(prev.Phase) {
					continue
				}
				m := r.measureOne(ctx, arm.Profile, spec, canary, baseline, now)
				res := analysis.Accumulate(prev, m, spec)
				res.Name = spec.Name
				res.Pairs = nil // the cohort's sums below; pairs stay in the judge's message
				if idx >= 0 {
					c.Analysis[idx] = res
				} else {
					c.Analysis = append(c.Analysis, res)
				}
				if k == 0 && m.Judge != nil && len(m.Judge.Pairs) > 0 {
					var s, t, cs, ct int64
					for _, p := range m.Judge.Pairs {
						s, t, cs, ct = s+p.CanarySlow, t+p.CanaryTotal, cs+p.BaselineSlow, ct+p.BaselineTotal
					}
					c.Slow, c.Total, c.ControlSlow, c.ControlTotal = s, t, cs, ct
					if first, ok := longest[c.Hardware]; !ok || since.Before(first) {
						longest[c.Hardware] = since
						for n := range controlArm.Cohorts {
							if controlArm.Cohorts[n].Hardware == c.Hardware {
								controlArm.Cohorts[n].Slow, controlArm.Cohorts[n].Total = cs, ct
							}
						}
					}
				}
				if res.Phase == v1alpha1.AnalysisFailed {
					failed = append(failed, fmt.Sprintf("%s on %s: %s", spec.Name, c.Hardware, res.Message))
				}
			}
		}
		if len(failed) > 0 {
			r.stopArm(exp, arm, strings.Join(failed, "; "))
		}
	}
}

func (r *Reconciler) measureOne(ctx context.Context, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline analysis.Cohort, now time.Time) analysis.Measurement {
	q, err := analysis.QuerierFor(r.Queriers, r.LokiAddress, r.PrometheusAddress, spec, "its address")
	if err != nil {
		return analysis.Measurement{Phase: analysis.PhaseError, At: now, Message: err.Error()}
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return analysis.Measure(qctx, q, profile, spec, canary, baseline, now)
}

func (r *Reconciler) stopArm(exp *v1alpha1.NetTuningExperiment, arm *v1alpha1.ExperimentArm, why string) {
	arm.Phase, arm.StopReason = v1alpha1.ArmStopped, text.Truncate(why, 1024)
	r.event(exp, corev1.EventTypeWarning, "ArmStopped", "Stop", fmt.Sprintf("arm %s stopped, its vehicles return to the base: %s", arm.Name, why))
}

// rank ranks the arms per hardware model from their latest counts.
func (r *Reconciler) rank(exp *v1alpha1.NetTuningExperiment) []v1alpha1.ExperimentResult {
	confidence := analysis.DefaultJudgeConfidence
	if cfg, err := analysis.JudgeConfigFor(&exp.Spec.Analysis); err == nil {
		confidence = cfg.Confidence
	}
	byModel := map[string][]ArmCounts{}
	for _, arm := range exp.Status.Arms {
		for _, c := range arm.Cohorts {
			byModel[c.Hardware] = append(byModel[c.Hardware], ArmCounts{Arm: arm.Name, Slow: c.Slow, Total: c.Total,
				ControlSlow: c.ControlSlow, ControlTotal: c.ControlTotal, Stopped: arm.Phase == v1alpha1.ArmStopped})
		}
	}
	var out []v1alpha1.ExperimentResult
	for m, rows := range byModel {
		ranking, winner := Rank(rows, confidence)
		out = append(out, v1alpha1.ExperimentResult{Hardware: m, Winner: winner, Ranking: ranking})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hardware < out[j].Hardware })
	return out
}

func (r *Reconciler) sampleTargetMet(exp *v1alpha1.NetTuningExperiment) bool {
	if exp.Spec.SampleTarget == nil {
		return false
	}
	for _, arm := range exp.Status.Arms {
		if arm.Phase == v1alpha1.ArmStopped {
			continue
		}
		for _, c := range arm.Cohorts {
			if c.Total < *exp.Spec.SampleTarget {
				return false
			}
		}
	}
	return true
}

// finish ends the experiment: results final, arms' profiles deleted (their
// vehicles return to the base).
func (r *Reconciler) finish(ctx context.Context, exp *v1alpha1.NetTuningExperiment, why string) (ctrl.Result, error) {
	st := &exp.Status
	now := metav1.NewTime(r.Now())
	st.Results = r.rank(exp)
	st.Phase, st.Finished = v1alpha1.ExperimentCompleted, &now
	for i := range st.Arms {
		if st.Arms[i].Phase == v1alpha1.ArmMeasuring || st.Arms[i].Phase == v1alpha1.ArmApplying {
			st.Arms[i].Phase = v1alpha1.ArmFinished
		}
	}
	var winners []string
	for _, res := range st.Results {
		winners = append(winners, fmt.Sprintf("%s: %s", res.Hardware, res.Winner))
	}
	st.Message = fmt.Sprintf("completed (%s); winners %s", why, strings.Join(winners, ", "))
	r.event(exp, corev1.EventTypeNormal, v1alpha1.ExperimentCompleted, "Complete", st.Message)
	log.FromContext(ctx).Info("experiment completed", "experiment", exp.Name, "winners", winners)
	_, err := r.deleteArms(ctx, exp)
	return ctrl.Result{RequeueAfter: 2 * time.Second}, err
}

func (r *Reconciler) event(exp *v1alpha1.NetTuningExperiment, typ, reason, action, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(exp, nil, typ, reason, action, "%s", text.Truncate(msg, 1024))
	}
	eventlog.Experiment(r.EventLog, exp, typ, reason, msg, r.Now())
}
