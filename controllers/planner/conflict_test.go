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

package planner_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/render"
)

// TestGoldenConflictingSecondProfile rolls a second profile out over a fleet
// that runs a first one. Both set the same sysctl at equal priority: on every
// vehicle the second reaches, the sysctl is applied by neither and the clash
// is reported; raising the second's priority (a new revision) settles it,
// vehicle by vehicle, as that revision rolls out.
func TestGoldenConflictingSecondProfile(t *testing.T) {
	first := &v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 30}},
		Sysctls:  []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_no_metrics_save", Value: "1"}},
	}
	second := &v1alpha1.NetTuningProfileSpec{
		Sysctls: []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_no_metrics_save", Value: "0"}},
	}
	raised := second.DeepCopy()
	raised.Priority = 10
	contents := map[string]*v1alpha1.NetTuningProfileSpec{"b1": second, "b2": raised}

	rollout := &v1alpha1.RolloutSpec{
		Canary:         v1alpha1.CanarySpec{Count: ptr(int32(1))},
		Steps:          []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(50))}}},
		MaxUnavailable: ptr(intstr.FromInt32(1)),
	}
	s := newSim(t, rollout, 4, 0, "")
	s.profile = "lan-b"
	s.revision = "b1"

	// Two hosts per vehicle.
	var nodes []render.Node
	for i := 1; i <= 4; i++ {
		for h, host := range []string{"xavier-a", "xavier-b"} {
			nodes = append(nodes, render.Node{
				Name:    fmt.Sprintf("av-%02d-%s", i, host),
				Labels:  map[string]string{v1alpha1.DefaultVehicleLabel: fmt.Sprintf("av-%02d", i), v1alpha1.DefaultHostLabel: host},
				Address: fmt.Sprintf("10.0.%d.%d", i, h+1), Device: "eth0",
			})
		}
	}
	renderFleet := func(assign map[string]string) string {
		var clash, sysctl []string
		for _, n := range nodes {
			in := []render.Input{{Profile: "lan-a", Revision: "a1", Spec: first}}
			if rev := assign[n.Labels[v1alpha1.DefaultVehicleLabel]]; rev != "" {
				in = append(in, render.Input{Profile: "lan-b", Revision: rev, Spec: contents[rev]})
			}
			res := render.Render(n, nodes, in)
			for _, c := range res.Conflicts {
				clash = append(clash, fmt.Sprintf("%s(%s %s: %s)", n.Name, c.Kind, c.Item, strings.Join(c.Profiles, "=")))
			}
			val := "-"
			for _, sc := range res.Spec.Sysctls {
				val = sc.Value
			}
			sysctl = append(sysctl, val)
			if len(res.Spec.Routes) != 1 {
				t.Errorf("%s: %d routes, want lan-a's host-pair route kept whatever the clash", n.Name, len(res.Spec.Routes))
			}
		}
		sort.Strings(clash)
		return fmt.Sprintf("    tcp_no_metrics_save per node: %s\n    conflicts: %s", strings.Join(sysctl, " "), or(strings.Join(clash, " "), "none"))
	}

	var clashed bool
	for i := 0; i < 8; i++ {
		if i == 4 {
			s.note("lan-b's priority raised to 10 (new revision b2)")
			s.revision = "b2"
		}
		out := s.tick(time.Minute)
		line := renderFleet(out.Assign)
		s.lines = append(s.lines, line)
		if i == 3 {
			clashed = strings.Contains(line, "conflicts: av-")
		}
	}
	if !clashed {
		t.Errorf("no conflict reported while equal-priority b1 was on vehicles")
	}
	if last := s.lines[len(s.lines)-1]; !strings.Contains(last, "conflicts: none") {
		t.Errorf("conflict left after the priority raise rolled out:\n%s", last)
	}
	s.golden("conflicting-second-profile")
}
