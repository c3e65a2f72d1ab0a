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

package agent

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/gate"
	"github.com/nettune/nettune/node-agent/kernel"
)

// EventSink receives the agent's apply and repair events as they happen,
// besides the Kubernetes Events of the Recorder (which need the API server):
// e.g. to ship them to Loki from a vehicle that is offline. kind is one of
// the Event* constants; revision is the revision the event is about.
// Event is called from the reconciler and the drift watcher and must not
// block.
type EventSink interface {
	Event(kind, revision, message string)
}

// Kinds of EventSink events.
const (
	// EventApplied: a revision was written to the host and committed.
	EventApplied = "applied"
	// EventVerified: the committed revision read back as desired and the
	// local probes passed (follows every EventApplied).
	EventVerified = "verified"
	// EventReverted: an apply was undone (apply error, verify mismatch or
	// failed probe); revision is the one undone.
	EventReverted = "reverted"
	// EventRefused: preflight refused a revision; nothing was touched.
	EventRefused = "refused"
	// EventRetrying: the host's environment stopped an apply (a full or
	// read-only state directory, a link down); it is tried again.
	EventRetrying = "retrying"
	// EventStateRepaired: an unreadable file of the state directory was kept
	// aside (the last-known-good fell back to the previous commit, or to
	// none).
	EventStateRepaired = "state-repaired"
	// EventDriftRepaired: items of the committed revision were re-tuned.
	EventDriftRepaired = "drift_repaired"
	// EventDeferred: a new revision waits for the vehicle's apply gate or a
	// maintenance window; the revision in force stays.
	EventDeferred = "deferred"
)

// Reconciler applies the node's NodeNetTuning and reports on it (Run).
type Reconciler struct {
	Engine   *Engine
	NodeName string
	// Recorder receives the Kubernetes Events about the NodeNetTuning
	// (Kube.EventRecorder); none are recorded when nil.
	Recorder EventRecorder
	Metrics  *Metrics
	// Events, when set, receives every apply outcome and drift repair.
	Events EventSink
	// Kernel, when set, is what the host's kernel provides, probed once at
	// start-up (Host.ProbeFeatures); every status report carries it
	// (status.kernel), its congestion controls re-read at each report
	// (an apply may have loaded one; kept as probed when they cannot be
	// read).
	Kernel *kernel.Features
	// Logs, when set, reports the push to Loki: the status carries it as
	// the LogsShipped condition (ConditionLogsShipped).
	Logs LogShipper

	// Gate, when set, is the vehicle's apply gate (--apply-gate-file): a
	// new revision starts to apply only while it is open, as the revision's
	// apply policy says (gate.Decide). Nil: the agent has no gate.
	Gate *gate.File
	// Location is the vehicle's time zone, in which maintenance windows
	// without a zone of their own are read (time.Local when nil).
	Location *time.Location

	// Now is the clock of the status' heartbeat (time.Now when nil).
	Now func() time.Time

	// Heartbeat is how often status is rewritten when nothing changed.
	Heartbeat time.Duration
	// Resync is how often the host is re-checked for drift without an event.
	Resync time.Duration

	// Kick receives a value when the drift watcher repaired something or
	// the gate changed: the NodeNetTuning is reconciled.
	Kick chan struct{}

	watch      atomic.Pointer[nntWatch] // while Run runs
	reconciles atomic.Int64
	// retryLimiter, when set, replaces the queue's rate limiter of failed
	// reconciles (tests).
	retryLimiter workqueue.TypedRateLimiter[string]

	mu sync.Mutex
	// refused remembers a generation that was refused or rolled back, so it is
	// not retried until the spec changes.
	refused      map[int64]Outcome
	last         Outcome
	driftRepairs int64
}

// init sets the defaults; a generation refused by a previous Run is tried
// again.
func (r *Reconciler) init() {
	if r.Heartbeat == 0 {
		r.Heartbeat = 5 * time.Minute
	}
	if r.Resync == 0 {
		r.Resync = 30 * time.Second
	}
	if r.Kick == nil {
		r.Kick = make(chan struct{}, 1)
	}
	r.mu.Lock()
	r.refused = map[int64]Outcome{}
	r.mu.Unlock()
}

// DriftRepaired counts a repair and wakes the reconciler to report it.
func (r *Reconciler) DriftRepaired(n int) {
	r.mu.Lock()
	r.driftRepairs += int64(n)
	r.mu.Unlock()
	if r.Events != nil {
		revision := ""
		if r.Engine != nil {
			if spec, err := r.Engine.CommittedSpec(); err == nil {
				revision = spec.Revision
			}
		}
		r.Events.Event(EventDriftRepaired, revision, fmt.Sprintf("%d item(s) re-tuned after drift", n))
	}
	r.kick()
}

