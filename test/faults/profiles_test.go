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
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

// sysctlSpec is a profile of one sysctl on every host.
func sysctlSpec(value string, rollout *v1alpha1.RolloutSpec) v1alpha1.NetTuningProfileSpec {
	return v1alpha1.NetTuningProfileSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "xavier"}},
		Sysctls:      []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_notsent_lowat", Value: value}},
		Rollout:      rollout,
	}
}

func sysctlOn(t *testing.T, vehicle, host string) string {
	t.Helper()
	ns := f.Vehicles[vehicle].Host(host).Netns
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/sys/net/ipv4/tcp_notsent_lowat").CombinedOutput()
	if err != nil {
		t.Fatalf("reading tcp_notsent_lowat in %s: %v: %s", ns, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTwoProfilesEditedAtOnce edits two profiles that tune the same nodes
// (one the routes, one a sysctl) in the same instant, each a staged rollout
// from a different canary: both complete, and every node ends with both new
// revisions in its NodeNetTuning and in its kernel.
func TestTwoProfilesEditedAtOnce(t *testing.T) {
	const routes, sysctls = "fault-two-routes", "fault-two-sysctl"
	var outcome, conv string
	record(t, "two profiles on the same nodes (routes; a sysctl) edited in the same instant, staged from different canaries",
		"hosts sampled throughout; both rollouts complete; every node's NodeNetTuning carries both new revisions, verified; every host's routes and sysctl carry them",
		func() (string, string) { return outcome, conv })
	start(t, routes, 15)
	remove(t, sysctls)
	put(t, sysctls, sysctlSpec("131072", allAtOnce()))
	s1 := healthy(t, sysctls, 2*time.Minute)
	watchHosts(t)

	pause := v1alpha1.RolloutStep{Pause: &v1alpha1.PauseStep{Duration: &metav1.Duration{Duration: 5 * time.Second}}}
	var wg sync.WaitGroup
	edits := []func(){
		func() { put(t, routes, spec(16, staged([]string{"av-001"}, pause, toFleet()))) },
		func() { put(t, sysctls, sysctlSpec("65536", staged([]string{"av-002"}, pause, toFleet()))) },
	}
	began := time.Now()
	for _, e := range edits {
		wg.Add(1)
		go func() { defer wg.Done(); e() }()
	}
	wg.Wait()
	r2 := healthy(t, routes, 3*time.Minute)
	var s2 string
	waitFor(t, 3*time.Minute, sysctls+" Healthy on a new revision", func() bool {
		p := getProfile(t, sysctls)
		s2 = p.Status.StableRevision
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy && s2 != s1 && s2 == p.Status.CurrentRevision
	})
	waitFor(t, time.Minute, "every node on both new revisions", func() bool {
		if !converged(t, routes, r2, 16) {
			return false
		}
		for _, n := range nodes(t) {
			if fleetmodel.AssignedRevision(&n, sysctls) != s2 {
				return false
			}
		}
		for _, v := range vehicles {
			for _, h := range hosts {
				if sysctlOn(t, v, h) != "65536" {
					return false
				}
			}
		}
		return true
	})
	conv = round(time.Since(began)) + " from the two edits"
	outcome = fmt.Sprintf("both rollouts completed (%s, %s); every node on both", r2, s2)
}
