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
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/node-agent/gate"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/test/framework/nettest"
)

// writeGate writes the gate file as an autonomy stack would: a temporary
// file renamed over it.
func writeGate(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// gtGateFile is a gate file in the test's temporary directory, holding
// content.
func gtGateFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	writeGate(t, path, content)
	return path
}

// gtAgent is the gate tests' start: a control plane, a host and an agent
// named node, set up by configure (its gate, its clock, its prober) and
// started, its gate watched when it has one, and revision r1 (cwnd 30)
// applied; it returns r1's NodeNetTuning as the agent reported it.
func gtAgent(t *testing.T, node string, configure func(*rtAgent)) (*localcp.ControlPlane, *rtHost, *rtAgent, *v1alpha1.NodeNetTuning) {
	t.Helper()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, node)
	if configure != nil {
		configure(a)
	}
	a.rtStart(t)
	if a.rec.Gate != nil {
		gtWatch(t, a)
	}
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", 30))
	return cp, h, a, gtApplied(t, cp.Client, a.node, "r1")
}

// gtWatch runs the gate watcher as runAgent does, until the test ends.
func gtWatch(t *testing.T, a *rtAgent) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.rec.Gate.Watch(ctx, 20*time.Millisecond, func(gate.State) { a.rec.GateChanged() })
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// gtGauge reads one of the agent's gauges (-1 when absent).
func gtGauge(t *testing.T, a *rtAgent, name string) float64 {
	t.Helper()
	mfs, err := a.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// gtDeferred waits until the agent reports revision as deferred for reason,
// with the revision in force still applied, and returns the object.
func gtDeferred(t *testing.T, c client.Client, node, revision, inForce, reason string) *v1alpha1.NodeNetTuning {
	t.Helper()
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, fmt.Sprintf("%s deferred (%s) with %s in force", revision, reason, inForce), func() error {
		nnt = &v1alpha1.NodeNetTuning{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: node}, nnt); err != nil {
			return err
		}
		d := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionDeferred)
		if d == nil || d.Status != metav1.ConditionTrue || d.Reason != reason || d.ObservedGeneration != nnt.Generation {
			return fmt.Errorf("Deferred condition %+v", d)
		}
		if g := nnt.Status.Gate; g == nil || g.PendingRevision != revision {
			return fmt.Errorf("status.gate %+v, want pendingRevision %s", g, revision)
		}
		if nnt.Status.AppliedRevision != inForce {
			return fmt.Errorf("appliedRevision %q, want %q", nnt.Status.AppliedRevision, inForce)
		}
		return nil
	})
	return nnt
}

// gtApplied waits until revision is applied and nothing is deferred.
func gtApplied(t *testing.T, c client.Client, node, revision string) *v1alpha1.NodeNetTuning {
	t.Helper()
	var nnt *v1alpha1.NodeNetTuning
	rtEventually(t, revision+" applied with nothing deferred", func() error {
		nnt = &v1alpha1.NodeNetTuning{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: node}, nnt); err != nil {
			return err
		}
		d := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionDeferred)
		if nnt.Status.AppliedRevision != revision || d == nil || d.Status != metav1.ConditionFalse || d.ObservedGeneration != nnt.Generation {
			return fmt.Errorf("appliedRevision %q, Deferred %+v", nnt.Status.AppliedRevision, d)
		}
		return nil
	})
	return nnt
}

