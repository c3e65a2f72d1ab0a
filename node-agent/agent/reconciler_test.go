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
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netns"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
	"github.com/nettune/nettune/test/framework/nettest"
)

// These tests run the node agent's reconciler (Reconciler.Run) as
// connect does (cmd/nettune-agent/run.go), against a real
// etcd + kube-apiserver (internal/localcp). The agent's "host" is a network
// namespace made by the test (nar-<random hex>), joined by a veth to a second
// namespace holding the peer; addresses are 10.253.X.1/24 and 10.253.X.2/24.
// Nothing is done in the test process's own network namespace.

const (
	rtDevA      = "nra0"
	rtDevB      = "nrb0"
	rtHeartbeat = time.Hour              // long: no heartbeat writes during a test
	rtResync    = 400 * time.Millisecond // short-ish: several resyncs per test
	rtTimeout   = 20 * time.Second       // upper bound of every wait
	rtMissing   = "nrmissing0"           // a device that exists nowhere
	rtRecorder  = "nettune-agent"        // the event recorder's name (connect)
	rtPeerName  = "peer-b"               // the peer host's name in specs
	rtCwndFirst = int32(30)              // cwnd of the first revision
	rtInitcwnd  = int32(25)              // initcwnd of every revision
	rtRTOFloor  = 10 * time.Millisecond  // rtoMin of every revision
)

// rtNewNetns creates a named network namespace with lo up; it is deleted in
// cleanup.
func rtNewNetns(t *testing.T) string {
	t.Helper()
	return nettest.NewNetns(t, "nar")
}

// rtHost is the agent's host (namespace A) and its peer (namespace B).
type rtHost struct {
	nsA, nsB     string
	addrA, addrB string // without prefix length
	handle       *kernel.Handle
	probePort    int32 // a TCP sink in B, the peer's probe port
}

