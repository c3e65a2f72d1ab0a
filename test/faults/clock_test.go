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

package faults

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/fleet"
)

// skewAgents restarts a vehicle's agents with their clocks off by skew
// (their Lease renewals, status and journal times); the test's end puts
// them back.
func skewAgents(t *testing.T, vehicle string, skew time.Duration) {
	t.Helper()
	restart := func(args ...string) {
		for _, h := range hosts {
			node := fleet.NodeName(vehicle, h)
			f.SetAgentArgs(node, args...)
			if err := f.StopAgent(node); err != nil {
				t.Error(err)
			}
		}
		if err := f.StartAgents(vehicle); err != nil {
			t.Error(err)
		}
	}
	restart("--clock-skew", skew.String())
	t.Cleanup(func() { restart() })
}

// TestVehicleClockSkew runs a staged rollout whose canary's clock is 10
// minutes ahead and another vehicle's 10 minutes behind, with a pause longer
// than unreachableAfter: no vehicle is ever counted Unreachable, no step
// waits for one, and the rollout completes.
func TestVehicleClockSkew(t *testing.T) {
	const name = "fault-clock"
	var outcome, conv string
	record(t, "vehicle clocks 10 minutes ahead (the canary) and 10 minutes behind",
		"hosts sampled throughout; status.vehicles.unreachable 0 at every poll through a pause longer than unreachableAfter (15 s); the rollout completes; every node verifies the new revision",
		func() (string, string) { return outcome, conv })
	skewAgents(t, "av-002", 10*time.Minute)
	skewAgents(t, "av-003", -10*time.Minute)
	start(t, name, 33)
	watchHosts(t)
	pause := v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{Duration: &metav1.Duration{Duration: 25 * time.Second}}}
	put(t, name, spec(34, staged([]string{"av-002"}, pause, toFleet())))
	began := time.Now()
	polls := 0
	p := waitProfile(t, name, 3*time.Minute, "Healthy on a new revision", func(p *v1alpha1.NetTuningProfile) bool {
		polls++
		if p.Status.Vehicles.Unreachable != 0 {
			t.Fatalf("%d vehicle(s) counted Unreachable with skewed clocks (step %v, phase %s)", p.Status.Vehicles.Unreachable, p.Status.CurrentStep, p.Status.Phase)
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy &&
			p.Status.StableRevision == p.Status.CurrentRevision && p.Status.StableRevision != ""
	})
	took := time.Since(began)
	if took < 25*time.Second {
		t.Errorf("the rollout completed in %s, inside its 25 s pause", round(took))
	}
	waitFor(t, time.Minute, "every node on "+p.Status.StableRevision, func() bool { return converged(t, name, p.Status.StableRevision, 34) })
	conv = round(took) + " from the edit (25 s of it the pause)"
	outcome = fmt.Sprintf("no vehicle Unreachable in %d polls; the rollout completed", polls)
}