// TestAgentHoldsARevisionWhileItsGateIsClosed: with the gate closed
// ("driving") a new revision is not applied — the kernel keeps the one in
// force, the status says Deferred (GateClosed) with the pending revision
// and the gate's reason; once the gate opens the revision is applied within
// a poll of the gate. A rollback marked immediate is applied with the gate
// closed.
func TestAgentHoldsARevisionWhileItsGateIsClosed(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	path := gtGateFile(t, "open parked")
	cp, h, a, nnt := gtAgent(t, "gate-node", func(a *rtAgent) { a.rec.Gate = &gate.File{Path: path} })
	if g := nnt.Status.Gate; g == nil || g.State != v1alpha1.GateOpen || g.Reason != "parked" || g.PendingRevision != "" {
		t.Errorf("status.gate %+v, want Open (parked), nothing pending", g)
	}
	rtAssertKernelRoute(t, h, 30)

	writeGate(t, path, "closed driving autonomously")
	rtUpdateSpec(t, cp.Client, a.node, h.rtSpec("r2", 26))
	nnt = gtDeferred(t, cp.Client, a.node, "r2", "r1", gate.ReasonGateClosed)
	if g := nnt.Status.Gate; g.State != v1alpha1.GateClosed || g.Reason != "driving autonomously" || g.Since == nil {
		t.Errorf("status.gate %+v, want Closed (driving autonomously) with a since", g)
	}
	d := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionDeferred)
	if !strings.Contains(d.Message, "driving autonomously") || !strings.Contains(d.Message, "r2") {
		t.Errorf("Deferred message %q: want the revision and the gate's reason", d.Message)
	}
	if ev := rtWaitEvent(t, cp.Client, a.node, gate.ReasonGateClosed); !strings.Contains(ev.Note, "r2 deferred") {
		t.Errorf("%s event %q, want it to name r2 deferred", ev.Reason, ev.Note)
	}
	// Several resyncs later the kernel still has r1.
	gets := a.rec.reconciles.Load()
	rtEventually(t, "three reconciles while deferred", func() error {
		if n := a.rec.reconciles.Load() - gets; n < 3 {
			return fmt.Errorf("%d reconciles", n)
		}
		return nil
	})
	rtAssertKernelRoute(t, h, 30)
	if v := gtGauge(t, a, "nettune_agent_apply_deferred"); v != 1 {
		t.Errorf("nettune_agent_apply_deferred %v, want 1", v)
	}
	if v := gtGauge(t, a, "nettune_agent_apply_gate_open"); v != 0 {
		t.Errorf("nettune_agent_apply_gate_open %v, want 0", v)
	}

	opened := time.Now()
	writeGate(t, path, "open")
	gtApplied(t, cp.Client, a.node, "r2")
	if v := gtGauge(t, a, "nettune_agent_apply_deferred"); v != 0 {
		t.Errorf("nettune_agent_apply_deferred %v once applied, want 0", v)
	}
	t.Logf("r2 applied and reported %s after the gate opened", time.Since(opened).Round(time.Millisecond))
	rtAssertKernelRoute(t, h, 26)

	// A rollback the controller marks immediate does not wait.
	writeGate(t, path, "closed driving")
	back := h.rtSpec("r1b", 30)
	back.ApplyPolicy = &v1alpha1.NodeApplyPolicy{Immediate: "rollback of profile p to r1"}
	rtUpdateSpec(t, cp.Client, a.node, back)
	gtApplied(t, cp.Client, a.node, "r1b")
	rtAssertKernelRoute(t, h, 30)
}

// TestAgentWithoutAGateHoldsWhatRequiresOne: a profile that requires a gate
// is never applied by an agent without one, and the status says why.
func TestAgentWithoutAGateHoldsWhatRequiresOne(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp, h, a, _ := gtAgent(t, "nogate-node", nil)
	spec := h.rtSpec("r2", 26)
	spec.ApplyPolicy = &v1alpha1.NodeApplyPolicy{Gate: v1alpha1.ApplyGateRequired}
	rtUpdateSpec(t, cp.Client, a.node, spec)
	nnt := gtDeferred(t, cp.Client, a.node, "r2", "r1", gate.ReasonGateNotConfigured)
	if g := nnt.Status.Gate; g.State != v1alpha1.GateNotConfigured {
		t.Errorf("status.gate.state %s, want NotConfigured", g.State)
	}
	rtAssertKernelRoute(t, h, 30)
}