func rtNewHost(t *testing.T) *rtHost {
	t.Helper()
	nettest.RequireRoot(t)
	h := &rtHost{nsA: rtNewNetns(t), nsB: rtNewNetns(t)}
	b := make([]byte, 1)
	for b[0] == 0 || b[0] == 255 {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
	}
	h.addrA, h.addrB = fmt.Sprintf("10.253.%d.1", b[0]), fmt.Sprintf("10.253.%d.2", b[0])
	nettest.IP(t, "-n", h.nsA, "link", "add", rtDevA, "type", "veth", "peer", "name", rtDevB, "netns", h.nsB)
	nettest.IP(t, "-n", h.nsA, "addr", "add", h.addrA+"/24", "dev", rtDevA)
	nettest.IP(t, "-n", h.nsB, "addr", "add", h.addrB+"/24", "dev", rtDevB)
	nettest.IP(t, "-n", h.nsA, "link", "set", rtDevA, "up")
	nettest.IP(t, "-n", h.nsB, "link", "set", rtDevB, "up")

	nsh, err := netns.GetFromName(h.nsA)
	if err != nil {
		t.Fatal(err)
	}
	h.handle, err = kernel.NewHandleAt(nsh)
	nsh.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.handle.Close() })

	// The peer's probe port: a TCP sink in B.
	nsb, err := netns.GetFromName(h.nsB)
	if err != nil {
		t.Fatal(err)
	}
	defer nsb.Close()
	var ln net.Listener
	if err := kernel.DoInNetns(nsb, func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(h.addrB, "0"))
		return err
	}); err != nil {
		t.Fatalf("listening in %s: %v", h.nsB, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _ = io.Copy(io.Discard, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	h.probePort = int32(ln.Addr().(*net.TCPAddr).Port)

	// The post-apply probe wants carrier on the route's device.
	rtEventually(t, "carrier on "+rtDevA, func() error {
		st, err := h.handle.ReadInterface(rtDevA)
		if err != nil {
			return err
		}
		if !st.Up || !st.Carrier {
			return fmt.Errorf("up=%t carrier=%t", st.Up, st.Carrier)
		}
		return nil
	})
	return h
}

// rtRoute is `ip -n A route show <peer>`, the kernel's view.
func (h *rtHost) rtRoute(t *testing.T) string {
	t.Helper()
	return nettest.IP(t, "-n", h.nsA, "route", "show", h.addrB)
}

// rtSpec is a spec tuning the route to the peer's /32 on the veth.
func (h *rtHost) rtSpec(revision string, cwnd int32) v1alpha1.NodeNetTuningSpec {
	return v1alpha1.NodeNetTuningSpec{
		Revision: revision,
		Routes: []v1alpha1.NodeRoute{{
			Destination: h.addrB + "/32",
			Device:      rtDevA,
			Peer:        rtPeerName,
			Parameters: v1alpha1.TCPParameters{
				Cwnd:     &v1alpha1.Cwnd{Value: cwnd, Lock: new(true)},
				Initcwnd: new(rtInitcwnd),
				RTOMin:   &metav1.Duration{Duration: rtRTOFloor},
			},
		}},
		Peers: []v1alpha1.Peer{{Host: rtPeerName, Address: h.addrB, ProbePort: h.probePort}},
	}
}

// rtWantMetrics is how iproute2 prints the metrics of rtSpec(_, cwnd).
func rtWantMetrics(cwnd int32) []string {
	return []string{fmt.Sprintf("cwnd lock %d", cwnd), fmt.Sprintf("initcwnd %d", rtInitcwnd), "rto_min lock 10ms"}
}

func rtAssertKernelRoute(t *testing.T, h *rtHost, cwnd int32) {
	t.Helper()
	route := h.rtRoute(t)
	if !strings.Contains(route, "dev "+rtDevA) {
		t.Errorf("kernel route to %s is not on %s: %q", h.addrB, rtDevA, route)
	}
	for _, m := range rtWantMetrics(cwnd) {
		if !strings.Contains(route, m) {
			t.Errorf("kernel route to %s lacks %q: %q", h.addrB, m, route)
		}
	}
}

// rtControlPlane starts a real etcd + kube-apiserver with the CRDs, stopped
// in cleanup.
func rtControlPlane(t *testing.T) *localcp.ControlPlane {
	t.Helper()
	nettest.RequireRoot(t)
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatalf("starting the local control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return cp
}

// rtLogger logs to t until cleanup: nothing may log to t once it is done.
func rtLogger(t *testing.T) logr.Logger {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	return funcr.New(func(prefix, args string) {
		if !done.Load() {
			t.Logf("%s %s", prefix, args)
		}
	}, funcr.Options{})
}

// rtAgent is one node agent: an engine on the test host and its reconciler.
// The reconciler outlives its runs (connections), as in runAgent.
type rtAgent struct {
	node    string
	host    *rtHost
	engine  *Engine
	rec     *Reconciler
	reg     *prometheus.Registry
	cp      *localcp.ControlPlane
	stopRun func()
}

// rtWatched is the agent's watched copy of name.
func (a *rtAgent) rtWatched(name string) (*v1alpha1.NodeNetTuning, error) {
	w := a.rec.watch.Load()
	if w == nil {
		return nil, fmt.Errorf("the agent is not running")
	}
	return w.get(name)
}

func rtNewAgent(t *testing.T, cp *localcp.ControlPlane, h *rtHost, node string) *rtAgent {
	t.Helper()
	log := rtLogger(t)
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Host: h.handle, Store: st, Probes: LocalProber{Window: 50 * time.Millisecond}, Log: log.WithName("engine")}
	a := &rtAgent{node: node, host: h, engine: e, cp: cp, reg: prometheus.NewRegistry()}
	features, err := h.handle.ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}
	a.rec = &Reconciler{Engine: e, NodeName: node, Heartbeat: rtHeartbeat, Resync: rtResync, Kick: make(chan struct{}, 1), Kernel: &features}
	a.rec.Metrics = NewMetrics(a.reg, node, e)
	return a
}

// rtStart connects the reconciler as connect does and runs it until
// cleanup (or a.stopRun); it returns once the watch is listed.
func (a *rtAgent) rtStart(t *testing.T) {
	t.Helper()
	cfg := rest.CopyConfig(a.cp.Config)
	cfg.Timeout = 10 * time.Second
	kube, err := NewKube(cfg)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	log := rtLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	a.rec.Recorder = kube.EventRecorder(ctx, rtRecorder, log.WithName("events"))
	done := make(chan error, 1)
	go func() { done <- a.rec.Run(ctx, kube, rtTimeout, log.WithName("reconciler")) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("reconciler: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("reconciler did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	rtEventually(t, "the watch of "+a.node+" to be listed", func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("the reconciler stopped: %v", err)
		default:
		}
		if a.rec.watch.Load() == nil {
			return fmt.Errorf("not listed yet")
		}
		return nil
	})
	a.stopRun = stop
}

// rtCreate creates a NodeNetTuning through the admin client.
func rtCreate(t *testing.T, c client.Client, name string, spec v1alpha1.NodeNetTuningSpec) *v1alpha1.NodeNetTuning {
	t.Helper()
	nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := c.Create(context.Background(), nnt); err != nil {
		t.Fatalf("creating NodeNetTuning %s: %v", name, err)
	}
	return nnt
}

// rtUpdateSpec replaces the spec of a NodeNetTuning and returns the object.
func rtUpdateSpec(t *testing.T, c client.Client, name string, spec v1alpha1.NodeNetTuningSpec) *v1alpha1.NodeNetTuning {
	t.Helper()
	nnt := &v1alpha1.NodeNetTuning{}
	rtEventually(t, "updating the spec of "+name, func() error {
		if err := c.Get(context.Background(), types.NamespacedName{Name: name}, nnt); err != nil {
			return err
		}
		nnt.Spec = spec
		return c.Update(context.Background(), nnt) // a conflict with a status patch is retried
	})
	return nnt
}

func rtGet(t *testing.T, c client.Client, name string) *v1alpha1.NodeNetTuning {
	t.Helper()
	nnt := &v1alpha1.NodeNetTuning{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, nnt); err != nil {
		t.Fatalf("getting NodeNetTuning %s: %v", name, err)
	}
	return nnt
}

// rtEventually polls f until it returns nil or rtTimeout passes.
func rtEventually(t *testing.T, what string, f func() error) {
	t.Helper()
	nettest.WaitFor(t, rtTimeout, func() error {
		if err := f(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		return nil
	})
}

// rtWaitStatus waits until the agent reported on the current generation of
// name (observedGeneration == generation and an Applied condition of that
// generation) and returns the object read straight from the API server.
func rtWaitStatus(t *testing.T, c client.Client, name string) *v1alpha1.NodeNetTuning {
	t.Helper()
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, "the status of "+name, func() error {
		nnt = &v1alpha1.NodeNetTuning{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: name}, nnt); err != nil {
			return err
		}
		applied := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionApplied)
		if nnt.Status.ObservedGeneration != nnt.Generation || applied == nil || applied.ObservedGeneration != nnt.Generation {
			return fmt.Errorf("generation %d, status %+v", nnt.Generation, nnt.Status)
		}
		return nil
	})
	return nnt
}

