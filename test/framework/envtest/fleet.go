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

package envtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/fleetcache"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/localcp"
)

// Fleet is the package's control plane (ControlPlane) with a set of
// vehicle nodes, agents that report on their NodeNetTunings the way the
// node agent does (status only: the node agent's own tests apply for
// real), and the controller replicas the test starts.
type Fleet struct {
	t      *testing.T
	Ctx    context.Context
	CP     *localcp.ControlPlane
	Client client.Client

	mu      sync.Mutex
	offline map[string]bool                     // vehicle -> agents silent
	failRev map[string]bool                     // revisions the agents roll back
	silent  map[string]bool                     // profiles whose nodes' agents never report (nor heartbeat)
	kernels map[string]*v1alpha1.KernelFeatures // vehicle -> the kernel its agents report (none when absent)
	queries []time.Time                         // when each analysis query returned
}

// T is the test the fleet belongs to.
func (e *Fleet) T() *testing.T { return e.t }

// Logger logs through t, when testing.Verbose, until t ends.
func Logger(t *testing.T) logr.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() { mu.Lock(); done = true; mu.Unlock() })
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !done && testing.Verbose() {
			t.Logf("%s %s", prefix, args)
		}
	}, funcr.Options{Verbosity: 0})
}

// StartFleet is NewFleet with one controller replica querying lokiURL
// and promURL.
func StartFleet(t *testing.T, lokiURL, promURL string) *Fleet {
	t.Helper()
	e := NewFleet(t)
	e.StartController(ControllerOptions{Loki: lokiURL, Prom: promURL})
	return e
}

// NewFleet takes the package's control plane (ControlPlane) and starts the
// simulated agents, until t ends; no controller runs yet.
func NewFleet(t *testing.T) *Fleet {
	t.Helper()
	cp := ControlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	e := &Fleet{t: t, Ctx: ctx, CP: cp, Client: cp.Client, offline: map[string]bool{}, failRev: map[string]bool{}}
	ctrl.SetLogger(Logger(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.agents(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// ControllerOptions configure a controller replica.
type ControllerOptions struct {
	// Loki and Prom are the analyses' default Loki and Prometheus.
	Loki, Prom  string
	LeaderElect bool
	// LokiSecret names the Secret in Namespace with the default Loki's
	// credentials.
	LokiSecret string
}

// StartController runs one controller replica, wired by controllers.Setup
// as the binary wires it, until the returned stop is called (or the test
// ends); stop cancels it without releasing its lease, as a killed process
// would.
func (e *Fleet) StartController(o ControllerOptions) (stop func()) {
	t := e.t
	t.Helper()
	opts := ctrl.Options{Scheme: e.CP.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: fleetcache.Options(Namespace)}
	if o.LeaderElect {
		lease, renew, retry := 3*time.Second, 2*time.Second, 200*time.Millisecond
		opts.LeaderElection = true
		opts.LeaderElectionID = "nettune-controller.nettune.io"
		opts.LeaderElectionNamespace = Namespace
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &lease, &renew, &retry
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.CP.Config), opts)
	if err != nil {
		t.Fatal(err)
	}
	base := analysis.HTTPQueriers(10 * time.Second)
	setup := controllers.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("nettune-controller"),
		Namespace: Namespace, SkipNameValidation: true,
		Backends: analysis.Backends{LokiAddress: o.Loki, PrometheusAddress: o.Prom, LokiSecret: o.LokiSecret, Queriers: func(p v1alpha1.AnalysisProvider, addr string, creds *httpauth.Credentials) (analysis.Querier, error) {
			q, err := base(p, addr, creds)
			if vq, ok := q.(analysis.VectorQuerier); ok {
				return timedVectorQuerier{timedQuerier: timedQuerier{q: q, e: e}, vq: vq}, err
			}
			return timedQuerier{q: q, e: e}, err
		}},
	}
	if err := controllers.Setup(mgr, setup); err != nil {
		t.Fatal(err)
	}
	return e.StartManager(mgr)
}

// StartManager starts mgr until the returned stop is called (or the test
// ends).
func (e *Fleet) StartManager(mgr ctrl.Manager) (stop func()) {
	t := e.t
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// timedQuerier records when each real query returned.
type timedQuerier struct {
	q analysis.Querier
	e *Fleet
}

func (tq timedQuerier) Query(ctx context.Context, q string, at time.Time) (float64, bool, error) {
	v, ok, err := tq.q.Query(ctx, q, at)
	tq.e.mu.Lock()
	tq.e.queries = append(tq.e.queries, time.Now())
	tq.e.mu.Unlock()
	return v, ok, err
}

// timedVectorQuerier is a timedQuerier whose client also runs the judge's
// per-pair queries.
type timedVectorQuerier struct {
	timedQuerier
	vq analysis.VectorQuerier
}

func (tq timedVectorQuerier) QueryVector(ctx context.Context, q string, at time.Time) ([]analysis.Series, error) {
	return tq.vq.QueryVector(ctx, q, at)
}

func (tq timedVectorQuerier) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]analysis.Series, error) {
	return tq.vq.QueryRange(ctx, q, start, end, step)
}

// LastQuery is when the last analysis query of the controllers
// StartController started returned (zero when none did).
func (e *Fleet) LastQuery() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queries) == 0 {
		return time.Time{}
	}
	return e.queries[len(e.queries)-1]
}

