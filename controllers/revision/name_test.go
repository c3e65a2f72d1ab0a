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

package revision

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func b(v bool) *bool { return &v }
func dur(d string) *metav1.Duration {
	p, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: p}
}
func cwndLocked(v int32, lock bool) *v1alpha1.Cwnd { return &v1alpha1.Cwnd{Value: v, Lock: b(lock)} }

func TestHash(t *testing.T) {
	spec := v1alpha1.NodeNetTuningSpec{Routes: []v1alpha1.NodeRoute{{Destination: "192.168.10.12/32",
		Parameters: v1alpha1.TCPParameters{Cwnd: cwndLocked(30, true), RTOMin: dur("10ms")}}}}
	h := Hash(spec)
	if len(h) != 10 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("hash %q is not 10 lowercase hex characters", h)
	}
	// Golden (sha256 of the JSON
	// {"revision":"","routes":[{"destination":"192.168.10.12/32","parameters":{"cwnd":{"value":30,"lock":true},"rtoMin":"10ms"}}]},
	// checked with sha256sum): a change of encoding or algorithm would re-roll
	// every revision in the fleet.
	if want := "29688f5656"; h != want {
		t.Errorf("Hash = %s, want %s", h, want)
	}
	if Hash(spec.DeepCopy()) != h {
		t.Errorf("hash of an equal copy differs")
	}
	// Equal durations written differently hash the same.
	alt := spec.DeepCopy()
	alt.Routes[0].Parameters.RTOMin = &metav1.Duration{Duration: 10 * time.Millisecond}
	if Hash(alt) != h {
		t.Errorf("hash depends on how the duration was built")
	}
	if Hash(map[string]int{"a": 1, "b": 2}) != Hash(map[string]int{"b": 2, "a": 1}) {
		t.Errorf("map hash depends on insertion order")
	}
	for name, mod := range map[string]func(*v1alpha1.NodeNetTuningSpec){
		"cwnd":     func(s *v1alpha1.NodeNetTuningSpec) { s.Routes[0].Parameters.Cwnd.Value = 29 },
		"lock":     func(s *v1alpha1.NodeNetTuningSpec) { *s.Routes[0].Parameters.Cwnd.Lock = false },
		"rtoMin":   func(s *v1alpha1.NodeNetTuningSpec) { s.Routes[0].Parameters.RTOMin.Duration = 11 * time.Millisecond },
		"dest":     func(s *v1alpha1.NodeNetTuningSpec) { s.Routes[0].Destination = "192.168.10.13/32" },
		"quickack": func(s *v1alpha1.NodeNetTuningSpec) { s.Routes[0].Parameters.Quickack = b(false) },
		"sysctl": func(s *v1alpha1.NodeNetTuningSpec) {
			s.Sysctls = []v1alpha1.Sysctl{{Name: "net.core.somaxconn", Value: "1"}}
		},
	} {
		c := spec.DeepCopy()
		mod(c)
		if Hash(c) == h {
			t.Errorf("hash unchanged after changing %s", name)
		}
	}
}

func TestNameIgnoresTheRollout(t *testing.T) {
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	q := p.DeepCopy()
	q.Spec.Rollout = &v1alpha1.RolloutSpec{MaxUnavailable: nil}
	if Name(p) != Name(q) {
		t.Error("the rollout changed the revision")
	}
	q.Spec.VehicleLabel = "other"
	if Name(p) == Name(q) {
		t.Error("the content did not change the revision")
	}
}
