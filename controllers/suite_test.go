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

package controllers_test

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

const revisionNS = "nettune-system"

// fleetEnv is a real kube-apiserver with the controller running, a set of
// vehicle nodes, and agents that report on their NodeNetTunings the way the
// node agent does (status only: the node agent's own tests apply for real).
type fleetEnv struct {
	t    *testing.T
	ctx  context.Context
	cp   *localcp.ControlPlane
	c    client.Client
	stop context.CancelFunc

	mu      sync.Mutex
	offline map[string]bool                     // vehicle -> agents silent
	failRev map[string]bool                     // revisions the agents roll back
	silent  map[string]bool                     // profiles whose nodes' agents never report (nor heartbeat)
	kernels map[string]*v1alpha1.KernelFeatures // vehicle -> the kernel its agents report (none when absent)
	queries []time.Time                         // when each analysis query returned
}

func testLogger(t *testing.T) logr.Logger {
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

func startFleet(t *testing.T, lokiURL, promURL string) *fleetEnv {
	t.Helper()
	e := startCluster(t)
	e.startController(controllerOptions{loki: lokiURL, prom: promURL})
	return e
}

// startCluster starts the control plane and the simulated agents.
func startCluster(t *testing.T) *fleetEnv {
	t.Helper()
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	e := &fleetEnv{t: t, ctx: ctx, cp: cp, c: cp.Client, stop: cancel, offline: map[string]bool{}, failRev: map[string]bool{}}
	if err := e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: revisionNS}}); err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(testLogger(t))
	go e.agents(ctx)
	t.Cleanup(cancel)
	return e
}

type controllerOptions struct {
	loki, prom  string
	leaderElect bool
	// lokiSecret names the Secret in revisionNS with the default Loki's
	// credentials.
	lokiSecret string
}

// startController runs one controller replica until the returned stop is
// called (or the test ends); stop cancels it without releasing its lease,
// as a killed process would.
func (e *fleetEnv) startController(o controllerOptions) (stop func()) {
	t := e.t
	t.Helper()
	opts := ctrl.Options{Scheme: e.cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: fleetcache.Options(revisionNS)}
	if o.leaderElect {
		lease, renew, retry := 3*time.Second, 2*time.Second, 200*time.Millisecond
		opts.LeaderElection = true
		opts.LeaderElectionID = "nettune-controller.nettune.io"
		opts.LeaderElectionNamespace = revisionNS
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &lease, &renew, &retry
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.cp.Config), opts)
	if err != nil {
		t.Fatal(err)
	}
	base := analysis.HTTPQueriers(10 * time.Second)
	setup := controllers.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("nettune-controller"),
		Namespace: revisionNS, SkipNameValidation: true,
		Backends: analysis.Backends{LokiAddress: o.loki, PrometheusAddress: o.prom, LokiSecret: o.lokiSecret, Queriers: func(p v1alpha1.AnalysisProvider, addr string, creds *httpauth.Credentials) (analysis.Querier, error) {
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
	ctx, cancel := context.WithCancel(e.ctx)
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
	e *fleetEnv
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

// addVehicles creates vehicles of two hosts each (xavier-a, xavier-b).
func (e *fleetEnv) addVehicles(hardware string, names ...string) {
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
			if err := e.c.Create(e.ctx, n); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// agents plays every node's agent: report the spec applied and verified (or
// rolled back for a failing revision), with a heartbeat, unless the vehicle
// is offline.
func (e *fleetEnv) agents(ctx context.Context) {
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
		if err := e.c.List(ctx, list); err != nil {
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
			if err := e.c.Status().Patch(ctx, nnt, patch); err == nil {
				beat[nnt.Name] = time.Now()
			}
		}
	}
}

func (e *fleetEnv) profile(name string) *v1alpha1.NetTuningProfile {
	p := &v1alpha1.NetTuningProfile{}
	if err := e.c.Get(e.ctx, client.ObjectKey{Name: name}, p); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitProfile polls until cond holds, failing with the profile's status.
func (e *fleetEnv) waitProfile(name string, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := e.profile(name)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s: phase=%s step=%v current=%s stable=%s vehicles=%+v analysis=%+v conditions=%+v",
				timeout, what, p.Status.Phase, p.Status.CurrentStep, p.Status.CurrentRevision, p.Status.StableRevision,
				p.Status.Vehicles, p.Status.Analysis, p.Status.Conditions)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeRevisions maps node -> the profile revision its NodeNetTuning carries.
func (e *fleetEnv) nodeRevisions(profile string) map[string]string {
	list := &v1alpha1.NodeNetTuningList{}
	if err := e.c.List(e.ctx, list); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for i := range list.Items {
		out[list.Items[i].Name] = fleetmodel.AssignedRevision(&list.Items[i], profile)
	}
	return out
}

func (e *fleetEnv) events(name string) []string {
	list := &corev1.EventList{}
	_ = e.c.List(e.ctx, list)
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name && ev.InvolvedObject.Kind == "NetTuningProfile" {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	sort.Strings(out)
	return out
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
func ptr[T any](v T) *T                    { return &v }

// lanProfile is the shipped profile's shape with test-sized timings.
func lanProfile(cwnd int32, provider v1alpha1.AnalysisProvider, query, samples string) *v1alpha1.NetTuningProfile {
	a := v1alpha1.AnalysisSpec{
		Name: "p9999-latency", Provider: provider, Query: query,
		Interval: dur(time.Second), Window: dur(10 * time.Minute), Measurements: ptr(int32(2)),
		MinSamples: ptr(int64(500)), MaxValue: ptr("20"), MaxBaselineFactor: ptr("1.10"), MaxBaselineOffset: ptr("1"),
		FailureLimit: ptr(int32(0)), InconclusiveLimit: ptr(int32(0)), OnInconclusive: v1alpha1.InconclusivePause,
	}
	if samples != "" {
		a.SamplesQuery = ptr(samples)
	}
	return &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "xavier-lan"},
		Spec: v1alpha1.NetTuningProfileSpec{
			Defaults: &v1alpha1.TCPParameters{
				Cwnd: &v1alpha1.Cwnd{Value: cwnd}, Initcwnd: ptr(cwnd - 5), RTOMin: dur(10 * time.Millisecond),
			},
			Rollout: &v1alpha1.RolloutSpec{
				Canary: v1alpha1.CanarySpec{Count: ptr(int32(2))},
				Steps: []v1alpha1.RolloutStep{
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(50))}},
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}},
				},
				MaxUnavailable: ptr(intOrString("50%")),
				Analyses:       []v1alpha1.AnalysisSpec{a},
			},
		},
	}
}

