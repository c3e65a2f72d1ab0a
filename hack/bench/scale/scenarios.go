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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// profileName is the profile every scenario edits.
const profileName = "fleet-scale"

// scenario is the outcome of one timed scenario. Its times are from the
// apply (the profile's create or update; for the rollback, the abort) to
// the event the tracker saw.
type scenario struct {
	ran  bool
	done bool   // reached its end state
	note string // why not, when it did not ("timed out after ...")
	// first: all at once, the first node verified; staged, the first
	// canary vehicle verified; rollback, every canary vehicle verified on
	// the revision to abort (from its edit).
	first time.Duration
	// all: all at once and staged, every node verified; rollback, from the
	// abort until every node is verified on the stable revision again and
	// the profile is RolledBack.
	all time.Duration
	// settled: all at once and staged, the profile Healthy with the
	// revision stable; rollback, the profile seen RolledBack (from the
	// abort).
	settled  time.Duration
	revision string
	moved    int // rollback: nodes on the new revision when it was aborted
	verified int // nodes verified on the scenario's target at its end
}

// bench runs the scenarios of one size under one liveness protocol.
type bench struct {
	c    config
	cl   client.Client
	tr   *tracker
	ctrl *benchutil.Controller
	// ctrlStopped: the writes-alone scenario stopped the controller.
	ctrlStopped bool
	// ctrlLast is the controller's usage when the writes alone stopped it.
	ctrlLast benchutil.Usage
	// ag are the simulated agents (the writes alone pause their reports and
	// reads their informer cache).
	ag    *agents
	total int
	label string // e.g. "5000 nodes lease"
	// unreachableAfter is the rollouts' spec.rollout.unreachableAfter.
	unreachableAfter time.Duration
	w                io.Writer
}

// tuning is the profile's content: cwnd and rto_min on every host pair of
// the orin vehicles.
func tuning(cwnd int32) v1alpha1.NetTuningProfileSpec {
	lock := true
	return v1alpha1.NetTuningProfileSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: hardware}},
		Defaults: &v1alpha1.TCPParameters{
			Cwnd:   &v1alpha1.Cwnd{Value: cwnd, Lock: &lock},
			RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond},
		},
	}
}

// canaryRollout is a rollout whose canary is 2 vehicles picked by count,
// every vehicle of a step updated at once, then steps.
func canaryRollout(unreachableAfter time.Duration, steps ...v1alpha1.RolloutStep) *v1alpha1.RolloutSpec {
	count := int32(2)
	all := intstr.FromString("100%")
	return &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &count}, MaxUnavailable: &all, Steps: steps,
		UnreachableAfter: &metav1.Duration{Duration: unreachableAfter}}
}

// percentStep grows the rollout to percent of the vehicles.
func percentStep(percent int32) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &percent}}
}

// say prints a progress line timed from t0.
func (b *bench) say(t0 time.Time, format string, args ...any) {
	fmt.Fprintf(b.w, "[%5s] %s: %s\n", time.Since(t0).Round(time.Second), b.label, fmt.Sprintf(format, args...))
}

