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
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/node-agent/agent"
	"github.com/nettune/nettune/node-agent/agent/crlease"
)

// statusHeartbeat is how often an agent of the previous protocol re-patched
// its status to say it was alive.
const statusHeartbeat = 30 * time.Second

// taskKind is what a simulated agent has to do for its node.
type taskKind uint8

const (
	// taskReport writes the verified report of a new spec.
	taskReport taskKind = iota
	// taskRenew renews the node's Lease (lease protocol).
	taskRenew
	// taskRefresh rewrites the status heartbeat of an unchanged report.
	taskRefresh
)

// task is one thing to do for one node.
type task struct {
	kind taskKind
	node string
}

// agents simulates the agent of every node in this process: two queues of
// tasks with a worker pool each, one fed by the NodeNetTuning informer
// (reports), the other by per-node schedules (Lease renewals, heartbeats)
// spread evenly over their period, so that periodic writes never hold a
// report back in the simulator (real agents share no queue).
type agents struct {
	c          client.Client
	cache      client.Reader
	mode       string
	delay      time.Duration
	renewEvery time.Duration // Lease renewal period
	workers    int
	nodes      []string
	progress   func(done int) // called during the Lease creates
	reports    workqueue.TypedRateLimitingInterface[task]
	periodic   workqueue.TypedRateLimitingInterface[task]

	mu        sync.Mutex
	due       map[task]time.Time   // next time of a periodic task
	lastWrite map[string]time.Time // node -> last status write
	keepers   map[string]*agent.LeaseKeeper

	// paused: the agents report nothing (the writes-alone scenario writes the reports).
	paused atomic.Bool

	writes, conflicts, failures atomic.Int64
	errMu                       sync.Mutex
	errs                        map[string]int // failures by blurred error text
	wg                          sync.WaitGroup
}

// newAgents simulates the agents of nodes, reading NodeNetTunings from
// cache and writing with c.
func newAgents(c client.Client, cache client.Reader, mode string, delay, renew time.Duration, workers int, nodes []string) *agents {
	queue := func() workqueue.TypedRateLimitingInterface[task] {
		return workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[task](100*time.Millisecond, 10*time.Second))
	}
	return &agents{
		c: c, cache: cache, mode: mode, delay: delay, renewEvery: renew, workers: workers, nodes: nodes,
		reports: queue(), periodic: queue(),
		due:       map[task]time.Time{},
		lastWrite: map[string]time.Time{},
		keepers:   map[string]*agent.LeaseKeeper{},
		errs:      map[string]int{},
	}
}

// refreshPeriod is how often an unchanged status is rewritten.
func (a *agents) refreshPeriod() time.Duration {
	if a.mode == modeLease {
		return v1alpha1.DefaultStatusRefresh
	}
	return statusHeartbeat
}

// start creates the Leases (lease protocol), schedules every node's
// periodic tasks at a random phase of their period and starts the workers.
// The workers stop when ctx ends.
func (a *agents) start(ctx context.Context) error {
	if a.mode == modeLease {
		var done atomic.Int64
		err := benchutil.Parallel(ctx, len(a.nodes), a.workers, func(k int) error {
			err := a.renew(ctx, a.nodes[k])
			if n := done.Add(1); a.progress != nil {
				a.progress(int(n))
			}
			return err
		})
		if err != nil {
			return err
		}
		for _, n := range a.nodes {
			a.schedule(task{taskRenew, n}, time.Duration(rand.Int64N(int64(a.renewEvery))))
		}
	}
	for _, n := range a.nodes {
		a.schedule(task{taskRefresh, n}, time.Duration(rand.Int64N(int64(a.refreshPeriod()))))
	}
	for _, q := range []workqueue.TypedRateLimitingInterface[task]{a.reports, a.periodic} {
		for range a.workers {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				for a.next(ctx, q) {
				}
			}()
		}
	}
	go func() {
		<-ctx.Done()
		a.reports.ShutDown()
		a.periodic.ShutDown()
	}()
	return nil
}

// wait blocks until the workers stopped (after ctx ended).
func (a *agents) wait() { a.wg.Wait() }

// schedule queues a periodic task after d and remembers when it is due.
func (a *agents) schedule(t task, d time.Duration) {
	a.mu.Lock()
	a.due[t] = time.Now().Add(d)
	a.mu.Unlock()
	a.periodic.AddAfter(t, d)
}

