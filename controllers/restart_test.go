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
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/test/framework/envtest"
)

func leaseHolder(e *envtest.Fleet) string {
	l := &coordinationv1.Lease{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Namespace: envtest.Namespace, Name: "nettune-controller.nettune.io"}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLeaderHandoverResumesRollout: two replicas with leader election; the
// leader drives a rollout to an indefinite pause and is killed (its lease is
// not released); the standby takes over, keeps the canary cohort and step
// from the API objects, and finishes the rollout once promoted.
func TestLeaderHandoverResumesRollout(t *testing.T) {
	e := envtest.NewFleet(t)
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)
	stopA := e.StartController(envtest.ControllerOptions{LeaderElect: true})

	p := envtest.LanProfile(40, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	r1 := e.Settle(p)
	holderA := leaseHolder(e)
	if holderA == "" {
		t.Fatal("no leader lease after the first rollout")
	}
	e.StartController(envtest.ControllerOptions{LeaderElect: true}) // the standby

	r2 := e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		envtest.SetCwnd(p, 30)
		p.Spec.Rollout = &v1alpha1.RolloutSpec{
			Canary: v1alpha1.CanarySpec{Count: envtest.Ptr(int32(2))},
			Steps: []v1alpha1.RolloutStep{
				{Pause: &v1alpha1.PauseStep{}},
				{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: envtest.Ptr(int32(100))}},
			},
			MaxUnavailable: envtest.Ptr(envtest.IntOrString("2")),
		}
	})
	paused := e.WaitProfile("xavier-lan", 30*time.Second, "paused at step 0", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision == r2 && p.Status.Phase == v1alpha1.PhasePaused && p.Status.Vehicles.Verified == 2
	})
	canaries := strings.Join(paused.Status.CanaryVehicles, ",")

	stopA()
	waitLeaseChange(e, holderA, 30*time.Second)
	if err := e.Client.Patch(e.Ctx, paused, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+v1alpha1.PromoteAnnotation+`":"`+fleetmodel.PromoteValue(r2, 0, planner.RolloutStarted(&paused.Status, r2))+`"}}}`))); err != nil {
		t.Fatal(err)
	}
	final := e.WaitProfile("xavier-lan", 60*time.Second, "r2 stable after handover", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.StableRevision == r2
	})
	if got := strings.Join(final.Status.CanaryVehicles, ","); got != canaries {
		t.Errorf("canaries changed across the handover: %s -> %s", canaries, got)
	}
	e.AssertAllNodes(r2)
	outcomes := map[string]string{}
	for _, r := range final.Status.Revisions {
		outcomes[r.Name] = r.Outcome
	}
	if outcomes[r1] != v1alpha1.OutcomeSuperseded || outcomes[r2] != v1alpha1.OutcomeStable {
		t.Errorf("revision outcomes %v", outcomes)
	}
}

func waitLeaseChange(e *envtest.Fleet, from string, timeout time.Duration) {
	t := e.T()
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if h := leaseHolder(e); h != "" && h != from {
			t.Logf("lease moved from %s to %s", from, h)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("lease still held by %s after %s", from, timeout)
}
