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
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// profileName is the hub profile every scenario edits.
const profileName = "fleet-hub"

// tracker keeps the latest hub profile its informer saw and tells waiters
// when it first satisfies their condition.
type tracker struct {
	mu      sync.Mutex
	last    *v1alpha1.NetTuningProfile
	waiters []*waiter
}

// waiter is a condition on the profile; at is when it first held (done
// closed then).
type waiter struct {
	cond func(*v1alpha1.NetTuningProfile) bool
	done chan struct{}
	at   time.Time
}

func (t *tracker) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.observe(o) },
		UpdateFunc: func(_, o any) { t.observe(o) },
	}
}

func (t *tracker) observe(o any) {
	p, ok := o.(*v1alpha1.NetTuningProfile)
	if !ok || p.Name != profileName {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = p
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.cond(p) {
			w.at = now
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	t.waiters = kept
}

// when registers cond; it may hold already.
func (t *tracker) when(cond func(*v1alpha1.NetTuningProfile) bool) *waiter {
	w := &waiter{cond: cond, done: make(chan struct{})}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last != nil && cond(t.last) {
		w.at = time.Now()
		close(w.done)
		return w
	}
	t.waiters = append(t.waiters, w)
	return w
}

// latest is the profile as last seen (nil before).
func (t *tracker) latest() *v1alpha1.NetTuningProfile {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// scenario is one timed scenario.
type scenario struct {
	name string
	done bool   // reached its end state
	note string // why not
	// first and all are from the edit (the rollback's all: from the abort)
	// to the first and the final state the hub's status showed; firstWhat
	// and allWhat say which.
	first, all         time.Duration
	firstWhat, allWhat string
	// seen: from the edit until the hub's status first showed it planned
	// (observedGeneration and a new currentRevision); 0 when not seen.
	seen             time.Duration
	goal             time.Duration // of all (0 = none)
	revision, stable string
	phase            phase
}

func (s *scenario) outcome() string {
	if s.done {
		return "done"
	}
	return s.note
}

// bench runs the scenarios of one size.
type bench struct {
	c        config
	cl       client.Client
	tr       *tracker
	ctrl     *benchutil.Controller
	agent    *workAgent
	m        *meter
	vehicles int
	say      func(string, ...any)
	dir      string // the size's state directory
}

// content is the profile's spec: every cluster of the benchmark, cwnd
// locked (the revision changes with it) and rto_min, and the rollout.
func content(cwnd int32, rollout *v1alpha1.RolloutSpec) v1alpha1.NetTuningProfileSpec {
	lock := true
	return v1alpha1.NetTuningProfileSpec{
		ClusterSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{benchLabel: "hub"}},
		Defaults: &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: cwnd, Lock: &lock},
			RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond}},
		Rollout: rollout,
	}
}

// canaryRollout: a canary of -canary vehicles picked by count (spread
// across clusters and hardware), every vehicle of a step at once, then
// steps.
func (b *bench) canaryRollout(steps ...v1alpha1.RolloutStep) *v1alpha1.RolloutSpec {
	count := b.c.canary
	all := intstr.FromString("100%")
	return &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &count}, MaxUnavailable: &all, Steps: steps}
}

func percentStep(percent int32) v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: &percent}}
}

// Conditions on the hub's status.

// planned: the hub planned generation gen, whose revision is not prev.
func planned(p *v1alpha1.NetTuningProfile, gen int64, prev string) bool {
	return p.Generation >= gen && p.Status.ObservedGeneration >= gen && p.Status.CurrentRevision != "" && p.Status.CurrentRevision != prev
}

// allVerified: the revision is stable and every vehicle verified it.
func (b *bench) allVerified(gen int64, prev string) func(*v1alpha1.NetTuningProfile) bool {
	return func(p *v1alpha1.NetTuningProfile) bool {
		st := p.Status
		return planned(p, gen, prev) && st.Phase == v1alpha1.PhaseHealthy && st.StableRevision == st.CurrentRevision &&
			int(st.Vehicles.Total) == b.vehicles && int(st.Vehicles.Verified) == b.vehicles
	}
}

// verifiedAtLeast: n vehicles verified the new revision (n < 0: the
// canary cohort).
func verifiedAtLeast(gen int64, prev string, n int) func(*v1alpha1.NetTuningProfile) bool {
	return func(p *v1alpha1.NetTuningProfile) bool {
		want := n
		if want < 0 {
			want = len(p.Status.CanaryVehicles)
			if want == 0 {
				return false
			}
		}
		return planned(p, gen, prev) && int(p.Status.Vehicles.Verified) >= want
	}
}

// clustersVerified sums status.clusters[].verified: the vehicles verified
// on the revision the hub assigns them.
func clustersVerified(p *v1alpha1.NetTuningProfile) int {
	n := 0
	for _, c := range p.Status.Clusters {
		n += int(c.Verified)
	}
	return n
}