// kick wakes the reconciler (a wake-up already pending is enough).
func (r *Reconciler) kick() {
	select {
	case r.Kick <- struct{}{}:
	default:
	}
}

// reconcile applies spec when it is new, then writes status if it changed.
func (r *Reconciler) reconcile(ctx context.Context, w *nntWatch, name string) (Result, error) {
	if name != r.NodeName {
		return Result{}, nil
	}
	nnt, err := w.get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return Result{}, nil // keep the last-known-good; nothing to report to
		}
		return Result{}, fmt.Errorf("getting NodeNetTuning %s: %w", name, err)
	}

	committed, err := r.Engine.CommittedSpec()
	if err != nil {
		return Result{}, err
	}
	for _, n := range r.Engine.TakeNotices() {
		if r.Recorder != nil {
			r.Recorder.Eventf(nnt, nil, "Warning", "StateRepaired", "Boot", "%s", n)
		}
		if r.Events != nil {
			r.Events.Event(EventStateRepaired, committed.Revision, n)
		}
	}
	r.mu.Lock()
	refusedOutcome, refused := r.refused[nnt.Generation]
	r.mu.Unlock()

	pending := committed.Revision != nnt.Spec.Revision || !reflect.DeepEqual(normalize(committed), normalize(nnt.Spec))
	gateState := r.gateState()
	// Only an apply about to start is gated: the windows are read then.
	var decision gate.Decision
	deferred := false
	if pending && !refused {
		decision = gate.Decide(nnt.Spec.ApplyPolicy, gateState, r.now().Time, r.Location)
		deferred = !decision.Allowed
	}

	var outcome Outcome
	switch {
	case refused:
		outcome = refusedOutcome
	case pending && !deferred:
		outcome, err = r.Engine.Apply(ctx, nnt.Spec)
		if err != nil {
			r.Metrics.observe(outcome, err)
			return Result{}, fmt.Errorf("applying revision %s: %w", nnt.Spec.Revision, err)
		}
		r.Metrics.observe(outcome, nil)
		r.event(nnt, outcome)
		if !outcome.Committed && outcome.Retry == 0 {
			r.mu.Lock()
			r.refused[nnt.Generation] = outcome
			r.mu.Unlock()
		}
	default:
		if deferred {
			// Held back: the revision in force stays, reported as such,
			// and the Deferred condition says what the apply waits for.
			r.deferredEvent(nnt, decision)
		}
		outcome = Outcome{Revision: committed.Revision, Committed: true, Items: r.Engine.Observe(committed)}
	}
	r.last = outcome

	requeue := r.Resync
	if outcome.Retry > 0 {
		requeue = outcome.Retry
	}
	if deferred && !decision.NextWindow.IsZero() {
		if until := decision.NextWindow.Sub(r.now().Time) + time.Second; until < requeue {
			requeue = max(until, time.Second)
		}
	}
	status := r.status(nnt, outcome)
	r.gateStatus(&status, nnt, gateState, decision, deferred)
	now := metav1.NewTime(time.Now())
	if r.Now != nil {
		now = metav1.NewTime(r.Now())
	}
	beat := nnt.Status.LastHeartbeatTime
	stale := beat == nil || now.Sub(beat.Time) >= r.Heartbeat
	if !stale && statusEqual(nnt.Status, status) {
		return Result{RequeueAfter: requeue}, nil
	}
	status.LastHeartbeatTime = &now
	original := nnt.DeepCopy()
	nnt.Status = status
	if err := w.kube.PatchStatus(ctx, original, nnt); err != nil {
		return Result{}, fmt.Errorf("patching status: %w", err)
	}
	return Result{RequeueAfter: requeue}, nil
}

// normalize clears what does not change the host, for comparisons.
func normalize(s v1alpha1.NodeNetTuningSpec) v1alpha1.NodeNetTuningSpec {
	s.Profiles = nil
	s.ApplyPolicy = nil
	return s
}

// gateState reads the gate (NotConfigured without one).
func (r *Reconciler) gateState() gate.State {
	if r.Gate == nil {
		return gate.NotConfigured
	}
	return r.Gate.Read()
}

// GateChanged wakes the reconciler: a revision held back by the gate may
// start now (or a report of the gate is due).
func (r *Reconciler) GateChanged() {
	r.kick()
}