// wait polls check every 100 ms until it reports done or -max-wait passed
// (timedOut), printing a progress line every -progress. It fails when ctx
// ends or the controller exits.
func (b *bench) wait(ctx context.Context, what string, t0 time.Time, check func() (done bool, verified int, note string)) (timedOut bool, err error) {
	deadline := t0.Add(b.c.maxWait)
	nextLine := time.Now().Add(b.c.progress)
	for {
		done, n, note := check()
		if done {
			return false, nil
		}
		if err := b.ctrl.Alive(); err != nil && !b.ctrlStopped {
			return false, err
		}
		now := time.Now()
		if now.After(deadline) {
			return true, nil
		}
		if now.After(nextLine) {
			b.say(t0, "%s: %d/%d verified%s", what, n, b.total, note)
			nextLine = now.Add(b.c.progress)
		}
		if err := benchutil.Sleep(ctx, 100*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// timedOut records a scenario that did not reach its end state in time.
func (b *bench) timedOut(s *scenario, n int) {
	s.note = fmt.Sprintf("timed out after %s (%d/%d verified)", b.c.maxWait, n, b.total)
}

// since is the time from t0 to t (0 when t is zero).
func since(t0, t time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(t0)
}

// untilVerified waits until every node verified the revision the profile's
// generation gen rolls out and the profile is Healthy with it stable.
func (b *bench) untilVerified(ctx context.Context, what string, t0 time.Time, gen int64, s *scenario) (bool, error) {
	return b.wait(ctx, what, t0, func() (bool, int, string) {
		if s.revision == "" {
			s.revision = b.tr.revision(gen)
		}
		if s.revision == "" {
			return false, 0, " (the controller has not taken the new generation yet)"
		}
		n := b.tr.count(s.revision)
		s.verified = n
		healthy := !b.tr.marksOf(s.revision).healthy.IsZero()
		note := ""
		if n == b.total && !healthy {
			note = " (waiting for the profile to turn Healthy)"
		}
		return n == b.total && healthy, n, note
	})
}

// allAtOnce creates the profile without a rollout: every vehicle receives
// its first revision at once. When the Lease renewal period needs an
// unreachableAfter above the default (2m: a profile without a rollout has
// it, and with a 4m renewal every vehicle would turn Unreachable between two
// renewals), the profile gets the smallest rollout that sets it: a canary
// of 2 vehicles, then every vehicle at once.
func (b *bench) allAtOnce(ctx context.Context) (scenario, error) {
	s := scenario{ran: true}
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName}, Spec: tuning(30)}
	if b.unreachableAfter > v1alpha1.DefaultUnreachableAfter {
		p.Spec.Rollout = canaryRollout(b.unreachableAfter, percentStep(100))
	}
	t0 := time.Now()
	if err := b.cl.Create(ctx, p); err != nil {
		return s, fmt.Errorf("creating profile %s: %w", profileName, err)
	}
	timedOut, err := b.untilVerified(ctx, "first revision, all at once", t0, p.Generation, &s)
	if err != nil {
		return s, err
	}
	m := b.tr.marksOf(s.revision)
	s.first, s.all, s.settled = since(t0, m.firstNode), since(t0, m.full), since(t0, m.healthy)
	if timedOut {
		b.timedOut(&s, s.verified)
		return s, nil
	}
	s.done = true
	b.say(t0, "first revision, all at once: first node verified after %s, every node after %s", benchutil.Round(s.first), benchutil.Round(s.all))
	return s, nil
}

// staged rolls a new revision out through a canary of 2 vehicles, then
// 10 %, 50 % and 100 % of the vehicles, with no analysis and no pause.
func (b *bench) staged(ctx context.Context) (scenario, error) {
	s := scenario{ran: true}
	gen, t0, err := b.edit(ctx, func(p *v1alpha1.NetTuningProfile) {
		p.Spec = tuning(31)
		p.Spec.Rollout = canaryRollout(b.unreachableAfter, percentStep(10), percentStep(50), percentStep(100))
	})
	if err != nil {
		return s, err
	}
	timedOut, err := b.untilVerified(ctx, "staged rollout", t0, gen, &s)
	if err != nil {
		return s, err
	}
	m := b.tr.marksOf(s.revision)
	s.all, s.settled = since(t0, m.full), since(t0, m.healthy)
	if first, _ := earliestLatest(b.tr.vehiclesVerified(s.revision, b.canaries(s.revision))); !first.IsZero() {
		s.first = first.Sub(t0)
	}
	if timedOut {
		b.timedOut(&s, s.verified)
		return s, nil
	}
	s.done = true
	b.say(t0, "staged rollout: first canary vehicle verified after %s, every node after %s", benchutil.Round(s.first), benchutil.Round(s.all))
	return s, nil
}

// rollback rolls a new revision out to a canary of 2 vehicles held by a
// pause, waits until the canary verified it, then aborts it
// (nettune.io/abort) and times the return of every node to the stable
// revision.
func (b *bench) rollback(ctx context.Context) (scenario, error) {
	s := scenario{ran: true}
	gen, t0, err := b.edit(ctx, func(p *v1alpha1.NetTuningProfile) {
		p.Spec = tuning(32)
		p.Spec.Rollout = canaryRollout(b.unreachableAfter, percentStep(50), v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{}})
	})
	if err != nil {
		return s, err
	}
	half := (b.total + 1) / 2
	timedOut, err := b.wait(ctx, "rollback: half the fleet on the new revision", t0, func() (bool, int, string) {
		if s.revision == "" {
			s.revision = b.tr.revision(gen)
		}
		if s.revision == "" {
			return false, 0, " (the controller has not taken the new generation yet)"
		}
		n := b.tr.count(s.revision)
		return n >= half, n, fmt.Sprintf(" (aborting at %d)", half)
	})
	if err != nil {
		return s, err
	}
	if timedOut {
		s.note = fmt.Sprintf("timed out after %s before half the fleet verified the new revision (%d/%d)",
			b.c.maxWait, b.tr.count(s.revision), half)
		return s, nil
	}
	s.first = time.Since(t0)
	s.moved = b.tr.count(s.revision)
	b.say(t0, "rollback: %d/%d nodes verified the new revision after %s; aborting", s.moved, b.total, benchutil.Round(s.first))
	return s, b.abort(ctx, &s)
}