func rtCond(t *testing.T, nnt *v1alpha1.NodeNetTuning, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(nnt.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("no %s condition in %+v", typ, nnt.Status.Conditions)
	}
	if c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	if c.ObservedGeneration != nnt.Generation {
		t.Errorf("condition %s observedGeneration %d, want %d", typ, c.ObservedGeneration, nnt.Generation)
	}
	return c
}

// rtAssertApplied checks the status of a committed, verified revision with
// the route to the peer tuned to cwnd.
func rtAssertApplied(t *testing.T, a *rtAgent, nnt *v1alpha1.NodeNetTuning, cwnd int32) {
	t.Helper()
	st := nnt.Status
	if st.AppliedRevision != nnt.Spec.Revision {
		t.Errorf("appliedRevision %q, want spec.revision %q", st.AppliedRevision, nnt.Spec.Revision)
	}
	if st.ObservedGeneration != nnt.Generation {
		t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, nnt.Generation)
	}
	rtCond(t, nnt, v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied")
	rtCond(t, nnt, v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified")
	rtCond(t, nnt, v1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsDesired")
	rtCond(t, nnt, v1alpha1.ConditionRolledBack, metav1.ConditionFalse, "Committed")
	rtCond(t, nnt, v1alpha1.ConditionDrifted, metav1.ConditionFalse, "NoDrift")
	if len(st.Items) != 1 {
		t.Fatalf("status items %+v, want one route", st.Items)
	}
	it := st.Items[0]
	if it.Kind != "Route" || it.Name != a.host.addrB+"/32" || it.State != StateVerified {
		t.Errorf("item %+v, want Route %s/32 Verified", it, a.host.addrB)
	}
	for _, m := range rtWantMetrics(cwnd) {
		if !strings.Contains(it.Desired, m) || !strings.Contains(it.Observed, m) {
			t.Errorf("item desired %q / observed %q lack %q", it.Desired, it.Observed, m)
		}
	}
	if st.LastHeartbeatTime == nil || time.Since(st.LastHeartbeatTime.Time) > time.Minute {
		t.Errorf("lastHeartbeatTime %v, want a recent time", st.LastHeartbeatTime)
	}
	rtAssertKernelRoute(t, a.host, cwnd)
}

// rtCounter sums the samples of a counter family matching labels.
func rtCounter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// rtAssertNoWrites waits about three resync periods and checks that name was
// not written meanwhile although the agent reconciled it on every resync.
func rtAssertNoWrites(t *testing.T, a *rtAgent) {
	t.Helper()
	c, name := a.cp.Client, a.node
	before := rtGet(t, c, name)
	// Let the agent's cache catch up with the last status write first: a
	// reconcile against an older copy would write the same status again.
	rtEventually(t, "the agent's cache to hold resourceVersion "+before.ResourceVersion, func() error {
		cached, err := a.rtWatched(name)
		if err != nil {
			return err
		}
		if cached.ResourceVersion != before.ResourceVersion {
			return fmt.Errorf("cache has %s", cached.ResourceVersion)
		}
		return nil
	})
	reconciles := a.rec.reconciles.Load()
	time.Sleep(3*rtResync + 200*time.Millisecond)
	after := rtGet(t, c, name)
	if n := a.rec.reconciles.Load() - reconciles; n < 2 {
		t.Errorf("only %v reconciles in %s: the resync did not run", n, 3*rtResync)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("NodeNetTuning %s written in steady state: resourceVersion %s -> %s\nbefore %+v\nafter  %+v",
			name, before.ResourceVersion, after.ResourceVersion, before.Status, after.Status)
	}
}

// rtEvents lists events.k8s.io/v1 Events about name, in every namespace.
func rtEvents(t *testing.T, c client.Client, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == "NodeNetTuning" {
			out = append(out, e)
		}
	}
	return out
}

func rtWaitEvent(t *testing.T, c client.Client, name, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	rtEventually(t, "a "+reason+" event about "+name, func() error {
		evs := rtEvents(t, c, name)
		for _, e := range evs {
			if e.Reason == reason {
				found = e
				return nil
			}
		}
		return fmt.Errorf("events about %s: %+v", name, evs)
	})
	return found
}

// rtSetup is the common start: control plane, host, the agent's own
// NodeNetTuning at revision r1 (cwnd 30), the agent running and converged.
func rtSetup(t *testing.T) (*localcp.ControlPlane, *rtAgent, *v1alpha1.NodeNetTuning) {
	t.Helper()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, "rt-node-"+nettest.RandHex(t, 4))
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", rtCwndFirst))
	a.rtStart(t)
	nnt := rtWaitStatus(t, cp.Client, a.node)
	rtAssertApplied(t, a, nnt, rtCwndFirst)
	return cp, a, nnt
}