const (
	lokiQuery = `quantile_over_time(0.9999, {job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} | json | unwrap latency_ms [{{ .Window }}]) by ()`
	lokiCount = `sum(count_over_time({job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} [{{ .Window }}]))`
)

// latencies draws n message latencies (ms): a 3-4 ms body, an exponential
// tail and 1 % of messages delayed a few ms more (p99.99 about 13 ms).
func latencies(rng *rand.Rand, n int, scale float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		v := 3 + rng.ExpFloat64()*0.8
		if rng.Float64() < 0.01 {
			v += 3 + rng.Float64()*3
		}
		out[i] = v * scale
	}
	return out
}

// settle waits for the first revision to be stable everywhere.
func (e *fleetEnv) settle(p *v1alpha1.NetTuningProfile) string {
	e.t.Helper()
	rollout := p.Spec.Rollout
	p.Spec.Rollout = nil
	if err := e.c.Create(e.ctx, p); err != nil {
		e.t.Fatal(err)
	}
	rev := revision.Name(p)
	e.waitProfile(p.Name, 60*time.Second, "first revision stable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.StableRevision == rev && p.Status.Phase == v1alpha1.PhaseHealthy
	})
	p.Spec.Rollout = rollout
	return rev
}

// edit changes a profile's spec as a user would, retrying when the
// controller changed the object in between (its finalizer, say).
func (e *fleetEnv) edit(name string, mutate func(*v1alpha1.NetTuningProfile)) string {
	e.t.Helper()
	var p *v1alpha1.NetTuningProfile
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p = e.profile(name)
		mutate(p)
		return e.c.Update(e.ctx, p)
	}); err != nil {
		e.t.Fatal(err)
	}
	return revision.Name(p)
}

func metav1ObjectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// kubectl runs bin/kubectl against the test's control plane.
func kubectl(t *testing.T, e *fleetEnv, args ...string) string {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig", e.cp.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