// reschedule queues a periodic task one period after it was due (not after
// it ran, so the spread over the period holds).
func (a *agents) reschedule(t task, period time.Duration) {
	a.mu.Lock()
	next := a.due[t].Add(period)
	if now := time.Now(); next.Before(now) {
		next = now
	}
	a.due[t] = next
	a.mu.Unlock()
	a.periodic.AddAfter(t, time.Until(next))
}

// onNodeNetTuning queues the report of a NodeNetTuning whose spec the agent
// has not reported on yet, after the simulated apply time.
func (a *agents) onNodeNetTuning(obj any) {
	nnt, ok := obj.(*v1alpha1.NodeNetTuning)
	if !ok || !needsReport(nnt) || a.paused.Load() {
		return
	}
	a.reports.AddAfter(task{taskReport, nnt.Name}, a.delay)
}

// needsReport says whether the agent has not reported on nnt's spec yet.
func needsReport(nnt *v1alpha1.NodeNetTuning) bool {
	return nnt.Status.ObservedGeneration != nnt.Generation || nnt.Status.AppliedRevision != nnt.Spec.Revision
}

// next processes one task of q; false when q shut down.
func (a *agents) next(ctx context.Context, q workqueue.TypedRateLimitingInterface[task]) bool {
	t, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(t)
	var err error
	switch t.kind {
	case taskReport:
		err = a.report(ctx, t.node)
		if err != nil && ctx.Err() == nil {
			q.AddRateLimited(t)
		} else {
			q.Forget(t)
		}
	case taskRenew:
		err = a.renew(ctx, t.node)
		a.reschedule(t, agent.RenewalWait(a.renewEvery))
	case taskRefresh:
		err = a.refresh(ctx, t.node)
		a.reschedule(t, a.refreshPeriod())
	}
	if err != nil && ctx.Err() == nil {
		a.fail(err)
	}
	return true
}

// fail counts a failed request.
func (a *agents) fail(err error) {
	a.failures.Add(1)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		a.conflicts.Add(1)
	}
	a.errMu.Lock()
	a.errs[blur(err.Error())]++
	a.errMu.Unlock()
}