// TestAgentAppliesItsNodeNetTuningAndReportsStatus: the agent applies its
// own NodeNetTuning to the host and reports it in status.
func TestAgentAppliesItsNodeNetTuningAndReportsStatus(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, a, nnt := rtSetup(t)
	if nnt.Generation != 1 || nnt.Status.AppliedRevision != "r1" {
		t.Errorf("generation %d appliedRevision %q, want 1 and r1", nnt.Generation, nnt.Status.AppliedRevision)
	}
	committed, err := a.engine.CommittedSpec()
	if err != nil {
		t.Fatal(err)
	}
	if committed.Revision != "r1" {
		t.Errorf("last-known-good revision %q, want r1", committed.Revision)
	}
	// status.kernel, through the API server (and its bounds): the features
	// probed at start-up.
	if k, f := nnt.Status.Kernel, a.rec.Kernel; k == nil || k.Release != f.Release || k.Machine != f.Machine ||
		!slices.Equal(k.TCPInfoCounters, f.TCPInfoCounters) || !slices.Equal(k.CongestionControls, f.CongestionControls) ||
		!k.Provides(v1alpha1.CounterSegsOut) {
		t.Errorf("status.kernel %+v, probed %+v", k, f)
	}
	ev := rtWaitEvent(t, cp.Client, a.node, "Applied")
	if ev.Type != "Normal" || ev.ReportingController != rtRecorder || !strings.Contains(ev.Note, "r1") {
		t.Errorf("Applied event %s/%s by %q: %q", ev.Type, ev.Reason, ev.ReportingController, ev.Note)
	}
	if n := rtCounter(t, a.reg, "nettune_agent_applies_total", map[string]string{"result": "committed"}); n != 1 {
		t.Errorf("committed applies %v, want 1", n)
	}
}