// scenarios runs the scenarios c.scenarios names, each a phase, then the
// idle measurement; a scenario that does not reach its end state stops the
// ones after it.
func (b *bench) scenarios(ctx context.Context, r *result) error {
	steps := []struct {
		name string
		run  func(context.Context, *scenario) error
	}{
		{"first", b.first}, {"staged", b.staged}, {"all-at-once", b.allAtOnce}, {"rollback", b.rollback},
	}
	for _, st := range steps {
		if !b.c.runs(st.name) {
			continue
		}
		s := &scenario{name: st.name}
		r.scenarios = append(r.scenarios, s)
		a := b.m.read(ctx)
		stopProfiles := profiles(ctx, b.ctrl.PprofURL, b.dir, st.name)
		err := st.run(ctx, s)
		stopProfiles()
		if err == nil && s.done && b.c.settle > 0 {
			err = benchutil.Sleep(ctx, b.c.settle)
		}
		s.phase = b.m.phase(st.name, a, b.m.read(ctx))
		if err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		if st.name == "first" && (s.done || s.phase.simWrites >= int64(r.clusters)) {
			// Every cluster reported: what the reports weigh.
			rc := measureReportCost(ctx, b.m.api, b.m.host, clusterName(1))
			r.cost = &rc
		}
		if !s.done {
			return nil
		}
	}
	if !b.c.runs("idle") {
		return nil
	}
	b.say("idle for %s", b.c.idle)
	a := b.m.read(ctx)
	if err := benchutil.Sleep(ctx, b.c.idle); err != nil {
		return err
	}
	idle := b.m.phase("idle", a, b.m.read(ctx))
	r.idle = &idle
	return b.ctrl.Alive()
}

// edit changes the profile (creates it when absent) and returns when the
// write was sent and its generation.
func (b *bench) edit(ctx context.Context, spec v1alpha1.NetTuningProfileSpec) (time.Time, int64, error) {
	var t0 time.Time
	var gen int64
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.NetTuningProfile{}
		err := b.cl.Get(ctx, types.NamespacedName{Name: profileName}, p)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		t0 = time.Now()
		if err != nil {
			p = &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName}, Spec: spec}
			err = b.cl.Create(ctx, p)
		} else {
			p.Spec = spec
			err = b.cl.Update(ctx, p)
		}
		gen = p.Generation
		return err
	})
	return t0, gen, err
}

// wait waits until w's condition held or -max-wait from t0 passed,
// printing the hub's progress every -progress.
func (b *bench) wait(ctx context.Context, what string, t0 time.Time, w *waiter) (bool, error) {
	deadline := time.NewTimer(time.Until(t0.Add(b.c.maxWait)))
	defer deadline.Stop()
	tick := time.NewTicker(b.c.progress)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-b.ctrl.Exited():
			return false, b.ctrl.Alive()
		case <-tick.C:
			if p := b.tr.latest(); p != nil {
				st := p.Status
				step := "-"
				if st.CurrentStep != nil {
					step = fmt.Sprint(*st.CurrentStep)
				}
				b.say("%s (%s): phase %s step %s, %d/%d vehicles verified the new revision, %d on what the hub assigns; %d OCM status writes",
					what, benchutil.Round(time.Since(t0)), st.Phase, step, st.Vehicles.Verified, st.Vehicles.Total, clustersVerified(p), b.agent.writes.Load())
			}
		}
	}
}

// plannedWaiter waits for the hub's status to show generation gen planned.
func (b *bench) plannedWaiter(gen int64, prev string) *waiter {
	return b.tr.when(func(p *v1alpha1.NetTuningProfile) bool { return planned(p, gen, prev) })
}

// seenAt records when w held, from t0, if it did.
func seenAt(w *waiter, t0 time.Time) time.Duration {
	select {
	case <-w.done:
		return w.at.Sub(t0)
	default:
		return 0
	}
}

// timed waits for first then all, both from t0, into s.
func (b *bench) timed(ctx context.Context, s *scenario, t0 time.Time, seen, first, all *waiter) error {
	defer func() { s.seen = seenAt(seen, t0) }()
	ok, err := b.wait(ctx, s.name, t0, first)
	if err != nil {
		return err
	}
	if !ok {
		s.note = fmt.Sprintf("%s not seen within %s", s.firstWhat, b.c.maxWait)
		return nil
	}
	s.first = first.at.Sub(t0)
	b.say("%s: %s after %s", s.name, s.firstWhat, benchutil.Round(s.first))
	if ok, err = b.wait(ctx, s.name, t0, all); err != nil {
		return err
	}
	if !ok {
		s.note = fmt.Sprintf("%s not seen within %s", s.allWhat, b.c.maxWait)
		return nil
	}
	s.all, s.done = all.at.Sub(t0), true
	if p := b.tr.latest(); p != nil {
		s.revision, s.stable = p.Status.CurrentRevision, p.Status.StableRevision
	}
	b.say("%s: %s after %s", s.name, s.allWhat, benchutil.Round(s.all))
	return nil
}

