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
	"os"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/fleet"
)

// outage is how long the API server stays down (NETTUNE_FAULTS_OUTAGE,
// default 2m).
func outage(t *testing.T) time.Duration {
	if v := os.Getenv("NETTUNE_FAULTS_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NETTUNE_FAULTS_OUTAGE: %v", err)
		}
		return d
	}
	return 2 * time.Minute
}

// canaryThenFleet: av-001 first, a pause, then every vehicle.
func canaryThenFleet(pause time.Duration) *v1alpha1.RolloutSpec {
	return staged([]string{"av-001"}, v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{Duration: &metav1.Duration{Duration: pause}}}, toFleet())
}

// flushRoutes removes a host's routes as a reboot would.
func flushRoutes(t *testing.T, vehicle, host string) {
	t.Helper()
	ns := f.Vehicles[vehicle].Host(host).Netns
	if out, err := exec.Command("ip", "-n", ns, "route", "flush", "proto", "static").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s route flush proto static: %v: %s", ns, err, out)
	}
}

// TestAPIServerDown cuts the API server off for two minutes in the middle of
// a step (the canary on the new revision, the rest of the fleet waiting):
// agents keep their state, two agents restarted meanwhile (one canary host,
// one not) boot from their last-known-good without it, and the controller
// resumes the step when it is back.
func TestAPIServerDown(t *testing.T) {
	const name = "fault-apiserver"
	down := outage(t)
	var outcome, conv string
	record(t, fmt.Sprintf("API server down %s in the middle of a step; two agents restarted (routes flushed) meanwhile", down),
		"hosts sampled throughout; restarted agents' routes back from last-known-good while the API server is down; no vehicle moves while it is down; the step resumes and every node verifies the new revision",
		func() (string, string) { return outcome, conv })
	remove(t, name)
	put(t, name, spec(20, allAtOnce()))
	r1 := healthy(t, name, 2*time.Minute)
	waitFor(t, time.Minute, "every node on "+r1, func() bool { return converged(t, name, r1, 20) })
	watchHosts(t)

	put(t, name, spec(21, canaryThenFleet(30*time.Second)))
	var r2 string
	waitFor(t, 2*time.Minute, "the canary av-001 verified on the new revision", func() bool {
		p := getProfile(t, name)
		r2 = p.Status.CurrentRevision
		return r2 != r1 && vehicleVerified(t, "av-001", name, r2) && hostsOn(t, "av-001", 21) == len(hosts)
	})
	if p := getProfile(t, name); p.Status.CurrentStep == nil || *p.Status.CurrentStep != 0 {
		t.Fatalf("want the rollout of %s at step 0 (the pause), have step %v", r2, p.Status.CurrentStep)
	}

	restore, err := f.CutAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	}()
	cut := time.Now()
	t.Logf("API server cut off at step 0 of %s", r2)
	// A reboot of one canary host and one other host while it is down.
	for _, n := range []struct{ vehicle, host string }{{"av-001", "xavier-b"}, {"av-002", "xavier-b"}} {
		if err := f.StopAgent(fleet.NodeName(n.vehicle, n.host)); err != nil {
			t.Fatal(err)
		}
		flushRoutes(t, n.vehicle, n.host)
		if err := f.StartAgents(n.vehicle); err != nil {
			t.Fatal(err)
		}
	}
	booted := waitFor(t, time.Minute, "the restarted agents restore their last-known-good", func() bool {
		return hostsOn(t, "av-001", 21) == len(hosts) && hostsOn(t, "av-002", 20) == len(hosts)
	})
	t.Logf("restarted agents restored their last-known-good in %s without the API server", round(booted))
	time.Sleep(time.Until(cut.Add(down)))
	for _, v := range []string{"av-002", "av-003"} {
		if n := hostsOn(t, v, 20); n != len(hosts) {
			t.Errorf("%s: %d of %d hosts on the stable revision at the end of the outage", v, n, len(hosts))
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("API server back after %s", round(back.Sub(cut)))
	// Every agent stayed alive through the outage: what the controller
	// could not observe is no silence of theirs.
	maxUnreachable := int32(0)
	p := waitProfile(t, name, 3*time.Minute, "Healthy after the outage", func(p *v1alpha1.NetTuningProfile) bool {
		if u := p.Status.Vehicles.Unreachable; u > maxUnreachable {
			maxUnreachable = u
			t.Errorf("%d vehicle(s) counted Unreachable %s after the API server returned (step %v, phase %s)",
				u, round(time.Since(back)), p.Status.CurrentStep, p.Status.Phase)
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy &&
			p.Status.StableRevision != "" && p.Status.StableRevision == p.Status.CurrentRevision
	})
	if r := p.Status.StableRevision; r != r2 {
		t.Fatalf("stable revision %s after the outage, want %s", r, r2)
	}
	waitFor(t, time.Minute, "every node on "+r2, func() bool { return converged(t, name, r2, 21) })
	conv = round(time.Since(back)) + " after the API server returned"
	outcome = fmt.Sprintf("restarted agents restored their last-known-good in %s while it was down; the step resumed and completed", round(booted))
}