// TestAgentSeesOnlyItsOwnNodeNetTuning: the agent's cache holds its own
// object only, and it never writes another node's object.
func TestAgentSeesOnlyItsOwnNodeNetTuning(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, "rt-node-"+nettest.RandHex(t, 4))
	// Other nodes' objects, one created before the agent starts and one
	// after. Their specs would be refused here (their device is missing), so
	// the agent would write a status if it ever reconciled them.
	otherSpec := h.rtSpec("other-r1", 30)
	otherSpec.Routes[0].Device = rtMissing
	before := rtCreate(t, cp.Client, "rt-other-"+nettest.RandHex(t, 4), otherSpec)
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", rtCwndFirst))
	a.rtStart(t)
	after := rtCreate(t, cp.Client, "rt-other-"+nettest.RandHex(t, 4), otherSpec)
	rtAssertApplied(t, a, rtWaitStatus(t, cp.Client, a.node), rtCwndFirst)

	var all v1alpha1.NodeNetTuningList
	if err := cp.Client.List(context.Background(), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 3 {
		t.Fatalf("the API server holds %d NodeNetTunings, want 3", len(all.Items))
	}
	// The watched copies: give the watch time to deliver `after` had the
	// field selector let it through, then list.
	time.Sleep(2 * rtResync)
	if names := a.rec.watch.Load().names(); len(names) != 1 || names[0] != a.node {
		t.Errorf("the agent's watch holds %v, want only %s", names, a.node)
	}
	for _, other := range []*v1alpha1.NodeNetTuning{before, after} {
		_, err := a.rtWatched(other.Name)
		if !apierrors.IsNotFound(err) {
			t.Errorf("the agent's watched copy of %s: %v, want NotFound", other.Name, err)
		}
		got := rtGet(t, cp.Client, other.Name)
		if !reflect.DeepEqual(got.Status, v1alpha1.NodeNetTuningStatus{}) {
			t.Errorf("%s has a status written by the agent: %+v", other.Name, got.Status)
		}
		if got.ResourceVersion != other.ResourceVersion {
			t.Errorf("%s was written after its creation: resourceVersion %s -> %s", other.Name, other.ResourceVersion, got.ResourceVersion)
		}
		if evs := rtEvents(t, cp.Client, other.Name); len(evs) != 0 {
			t.Errorf("events about %s: %+v", other.Name, evs)
		}
	}
	// The host carries the agent's own revision, nothing of the others'.
	rtAssertKernelRoute(t, h, rtCwndFirst)
}

