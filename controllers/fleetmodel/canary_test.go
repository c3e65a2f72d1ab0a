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

package fleetmodel

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestCanaryCount(t *testing.T) {
	node := func(hw, ring string) []*corev1.Node {
		return []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.DefaultHardwareLabel: hw, "ring": ring}}}}
	}
	f := &Fleet{HardwareLabel: v1alpha1.DefaultHardwareLabel, Vehicles: map[string][]*corev1.Node{
		"av-1": node("xavier", "0"), "av-2": node("xavier", "1"), "av-3": node("orin", "1"), "av-4": node("orin", "1"),
	}}
	count := func(n int32) *v1alpha1.NetTuningProfile {
		return &v1alpha1.NetTuningProfile{Spec: v1alpha1.NetTuningProfileSpec{Rollout: &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: &n}}}}
	}
	for _, c := range []struct {
		name     string
		p        *v1alpha1.NetTuningProfile
		excluded map[string]bool
		want     int
	}{
		{"count raised to the hardware models", count(1), nil, 2},
		{"count", count(3), nil, 3},
		{"count at most the fleet", count(9), map[string]bool{"av-4": true}, 3},
		{"excluded model", count(1), map[string]bool{"av-3": true, "av-4": true}, 1},
		{"by name, selected ones", &v1alpha1.NetTuningProfile{Spec: v1alpha1.NetTuningProfileSpec{Rollout: &v1alpha1.RolloutSpec{
			Canary: v1alpha1.CanarySpec{Vehicles: []string{"av-1", "av-9", "av-2"}}}}}, map[string]bool{"av-2": true}, 1},
		{"by selector", &v1alpha1.NetTuningProfile{Spec: v1alpha1.NetTuningProfileSpec{Rollout: &v1alpha1.RolloutSpec{
			Canary: v1alpha1.CanarySpec{Selector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"ring": "1"}}}}}}, nil, 3},
		{"a rollout in progress", func() *v1alpha1.NetTuningProfile {
			p := count(1)
			p.Status.CanaryVehicles = []string{"av-1", "av-2", "av-3"}
			return p
		}(), nil, 3},
		{"no rollout", &v1alpha1.NetTuningProfile{}, nil, 0},
	} {
		if got := CanaryCount(c.p, f, c.excluded); got != c.want {
			t.Errorf("%s: %d canary vehicles, want %d", c.name, got, c.want)
		}
	}
}
