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

package envtest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
)

// The fleet of the rollout suites: four Xavier vehicles and two Orin ones.
var (
	XavierVehicles = []string{"av-01", "av-02", "av-03", "av-04"}
	OrinVehicles   = []string{"av-05", "av-06"}
)

// AllVehicles is XavierVehicles and OrinVehicles.
func AllVehicles() []string { return append(append([]string{}, XavierVehicles...), OrinVehicles...) }

// Dur is a *metav1.Duration.
func Dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// Ptr is a pointer to v.
func Ptr[T any](v T) *T { return &v }

// IntOrString parses s.
func IntOrString(s string) intstr.IntOrString { return intstr.Parse(s) }

// The p99.99 latency analysis over the agents' probe messages in Loki, and
// their count.
const (
	LokiQuery = `quantile_over_time(0.9999, {job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} | json | unwrap latency_ms [{{ .Window }}]) by ()`
	LokiCount = `sum(count_over_time({job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} [{{ .Window }}]))`
)

// LanProfile is the shipped profile's shape with test-sized timings:
// profile xavier-lan, its clamp cwnd (initcwnd 5 below), a canary rollout
// of two vehicles analyzed by query (samples counted by samples, when not
// empty) at 50 % and 100 %.
func LanProfile(cwnd int32, provider v1alpha1.AnalysisProvider, query, samples string) *v1alpha1.NetTuningProfile {
	a := v1alpha1.AnalysisSpec{
		Name: "p9999-latency", Provider: provider, Query: query,
		Interval: Dur(time.Second), Window: Dur(10 * time.Minute), Measurements: Ptr(int32(2)),
		MinSamples: Ptr(int64(500)), MaxValue: Ptr("20"), MaxBaselineFactor: Ptr("1.10"), MaxBaselineOffset: Ptr("1"),
		FailureLimit: Ptr(int32(0)), InconclusiveLimit: Ptr(int32(0)), OnInconclusive: v1alpha1.InconclusivePause,
	}
	if samples != "" {
		a.SamplesQuery = Ptr(samples)
	}
	return &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "xavier-lan"},
		Spec: v1alpha1.NetTuningProfileSpec{
			Defaults: &v1alpha1.TCPParameters{
				Cwnd: &v1alpha1.Cwnd{Value: cwnd}, Initcwnd: Ptr(cwnd - 5), RTOMin: Dur(10 * time.Millisecond),
			},
			Rollout: &v1alpha1.RolloutSpec{
				Canary: v1alpha1.CanarySpec{Count: Ptr(int32(2))},
				Steps: []v1alpha1.RolloutStep{
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: Ptr(int32(50))}},
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: Ptr(int32(100))}},
				},
				MaxUnavailable: Ptr(IntOrString("50%")),
				Analyses:       []v1alpha1.AnalysisSpec{a},
			},
		},
	}
}

// SetCwnd changes the clamp (and initcwnd below it, as admission requires).
func SetCwnd(p *v1alpha1.NetTuningProfile, v int32) {
	p.Spec.Defaults.Cwnd.Value = v
	p.Spec.Defaults.Initcwnd = Ptr(v - 5)
}