// SetOffline silences (or revives) the agents of a vehicle: no report, no
// heartbeat.
func (e *Fleet) SetOffline(vehicle string, offline bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.offline[vehicle] = offline
}

// FailRevision makes the agents roll back revision rev.
func (e *Fleet) FailRevision(rev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failRev[rev] = true
}

// SetSilent makes the agents of the nodes carrying any of profiles never
// report (nor heartbeat); none when called without profiles.
func (e *Fleet) SetSilent(profiles ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.silent = nil
	if len(profiles) > 0 {
		e.silent = map[string]bool{}
	}
	for _, p := range profiles {
		e.silent[p] = true
	}
}

// SetKernel makes the agents of vehicle report kernel k.
func (e *Fleet) SetKernel(vehicle string, k *v1alpha1.KernelFeatures) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kernels == nil {
		e.kernels = map[string]*v1alpha1.KernelFeatures{}
	}
	e.kernels[vehicle] = k
}

// AddVehicles creates vehicles of two hosts each (xavier-a, xavier-b).
func (e *Fleet) AddVehicles(hardware string, names ...string) {
	for vi, v := range names {
		for hi, host := range []string{"xavier-a", "xavier-b"} {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
				Name: v + "-" + host,
				Labels: map[string]string{
					v1alpha1.DefaultVehicleLabel: v, v1alpha1.DefaultHostLabel: host, v1alpha1.DefaultHardwareLabel: hardware,
				},
				Annotations: map[string]string{
					v1alpha1.LANAddressAnnotation: fmt.Sprintf("10.%d.%d.%d", 10+len(hardware), vi+1, hi+1),
					v1alpha1.LANDeviceAnnotation:  "eth0",
				},
			}}
			if err := e.Client.Create(e.Ctx, n); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// agents plays every node's agent: report the spec applied and verified (or
// rolled back for a failing revision), with a heartbeat, unless the vehicle
// is offline.
func (e *Fleet) agents(ctx context.Context) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	beat := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		list := &v1alpha1.NodeNetTuningList{}
		if err := e.Client.List(ctx, list); err != nil {
			continue
		}
		for i := range list.Items {
			nnt := &list.Items[i]
			vehicle := strings.TrimSuffix(strings.TrimSuffix(nnt.Name, "-xavier-a"), "-xavier-b")
			e.mu.Lock()
			off := e.offline[vehicle]
			fail := false
			for _, sp := range nnt.Spec.Profiles {
				fail = fail || e.failRev[sp.Revision]
				off = off || e.silent[sp.Name]
			}
			e.mu.Unlock()
			if off {
				continue
			}
			e.mu.Lock()
			kernel := e.kernels[vehicle]
			e.mu.Unlock()
			fresh := nnt.Status.ObservedGeneration == nnt.Generation
			if fresh && time.Since(beat[nnt.Name]) < 2*time.Second {
				continue
			}
			patch := client.MergeFrom(nnt.DeepCopy())
			now := metav1.Now()
			nnt.Status.LastHeartbeatTime = &now
			nnt.Status.Kernel = kernel
			if !fresh {
				nnt.Status.ObservedGeneration = nnt.Generation
				set := func(typ string, s metav1.ConditionStatus, reason string) {
					meta.SetStatusCondition(&nnt.Status.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, ObservedGeneration: nnt.Generation})
				}
				if fail {
					set(v1alpha1.ConditionApplied, metav1.ConditionFalse, "RolledBack")
					set(v1alpha1.ConditionVerified, metav1.ConditionFalse, "RolledBack")
					set(v1alpha1.ConditionRolledBack, metav1.ConditionTrue, "ProbeOrVerifyFailed")
				} else {
					nnt.Status.AppliedRevision = nnt.Spec.Revision
					set(v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied")
					set(v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified")
					set(v1alpha1.ConditionRolledBack, metav1.ConditionFalse, "Committed")
					set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsDesired")
				}
			}
			if err := e.Client.Status().Patch(ctx, nnt, patch); err == nil {
				beat[nnt.Name] = time.Now()
			}
		}
	}
}

