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

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/fleet"
)

// vehicleNodes are the NodeNetTunings of one vehicle.
func vehicleNodes(t *testing.T, vehicle string) []v1alpha1.NodeNetTuning {
	t.Helper()
	var out []v1alpha1.NodeNetTuning
	for _, n := range nodes(t) {
		if vehicleOf(n.Name) == vehicle {
			out = append(out, n)
		}
	}
	return out
}

// vehicleDeferred says why a vehicle's nodes do not hold rev yet: "" when
// every node holds rev back with the given reason (Deferred condition,
// status.gate.pendingRevision) and still applies another revision.
func vehicleDeferred(t *testing.T, vehicle, rev, reason string) string {
	ns := vehicleNodes(t, vehicle)
	if len(ns) == 0 {
		return "no NodeNetTunings"
	}
	for i := range ns {
		n := &ns[i]
		if fleetmodel.AssignedRevision(n, profile) != rev {
			return fmt.Sprintf("%s not rendered with %s yet", n.Name, rev)
		}
		deferred, _, why := fleetmodel.NodeDeferred(n)
		if !deferred || why != reason {
			return fmt.Sprintf("%s: deferred=%t reason %q, want %s (gate %+v)", n.Name, deferred, why, reason, n.Status.Gate)
		}
		if n.Status.AppliedRevision == n.Spec.Revision {
			return fmt.Sprintf("%s applied %s although deferred", n.Name, n.Status.AppliedRevision)
		}
	}
	return ""
}

