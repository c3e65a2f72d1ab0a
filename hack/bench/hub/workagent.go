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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// feedbackName is the status feedback value the hub reads (the work's
// feedback rule names it; controllers/hub.FeedbackName).
const feedbackName = "vehicleReport"

// generationFeedbackName carries the copy's metadata.generation
// (controllers/hub.GenerationFeedbackName).
const generationFeedbackName = "generation"

// simCluster is one simulated managed cluster: its vehicles and what its
// work agent last reported of them.
type simCluster struct {
	name     string
	vehicles []string
	hardware string

	mu sync.Mutex
	// seen is the newest generation of each work queued; done the one
	// whose status was written.
	seen, done map[string]int64
	// revs is each vehicle's revision as last reported (nil before the
	// first report); content and share the profile copy's spec without
	// its hubAssignment, and the hubAssignment, as last applied (JSON).
	revs           map[string]string
	content, share string
	// written is when each work's status was last written, interval its
	// share's reportInterval: the cluster's controller rewrites its report
	// for the time alone (a heartbeat) that often, and the agent carries it;
	// 0 when the share asks for no heartbeat (liveness AddOnLease: the
	// report is rewritten only when a line or the generation changes).
	written  map[string]time.Time
	interval map[string]time.Duration
	// liveness is each work's share's spec.hubAssignment.liveness as last
	// answered ("" when unset: Report).
	liveness map[string]v1alpha1.Liveness
}

// workAgent simulates OCM's work agent of every cluster: one informer on
// the hub's ManifestWorks, one delaying queue, a worker pool.
type workAgent struct {
	cl       client.Client
	cache    cache.Cache
	delay    time.Duration
	workers  int
	queue    workqueue.TypedRateLimitingInterface[client.ObjectKey]
	clusters map[string]*simCluster

	// writes are the status writes that succeeded, conflicts their 409
	// answers, failures the other errors (lastErr the latest).
	writes, conflicts, failures atomic.Int64
	// moves counts the status writes in which a cluster's vehicles changed
	// revision (a cluster moved), vehiclesMoved those vehicles.
	moves, vehiclesMoved atomic.Int64
	// beats counts the status writes of a heartbeat alone (the report's
	// time, nothing else changed; none for a share of liveness
	// AddOnLease); they are in writes too.
	beats atomic.Int64
	// stillContent counts the status writes for a work generation that
	// moved no vehicle but carried a new profile content; stillShare the
	// ones whose share changed in form only (every vehicle keeps its
	// revision); stillOther the rest.
	stillContent, stillShare, stillOther atomic.Int64
	errMu                                sync.Mutex
	lastErr                              string
	wg                                   sync.WaitGroup
}

func newWorkAgent(cl client.Client, c cache.Cache, delay time.Duration, workers, clusters, vehicles int) *workAgent {
	a := &workAgent{cl: cl, cache: c, delay: delay, workers: workers, clusters: map[string]*simCluster{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[client.ObjectKey](5*time.Millisecond, time.Second))}
	for i := 1; i <= clusters; i++ {
		sc := &simCluster{name: clusterName(i), hardware: hardwareOf(i), seen: map[string]int64{}, done: map[string]int64{},
			written: map[string]time.Time{}, interval: map[string]time.Duration{}, liveness: map[string]v1alpha1.Liveness{}}
		for j := 1; j <= vehicles; j++ {
			sc.vehicles = append(sc.vehicles, vehicleName(i, j, vehicles))
		}
		a.clusters[sc.name] = sc
	}
	return a
}

// start registers the ManifestWork handler and starts the workers; they
// stop when ctx ends (wait returns then).
func (a *workAgent) start(ctx context.Context) error {
	inf, err := a.cache.GetInformer(ctx, &workv1.ManifestWork{})
	if err != nil {
		return fmt.Errorf("ManifestWork informer: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.observe(o) },
		UpdateFunc: func(_, o any) { a.observe(o) },
	}); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	go a.heartbeats(ctx)
	for range a.workers {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for a.next(ctx) {
			}
		}()
	}
	return nil
}

func (a *workAgent) wait() { a.wg.Wait() }

// heartbeats queues, every second, the works whose report is due for a
// heartbeat (as each cluster's controller rewrites its report every
// reportInterval and the work agent carries it to the hub); a work whose
// share asks for none (interval 0) is never due.
func (a *workAgent) heartbeats(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for _, c := range a.clusters {
			c.mu.Lock()
			for name, at := range c.written {
				if due(at, c.interval[name], now) {
					a.queue.Add(client.ObjectKey{Namespace: c.name, Name: name})
				}
			}
			c.mu.Unlock()
		}
	}
}

