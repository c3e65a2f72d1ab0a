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
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func node(name, vehicle, hw string, extra map[string]string) corev1.Node {
	l := map[string]string{"role": "av"}
	if vehicle != "" {
		l[v1alpha1.DefaultVehicleLabel] = vehicle
	}
	if hw != "" {
		l[v1alpha1.DefaultHardwareLabel] = hw
	}
	for k, v := range extra {
		l[k] = v
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// avFleet is a profile selecting role=av and the nodes it is tried on: two
// vehicles of two nodes, a node that names no vehicle and one the profile
// does not select.
func avFleet() (*v1alpha1.NetTuningProfile, []corev1.Node) {
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"role": "av"}}
	nodes := []corev1.Node{
		node("av-2-b", "av-2", "orin", map[string]string{"zone": "x"}),
		node("av-2-a", "av-2", "xavier", map[string]string{"zone": "x"}),
		node("av-1-a", "av-1", "xavier", map[string]string{"zone": "x"}),
		node("av-1-b", "av-1", "xavier", map[string]string{"zone": "y"}),
		node("stray", "", "xavier", nil),
		{ObjectMeta: metav1.ObjectMeta{Name: "other", Labels: map[string]string{v1alpha1.DefaultVehicleLabel: "av-9"}}},
	}
	return p, nodes
}

func TestSelect(t *testing.T) {
	p, nodes := avFleet()
	f, err := Select(p, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Vehicles) != 2 || f.Vehicles["av-2"][0].Name != "av-2-a" || !reflect.DeepEqual(f.Unlabelled, []string{"stray"}) {
		t.Fatalf("fleet %+v", f)
	}
	if f.VehicleOf("av-1-b") != "av-1" || f.VehicleOf("other") != "" {
		t.Errorf("VehicleOf: %q %q", f.VehicleOf("av-1-b"), f.VehicleOf("other"))
	}

	p.Spec.NodeSelector = &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "role", Operator: "Bogus"}}}
	if _, err := Select(p, nodes); err == nil {
		t.Error("a bad selector was accepted")
	}
}