func (b *bench) current() string {
	if p := b.tr.latest(); p != nil {
		return p.Status.CurrentRevision
	}
	return ""
}

// first: the profile's first revision to every vehicle at once (no
// rollout), from a fleet without it: the works bootstrap the clusters'
// vehicle reports.
func (b *bench) first(ctx context.Context, s *scenario) error {
	s.firstWhat, s.allWhat = "first vehicle verified", "every vehicle verified, Healthy"
	prev := b.current()
	t0, gen, err := b.edit(ctx, content(10, nil))
	if err != nil {
		return err
	}
	return b.timed(ctx, s, t0, b.plannedWaiter(gen, prev), b.tr.when(verifiedAtLeast(gen, prev, 1)), b.tr.when(b.allVerified(gen, prev)))
}

// staged: an edit rolled out canary first, then 10 %, 50 %, 100 %.
func (b *bench) staged(ctx context.Context, s *scenario) error {
	s.firstWhat, s.allWhat, s.goal = "canary verified", "every vehicle verified, Healthy", time.Minute
	prev := b.current()
	t0, gen, err := b.edit(ctx, content(20, b.canaryRollout(percentStep(10), percentStep(50), percentStep(100))))
	if err != nil {
		return err
	}
	return b.timed(ctx, s, t0, b.plannedWaiter(gen, prev), b.tr.when(verifiedAtLeast(gen, prev, -1)), b.tr.when(b.allVerified(gen, prev)))
}

// allAtOnce: an edit without rollout steps.
func (b *bench) allAtOnce(ctx context.Context, s *scenario) error {
	s.firstWhat, s.allWhat = "first vehicle verified", "every vehicle verified, Healthy"
	prev := b.current()
	t0, gen, err := b.edit(ctx, content(30, nil))
	if err != nil {
		return err
	}
	return b.timed(ctx, s, t0, b.plannedWaiter(gen, prev), b.tr.when(verifiedAtLeast(gen, prev, 1)), b.tr.when(b.allVerified(gen, prev)))
}

// rollback: an edit paused after its canary, aborted with the plugin's
// annotation; timed from the abort until every vehicle verified the stable
// revision again (first: the canary verified and paused, from the edit).
func (b *bench) rollback(ctx context.Context, s *scenario) error {
	s.firstWhat, s.allWhat, s.goal = "canary verified, paused (from the edit)", "every vehicle verified back on stable, RolledBack (from the abort)", 30*time.Second
	prev := b.current()
	t0, gen, err := b.edit(ctx, content(40, b.canaryRollout(v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{}})))
	if err != nil {
		return err
	}
	seen := b.plannedWaiter(gen, prev)
	defer func() { s.seen = seenAt(seen, t0) }()
	paused := b.tr.when(func(p *v1alpha1.NetTuningProfile) bool {
		return verifiedAtLeast(gen, prev, -1)(p) && p.Status.Phase == v1alpha1.PhasePaused
	})
	ok, err := b.wait(ctx, s.name, t0, paused)
	if err != nil || !ok {
		if !ok && err == nil {
			s.note = fmt.Sprintf("%s not seen within %s", s.firstWhat, b.c.maxWait)
		}
		return err
	}
	s.first = paused.at.Sub(t0)
	rev, stable := b.tr.latest().Status.CurrentRevision, b.tr.latest().Status.StableRevision
	b.say("%s: %s after %s; aborting %s", s.name, s.firstWhat, benchutil.Round(s.first), rev)
	back := b.tr.when(func(p *v1alpha1.NetTuningProfile) bool {
		st := p.Status
		return st.Phase == v1alpha1.PhaseRolledBack && st.FailedRevision == rev && st.StableRevision == stable &&
			len(st.RevisionVehicles) == 1 && st.RevisionVehicles[0].Revision == stable && int(st.RevisionVehicles[0].Vehicles) == b.vehicles &&
			clustersVerified(p) == b.vehicles
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AbortAnnotation: rev}}})
	t1 := time.Now()
	if err := b.cl.Patch(ctx, &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	ok, err = b.wait(ctx, s.name, t1, back)
	if err != nil {
		return err
	}
	if !ok {
		s.note = fmt.Sprintf("%s not seen within %s", s.allWhat, b.c.maxWait)
		return nil
	}
	s.all, s.done, s.revision, s.stable = back.at.Sub(t1), true, rev, stable
	b.say("%s: %s after %s", s.name, s.allWhat, benchutil.Round(s.all))
	return nil
}