// due reports whether a report last written at, with a heartbeat every
// interval (0: none), is due for one at now.
func due(at time.Time, interval time.Duration, now time.Time) bool {
	return interval > 0 && now.Sub(at) >= interval
}

// observe queues a work's new generation, due after the apply delay.
func (a *workAgent) observe(o any) {
	w, ok := o.(*workv1.ManifestWork)
	if !ok {
		return
	}
	c := a.clusters[w.Namespace]
	if c == nil {
		return
	}
	c.mu.Lock()
	fresh := w.Generation > c.seen[w.Name]
	if fresh {
		c.seen[w.Name] = w.Generation
	}
	c.mu.Unlock()
	if fresh {
		a.queue.AddAfter(client.ObjectKeyFromObject(w), a.delay)
	}
}

// next handles one queued work.
func (a *workAgent) next(ctx context.Context) bool {
	key, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(key)
	err := a.sync(ctx, key)
	switch {
	case err == nil:
		a.queue.Forget(key)
	case apierrors.IsConflict(err):
		a.conflicts.Add(1)
		a.queue.AddRateLimited(key)
	case ctx.Err() != nil:
	default:
		a.failures.Add(1)
		a.errMu.Lock()
		a.lastErr = err.Error()
		a.errMu.Unlock()
		a.queue.AddRateLimited(key)
	}
	return true
}

