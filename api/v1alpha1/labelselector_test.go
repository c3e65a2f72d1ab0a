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

package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	nettunev1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// validSelector uses a prefixed key, a NotIn and an Exists requirement, the
// longest key (a prefix of 253 characters and a name of 63) and the longest
// and the empty value.
var validSelector = `
matchLabels:
  nettune.io/vehicle: av-001
  "` + labelPrefix(253) + `/` + strings.Repeat("n", 63) + `": "` + strings.Repeat("v", 63) + `"
  nettune.io/empty: ""
matchExpressions:
- {key: nettune.io/hardware, operator: NotIn, values: [orin, Xavier_NX.2]}
- {key: nettune.io/host, operator: Exists}
- {key: ring, operator: DoesNotExist}
- {key: nettune.io/vehicle, operator: In, values: [av-001, av-002]}`

// TestValidSelectorsAreAccepted stores a valid selector in each of the four
// selector fields and reads it back unchanged: the wire format is that of
// metav1.LabelSelector.
func TestValidSelectorsAreAccepted(t *testing.T) {
	sel := map[string]any{}
	if err := yaml.Unmarshal([]byte(validSelector), &sel); err != nil {
		t.Fatal(err)
	}
	profile := func(name string, spec map[string]any) *unstructured.Unstructured {
		spec["defaults"] = map[string]any{"initcwnd": int64(10)}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nettune.io/v1alpha1", "kind": "NetTuningProfile",
			"metadata": map[string]any{"name": name}, "spec": spec}}
	}
	experiment := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: nettune.io/v1alpha1
