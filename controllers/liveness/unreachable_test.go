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

package liveness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/agent"
	"github.com/nettune/nettune/node-agent/agent/crlease"
	"github.com/nettune/nettune/test/framework/envtest"
)

// TestLeaseLiveness: the agents renew their Leases (the node agent's own
// LeaseKeeper) with clocks 10 minutes ahead (av-1) and 10 minutes behind
// (av-2); their status is never rewritten to say they are alive. While they
// renew, no vehicle is Unreachable (a controller reading the vehicles'
// renewTime would call av-2 silent for 10 minutes); once av-1 and av-2 stop
// renewing they turn Unreachable unreachableAfter later by the controller's
// clock, and av-1 is reachable again as soon as it renews.
func TestLeaseLiveness(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", "av-1", "av-2", "av-3")
	const after = 4 * time.Second
	createLivenessProfile(t, e, after)
	skew := map[string]time.Duration{"av-1": 10 * time.Minute, "av-2": -10 * time.Minute, "av-3": 0}
	var mu sync.Mutex
	stopped := map[string]bool{}
	renew := func(ctx context.Context, vehicle, node string) {
		k := &agent.LeaseKeeper{Client: crlease.Client{C: e.Client}, Namespace: envtest.Namespace, Node: node,
			Now: func() time.Time { return time.Now().Add(skew[vehicle]) }}
		for ctx.Err() == nil {
			mu.Lock()
			off := stopped[vehicle]
			mu.Unlock()
			if !off {
				if err := k.RenewOnce(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("renewing %s: %v", node, err)
				}
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for v := range skew {
		for _, h := range []string{"xavier-a", "xavier-b"} {
			wg.Add(1)
			go func() { defer wg.Done(); renew(ctx, v, v+"-"+h) }()
		}
	}
	// Liveness is the Lease alone: the simulated agents' status heartbeats
	// stop once every vehicle verified.
	e.WaitProfile("lan", time.Minute, "healthy on every vehicle", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.Vehicles.Verified == 3
	})
	for v := range skew {
		e.SetOffline(v, true)
	}

	// Several unreachableAfter periods of skewed renewals: all reachable.
	for end := time.Now().Add(3 * after); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n := e.Profile("lan").Status.Vehicles.Unreachable; n != 0 {
			t.Fatalf("%d vehicle(s) Unreachable while every agent renews its Lease (clocks skewed by +-10m)", n)
		}
	}
	lease := &coordinationv1.Lease{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: envtest.Namespace, Name: "av-2-xavier-a"}, lease); err != nil {
		t.Fatal(err)
	}
	if lag := time.Since(lease.Spec.RenewTime.Time); lag < 9*time.Minute || lease.Labels[v1alpha1.AgentLeaseLabel] != "av-2-xavier-a" {
		t.Fatalf("av-2's lease renewTime is %s behind with labels %v: the skew did not reach the lease", lag, lease.Labels)
	}

	mu.Lock()
	stopped["av-1"], stopped["av-2"] = true, true
	mu.Unlock()
	silent := time.Now()
	// The last renewal was at most 500 ms before silent: Unreachable is due
	// between after-0.5s and after plus the timer's second and a reconcile.
	e.WaitProfile("lan", after+10*time.Second, "av-1 and av-2 Unreachable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Vehicles.Unreachable == 2
	})
	took := time.Since(silent)
	t.Logf("renewals stopped -> 2 vehicles Unreachable in %s (unreachableAfter %s)", took.Round(10*time.Millisecond), after)
	if took < after-time.Second {
		t.Errorf("Unreachable after %s, before unreachableAfter %s", took, after)
	}
	if took > after+5*time.Second {
		t.Errorf("Unreachable only after %s (unreachableAfter %s)", took, after)
	}

	mu.Lock()
	stopped["av-1"] = false
	mu.Unlock()
	back := time.Now()
	e.WaitProfile("lan", 10*time.Second, "av-1 reachable again", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Vehicles.Unreachable == 1
	})
	t.Logf("av-1 renewing again -> reachable in %s", time.Since(back).Round(10*time.Millisecond))

	// Silent again: the timer, which had passed every deadline, must have
	// learned av-1's new one.
	mu.Lock()
	stopped["av-1"] = true
	mu.Unlock()
	again := time.Now()
	e.WaitProfile("lan", after+10*time.Second, "av-1 Unreachable again", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Vehicles.Unreachable == 2
	})
	t.Logf("av-1 silent again -> Unreachable in %s", time.Since(again).Round(10*time.Millisecond))
}

// TestStatusHeartbeatLiveness: agents that keep no Lease (an older agent)
// are judged by their status heartbeats; the fleet's timer must wake the
// profile when one of them goes silent, though heartbeats alone wake
// nothing.
func TestStatusHeartbeatLiveness(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", "av-1", "av-2")
	const after = 5 * time.Second
	createLivenessProfile(t, e, after)
	e.WaitProfile("lan", time.Minute, "healthy on every vehicle", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.Vehicles.Verified == 2
	})
	// The simulated agents heartbeat every 2 s: nobody is Unreachable.
	for end := time.Now().Add(2 * after); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if n := e.Profile("lan").Status.Vehicles.Unreachable; n != 0 {
			t.Fatalf("%d vehicle(s) Unreachable while every agent heartbeats", n)
		}
	}
	e.SetOffline("av-2", true)
	silent := time.Now()
	e.WaitProfile("lan", after+15*time.Second, "av-2 Unreachable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Vehicles.Unreachable == 1
	})
	t.Logf("heartbeats stopped -> Unreachable in %s (unreachableAfter %s, heartbeat every 2 s)", time.Since(silent).Round(10*time.Millisecond), after)
}

// createLivenessProfile creates profile "lan" on the xavier vehicles with
// the given unreachableAfter (one canary, then every vehicle).
func createLivenessProfile(t *testing.T, e *envtest.Fleet, after time.Duration) {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: v1alpha1.NetTuningProfileSpec{
			NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "xavier"}},
			Defaults:     &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 30}},
			Rollout: &v1alpha1.RolloutSpec{UnreachableAfter: envtest.Dur(after), Canary: v1alpha1.CanarySpec{Count: envtest.Ptr(int32(1))},
				Steps: []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: envtest.Ptr(int32(100))}}}},
		},
	}
	if err := e.Client.Create(e.Ctx, p); err != nil {
		t.Fatal(err)
	}
}