// TestAgentAppliesWhenItsWindowOpens: outside its maintenance window a
// revision waits, the status naming when the window opens; the window opens
// during the test and the revision is applied without any other event. The
// agent's clock stands an hour before the window until the wait is seen,
// then 2 s before it: however slow the machine, the wait is observed before
// the window opens, and the window opens by the clock alone.
func TestAgentAppliesWhenItsWindowOpens(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	wall := time.Now()
	next := time.Date(wall.Year(), wall.Month(), wall.Day(), 22, 0, 0, 0, time.UTC)
	if !next.After(wall) {
		next = next.Add(24 * time.Hour)
	}
	var offset atomic.Int64 // the agent's clock minus the wall clock
	setClock := func(at time.Time) { offset.Store(int64(time.Until(at))) }
	setClock(next.Add(-time.Hour))
	cp, h, a, _ := gtAgent(t, "window-node", func(a *rtAgent) {
		a.rec.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})

	spec := h.rtSpec("r2", 26)
	spec.ApplyPolicy = &v1alpha1.NodeApplyPolicy{Windows: []v1alpha1.ProfileWindows{{Profile: "night",
		Windows: []v1alpha1.MaintenanceWindow{{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}}}}
	rtUpdateSpec(t, cp.Client, a.node, spec)
	nnt := gtDeferred(t, cp.Client, a.node, "r2", "r1", gate.ReasonOutsideWindow)
	if w := nnt.Status.Gate.NextWindow; w == nil || !w.Time.Equal(next) {
		t.Errorf("status.gate.nextWindow %v, want %s", w, next)
	}
	rtAssertKernelRoute(t, h, 30)
	setClock(next.Add(-2 * time.Second))
	gtApplied(t, cp.Client, a.node, "r2")
	rtAssertKernelRoute(t, h, 26)
	if at := a.rec.Now(); at.Before(next) {
		t.Errorf("r2 applied at %s by the agent's clock, before its window opened at %s", at, next)
	}
}

// closingProber closes the gate while the apply runs (during its post-apply
// probe), then probes as the agent does.
type closingProber struct {
	path   string
	t      *testing.T
	closed atomic.Bool
	Prober
}

func (p *closingProber) Probe(ctx context.Context, host *kernel.Handle, spec v1alpha1.NodeNetTuningSpec) error {
	if spec.Revision == "r2" && !p.closed.Load() {
		writeGate(p.t, p.path, "closed driving off mid-apply")
		p.closed.Store(true)
	}
	return p.Prober.Probe(ctx, host, spec)
}

// TestAgentFinishesAnApplyTheGateClosesMidway: the gate is read once, before an
// apply starts; closing it while the apply runs (here during the post-apply
// probe, after the routes were written) does not stop the transaction
// halfway: the revision commits whole, and the next revision waits.
func TestAgentFinishesAnApplyTheGateClosesMidway(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	path := gtGateFile(t, "open")
	var prober *closingProber
	cp, h, a, _ := gtAgent(t, "midway-node", func(a *rtAgent) {
		prober = &closingProber{path: path, t: t, Prober: a.engine.Probes}
		a.engine.Probes = prober
		a.rec.Gate = &gate.File{Path: path}
	})

	rtUpdateSpec(t, cp.Client, a.node, h.rtSpec("r2", 26))
	gtApplied(t, cp.Client, a.node, "r2")
	if !prober.closed.Load() {
		t.Fatal("the gate was never closed during the apply: the test proves nothing")
	}
	rtAssertKernelRoute(t, h, 26)
	nnt := rtGet(t, cp.Client, a.node)
	rtCond(t, nnt, v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified")

	rtUpdateSpec(t, cp.Client, a.node, h.rtSpec("r3", 28))
	gtDeferred(t, cp.Client, a.node, "r3", "r2", gate.ReasonGateClosed)
	rtAssertKernelRoute(t, h, 26)
}