func (b *bench) abort(ctx context.Context, s *scenario) error {
	stable := b.tr.status().StableRevision
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AbortAnnotation: s.revision}}})
	if err != nil {
		return fmt.Errorf("encoding the abort annotation: %w", err)
	}
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName}}
	t0 := time.Now()
	if err := b.cl.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating %s with %s: %w", profileName, v1alpha1.AbortAnnotation, err)
	}
	timedOut, err := b.wait(ctx, "rollback", t0, func() (bool, int, string) {
		n := b.tr.count(stable)
		s.verified = n
		back := b.tr.marksOf(stable).full.After(t0)
		rolled := !b.tr.marksOf(s.revision).rolled.IsZero()
		note := ""
		if !rolled {
			note = " (the profile is not RolledBack yet)"
		}
		return n == b.total && back && rolled, n, note
	})
	if err != nil {
		return err
	}
	m, r := b.tr.marksOf(stable), b.tr.marksOf(s.revision)
	s.settled = since(t0, r.rolled)
	if m.full.After(t0) {
		s.all = max(since(t0, m.full), s.settled)
	}
	if timedOut {
		b.timedOut(s, s.verified)
		return nil
	}
	s.done = true
	b.say(t0, "rollback: every node back on the stable revision %s after %s (RolledBack after %s)", stable, benchutil.Round(s.all), benchutil.Round(s.settled))
	return nil
}

// canaries are the canary vehicles the profile's status names for rev.
func (b *bench) canaries(rev string) []string {
	st := b.tr.status()
	if rev == "" || st.CurrentRevision != rev {
		return nil
	}
	return st.CanaryVehicles
}

// earliestLatest are the earliest and latest of times (zero when none).
func earliestLatest(times map[string]time.Time) (earliest, latest time.Time) {
	for _, t := range times {
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
		if t.After(latest) {
			latest = t
		}
	}
	return earliest, latest
}

// edit updates the profile (retrying on conflicts) and returns its new
// generation and when the successful update was sent.
func (b *bench) edit(ctx context.Context, mutate func(*v1alpha1.NetTuningProfile)) (gen int64, t0 time.Time, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.NetTuningProfile{}
		if err := b.cl.Get(ctx, client.ObjectKey{Name: profileName}, p); err != nil {
			return err
		}
		mutate(p)
		t0 = time.Now()
		if err := b.cl.Update(ctx, p); err != nil {
			return err
		}
		gen = p.Generation
		return nil
	})
	if err != nil {
		return 0, t0, fmt.Errorf("updating profile %s: %w", profileName, err)
	}
	return gen, t0, nil
}

// idle waits -settle, then measures -idle with nothing to do.
func (b *bench) idle(ctx context.Context, m *meter) (phase, error) {
	if err := benchutil.Sleep(ctx, b.c.settle); err != nil {
		return phase{}, err
	}
	a := m.read(ctx)
	t0 := time.Now()
	every := max(b.c.progress, 30*time.Second)
	for left := b.c.idle; left > 0; left = b.c.idle - time.Since(t0) {
		if err := benchutil.Sleep(ctx, min(every, left)); err != nil {
			return phase{}, err
		}
		if err := b.ctrl.Alive(); err != nil {
			return phase{}, err
		}
		if time.Since(t0) < b.c.idle {
			b.say(t0, "idle: %s of %s", benchutil.Round(time.Since(t0)), b.c.idle)
		}
	}
	return m.phase("idle", a, m.read(ctx)), nil
}

// controllerFieldManager is the field manager of the controller's writes
// (the API server takes it from the binary's user agent).
const controllerFieldManager = "nettune-controller"

