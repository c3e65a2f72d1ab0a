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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sort"

	"github.com/nettune/nettune/api/v1alpha1"
)

// CanaryCount is how many vehicles a rollout's canary has or will have:
// those of a rollout in progress (status.canaryVehicles), else what
// spec.rollout.canary selects among the vehicles not excluded (a count is
// raised to the fleet's hardware models, as the planner does), at most
// the fleet. 0 without a rollout or with an invalid selector.
func CanaryCount(p *v1alpha1.NetTuningProfile, f *Fleet, excluded map[string]bool) int {
	if n := len(p.Status.CanaryVehicles); n > 0 {
		return n
	}
	r := p.Spec.Rollout
	if r == nil {
		return 0
	}
	n, total := 0, 0
	models := map[string]bool{}
	for v, nodes := range f.Vehicles {
		if excluded[v] || len(nodes) == 0 {
			continue
		}
		total++
		models[nodes[0].Labels[f.HardwareLabel]] = true
	}
	switch {
	case len(r.Canary.Vehicles) > 0:
		for _, v := range r.Canary.Vehicles {
			if _, ok := f.Vehicles[v]; ok && !excluded[v] {
				n++
			}
		}
	case r.Canary.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(r.Canary.Selector.AsMetav1())
		if err != nil {
			return 0
		}
		for v, nodes := range f.Vehicles {
			if !excluded[v] && len(nodes) > 0 && sel.Matches(labels.Set(nodes[0].Labels)) {
				n++
			}
		}
	case r.Canary.Count != nil:
		n = max(int(*r.Canary.Count), len(models))
	}
	return min(n, total)
}

// NotExcluded are the fleet's vehicles that the profile's exclude
// annotation does not name, sorted, and the set it names.
func NotExcluded(p *v1alpha1.NetTuningProfile, f *Fleet) (vehicles []string, excluded map[string]bool) {
	excluded = map[string]bool{}
	for _, v := range SplitList(p.Annotations[v1alpha1.ExcludeAnnotation]) {
		excluded[v] = true
	}
	for v := range f.Vehicles {
		if !excluded[v] {
			vehicles = append(vehicles, v)
		}
	}
	sort.Strings(vehicles)
	return vehicles, excluded
}
