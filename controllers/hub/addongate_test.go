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

package hub

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

func TestAddOnGateWhy(t *testing.T) {
	g := &AddOnGate{Name: "nettune", VersionLabel: "v", MinVersion: "0.2.0"}
	mca := func(avail metav1.ConditionStatus, version string) *addonv1alpha1.ManagedClusterAddOn {
		a := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "nettune", Labels: map[string]string{}}}
		if avail != "" {
			a.Status.Conditions = []metav1.Condition{{Type: "Available", Status: avail, Reason: "R"}}
		}
		if version != "" {
			a.Labels["v"] = version
		}
		return a
	}
	for _, tc := range []struct {
		name string
		a    *addonv1alpha1.ManagedClusterAddOn
		want string
	}{
		{"missing", nil, "not installed"},
		{"no health yet", mca("", "0.2.0"), "not Available: not reported"},
		{"lease stopped", mca(metav1.ConditionFalse, "0.2.0"), "not Available: False (R)"},
		{"no version", mca(metav1.ConditionTrue, ""), "not reported its version"},
		{"too old", mca(metav1.ConditionTrue, "0.1.9"), "runs 0.1.9, older than 0.2.0"},
		{"same", mca(metav1.ConditionTrue, "0.2.0"), ""},
		{"newer", mca(metav1.ConditionTrue, "v0.10.0"), ""},
	} {
		got := g.why(tc.a)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: why = %q, want %q", tc.name, got, tc.want)
		}
	}
}