// TestAgentAppliesSpecChangeAndPatchesStatusOnlyOnChange: a new revision is
// applied and reported; in steady state the status is not rewritten.
func TestAgentAppliesSpecChangeAndPatchesStatusOnlyOnChange(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, a, _ := rtSetup(t)
	rtAssertNoWrites(t, a)
	first := rtGet(t, cp.Client, a.node).Status.VerifiedTime
	if first == nil {
		t.Fatal("r1 verified without a verifiedTime")
	}
	changed := time.Now().Truncate(time.Second) // the API keeps seconds

	rtUpdateSpec(t, cp.Client, a.node, a.host.rtSpec("r2", 40))
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, "revision r2 reported", func() error {
		nnt = rtWaitStatus(t, cp.Client, a.node)
		if nnt.Status.AppliedRevision != "r2" {
			return fmt.Errorf("appliedRevision %q", nnt.Status.AppliedRevision)
		}
		return nil
	})
	if nnt.Generation != 2 {
		t.Errorf("generation %d after one spec change, want 2", nnt.Generation)
	}
	// The verification time is r2's, not r1's: an analysis counts the
	// vehicle's samples from it.
	if vt := nnt.Status.VerifiedTime; vt == nil || vt.Time.Before(changed) || vt.Equal(first) {
		t.Errorf("verifiedTime %v after r2 (r1's %v, spec changed at %v), want r2's", vt, first, changed)
	}
	rtAssertApplied(t, a, nnt, 40)
	if route := a.host.rtRoute(t); strings.Contains(route, "cwnd lock 30") {
		t.Errorf("kernel route still has the old cwnd: %q", route)
	}
	rtAssertNoWrites(t, a)
	if got := rtGet(t, cp.Client, a.node); !got.Status.LastHeartbeatTime.Equal(nnt.Status.LastHeartbeatTime) {
		t.Errorf("heartbeat rewritten within the heartbeat interval: %v -> %v", nnt.Status.LastHeartbeatTime, got.Status.LastHeartbeatTime)
	}
	if n := rtCounter(t, a.reg, "nettune_agent_applies_total", map[string]string{"result": "committed"}); n != 2 {
		t.Errorf("committed applies %v, want 2 (r1, r2; no re-apply on resync)", n)
	}
}