// Profile reads a NetTuningProfile.
func (e *Fleet) Profile(name string) *v1alpha1.NetTuningProfile {
	p := &v1alpha1.NetTuningProfile{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: name}, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// WaitProfile polls until cond holds, failing with the profile's status.
func (e *Fleet) WaitProfile(name string, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := e.Profile(name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s: phase=%s step=%v current=%s stable=%s vehicles=%+v analysis=%+v conditions=%+v",
				timeout, what, p.Status.Phase, p.Status.CurrentStep, p.Status.CurrentRevision, p.Status.StableRevision,
				p.Status.Vehicles, p.Status.Analysis, p.Status.Conditions)
		}
		time.Sleep(PollInterval)
	}
}

// NodeRevisions maps node -> the profile revision its NodeNetTuning carries.
func (e *Fleet) NodeRevisions(profile string) map[string]string {
	list := &v1alpha1.NodeNetTuningList{}
	if err := e.Client.List(e.Ctx, list); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for i := range list.Items {
		out[list.Items[i].Name] = fleetmodel.AssignedRevision(&list.Items[i], profile)
	}
	return out
}

// Events are the Events of profile name as "Reason: message", sorted: of
// the profile by that name now, when there is one (events of an earlier
// test's profile of the same name, recorded late by its stopped
// controller, are not its).
func (e *Fleet) Events(name string) []string {
	var uid types.UID
	p := &v1alpha1.NetTuningProfile{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: name}, p); err == nil {
		uid = p.UID
	} else if !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	list := &corev1.EventList{}
	_ = e.Client.List(e.Ctx, list)
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.InvolvedObject.Kind == "NetTuningProfile" && (uid == "" || ev.InvolvedObject.UID == uid) {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	sort.Strings(out)
	return out
}

// Settle creates p without its rollout and waits for its first revision to
// be stable everywhere; p keeps its rollout.
func (e *Fleet) Settle(p *v1alpha1.NetTuningProfile) string {
	e.t.Helper()
	rollout := p.Spec.Rollout
	p.Spec.Rollout = nil
	if err := e.Client.Create(e.Ctx, p); err != nil {
		e.t.Fatal(err)
	}
	rev := revision.Name(p)
	e.WaitProfile(p.Name, 60*time.Second, "first revision stable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.StableRevision == rev && p.Status.Phase == v1alpha1.PhaseHealthy
	})
	p.Spec.Rollout = rollout
	return rev
}

// Edit changes a profile's spec as a user would, retrying when the
// controller changed the object in between (its finalizer, say), and
// returns the revision of the result.
func (e *Fleet) Edit(name string, mutate func(*v1alpha1.NetTuningProfile)) string {
	e.t.Helper()
	var p *v1alpha1.NetTuningProfile
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p = e.Profile(name)
		mutate(p)
		return e.Client.Update(e.Ctx, p)
	}); err != nil {
		e.t.Fatal(err)
	}
	return revision.Name(p)
}

// AssertAllNodes checks that the 12 nodes of XavierVehicles and
// OrinVehicles all render revision rev of profile xavier-lan.
func (e *Fleet) AssertAllNodes(rev string) {
	t := e.t
	t.Helper()
	// The node renderer writes the nodes after the profile's status records
	// the decision (two controllers): on a loaded machine that takes a
	// moment, so wait for it, up to 30 s.
	revs := e.NodeRevisions("xavier-lan")
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); revs = e.NodeRevisions("xavier-lan") {
		all := len(revs) == 12
		for _, r := range revs {
			all = all && r == rev
		}
		if all {
			return
		}
		time.Sleep(PollInterval)
	}
	if len(revs) != 12 {
		t.Errorf("%d NodeNetTunings, want 12", len(revs))
	}
	for n, r := range revs {
		if r != rev {
			t.Errorf("node %s renders %q, want %q", n, r, rev)
		}
	}
}
