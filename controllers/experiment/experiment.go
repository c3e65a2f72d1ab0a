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

package experiment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Overlay returns a copy of base with the variant's parameters replacing the
// base's of the same name in its defaults (created when the base has none),
// in every host pair that sets parameters of its own, and in every route.
// Everything else (selector, sysctls, interfaces, rollout) is copied as is.
func Overlay(base *v1alpha1.NetTuningProfileSpec, p v1alpha1.TCPParameters) *v1alpha1.NetTuningProfileSpec {
	out := base.DeepCopy()
	if out.Defaults == nil {
		out.Defaults = &v1alpha1.TCPParameters{}
	}
	out.Defaults.Overlay(&p)
	for i := range out.HostPairs {
		if out.HostPairs[i].Parameters != nil {
			out.HostPairs[i].Parameters.Overlay(&p)
		}
	}
	for i := range out.Routes {
		out.Routes[i].Parameters.Overlay(&p)
	}
	return out
}

// Describe is a variant's parameters in one line, e.g. "cwnd=30 rtoMin=10ms".
func Describe(p v1alpha1.TCPParameters) string {
	var parts []string
	if p.Cwnd != nil {
		lock := ""
		if !p.Cwnd.IsLocked() {
			lock = " (unlocked)"
		}
		parts = append(parts, fmt.Sprintf("cwnd=%d%s", p.Cwnd.Value, lock))
	}
	add := func(name string, v *int32) {
		if v != nil {
			parts = append(parts, fmt.Sprintf("%s=%d", name, *v))
		}
	}
	add("initcwnd", p.Initcwnd)
	add("initrwnd", p.Initrwnd)
	add("ssthresh", p.Ssthresh)
	if p.RTOMin != nil {
		parts = append(parts, "rtoMin="+p.RTOMin.Duration.String())
	}
	if p.Quickack != nil {
		parts = append(parts, fmt.Sprintf("quickack=%t", *p.Quickack))
	}
	if p.CongestionControl != nil {
		parts = append(parts, "congestionControl="+string(*p.CongestionControl))
	}
	add("advmss", p.AdvMSS)
	add("mtu", p.MTU)
	if len(parts) == 0 {
		return "(no change)"
	}
	return strings.Join(parts, " ")
}

// HardwareModel is a vehicle's hardware model: the distinct values of the
// hardware label on its nodes, sorted and joined with "+" ("unknown" for a
// node without the label).
func HardwareModel(nodes []*corev1.Node, label string) string {
	seen := map[string]bool{}
	for _, n := range nodes {
		v := n.Labels[label]
		if v == "" {
			v = "unknown"
		}
		seen[v] = true
	}
	models := make([]string, 0, len(seen))
	for m := range seen {
		models = append(models, m)
	}
	sort.Strings(models)
	return strings.Join(models, "+")
}

// Vehicle is a vehicle eligible for an experiment.
type Vehicle struct {
	Name     string
	Hardware string
}

// Draw is the outcome of drawing cohorts.
type Draw struct {
	// Cohorts[arm][hardware] are the vehicles of each arm (ControlArm and
	// the variants) per hardware model, sorted.
	Cohorts map[string]map[string][]string
	// Budget is how many vehicles maxPercent allows; Used how many were drawn.
	Budget, Used int
	// Skipped are the hardware models with too few vehicles for one per arm.
	Skipped []string
}

// Assign draws the cohorts: fleet is how many vehicles the base profile
// selects, eligible those the experiment may use. maxPercent of fleet
// (rounded down) is the budget, shared among the hardware models in
// proportion to their eligible vehicles; each model gives every arm (the
// control and each variant) the same number of vehicles, at most perArm
// (0: no cap). Within a model vehicles are taken in an order fixed by seed
// (the experiment's UID): a pseudo-random order that does not change between
// reconciles and does not follow names.
func Assign(fleet int, eligible []Vehicle, variants []string, maxPercent, perArm int, seed string) Draw {
	arms := append([]string{v1alpha1.ControlArm}, variants...)
	d := Draw{Cohorts: map[string]map[string][]string{}, Budget: fleet * maxPercent / 100}
	for _, a := range arms {
		d.Cohorts[a] = map[string][]string{}
	}
	byModel := map[string][]string{}
	for _, v := range eligible {
		byModel[v.Hardware] = append(byModel[v.Hardware], v.Name)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		names := byModel[m]
		sort.Slice(names, func(i, j int) bool {
			hi, hj := order(seed, names[i]), order(seed, names[j])
			if hi != hj {
				return hi < hj
			}
			return names[i] < names[j]
		})
		share := 0
		if len(eligible) > 0 {
			share = d.Budget * len(names) / len(eligible)
		}
		k := min(share, len(names)) / len(arms)
		if perArm > 0 {
			k = min(k, perArm)
		}
		if k == 0 {
			d.Skipped = append(d.Skipped, m)
			continue
		}
		for i, a := range arms {
			c := append([]string{}, names[i*k:(i+1)*k]...)
			sort.Strings(c)
			d.Cohorts[a][m] = c
			d.Used += k
		}
	}
	return d
}

// order is a vehicle's place in the draw of the experiment seeded by seed.
func order(seed, name string) uint64 {
	h := sha256.Sum256([]byte(seed + "/" + name))
	return binary.BigEndian.Uint64(h[:8])
}

// ArmSelector is the node selector of an arm's profile: the base's, plus
// the arm's vehicles by the vehicle label.
func ArmSelector(base *metav1.LabelSelector, vehicleLabel string, vehicles []string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if base != nil {
		sel = base.DeepCopy()
	}
	vs := append([]string{}, vehicles...)
	sort.Strings(vs)
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: vehicleLabel, Operator: metav1.LabelSelectorOpIn, Values: vs,
	})
	return sel
}

// ArmProfileName is the name of an arm's profile.
func ArmProfileName(experiment, variant string) string { return experiment + "-" + variant }
