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
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const experimentAnalysis = `
analysis:
  name: slow
  provider: Loki
  judge: {slowQuery: s, totalQuery: t}`

var invalidExperiments = []invalidCase{
	{"no variants", `profile: p
duration: 1h
variants: []` + experimentAnalysis, "spec.variants", "should have at least 1 items"},
	{"a variant named control", `profile: p
duration: 1h
variants: [{name: control, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.variants[0].name", "control is the name of the base cohort"},
	{"a variant whose initcwnd exceeds its cwnd", `profile: p
duration: 1h
variants: [{name: a, parameters: {cwnd: {value: 20}, initcwnd: 25}}]` + experimentAnalysis, "spec.variants[0].parameters.initcwnd", "initcwnd must not exceed cwnd.value"},
	{"a query analysis as the metric", `profile: p
duration: 1h
variants: [{name: a, parameters: {cwnd: {value: 20}}}]
analysis: {name: q, provider: Loki, query: q, maxValue: "1"}`, "spec.analysis", "must be a judge analysis"},
	{"a duration under 10s", `profile: p
duration: 5s
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.duration", "at least 10s"},
	{"an applyTimeout under 1s", `profile: p
duration: 1h
applyTimeout: 500ms
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.applyTimeout", "at least 1s"},
	{"maxPercent above 100", `profile: p
duration: 1h
maxPercent: 150
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.maxPercent", "less than or equal to 100"},
	{"a selector label value with a space", `profile: p
duration: 1h
selector: {matchLabels: {a: "b c"}}
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.selector.matchLabels.a", "should match"},
	{"a selector label key with a space", `profile: p
duration: 1h
selector: {matchLabels: {"a b": c}}
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.selector.matchLabels", `matchLabels key "a b" is not a label key`},
	{"a selector In without values", `profile: p
duration: 1h
selector: {matchExpressions: [{key: nettune.io/hardware, operator: In}]}
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.selector.matchExpressions[0].values", "need at least one value"},
	{"a selector expression value with a space", `profile: p
duration: 1h
selector: {matchExpressions: [{key: nettune.io/vehicle, operator: NotIn, values: ["av 001"]}]}
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.selector.matchExpressions[0].values[0]", "should match"},
	{"a selector with an unknown operator", `profile: p
duration: 1h
selector: {matchExpressions: [{key: nettune.io/hardware, operator: Gt, values: ["1"]}]}
variants: [{name: a, parameters: {cwnd: {value: 20}}}]` + experimentAnalysis, "spec.selector.matchExpressions[0].operator", "Unsupported value"},
}

// TestInvalidExperimentsAreRefused: the API server refuses each, naming the
// field.
func TestInvalidExperimentsAreRefused(t *testing.T) {
	ctx := context.Background()
	for i, tc := range invalidExperiments {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			u.Object = map[string]any{"apiVersion": "nettune.io/v1alpha1", "kind": "NetTuningExperiment",
				"metadata": map[string]any{"name": fmt.Sprintf("invalid-x-%d", i)}, "spec": spec}
			err := cp.Client.Create(ctx, u)
			if err == nil {
				_ = cp.Client.Delete(ctx, u)
				t.Fatalf("experiment was accepted, want refusal naming %s", tc.field)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			assertNamesField(t, err, tc.field, tc.msg)
		})
	}
}
