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

package addon

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	"github.com/nettune/nettune/charts"
)

func TestPlan(t *testing.T) {
	const v2 = "0.2.0"
	at := func(name, work, ver string, avail bool) Installed {
		return Installed{Cluster: name, Work: work, Version: ver, Available: avail}
	}
	for _, tc := range []struct {
		name          string
		s             Strategy
		in            []Installed
		write, waitOn []string
	}{
		{"new clusters install at once", Strategy{Progressive: true, MaxConcurrency: 1},
			[]Installed{at("b", "", "", false), at("a", "", "", false)}, []string{"a", "b"}, nil},
		{"progressive: one at a time, in name order", Strategy{Progressive: true, MaxConcurrency: 1},
			[]Installed{at("c", "0.1.0", "0.1.0", true), at("a", "0.1.0", "0.1.0", true), at("b", "0.1.0", "0.1.0", true)}, []string{"a"}, []string{"b", "c"}},
		{"progressive: a cluster upgrading holds the next", Strategy{Progressive: true, MaxConcurrency: 1},
			[]Installed{at("a", v2, "0.1.0", true), at("b", "0.1.0", "0.1.0", true)}, nil, []string{"b"}},
		{"progressive: not available yet holds the next", Strategy{Progressive: true, MaxConcurrency: 1},
			[]Installed{at("a", v2, v2, false), at("b", "0.1.0", "0.1.0", true)}, nil, []string{"b"}},
		{"progressive: done frees a slot", Strategy{Progressive: true, MaxConcurrency: 1},
			[]Installed{at("a", v2, v2, true), at("b", "0.1.0", "0.1.0", true), at("c", "0.1.0", "0.1.0", true)}, []string{"b"}, []string{"c"}},
		{"progressive: two at a time", Strategy{Progressive: true, MaxConcurrency: 2},
			[]Installed{at("a", "0.1.0", "0.1.0", true), at("b", "0.1.0", "0.1.0", true), at("c", "0.1.0", "", false)}, []string{"a", "b"}, []string{"c"}},
		{"all at once", Strategy{},
			[]Installed{at("a", "0.1.0", "0.1.0", true), at("b", "0.1.0", "0.1.0", true)}, []string{"a", "b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, wait := Plan(v2, tc.s, tc.in)
			if !reflect.DeepEqual(w, tc.write) || !reflect.DeepEqual(wait, tc.waitOn) {
				t.Errorf("Plan = write %v, waiting %v; want %v, %v", w, wait, tc.write, tc.waitOn)
			}
		})
	}
}

func TestStrategyFrom(t *testing.T) {
	pct := intstr.FromString("50%")
	s, err := StrategyFrom(&clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
		Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: pct}}, 3, "f")
	if err != nil || !s.Progressive || s.MaxConcurrency != 2 {
		t.Errorf("50%% of 3 = %+v, %v; want Progressive, 2", s, err)
	}
	if _, err := StrategyFrom(&clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup}, 3, "spec.x"); err == nil ||
		!strings.Contains(err.Error(), "spec.x.type") {
		t.Errorf("ProgressivePerGroup: %v, want an error naming spec.x.type", err)
	}
	if s, err := StrategyFrom(nil, 3, "f"); err != nil || s.Progressive {
		t.Errorf("no strategy = %+v, %v; want All", s, err)
	}
}

func TestRenderChart(t *testing.T) {
	ch, err := LoadChart(charts.FS, charts.Dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(ch, Release{Name: "nettune", Namespace: "nettune-system", KubeVersion: "v1.36.0", Set: []string{"controller.addOnLease=nettune"}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	var args []any
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() == "Deployment" {
			cs, _, _ := unstructuredSlice(o.Object, "spec", "template", "spec", "containers")
			args, _ = cs[0].(map[string]any)["args"].([]any)
			if v := o.GetLabels()["app.kubernetes.io/version"]; v != ch.Metadata.AppVersion {
				t.Errorf("Deployment version label %q, want %q", v, ch.Metadata.AppVersion)
			}
		}
	}
	if objs[0].GetKind() != "Namespace" || kinds["CustomResourceDefinition"] != 3 || kinds["Deployment"] != 1 || kinds["DaemonSet"] != 1 || kinds["ClusterRole"] == 0 {
		t.Errorf("rendered kinds %v (first %s)", kinds, objs[0].GetKind())
	}
	found := false
	for _, a := range args {
		found = found || a == "--addon-lease=nettune"
	}
	if !found {
		t.Errorf("controller args %v lack --addon-lease=nettune", args)
	}
	if _, err := Render(ch, Release{Name: "nettune", Namespace: "nettune-system", Set: []string{"controller.replicas=0"}}); err == nil ||
		!strings.Contains(err.Error(), "replicas") {
		t.Errorf("controller.replicas=0: %v, want a schema error naming replicas", err)
	}
}

func unstructuredSlice(o map[string]any, path ...string) ([]any, bool, error) {
	cur := any(o)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}