// writesAlone stops the controller and the simulated agents' reports, then
// moves every node itself with the two writes a move needs and nothing
// else: the NodeNetTuning's spec (the spec the controller rendered, with
// cwnd 33 and a new revision), written as the controller's field manager,
// and right after it the verified report of that generation, as the agent
// writes it, -agent-workers nodes at a time, with no apply delay; the Lease
// renewals go on as in every rollout. The time from the first write to
// every node verified is what the API server takes for a rollout's writes
// on this machine with no controller deciding, rendering or pacing them. It
// runs last: the fleet is not the controller's any more afterwards.
func (b *bench) writesAlone(ctx context.Context, m *meter) (scenario, phase, error) {
	s := scenario{ran: true, revision: profileName + "-alone"}
	last := m.read(ctx)
	b.ctrl.Stop()
	b.ctrlStopped, b.ctrlLast = true, last.ctrl
	b.ag.paused.Store(true)
	defer b.ag.paused.Store(false)
	a := m.read(ctx)
	a.ctrl = last.ctrl // the controller is gone: it used nothing in this phase
	nnts := &v1alpha1.NodeNetTuningList{}
	if err := b.ag.cache.List(ctx, nnts); err != nil {
		return s, phase{}, fmt.Errorf("writes alone: listing the NodeNetTunings: %w", err)
	}
	patches := make([][]byte, len(nnts.Items))
	for i := range nnts.Items {
		spec := nnts.Items[i].Spec.DeepCopy()
		spec.Revision = s.revision
		for j := range spec.Profiles {
			if spec.Profiles[j].Name == profileName {
				spec.Profiles[j].Revision = s.revision
			}
		}
		for j := range spec.Routes {
			if c := spec.Routes[j].Parameters.Cwnd; c != nil {
				c.Value = 33
			}
		}
		raw, err := json.Marshal(map[string]any{"spec": spec})
		if err != nil {
			return s, phase{}, fmt.Errorf("writes alone: encoding the spec of %s: %w", nnts.Items[i].Name, err)
		}
		patches[i] = raw
	}
	t0 := time.Now()
	err := benchutil.Parallel(ctx, len(patches), b.c.workers, func(i int) error {
		nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: nnts.Items[i].Name}}
		// The patch answers with the object as stored: the new generation.
		if err := b.cl.Patch(ctx, nnt, client.RawPatch(types.MergePatchType, patches[i]), client.FieldOwner(controllerFieldManager)); err != nil {
			return fmt.Errorf("writes alone: patching the spec of %s: %w", nnt.Name, err)
		}
		return b.ag.patchStatus(ctx, nnt.Name, map[string]any{"status": verifiedStatus(nnt, metav1.Now())})
	})
	if err != nil {
		return s, phase{}, err
	}
	s.first = time.Since(t0) // every node's two writes answered
	timedOut, err := b.wait(ctx, "writes alone (no controller)", t0, func() (bool, int, string) {
		n := b.tr.count(s.revision)
		s.verified = n
		return n == b.total, n, ""
	})
	if err != nil {
		return s, phase{}, err
	}
	z := m.read(ctx)
	z.ctrl = last.ctrl
	s.all = since(t0, b.tr.marksOf(s.revision).full)
	if timedOut {
		b.timedOut(&s, s.verified)
	} else {
		s.done = true
		b.say(t0, "writes alone (no controller): every node's two writes answered after %s, every node seen verified after %s", benchutil.Round(s.first), benchutil.Round(s.all))
	}
	return s, m.phase("writes alone (no controller)", a, z), nil
}

// smallestWrites is the machine's floor for a rollout's writes (lease
// protocol, after the writes alone): with the controller still stopped,
// every node's agent renews its Lease (the agent's own LeaseKeeper: one
// Update of spec.renewTime, the smallest write any agent makes), then every
// node's agent renews it once more, -agent-workers nodes at a time. first
// is when every node's first renewal was answered (one write a node), all
// when every node's second was (two writes a node, as many as a rollout
// needs). A rollout on this machine cannot be faster than its writes would
// be if every one were this small.
func (b *bench) smallestWrites(ctx context.Context, m *meter) (scenario, phase, error) {
	s := scenario{ran: true}
	a := m.read(ctx)
	a.ctrl = b.ctrlLast // the controller is gone
	nodes := b.ag.nodes
	var renewed [2]atomic.Int64
	t0 := time.Now()
	for round := range renewed {
		err := benchutil.Parallel(ctx, len(nodes), b.c.workers, func(i int) error {
			if err := b.ag.renew(ctx, nodes[i]); err != nil {
				return fmt.Errorf("smallest writes: renewing the Lease of %s: %w", nodes[i], err)
			}
			renewed[round].Add(1)
			return nil
		})
		if err != nil {
			return s, phase{}, err
		}
		if round == 0 {
			s.first = time.Since(t0)
		}
	}
	s.all = time.Since(t0)
	s.verified = int(min(renewed[0].Load(), renewed[1].Load()))
	z := m.read(ctx)
	z.ctrl = b.ctrlLast
	if s.verified == b.total {
		s.done = true
	} else {
		s.note = fmt.Sprintf("%d/%d nodes renewed twice", s.verified, b.total)
	}
	b.say(t0, "smallest writes (no controller): every node's Lease renewed once after %s, twice after %s", benchutil.Round(s.first), benchutil.Round(s.all))
	return s, m.phase("smallest writes (no controller)", a, z), nil
}
