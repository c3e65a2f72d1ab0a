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

package v1alpha1

import (
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestDefaultsMatchTheCRD: the Go defaults equal the generated CRD's
// +kubebuilder:default values, so code and API server cannot disagree.
func TestDefaultsMatchTheCRD(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/nettune.io_nettuningprofiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	rollout := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["rollout"].Properties
	analysis := rollout["analyses"].Items.Schema.Properties
	for field, want := range map[string]time.Duration{
		"unreachableAfter":      DefaultUnreachableAfter,
		"unreachableTimeout":    DefaultUnreachableTimeout,
		"analyses[].interval":   DefaultAnalysisInterval,
		"analyses[].window":     DefaultAnalysisWindow,
		"analyses[].judge.step": DefaultJudgeStep,
	} {
		def := rollout[field].Default
		if f, ok := strings.CutPrefix(field, "analyses[]."); ok {
			def = analysis[f].Default
			if s, ok := strings.CutPrefix(f, "judge."); ok {
				def = analysis["judge"].Properties[s].Default
			}
		}
		if def == nil {
			t.Errorf("CRD field rollout.%s has no default", field)
			continue
		}
		var s string
		if err := yaml.Unmarshal(def.Raw, &s); err != nil {
			t.Fatal(err)
		}
		got, err := time.ParseDuration(s)
		if err != nil || got != want {
			t.Errorf("CRD default of rollout.%s is %q, Go default %s", field, s, want)
		}
	}
	var nilRollout *RolloutSpec
	if nilRollout.GetUnreachableAfter() != DefaultUnreachableAfter || nilRollout.GetUnreachableTimeout() != DefaultUnreachableTimeout {
		t.Error("a nil rollout does not give the defaults")
	}
	if got := (&AnalysisSpec{}).GetInterval(); got != DefaultAnalysisInterval {
		t.Errorf("an analysis without interval: %s, want %s", got, DefaultAnalysisInterval)
	}
	if got := (&AnalysisSpec{}).GetWindow(); got != DefaultAnalysisWindow {
		t.Errorf("an analysis without window: %s, want %s", got, DefaultAnalysisWindow)
	}
	var nilJudge *JudgeSpec
	if got := nilJudge.GetStep(); got != DefaultJudgeStep {
		t.Errorf("a nil judge's step: %s, want %s", got, DefaultJudgeStep)
	}
}
