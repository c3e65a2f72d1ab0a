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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/render"
)

// Finalizer removes a deleted profile's items from every node.
const Finalizer = "nettune.io/cleanup"

// QuerierFactory returns the query client for an analysis provider.
type QuerierFactory func(provider v1alpha1.AnalysisProvider, address string) (analysis.Querier, error)

// HTTPQueriers builds Loki and Prometheus clients over one HTTP client.
func HTTPQueriers(c *http.Client) QuerierFactory {
	return func(p v1alpha1.AnalysisProvider, address string) (analysis.Querier, error) {
		switch p {
		case v1alpha1.ProviderLoki:
			return analysis.NewLoki(address, c), nil
		case v1alpha1.ProviderPrometheus:
			return analysis.NewPrometheus(address, c), nil
		}
		return nil, fmt.Errorf("unknown analysis provider %q", p)
	}
}

// ProfileReconciler rolls a NetTuningProfile out: it keeps its revisions,
// asks the planner which vehicle gets which revision, runs the analyses the
// planner asks for, and renders every node's NodeNetTuning.
//
// Profiles are reconciled one at a time (NodeNetTunings are shared between
// profiles): a reconcile reads the other profiles' assignments from the
// NodeNetTunings it renders and writes only its own.
type ProfileReconciler struct {
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
	// Queriers makes analysis clients (HTTPQueriers(http.DefaultClient) when nil).
	Queriers QuerierFactory
	// LokiAddress and PrometheusAddress are used by analyses without an address.
	LokiAddress       string
	PrometheusAddress string
	// EventLog, when set, also receives every rollout event as a JSON line
	// (see RolloutEventLine), e.g. to ship them to Loki. It never changes a
	// decision.
	EventLog EventLog
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
}