// deferredEvent announces a revision held back, once per revision and
// reason: the condition already saying so is not repeated.
func (r *Reconciler) deferredEvent(nnt *v1alpha1.NodeNetTuning, d gate.Decision) {
	if c := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionDeferred); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == d.Reason && nnt.Status.Gate != nil && nnt.Status.Gate.PendingRevision == nnt.Spec.Revision {
		return
	}
	msg := fmt.Sprintf("revision %s deferred: %s", nnt.Spec.Revision, d.Message)
	if r.Recorder != nil {
		r.Recorder.Eventf(nnt, nil, "Normal", d.Reason, "Defer", "%s", msg)
	}
	if r.Events != nil {
		r.Events.Event(EventDeferred, nnt.Spec.Revision, msg)
	}
}

// gateStatus reports the gate, what waits for it, and the Deferred
// condition.
func (r *Reconciler) gateStatus(st *v1alpha1.NodeNetTuningStatus, nnt *v1alpha1.NodeNetTuning, g gate.State, d gate.Decision, deferred bool) {
	gs := &v1alpha1.ApplyGateStatus{State: g.State, Reason: g.Reason}
	if !g.Since.IsZero() {
		since := metav1.NewTime(g.Since.Truncate(time.Second))
		gs.Since = &since
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionDeferred, Status: metav1.ConditionFalse, Reason: gate.ReasonAllowed,
		Message: "no revision waits", ObservedGeneration: nnt.Generation}
	if deferred {
		gs.PendingRevision = nnt.Spec.Revision
		if !d.NextWindow.IsZero() {
			next := metav1.NewTime(d.NextWindow)
			gs.NextWindow = &next
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, d.Reason
		cond.Message = fmt.Sprintf("revision %s waits, %q in force: %s", nnt.Spec.Revision, st.AppliedRevision, d.Message)
	}
	st.Gate = gs
	meta.SetStatusCondition(&st.Conditions, cond)
	if r.Metrics != nil && r.Metrics.Deferred != nil {
		r.Metrics.Deferred.Set(b2f(deferred))
		r.Metrics.GateOpen.Set(b2f(g.State != v1alpha1.GateClosed))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (r *Reconciler) event(nnt *v1alpha1.NodeNetTuning, o Outcome) {
	OutcomeEvents(r.Events, nnt.Spec.Revision, o)
	if r.Recorder == nil {
		return
	}
	switch {
	case o.Retry > 0:
		r.Recorder.Eventf(nnt, nil, "Warning", o.RetryReason, "Apply", "revision %s not applied: %s; retrying every %s", nnt.Spec.Revision, o.Reason, o.Retry)
	case o.Committed:
		r.Recorder.Eventf(nnt, nil, "Normal", "Applied", "Apply", "revision %s applied and verified in %s", o.Revision, o.Duration.Round(time.Millisecond))
	case o.Refused:
		r.Recorder.Eventf(nnt, nil, "Warning", "Refused", "Apply", "revision %s refused: %s", nnt.Spec.Revision, o.Reason)
	case o.RolledBack:
		r.Recorder.Eventf(nnt, nil, "Warning", v1alpha1.ReasonRolledBack, "Apply", "revision %s rolled back to %q: %s", nnt.Spec.Revision, o.Revision, o.Reason)
	}
}

// OutcomeEvents sends the events of one apply of revision to sink (nil:
// none): applied and verified for a commit, refused, or reverted.
func OutcomeEvents(sink EventSink, revision string, o Outcome) {
	if sink == nil {
		return
	}
	switch {
	case o.Retry > 0:
		sink.Event(EventRetrying, revision, fmt.Sprintf("%s: %s", o.RetryReason, o.Reason))
	case o.Committed:
		sink.Event(EventApplied, o.Revision, fmt.Sprintf("revision %s applied in %s", o.Revision, o.Duration.Round(time.Millisecond)))
		verified, notEffective := 0, 0
		for _, it := range o.Items {
			switch it.State {
			case StateVerified:
				verified++
			case StateNotEffective:
				notEffective++
			}
		}
		msg := fmt.Sprintf("%d item(s) read back as desired and the local probes passed", verified+notEffective)
		if notEffective > 0 {
			msg += fmt.Sprintf("; %d set but not effective", notEffective)
		}
		sink.Event(EventVerified, o.Revision, msg)
	case o.Refused:
		sink.Event(EventRefused, revision, o.Reason)
	case o.RolledBack:
		sink.Event(EventReverted, revision, fmt.Sprintf("rolled back to %q: %s", o.Revision, o.Reason))
	}
}

// status builds the node's report from the last outcome.
func (r *Reconciler) status(nnt *v1alpha1.NodeNetTuning, o Outcome) v1alpha1.NodeNetTuningStatus {
	st := *nnt.Status.DeepCopy()
	st.ObservedGeneration = nnt.Generation
	st.AppliedRevision = o.Revision
	st.Items = o.Items
	r.mu.Lock()
	st.DriftRepairs = r.driftRepairs
	r.mu.Unlock()
	if r.Kernel != nil {
		f := *r.Kernel
		if cc, err := r.Engine.Host.AvailableCongestionControls(); err == nil {
			f.CongestionControls = cc
		}
		st.Kernel = kernelFeatures(f)
	}

	gen := nnt.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	switch {
	case o.Retry > 0:
		// The host's environment, not the revision: neither verified nor
		// failed, retried by the agent.
		msg := fmt.Sprintf("revision %s not applied, %q in force: %s; retrying every %s", nnt.Spec.Revision, o.Revision, o.Reason, o.Retry)
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, o.RetryReason, msg)
		set(v1alpha1.ConditionVerified, metav1.ConditionFalse, o.RetryReason, "not applied yet")
		set(v1alpha1.ConditionRolledBack, metav1.ConditionFalse, o.RetryReason, "")
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, o.RetryReason, msg)
	case o.Committed:
		set(v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied", "revision "+o.Revision+" is in force")
		verified, notEffective := true, 0
		for _, it := range o.Items {
			switch it.State {
			case StateNotEffective:
				notEffective++
			case StateVerified:
			default:
				verified = false
			}
		}
		if verified {
			msg := "every item read back as desired and the local probes passed"
			if notEffective > 0 {
				msg += fmt.Sprintf("; %d item(s) set but not effective (see items)", notEffective)
			}
			// The revision's verification time: kept while this revision
			// stays verified, set when it turns verified.
			was := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionVerified)
			if st.VerifiedTime == nil || nnt.Status.AppliedRevision != o.Revision || was == nil || was.Status != metav1.ConditionTrue {
				now := r.now()
				st.VerifiedTime = &now
			}
			set(v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified", msg)
			set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsDesired", "")
		} else {
			set(v1alpha1.ConditionVerified, metav1.ConditionFalse, "Drifted", "an item differs from the spec; repairing")
		}
		set(v1alpha1.ConditionRolledBack, metav1.ConditionFalse, "Committed", "")
	case o.Refused:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, "Refused", o.Reason)
		set(v1alpha1.ConditionVerified, metav1.ConditionFalse, "Refused", "nothing was changed")
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, "Refused", o.Reason)
	case o.RolledBack:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonRolledBack, "revision "+nnt.Spec.Revision+" was undone")
		set(v1alpha1.ConditionVerified, metav1.ConditionFalse, v1alpha1.ReasonRolledBack, o.Reason)
		set(v1alpha1.ConditionRolledBack, metav1.ConditionTrue, "ProbeOrVerifyFailed", o.Reason)
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonRolledBack, o.Reason)
	}
	drifted := metav1.ConditionFalse
	reason := "NoDrift"
	if st.DriftRepairs > 0 {
		reason = "Repaired"
	}
	set(v1alpha1.ConditionDrifted, drifted, reason, fmt.Sprintf("%d drift repair(s) since the agent started", st.DriftRepairs))
	r.setLogsShippedCondition(&st, gen)
	return st
}

// statusEqual compares two statuses ignoring heartbeat and condition times,
// and the message of the LogsShipped condition (its count of lines on disk
// moves at every push: a change of its status or reason is written, the
// message follows with the next write).
func statusEqual(a, b v1alpha1.NodeNetTuningStatus) bool {
	a.LastHeartbeatTime, b.LastHeartbeatTime = nil, nil
	strip := func(cs []metav1.Condition) []metav1.Condition {
		out := make([]metav1.Condition, len(cs))
		for i, c := range cs {
			c.LastTransitionTime = metav1.Time{}
			if c.Type == ConditionLogsShipped {
				c.Message = ""
			}
			out[i] = c
		}
		return out
	}
	a.Conditions, b.Conditions = strip(a.Conditions), strip(b.Conditions)
	// No items is no items: Observe returns an empty slice, the API server
	// (omitempty) nil.
	if len(a.Items) == 0 && len(b.Items) == 0 {
		a.Items, b.Items = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// now is the reconciler's clock as an API time.
func (r *Reconciler) now() metav1.Time {
	if r.Now != nil {
		return metav1.NewTime(r.Now())
	}
	return metav1.NewTime(time.Now())
}