kind: NetTuningExperiment
metadata: {name: valid-selector}
spec:
  profile: p
  duration: 1h
  variants: [{name: a, parameters: {cwnd: {value: 20}}}]`+strings.ReplaceAll(experimentAnalysis, "\n", "\n  ")), &experiment.Object); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(experiment.Object, runtime.DeepCopyJSON(sel), "spec", "selector"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field string
		obj   *unstructured.Unstructured
		path  []string
	}{
		{"spec.nodeSelector", profile("valid-node-selector", map[string]any{"nodeSelector": runtime.DeepCopyJSON(sel)}), []string{"spec", "nodeSelector"}},
		{"spec.rollout.canary.selector", profile("valid-canary-selector", map[string]any{"rollout": map[string]any{"canary": map[string]any{"selector": runtime.DeepCopyJSON(sel)}}}), []string{"spec", "rollout", "canary", "selector"}},
		{"spec.clusterSelector", profile("valid-cluster-selector", map[string]any{"clusterSelector": runtime.DeepCopyJSON(sel)}), []string{"spec", "clusterSelector"}},
		{"spec.selector (experiment)", experiment, []string{"spec", "selector"}},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			if err := cp.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("valid selector in %s refused: %v", tc.field, err)
			}
			t.Cleanup(func() { _ = cp.Client.Delete(ctx, tc.obj) })
			got, ok, err := unstructured.NestedMap(tc.obj.Object, tc.path...)
			if err != nil || !ok {
				t.Fatalf("stored object has no %s: %v", tc.field, err)
			}
			if !reflect.DeepEqual(got, sel) {
				t.Errorf("%s stored as\n%v\nwant\n%v", tc.field, got, sel)
			}
		})
	}
}

// TestSelectorAdmissionAgreesWithTheParser submits label keys and values at
// the edges of what Kubernetes allows, in matchLabels and in matchExpressions,
// and checks the API server stores exactly those the controller's parser
// (metav1.LabelSelectorAsSelector) accepts.
func TestSelectorAdmissionAgreesWithTheParser(t *testing.T) {
	keys := []string{
		"a", "A", "nettune.io/vehicle", "kubernetes.io/hostname", "a-b_c.D", "a.b-c/X_y.z",
		strings.Repeat("k", 63), labelPrefix(253) + "/" + strings.Repeat("n", 63),
		"", "a b", "-a", "a-", "_a", "a/", "/a", "a/b/c", "Nettune.io/vehicle", "nettune_io/vehicle",
		"nettune..io/vehicle", "-nettune.io/vehicle", "nettune.io-/vehicle",
		strings.Repeat("k", 64), labelPrefix(254) + "/a", "a/" + strings.Repeat("n", 64), "ü",
	}
	values := []string{
		"", "a", "A", "av-001", "Xavier_NX.2", strings.Repeat("v", 63),
		"b c", "-a", "a-", ".a", "a.", "a/b", strings.Repeat("v", 64), "ü", "a\n",
	}
	type probe struct {
		name string
		sel  *metav1.LabelSelector
	}
	var probes []probe
	for _, k := range keys {
		probes = append(probes,
			probe{fmt.Sprintf("matchLabels key %q", k), &metav1.LabelSelector{MatchLabels: map[string]string{k: "v"}}},
			probe{fmt.Sprintf("matchExpressions key %q", k), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k, Operator: metav1.LabelSelectorOpExists}}}})
	}
	for _, v := range values {
		probes = append(probes,
			probe{fmt.Sprintf("matchLabels value %q", v), &metav1.LabelSelector{MatchLabels: map[string]string{"k": v}}},
			probe{fmt.Sprintf("matchExpressions value %q", v), &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"ok", v}}}}})
	}
	ctx := context.Background()
	for i, pr := range probes {
		t.Run(pr.name, func(t *testing.T) {
			_, parseErr := metav1.LabelSelectorAsSelector(pr.sel)
			sel, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pr.sel)
			if err != nil {
				t.Fatal(err)
			}
			p := mustProfile(t, fmt.Sprintf("selector-probe-%d", i), `defaults: {initcwnd: 10}`)
			if err := unstructured.SetNestedField(p.Object, sel, "spec", "nodeSelector"); err != nil {
				t.Fatal(err)
			}
			err = cp.Client.Create(ctx, p)
			if err == nil {
				_ = cp.Client.Delete(ctx, p)
			}
			switch {
			case parseErr == nil && err != nil:
				t.Errorf("refused, but the parser accepts it: %v", err)
			case parseErr != nil && err == nil:
				t.Errorf("stored, but the parser refuses it: %v", parseErr)
			case err != nil && !apierrors.IsInvalid(err):
				t.Errorf("want an Invalid error, got %v", err)
			case err != nil && !strings.Contains(err.Error(), "spec.nodeSelector.match"):
				t.Errorf("the refusal does not name the selector's field: %v", err)
			}
		})
	}
}

// TestLabelSelectorIsMetav1OnTheWire: the same selector marshals to the same
// JSON as a metav1.LabelSelector and converts both ways without loss.
func TestLabelSelectorIsMetav1OnTheWire(t *testing.T) {
	for _, in := range []*metav1.LabelSelector{
		{},
		{MatchLabels: map[string]string{}},
		{MatchLabels: map[string]string{"nettune.io/vehicle": "av-001", "e": ""}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "nettune.io/hardware", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"orin"}},
			{Key: "nettune.io/host", Operator: metav1.LabelSelectorOpExists},
			{Key: "ring", Operator: metav1.LabelSelectorOpDoesNotExist, Values: []string{}},
		}},
	} {
		want, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		ours := &nettunev1alpha1.LabelSelector{}
		if err := json.Unmarshal(want, ours); err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ours)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("JSON %s, metav1 has %s", got, want)
		}
		if back := nettunev1alpha1.LabelSelectorFromMetav1(in).AsMetav1(); !reflect.DeepEqual(back, in) {
			t.Errorf("converted both ways: %#v, want %#v", back, in)
		}
		ref := &metav1.LabelSelector{}
		if err := json.Unmarshal(want, ref); err != nil {
			t.Fatal(err)
		}
		if back := ours.AsMetav1(); !reflect.DeepEqual(back, ref) {
			t.Errorf("from JSON: %#v, metav1 has %#v", back, ref)
		}
	}
	var nilSel *nettunev1alpha1.LabelSelector
	if nilSel.AsMetav1() != nil || nettunev1alpha1.LabelSelectorFromMetav1(nil) != nil {
		t.Error("nil does not convert to nil")
	}
}