// SetupWithManager registers the reconciler and its watches.
func (r *ProfileReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Queriers == nil {
		r.Queriers = HTTPQueriers(&http.Client{Timeout: 30 * time.Second})
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.NetTuningProfile{}).
		Watches(&corev1.Node{}, r.allProfiles(), builder.WithPredicates(nodePredicate())).
		Watches(&v1alpha1.NodeNetTuning{}, r.allProfiles(), builder.WithPredicates(nntPredicate())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1, SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// Reconcile runs one planning round for a profile and patches its status once.
func (r *ProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
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
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		patch := client.MergeFrom(p.DeepCopy())
		controllerutil.AddFinalizer(p, Finalizer)
		if err := r.Patch(ctx, p, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	base := p.DeepCopy()
	defer func() {
		p.Status.ObservedGeneration = p.Generation
		if equalStatus(base.Status, p.Status) {
			return
		}
		// Optimistic lock: a status computed from an outdated profile is
		// refused (and the reconcile retried) rather than merged.
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := r.Status().Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
			retErr = errors.Join(retErr, fmt.Errorf("patch status: %w", err))
		}
	}()

	started := r.Now()
	out, err := r.plan(ctx, p)
	if err != nil {
		setStalled(p, "ReconcileError", err.Error(), r.Now())
		return ctrl.Result{}, err
	}
	p.Status = out.Status
	for _, e := range out.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(p, nil, typ, e.Reason, "Rollout", "%s", e.Message)
		logEvent(r.EventLog, p, e, r.Now())
		if e.Reason == "RolledBack" {
			rollbacksTotal.WithLabelValues(p.Name, rollbackReason(p)).Inc()
		}
	}
	recordMetrics(p)
	logger.V(1).Info("planned", "revision", p.Status.CurrentRevision, "phase", p.Status.Phase,
		"step", p.Status.CurrentStep, "requeueAfter", out.RequeueAfter, "took", r.Now().Sub(started))
	return ctrl.Result{RequeueAfter: out.RequeueAfter}, nil
}

// plan gathers the observed state, runs the planner (and any analysis it asks
// for), and renders the nodes.
func (r *ProfileReconciler) plan(ctx context.Context, p *v1alpha1.NetTuningProfile) (planner.Output, error) {
	revs := newRevisions(r.Client, r.Namespace)
	rev := RevisionName(p)
	if err := revs.ensure(ctx, p, rev, r.Scheme); err != nil {
		return planner.Output{}, err
	}
	nodes := &corev1.NodeList{}
	if err := r.List(ctx, nodes); err != nil {
		return planner.Output{}, fmt.Errorf("list nodes: %w", err)
	}
	nntList := &v1alpha1.NodeNetTuningList{}
	if err := r.List(ctx, nntList); err != nil {
		return planner.Output{}, fmt.Errorf("list nodenettunings: %w", err)
	}
	nnts := map[string]*v1alpha1.NodeNetTuning{}
	for i := range nntList.Items {
		nnts[nntList.Items[i].Name] = &nntList.Items[i]
	}
	f, err := selectFleet(p, nodes.Items)
	if err != nil {
		return planner.Output{}, err
	}

	in := planner.Input{
		Now: r.Now(), Profile: p.Name, Revision: rev, Generation: p.Generation,
		Rollout: p.Spec.Rollout, Status: p.Status, Vehicles: f.observe(p.Name, nnts), Commands: Commands(p),
	}
	out := planner.Plan(in)
	if m := out.Measure; m != nil {
		if st, measured := r.measure(ctx, p, m, out.Status); measured {
			in.Status = st
			out = planner.Plan(in)
		}
	}

	conflicts, err := r.renderNodes(ctx, p, f, out.Assign, nodes.Items, nnts, revs)
	if err != nil {
		return planner.Output{}, err
	}
	setConflict(&out.Status, p.Generation, conflicts, r.Now())

	keep := map[string]bool{rev: true}
	for _, rv := range out.Status.Revisions {
		keep[rv.Name] = true
	}
	if err := revs.prune(ctx, p, keep); err != nil {
		return planner.Output{}, err
	}
	return out, nil
}

// measure takes one measurement of the analysis the planner waits for, if it
// is due, and folds it into the status.
func (r *ProfileReconciler) measure(ctx context.Context, p *v1alpha1.NetTuningProfile, m *planner.Measure, st v1alpha1.NetTuningProfileStatus) (v1alpha1.NetTuningProfileStatus, bool) {
	var spec *v1alpha1.AnalysisSpec
	for i := range p.Spec.Rollout.Analyses {
		if p.Spec.Rollout.Analyses[i].Name == m.Analysis {
			spec = &p.Spec.Rollout.Analyses[i]
		}
	}
	if spec == nil {
		return st, false
	}
	idx := -1
	prev := v1alpha1.AnalysisResult{Name: m.Analysis, Step: m.Step}
	for i, a := range st.Analysis {
		if a.Name == m.Analysis && a.Step == m.Step {
			idx, prev = i, a
		}
	}
	now := r.Now()
	if due, _ := analysis.Due(prev, spec, now); !due {
		return st, false
	}
	address := r.LokiAddress
	if spec.Provider == v1alpha1.ProviderPrometheus {
		address = r.PrometheusAddress
	}
	if spec.Address != nil && *spec.Address != "" {
		address = *spec.Address
	}
	var meas analysis.Measurement
	q, err := r.Queriers(spec.Provider, address)
	if err == nil && address == "" {
		err = fmt.Errorf("analysis %s: no %s address (set spec.rollout.analyses[].address or the controller's default)", spec.Name, spec.Provider)
	}
	if err != nil {
		meas = analysis.Measurement{Phase: analysis.PhaseError, At: now, Message: err.Error()}
	} else {
		// The cohorts settled when the analysis took its first measurement
		// (a judge counts messages only from one step after that).
		since := analysis.StartedAt(prev, now)
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		meas = analysis.Measure(qctx, q, p.Name,
			spec, analysis.Cohort{Vehicles: m.Canary, Revision: m.CanaryRevision, Since: since},
			analysis.Cohort{Vehicles: m.Baseline, Revision: m.BaselineRevision, Since: since}, now)
		cancel()
	}
	res := analysis.Accumulate(prev, meas, spec)
	res.Name, res.Step = m.Analysis, m.Step
	st = *st.DeepCopy()
	if idx >= 0 {
		st.Analysis[idx] = res
	} else {
		st.Analysis = append(st.Analysis, res)
	}
	if len(st.Analysis) > 8 {
		st.Analysis = st.Analysis[len(st.Analysis)-8:]
	}
	recordMeasurement(p.Name, spec, meas)
	typ := corev1.EventTypeNormal
	if meas.Phase != analysis.PhaseSuccessful {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(p, nil, typ, "Analysis"+string(meas.Phase), "Analysis", "analysis %s step %d (%s): %s [result %s]",
		spec.Name, m.Step, spec.Provider, meas.Message, res.Phase)
	return st, true
}

// renderNodes writes every node's NodeNetTuning: this profile's assignment
// for the nodes it selects (or none for nodes it no longer selects) and the
// other profiles' assignments as they stand. It returns the conflicts that
// involve this profile.
func (r *ProfileReconciler) renderNodes(ctx context.Context, p *v1alpha1.NetTuningProfile, f *fleet, assign map[string]string,
	nodes []corev1.Node, nnts map[string]*v1alpha1.NodeNetTuning, revs *revisions) ([]string, error) {
	all := make([]render.Node, 0, len(nodes))
	for i := range nodes {
		all = append(all, render.NodeFromCore(&nodes[i]))
	}
	profiles := &v1alpha1.NetTuningProfileList{}
	if err := r.List(ctx, profiles); err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	live := map[string]bool{}
	for _, op := range profiles.Items {
		if op.DeletionTimestamp.IsZero() {
			live[op.Name] = true
		}
	}
	conflictSet := map[string]bool{}
	for i := range nodes {
		node := &nodes[i]
		nnt := nnts[node.Name]
		want := ""
		if v := f.vehicleOf(node.Name); v != "" {
			want = assign[v]
		}
		if nnt == nil && want == "" {
			continue
		}
		var inputs []render.Input
		if nnt != nil {
			for _, sp := range nnt.Spec.Profiles {
				if sp.Name == p.Name || !live[sp.Name] {
					continue
				}
				spec, err := revs.get(ctx, sp.Revision)
				if err != nil {
					return nil, err
				}
				if spec == nil {
					// Never drop another profile's items for want of its
					// content: leave the node as it is until that profile
					// renders it again.
					log.FromContext(ctx).Info("revision content missing; node left unchanged", "node", node.Name, "revision", sp.Revision)
					inputs = nil
					break
				}
				inputs = append(inputs, render.Input{Profile: sp.Name, Revision: sp.Revision, Spec: spec})
			}
			if inputs == nil && otherProfiles(nnt, p.Name, live) > 0 {
				continue
			}
		}
		if want != "" {
			spec, err := revs.get(ctx, want)
			if err != nil {
				return nil, err
			}
			if spec == nil {
				return nil, fmt.Errorf("revision %s of profile %s is gone from namespace %s", want, p.Name, r.Namespace)
			}
			inputs = append(inputs, render.Input{Profile: p.Name, Revision: want, Spec: spec})
		}
		result := render.Render(render.NodeFromCore(node), all, inputs)
		for _, c := range result.Conflicts {
			if contains(c.Profiles, p.Name) {
				conflictSet[fmt.Sprintf("%s %s on %s with %s", c.Kind, c.Item, node.Name, strings.Join(without(c.Profiles, p.Name), ", "))] = true
			}
		}
		if err := r.writeNode(ctx, node, nnt, result.Spec); err != nil {
			return nil, err
		}
	}
	var out []string
	for c := range conflictSet {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// writeNode creates or updates a node's NodeNetTuning when its spec changed.
func (r *ProfileReconciler) writeNode(ctx context.Context, node *corev1.Node, nnt *v1alpha1.NodeNetTuning, spec v1alpha1.NodeNetTuningSpec) error {
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
	if apiequality.Semantic.DeepEqual(nnt.Spec, spec) {
		return nil
	}
	patch := client.MergeFrom(nnt.DeepCopy())
	nnt.Spec = spec
	if err := r.Patch(ctx, nnt, patch); err != nil {
		return fmt.Errorf("update nodenettuning %s: %w", node.Name, err)
	}
	nodesRendered.Inc()
	return nil
}

// finalize removes a deleted profile from every node, then lets it go.
func (r *ProfileReconciler) finalize(ctx context.Context, p *v1alpha1.NetTuningProfile) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	nodes := &corev1.NodeList{}
	if err := r.List(ctx, nodes); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	nntList := &v1alpha1.NodeNetTuningList{}
	if err := r.List(ctx, nntList); err != nil {
		return fmt.Errorf("list nodenettunings: %w", err)
	}
	nnts := map[string]*v1alpha1.NodeNetTuning{}
	for i := range nntList.Items {
		if AssignedRevision(&nntList.Items[i], p.Name) != "" {
			nnts[nntList.Items[i].Name] = &nntList.Items[i]
		}
	}
	var keep []corev1.Node
	for _, n := range nodes.Items {
		if nnts[n.Name] != nil {
			keep = append(keep, n)
		}
	}
	empty := &fleet{vehicles: map[string][]*corev1.Node{}}
	if _, err := r.renderNodes(ctx, p, empty, nil, keep, nnts, newRevisions(r.Client, r.Namespace)); err != nil {
		return err
	}
	patch := client.MergeFrom(p.DeepCopy())
	controllerutil.RemoveFinalizer(p, Finalizer)
	if err := r.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Removed", "Delete", "profile removed from %d node(s)", len(keep))
	deleteMetrics(p.Name)
	return nil
}

func setConflict(st *v1alpha1.NetTuningProfileStatus, gen int64, conflicts []string, now time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionFalse, Reason: "NoConflict",
		Message: "no item clashes with an equal-priority profile", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if len(conflicts) > 0 {
		msg := fmt.Sprintf("%d item(s) set differently by an equal-priority profile are applied by neither: %s",
			len(conflicts), strings.Join(conflicts, "; "))
		if len(msg) > 1024 {
			msg = msg[:1021] + "..."
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, "EqualPriorityClash", msg
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func setStalled(p *v1alpha1.NetTuningProfile, reason, msg string, now time.Time) {
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg},
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg},
	} {
		c.ObservedGeneration, c.LastTransitionTime = p.Generation, metav1.NewTime(now)
		meta.SetStatusCondition(&p.Status.Conditions, c)
	}
}

func rollbackReason(p *v1alpha1.NetTuningProfile) string {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c != nil {
		return c.Reason
	}
	return "Unknown"
}

// equalStatus compares statuses ignoring condition transition times.
func equalStatus(a, b v1alpha1.NetTuningProfileStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for _, cs := range [][]metav1.Condition{a.Conditions, b.Conditions} {
		for i := range cs {
			cs[i].LastTransitionTime = metav1.Time{}
		}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func without(list []string, s string) []string {
	var out []string
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

func otherProfiles(nnt *v1alpha1.NodeNetTuning, self string, live map[string]bool) int {
	n := 0
	for _, sp := range nnt.Spec.Profiles {
		if sp.Name != self && live[sp.Name] {
			n++
		}
	}
	return n
}
