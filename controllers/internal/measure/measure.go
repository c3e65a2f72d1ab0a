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

// Package measure takes the analysis measurements a plan asks for, for the
// profile reconciler of a cluster and for the hub's alike: the planner
// decides when a step waits for a verdict, this package queries Loki or
// Prometheus through the judge, and the planner's next round records the
// results.
package measure

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/planner"
)

// Config says where analyses query and with which credentials.
type Config = analysis.Backends

// Kernels says what the given vehicles' kernels reported, for an analysis
// to check what each cohort can measure.
type Kernels func(vehicles []string) map[string][]analysis.NodeKernel

// Taken is one measurement taken, announced by the caller once the status
// that records it is written.
type Taken struct {
	Spec        *v1alpha1.AnalysisSpec
	Step        int32
	Measurement analysis.Measurement
	Result      v1alpha1.AnalysisResult
}

// Event is how a measurement taken is announced, at a cluster and at the
// hub alike: a Normal event when it passed, a Warning otherwise.
func (t Taken) Event() (eventType, reason, message string) {
	eventType = corev1.EventTypeNormal
	if t.Measurement.Phase != analysis.PhaseSuccessful {
		eventType = corev1.EventTypeWarning
	}
	return eventType, "Analysis" + string(t.Measurement.Phase), fmt.Sprintf("analysis %s step %d (%s): %s [result %s]",
		t.Spec.Name, t.Step, t.Spec.Provider, t.Measurement.Message, t.Result.Phase)
}

// Due takes every measurement out asks for that is due, all on the status
// out planned (one plan then decides on all of their results), and returns
// the results for the planner's next round.
func Due(ctx context.Context, c Config, profile string, out planner.Output, now time.Time, kernels Kernels) ([]v1alpha1.AnalysisResult, []Taken) {
	view := out.Status
	var results []v1alpha1.AnalysisResult
	var taken []Taken
	for _, m := range out.Measures {
		t, ok := take(ctx, c, profile, m, view, now, kernels)
		if !ok {
			continue
		}
		results = append(results, t.Result)
		taken = append(taken, t)
		view = planner.WithResult(view, t.Result)
	}
	return results, taken
}

// take takes one measurement of the analysis m if it is due (st is the
// status the planner asked from).
func take(ctx context.Context, c Config, profile string, m *planner.Measure, st v1alpha1.NetTuningProfileStatus, now time.Time, kernels Kernels) (Taken, bool) {
	spec := m.Spec
	if spec == nil {
		return Taken{}, false
	}
	prev, ok := planner.AnalysisResultOf(st, m.Analysis, m.Step)
	if !ok {
		prev = v1alpha1.AnalysisResult{Name: m.Analysis, Step: m.Step}
	}
	if due, _ := analysis.Due(prev, spec, now); !due {
		return Taken{}, false
	}
	var meas analysis.Measurement
	q, err := c.QuerierFor(ctx, spec, "spec.rollout.analyses[].address")
	if err != nil {
		meas = analysis.ErrorMeasurement(now, err)
	} else {
		// The cohorts settled when the analysis took its first measurement
		// (a judge counts messages only from one step after that).
		since := analysis.StartedAt(prev, now)
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		meas = analysis.Measure(qctx, q, profile,
			spec, analysis.Cohort{Vehicles: m.Canary, Revision: m.CanaryRevision, Since: since, Kernels: kernels(m.Canary), VerifiedAt: m.VerifiedAt},
			analysis.Cohort{Vehicles: m.Baseline, Revision: m.BaselineRevision, Since: since, Kernels: kernels(m.Baseline), VerifiedAt: m.VerifiedAt}, now)
		cancel()
	}
	res := analysis.Accumulate(prev, meas, spec)
	res.Name, res.Step = m.Analysis, m.Step
	return Taken{Spec: spec, Step: m.Step, Measurement: meas, Result: res}, true
}