// errorSummary lists the failures by kind, most frequent first.
func (a *agents) errorSummary() []benchutil.KindCount {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	out := make([]benchutil.KindCount, 0, len(a.errs))
	for k, v := range a.errs {
		out = append(out, benchutil.KindCount{Kind: k, Count: float64(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// report writes the verified report of the node's current spec.
func (a *agents) report(ctx context.Context, node string) error {
	nnt := &v1alpha1.NodeNetTuning{}
	if err := a.cache.Get(ctx, client.ObjectKey{Name: node}, nnt); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !needsReport(nnt) {
		return nil
	}
	return a.patchStatus(ctx, node, map[string]any{"status": verifiedStatus(nnt, metav1.Now())})
}

// refresh rewrites the heartbeat of a node that has a report, unless its
// status was written less than half a period ago.
func (a *agents) refresh(ctx context.Context, node string) error {
	a.mu.Lock()
	last := a.lastWrite[node]
	a.mu.Unlock()
	if time.Since(last) < a.refreshPeriod()/2 {
		return nil
	}
	nnt := &v1alpha1.NodeNetTuning{}
	if err := a.cache.Get(ctx, client.ObjectKey{Name: node}, nnt); err != nil {
		return client.IgnoreNotFound(err)
	}
	if nnt.Status.ObservedGeneration == 0 {
		return nil // nothing reported yet: the report writes the first heartbeat
	}
	now := metav1.Now()
	return a.patchStatus(ctx, node, map[string]any{"status": map[string]any{"lastHeartbeatTime": now}})
}

// patchStatus merge-patches a NodeNetTuning's status, as the agent does
// (client.MergeFrom: no resourceVersion, so never a conflict).
func (a *agents) patchStatus(ctx context.Context, node string, body map[string]any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding status of %s: %w", node, err)
	}
	nnt := &v1alpha1.NodeNetTuning{}
	nnt.Name = node
	if err := a.c.Status().Patch(ctx, nnt, client.RawPatch(types.MergePatchType, raw)); err != nil {
		return fmt.Errorf("patching status of nodenettuning %s: %w", node, client.IgnoreNotFound(err))
	}
	a.writes.Add(1)
	a.mu.Lock()
	a.lastWrite[node] = time.Now()
	a.mu.Unlock()
	return nil
}

// verifiedStatus is the status the agent writes after applying and
// verifying nnt's spec (node-agent/agent Reconciler.status for a committed
// outcome with every item verified and no drift repaired).
func verifiedStatus(nnt *v1alpha1.NodeNetTuning, now metav1.Time) v1alpha1.NodeNetTuningStatus {
	st := *nnt.Status.DeepCopy()
	gen := nnt.Generation
	st.ObservedGeneration = gen
	st.AppliedRevision = nnt.Spec.Revision
	st.Items = verifiedItems(nnt.Spec)
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
	}
	set(v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied", "revision "+nnt.Spec.Revision+" is in force")
	set(v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified", "every item read back as desired and the local probes passed")
	set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsDesired", "")
	set(v1alpha1.ConditionRolledBack, metav1.ConditionFalse, "Committed", "")
	set(v1alpha1.ConditionDrifted, metav1.ConditionFalse, "NoDrift", "0 drift repair(s) since the agent started")
	st.LastHeartbeatTime = &now
	return st
}

// verifiedItems reports every item of spec read back as desired.
func verifiedItems(spec v1alpha1.NodeNetTuningSpec) []v1alpha1.ItemResult {
	out := make([]v1alpha1.ItemResult, 0, len(spec.Routes)+len(spec.Sysctls)+len(spec.Interfaces))
	for _, r := range spec.Routes {
		m := routeMetrics(r.Parameters)
		out = append(out, v1alpha1.ItemResult{Kind: "Route", Name: r.Destination, State: "Verified", Desired: m, Observed: m})
	}
	for _, s := range spec.Sysctls {
		out = append(out, v1alpha1.ItemResult{Kind: "Sysctl", Name: s.Name, State: "Verified", Desired: s.Value, Observed: s.Value})
	}
	for _, i := range spec.Interfaces {
		out = append(out, v1alpha1.ItemResult{Kind: "Interface", Name: i.Name, State: "Verified"})
	}
	return out
}

// routeMetrics writes route parameters in iproute2's notation, as the
// agent reports them (close enough for the size of a status).
func routeMetrics(p v1alpha1.TCPParameters) string {
	var parts []string
	if p.Cwnd != nil {
		lock := ""
		if p.Cwnd.IsLocked() {
			lock = "lock "
		}
		parts = append(parts, fmt.Sprintf("cwnd %s%d", lock, p.Cwnd.Value))
	}
	for _, f := range []struct {
		name string
		v    *int32
	}{{"initcwnd", p.Initcwnd}, {"initrwnd", p.Initrwnd}, {"ssthresh", p.Ssthresh}, {"advmss", p.AdvMSS}, {"mtu", p.MTU}} {
		if f.v != nil {
			parts = append(parts, fmt.Sprintf("%s %d", f.name, *f.v))
		}
	}
	if p.RTOMin != nil {
		parts = append(parts, fmt.Sprintf("rto_min lock %dms", p.RTOMin.Milliseconds()))
	}
	if p.Quickack != nil {
		q := 0
		if *p.Quickack {
			q = 1
		}
		parts = append(parts, fmt.Sprintf("quickack %d", q))
	}
	if p.CongestionControl != nil {
		parts = append(parts, "congctl "+string(*p.CongestionControl))
	}
	return strings.Join(parts, " ")
}

// renew creates or renews node's Lease with the agent's own LeaseKeeper
// (a GET, then an Update with the resourceVersion just read, or a Create
// when it is missing).
func (a *agents) renew(ctx context.Context, node string) error {
	a.mu.Lock()
	k := a.keepers[node]
	if k == nil {
		k = &agent.LeaseKeeper{Client: crlease.Client{C: a.c}, Namespace: namespace, Node: node, Renew: a.renewEvery, Duration: leaseDuration(a.renewEvery)}
		a.keepers[node] = k
	}
	a.mu.Unlock()
	if err := k.RenewOnce(ctx); err != nil {
		return err
	}
	a.writes.Add(1)
	return nil
}

// leaseDuration is the leaseDurationSeconds written with renewal period
// renew: the agent's default, or three periods for a longer one.
func leaseDuration(renew time.Duration) time.Duration {
	return max(v1alpha1.DefaultAgentLeaseDuration, 3*renew)
}

// unreachableAfter is the profiles' spec.rollout.unreachableAfter with
// renewal period renew: the default, or three periods for a longer one.
func unreachableAfter(renew time.Duration) time.Duration {
	return max(v1alpha1.DefaultUnreachableAfter, 3*renew)
}