// TestAgentReportsRefusedSpecAndKeepsPreviousRevision: a spec naming a
// missing device is refused before any change and reported, and the host
// keeps the previous revision.
func TestAgentReportsRefusedSpecAndKeepsPreviousRevision(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, a, _ := rtSetup(t)
	bad := a.host.rtSpec("r2-bad", 50)
	bad.Routes[0].Device = rtMissing
	rtUpdateSpec(t, cp.Client, a.node, bad)
	nnt := rtWaitStatus(t, cp.Client, a.node)
	if nnt.Generation != 2 || nnt.Spec.Revision != "r2-bad" {
		t.Fatalf("generation %d revision %q, want 2 and r2-bad", nnt.Generation, nnt.Spec.Revision)
	}
	applied := rtCond(t, nnt, v1alpha1.ConditionApplied, metav1.ConditionFalse, "Refused")
	if !strings.Contains(applied.Message, rtMissing) {
		t.Errorf("Applied message %q does not name device %s", applied.Message, rtMissing)
	}
	degraded := rtCond(t, nnt, v1alpha1.ConditionDegraded, metav1.ConditionTrue, "Refused")
	if !strings.Contains(degraded.Message, rtMissing) {
		t.Errorf("Degraded message %q does not name device %s", degraded.Message, rtMissing)
	}
	rtCond(t, nnt, v1alpha1.ConditionVerified, metav1.ConditionFalse, "Refused")
	if nnt.Status.AppliedRevision != "r1" {
		t.Errorf("appliedRevision %q after a refusal, want the previous r1", nnt.Status.AppliedRevision)
	}
	// The host still has revision r1's metrics.
	rtAssertKernelRoute(t, a.host, rtCwndFirst)
	if route := a.host.rtRoute(t); strings.Contains(route, "cwnd lock 50") {
		t.Errorf("kernel route has the refused revision's cwnd: %q", route)
	}
	if committed, err := a.engine.CommittedSpec(); err != nil || committed.Revision != "r1" {
		t.Errorf("last-known-good revision %q (%v), want r1", committed.Revision, err)
	}
	ev := rtWaitEvent(t, cp.Client, a.node, "Refused")
	if ev.Type != "Warning" || !strings.Contains(ev.Note, rtMissing) || !strings.Contains(ev.Note, "r2-bad") {
		t.Errorf("Refused event %s: %q, want a Warning naming r2-bad and %s", ev.Type, ev.Note, rtMissing)
	}
	// A refused generation is not retried on every resync, nor re-reported.
	rtAssertNoWrites(t, a)
	if n := rtCounter(t, a.reg, "nettune_agent_applies_total", map[string]string{"result": "refused"}); n != 1 {
		t.Errorf("refused applies %v, want 1", n)
	}
	rtAssertKernelRoute(t, a.host, rtCwndFirst)
}

// TestAgentReconnectsWithANewRun: runAgent connects again, and runs the
// same Reconciler again, every time the previous run stopped (control plane
// out of reach). The second run must apply a spec change.
func TestAgentReconnectsWithANewRun(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, a, _ := rtSetup(t)
	a.stopRun()
	a.rtStart(t) // Run again, in the same process
	rtUpdateSpec(t, cp.Client, a.node, a.host.rtSpec("r2", 35))
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, "revision r2 reported", func() error {
		nnt = rtWaitStatus(t, cp.Client, a.node)
		if nnt.Status.AppliedRevision != "r2" {
			return fmt.Errorf("appliedRevision %q", nnt.Status.AppliedRevision)
		}
		return nil
	})
	rtAssertApplied(t, a, nnt, 35)
}

// TestAgentEmptySpecIsNotRewrittenOnResync: a revision with nothing to tune
// (the node left every profile) is applied, undoing the previous tuning, and
// its status, with no items, is not rewritten on every resync either.
func TestAgentEmptySpecIsNotRewrittenOnResync(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, a, _ := rtSetup(t)
	rtUpdateSpec(t, cp.Client, a.node, v1alpha1.NodeNetTuningSpec{Revision: "r2-empty"})
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, "revision r2-empty reported", func() error {
		nnt = rtWaitStatus(t, cp.Client, a.node)
		if nnt.Status.AppliedRevision != "r2-empty" {
			return fmt.Errorf("appliedRevision %q", nnt.Status.AppliedRevision)
		}
		return nil
	})
	rtCond(t, nnt, v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied")
	rtCond(t, nnt, v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified")
	if len(nnt.Status.Items) != 0 {
		t.Errorf("status items %+v, want none", nnt.Status.Items)
	}
	// The route to the peer did not exist before nettune: it is gone again.
	if route := a.host.rtRoute(t); route != "" {
		t.Errorf("kernel still has a route to %s: %q", a.host.addrB, route)
	}
	rtAssertNoWrites(t, a)
}