// sync writes the status of the work's current generation, as the work
// agent does once the cluster applied it and its controller reported.
func (a *workAgent) sync(ctx context.Context, key client.ObjectKey) error {
	c := a.clusters[key.Namespace]
	w := &workv1.ManifestWork{}
	if err := a.cache.Get(ctx, key, w); err != nil {
		return client.IgnoreNotFound(err)
	}
	c.mu.Lock()
	done := c.done[w.Name] >= w.Generation
	beat := done && due(c.written[w.Name], c.interval[w.Name], time.Now())
	c.mu.Unlock()
	if done && !beat {
		return nil
	}
	status, revs, copied, err := c.status(w)
	if err != nil {
		return err
	}
	patched := w.DeepCopy()
	patched.Status = status
	if err := a.cl.Status().Patch(ctx, patched, client.MergeFromWithOptions(w, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	a.writes.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[w.Name], c.interval[w.Name], c.liveness[w.Name] = time.Now(), copied.interval, copied.liveness
	if beat {
		a.beats.Add(1)
		return nil
	}
	c.done[w.Name] = w.Generation
	moved := 0
	for v, r := range revs {
		if c.revs[v] != r {
			moved++
		}
	}
	switch {
	case moved > 0:
		a.moves.Add(1)
		a.vehiclesMoved.Add(int64(moved))
	case copied.content != c.content:
		a.stillContent.Add(1)
	case copied.share != c.share:
		a.stillShare.Add(1)
	default:
		a.stillOther.Add(1)
	}
	c.revs, c.content, c.share = revs, copied.content, copied.share
	return nil
}

// livenessCounts counts the works answered by the liveness their share
// last gave (Report when unset).
func (a *workAgent) livenessCounts() map[v1alpha1.Liveness]int {
	out := map[v1alpha1.Liveness]int{}
	for _, c := range a.clusters {
		c.mu.Lock()
		for _, l := range c.liveness {
			if l == "" {
				l = v1alpha1.LivenessReport
			}
			out[l]++
		}
		c.mu.Unlock()
	}
	return out
}

// lastError is the latest error other than a conflict ("" when none).
func (a *workAgent) lastError() string {
	a.errMu.Lock()
	defer a.errMu.Unlock()
	return a.lastErr
}

// manifestHead is what the agent reads of a manifest.
type manifestHead struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec map[string]json.RawMessage `json:"spec"`
}

// copied is what a work carries of the profile: its spec without the
// hubAssignment and the hubAssignment, as JSON, and the heartbeat the
// hubAssignment asks for (its reportInterval; 0 when its liveness is
// AddOnLease: no heartbeat).
type copied struct {
	content, share string
	interval       time.Duration
	liveness       v1alpha1.Liveness
}

// resources maps the kinds a hub places to their resources.
var resources = map[string]string{"ControllerRevision": "controllerrevisions", "NetTuningProfile": "nettuningprofiles"}

// status is the work's status once applied and verified in the cluster:
// the work's and every manifest's conditions, and the profile's vehicle
// report (every vehicle on the revision its share gives it, verified;
// none given, none verified) as status feedback. It returns the
// vehicles' revisions too.
func (c *simCluster) status(w *workv1.ManifestWork) (workv1.ManifestWorkStatus, map[string]string, copied, error) {
	var cp copied
	now := metav1.NewTime(time.Now())
	gen := w.Generation
	st := *w.Status.DeepCopy()
	set := func(conds *[]metav1.Condition, typ, reason, msg string) {
		meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
			ObservedGeneration: gen, LastTransitionTime: now})
	}
	set(&st.Conditions, workv1.WorkApplied, "AppliedManifestWorkComplete", "Apply manifest work complete")
	set(&st.Conditions, workv1.WorkAvailable, "ResourcesAvailable", "All resources are available")
	old := map[string][]metav1.Condition{}
	for _, m := range w.Status.ResourceStatus.Manifests {
		old[m.ResourceMeta.Resource+"/"+m.ResourceMeta.Namespace+"/"+m.ResourceMeta.Name] = m.Conditions
	}
	var revs map[string]string
	manifests := make([]workv1.ManifestCondition, 0, len(w.Spec.Workload.Manifests))
	for i, m := range w.Spec.Workload.Manifests {
		var h manifestHead
		if err := json.Unmarshal(m.Raw, &h); err != nil {
			return st, nil, cp, fmt.Errorf("work %s/%s manifest %d: %w", w.Namespace, w.Name, i, err)
		}
		group, version, found := strings.Cut(h.APIVersion, "/")
		if !found {
			group, version = "", h.APIVersion
		}
		res := resources[h.Kind]
		if res == "" {
			res = strings.ToLower(h.Kind) + "s"
		}
		mc := workv1.ManifestCondition{
			ResourceMeta: workv1.ManifestResourceMeta{Ordinal: int32(i), Group: group, Version: version, Kind: h.Kind,
				Resource: res, Name: h.Metadata.Name, Namespace: h.Metadata.Namespace},
			Conditions: old[res+"/"+h.Metadata.Namespace+"/"+h.Metadata.Name],
		}
		set(&mc.Conditions, workv1.ManifestApplied, "AppliedManifestComplete", "Apply manifest complete")
		set(&mc.Conditions, workv1.ManifestAvailable, "ResourceAvailable", "Resource is available")
		if h.Kind == "NetTuningProfile" {
			share := &v1alpha1.HubAssignment{}
			if raw := h.Spec["hubAssignment"]; raw != nil {
				if err := json.Unmarshal(raw, share); err != nil {
					return st, nil, cp, fmt.Errorf("work %s/%s: spec.hubAssignment: %w", w.Namespace, w.Name, err)
				}
			}
			cp.share, cp.liveness = string(h.Spec["hubAssignment"]), share.Liveness
			if share.Heartbeat() {
				cp.interval = share.GetReportInterval()
			}
			delete(h.Spec, "hubAssignment")
			content, _ := json.Marshal(h.Spec)
			cp.content = string(content)
			var report string
			// The copy's generation stands for the work's: each follows
			// the changes of the share.
			report, revs = c.report(share, gen, now.Time)
			mc.StatusFeedbacks = workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{
				{Name: feedbackName, Value: workv1.FieldValue{Type: workv1.String, String: &report}},
				{Name: generationFeedbackName, Value: workv1.FieldValue{Type: workv1.Integer, Integer: &gen}}}}
			set(&mc.Conditions, "StatusFeedbackSynced", "StatusFeedbackSynced", "")
		}
		manifests = append(manifests, mc)
	}
	if revs == nil {
		return st, nil, cp, fmt.Errorf("work %s/%s carries no NetTuningProfile", w.Namespace, w.Name)
	}
	st.ResourceStatus.Manifests = manifests
	return st, revs, cp, nil
}

// report is the cluster controller's status.vehicleReport for a share,
// written now for the copy's generation: every vehicle rendered with its
// revision and verified (a vehicle given no revision is reported without
// one, not verified).
func (c *simCluster) report(share *v1alpha1.HubAssignment, generation int64, now time.Time) (string, map[string]string) {
	named := map[string]string{}
	for _, as := range share.Assignments {
		for _, v := range as.Vehicles {
			named[v] = as.Revision
		}
	}
	revs := make(map[string]string, len(c.vehicles))
	rs := make([]v1alpha1.VehicleReport, 0, len(c.vehicles))
	for _, v := range c.vehicles {
		rev, ok := named[v]
		if !ok {
			rev = share.Stable
		}
		revs[v] = rev
		rs = append(rs, v1alpha1.VehicleReport{Vehicle: v, Revision: rev, Verified: rev != "", Hardware: []string{c.hardware},
			Counters: []string{"bytes_retrans", "delivery_rate", "min_rtt"}})
	}
	return v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: now.Truncate(time.Second), Generation: generation}, rs), revs
}