// vehicleVerified says whether every node of a vehicle verified rev.
func vehicleVerified(t *testing.T, vehicle, rev string) bool {
	t.Helper()
	ok, err := f.VehicleVerified(context.Background(), vehicle, profile, rev)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// gateClosedOnAgents says whether every agent of the vehicle reads its
// gate as closed (its nettune_agent_apply_gate_open gauge), straight from
// the agents, without the API server.
func gateClosedOnAgents(vehicle string) error {
	for _, h := range f.Vehicles[vehicle].Hosts {
		node := fleet.NodeName(vehicle, h.Name)
		body, err := httpGet(context.Background(), http.DefaultClient, "http://"+f.AgentMetrics(node)+"/metrics", nil)
		if err != nil {
			return err
		}
		if l := gaugeLine(body, "nettune_agent_apply_gate_open"); !strings.HasSuffix(l, " 0") {
			return fmt.Errorf("%s: %s", node, l)
		}
	}
	return nil
}

func gaugeLine(metrics, name string) string {
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return name + " absent"
}

// waitWhy waits until why returns "", failing with its last answer.
func waitWhy(t *testing.T, timeout time.Duration, what string, why func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		w := why()
		if w == "" {
			return
		}
		if time.Now().After(deadline) {
			out, _ := f.Plugin(context.Background(), "status", profile)
			t.Fatalf("timed out after %s waiting for %s: %s\n%s", timeout, what, w, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// withRollout gives p a rollout when it has none (the stable sample has
// none), keeping the one it has.
func withRollout(p *v1alpha1.NetTuningProfile) {
	if p.Spec.Rollout == nil {
		p.Spec.Rollout = &v1alpha1.RolloutSpec{}
	}
}

func setGate(t *testing.T, vehicle, content string) {
	t.Helper()
	if err := f.SetGate(vehicle, content); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s gate: %s", vehicle, content)
}

// testGates: vehicles apply only while the vehicle says it is safe. Each
// edit sets an ssthresh no other subtest uses (21 down to 18): content
// equal to the stable or a failed revision starts no rollout.
func testGates(t *testing.T) {
	const driving = "av-004"
	// Every subtest opens the gates it closed, passed or not: a gate left
	// closed would hold the next subtest's revision.
	openAfter := func(t *testing.T, vehicle string) {
		t.Cleanup(func() {
			if err := f.SetGate(vehicle, "open"); err != nil {
				t.Error(err)
			}
		})
	}

	t.Run("a driving vehicle stays on its revision while the rest take the new one, and applies once its gate opens", func(t *testing.T) {
		stable := getProfile(t).Status.StableRevision
		openAfter(t, driving)
		setGate(t, driving, "closed driving autonomously")
		edit(t, func(p *v1alpha1.NetTuningProfile) {
			withRollout(p)
			p.Spec.HostPairs = nil
			p.Spec.Defaults.Ssthresh = ptr(int32(21))
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-001"}}
			p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}}}
			p.Spec.Rollout.Apply = &v1alpha1.ApplyPolicy{DeferredTimeout: &metav1.Duration{Duration: 20 * time.Second}}
			// The defaults again (an earlier subtest shortened them): the
			// plugin judges a vehicle by its status heartbeat, and a
			// deferred vehicle's status is not rewritten while it waits.
			p.Spec.Rollout.UnreachableAfter, p.Spec.Rollout.UnreachableTimeout = nil, nil
		})
		began := time.Now()
		sawDeferred := false
		p := waitProfile(t, 3*time.Minute, "stable without the driving vehicle", func(p *v1alpha1.NetTuningProfile) bool {
			if p.Status.CurrentRevision != stable && p.Status.Vehicles.Deferred == 1 {
				sawDeferred = true
			}
			stopOn(t, p, v1alpha1.PhaseRolledBack, "the rollout was rolled back")
			return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.CurrentRevision != stable
		})
		rev := p.Status.StableRevision
		t.Logf("rollout completed without %s after %s (deferredTimeout 20s)", driving, time.Since(began).Round(time.Second))
		if !sawDeferred {
			t.Errorf("status.vehicles.deferred was never 1 while %s held %s back", driving, rev)
		}
		if p.Status.Vehicles.Failed != 0 || p.Status.Vehicles.Unreachable != 0 {
			t.Errorf("vehicles %+v: the driving vehicle must be neither failed nor unreachable", p.Status.Vehicles)
		}
		if why := vehicleDeferred(t, driving, rev, "GateClosed"); why != "" {
			t.Fatalf("%s is not shown Deferred on %s: %s", driving, rev, why)
		}
		assertRoutes(t, "ssthresh lock 21", func(vehicle, host, route string) bool { return vehicle != driving })
		for _, h := range f.Vehicles[driving].Hosts {
			if out, err := f.Routes(driving, h.Name); err != nil || strings.Contains(out, "ssthresh lock 21") {
				t.Errorf("%s/%s took the new revision with its gate closed (%v):\n%s", driving, h.Name, err, out)
			}
		}
		out, _ := f.Plugin(context.Background(), "status", profile)
		t.Logf("kubectl nettune status %s:\n%s", profile, out)
		if !strings.Contains(out, "Deferred (GateClosed)") || !strings.Contains(out, "1 deferred") {
			t.Errorf("the plugin's status does not show %s Deferred (GateClosed) and 1 deferred", driving)
		}

		opened := time.Now()
		setGate(t, driving, "open parked at the depot")
		waitFor(t, time.Minute, driving+" verifies "+rev+" once its gate opens", func() bool { return vehicleVerified(t, driving, rev) })
		t.Logf("%s verified %s %s after its gate opened", driving, rev, time.Since(opened).Round(time.Millisecond))
		assertRoutes(t, "ssthresh lock 21", nil)
	})

	t.Run("a gate closed while the vehicle is cut off from the API server holds the next revision", func(t *testing.T) {
		stable := getProfile(t).Status.StableRevision
		restore, err := f.CutAPIServer()
		if err != nil {
			t.Fatal(err)
		}
		restored := false
		defer func() {
			if !restored {
				_ = restore()
			}
		}()
		openAfter(t, driving)
		setGate(t, driving, "closed driving, no connectivity")
		waitFor(t, 30*time.Second, "every agent of "+driving+" to read its gate closed while offline", func() bool { return gateClosedOnAgents(driving) == nil })
		if err := restore(); err != nil {
			t.Fatal(err)
		}
		restored = true
		edit(t, func(p *v1alpha1.NetTuningProfile) {
			withRollout(p)
			p.Spec.Defaults.Ssthresh = ptr(int32(20))
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{driving}}
			p.Spec.Rollout.Steps = nil
		})
		var rev string
		waitWhy(t, 2*time.Minute, driving+" holds the next revision back", func() string {
			if rev = getProfile(t).Status.CurrentRevision; rev == stable {
				return "no rollout started"
			}
			return vehicleDeferred(t, driving, rev, "GateClosed")
		})
		for _, h := range f.Vehicles[driving].Hosts {
			if out, err := f.Routes(driving, h.Name); err != nil || strings.Contains(out, "ssthresh lock 20") {
				t.Errorf("%s/%s took %s with its gate closed (%v):\n%s", driving, h.Name, rev, err, out)
			}
		}
		setGate(t, driving, "open")
		p := waitProfile(t, 2*time.Minute, rev+" stable once the canary's gate opened", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision == rev
		})
		waitFor(t, time.Minute, "every node verified "+rev, func() bool { return allVerified(t, rev) })
		assertRoutes(t, "ssthresh lock 20", nil)
		if p.Status.Vehicles.Deferred != 0 {
			t.Errorf("deferred vehicles %d after every gate opened", p.Status.Vehicles.Deferred)
		}
	})

	t.Run("a revision waits for its maintenance window and applies once it opens", func(t *testing.T) {
		stable := getProfile(t).Status.StableRevision
		// A window opening at the next whole minute at least 20 s away,
		// in UTC, open for 10 minutes.
		start := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
		if time.Until(start) < 20*time.Second {
			start = start.Add(time.Minute)
		}
		schedule := fmt.Sprintf("%d %d * * *", start.Minute(), start.Hour())
		edit(t, func(p *v1alpha1.NetTuningProfile) {
			withRollout(p)
			p.Spec.Defaults.Ssthresh = ptr(int32(19))
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-001"}}
			p.Spec.Rollout.Apply = &v1alpha1.ApplyPolicy{DeferredTimeout: &metav1.Duration{Duration: 5 * time.Minute},
				MaintenanceWindows: []v1alpha1.MaintenanceWindow{{Schedule: schedule, Duration: metav1.Duration{Duration: 10 * time.Minute}, TimeZone: "UTC"}}}
		})
		var rev string
		waitWhy(t, time.Minute, "the canary waits for its window", func() string {
			if rev = getProfile(t).Status.CurrentRevision; rev == stable {
				return "no rollout started"
			}
			return vehicleDeferred(t, "av-001", rev, "OutsideWindow")
		})
		for _, n := range vehicleNodes(t, "av-001") {
			if g := n.Status.Gate; g.NextWindow == nil || !g.NextWindow.Time.Equal(start) {
				t.Errorf("%s: status.gate.nextWindow %v, want %s", n.Name, g.NextWindow, start)
			}
		}
		t.Logf("schedule %q UTC: %s waits %s for its window", schedule, rev, time.Until(start).Round(time.Second))
		p := waitProfile(t, 4*time.Minute, rev+" stable once the window opened", func(p *v1alpha1.NetTuningProfile) bool {
			stopOn(t, p, v1alpha1.PhaseRolledBack, "the rollout was rolled back")
			return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision == rev
		})
		waitFor(t, time.Minute, "every node verified "+rev, func() bool { return allVerified(t, rev) })
		for _, n := range nodes(t) {
			if v := n.Status.VerifiedTime; v == nil || v.Time.Before(start.Add(-time.Second)) {
				t.Errorf("%s verified %s at %v, before its window opened at %s", n.Name, rev, v, start)
			}
		}
		t.Logf("%s stable %s after the window opened", p.Status.StableRevision, time.Since(start).Round(time.Second))
	})

	t.Run("a rollback is applied at once on a vehicle whose gate is closed", func(t *testing.T) {
		stable := getProfile(t).Status.StableRevision
		edit(t, func(p *v1alpha1.NetTuningProfile) {
			withRollout(p)
			p.Spec.Defaults.Ssthresh = ptr(int32(18))
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{"av-001"}}
			p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}}
			p.Spec.Rollout.Apply = nil
		})
		var rev string
		waitFor(t, 2*time.Minute, "the canary verified the new revision", func() bool {
			p := getProfile(t)
			rev = p.Status.CurrentRevision
			return rev != stable && p.Status.Phase == v1alpha1.PhasePaused && vehicleVerified(t, "av-001", rev)
		})
		openAfter(t, "av-001")
		setGate(t, "av-001", "closed driving autonomously")
		waitFor(t, 30*time.Second, "av-001's agents read their gate closed", func() bool { return gateClosedOnAgents("av-001") == nil })
		rolled := time.Now()
		plugin(t, "abort", profile)
		p := waitProfile(t, time.Minute, "aborted", func(p *v1alpha1.NetTuningProfile) bool { return p.Status.Phase == v1alpha1.PhaseRolledBack })
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Reason != "Aborted" {
			t.Errorf("RolledBack condition %+v, want Aborted", c)
		}
		waitFor(t, time.Minute, "av-001 back on "+stable+" with its gate closed", func() bool { return vehicleVerified(t, "av-001", stable) })
		t.Logf("av-001 rolled back to %s %s after the abort, gate closed", stable, time.Since(rolled).Round(time.Millisecond))
		for _, n := range vehicleNodes(t, "av-001") {
			if a := n.Spec.ApplyPolicy; a == nil || !strings.Contains(a.Immediate, "rollback of profile "+profile) {
				t.Errorf("%s: spec.applyPolicy %+v, want immediate naming the rollback", n.Name, a)
			}
		}
		assertRoutes(t, "ssthresh lock 19", func(vehicle, host, route string) bool { return vehicle == "av-001" })
		setGate(t, "av-001", "open")
	})
}
