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

// Package measure takes analysis measurements: the ones a plan asks for, in
// a rollout round (controllers/internal/round) of a cluster's profile
// reconciler and of the hub's alike, and an experiment's (Take). The
// planner decides when a step waits for a verdict, this package queries
// Loki or Prometheus through the analysis package (the judge, or a query
// analysis' thresholds), and the round's second plan records the results.
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
	Spec *v1alpha1.AnalysisSpec
	Step int32
	// Measurement carries the verdict; Result is the analysis' result
	// with it (analysis.Accumulate), for the planner to record.
	Measurement analysis.Measurement
	Result      v1alpha1.AnalysisResult
}

// Event is how a measurement taken is announced, at a cluster and at the
// hub alike: a Normal event when it passed, a Warning otherwise.
func (t Taken) Event() (eventType, reason, message string) {
	eventType = corev1.EventTypeNormal
	if t.Measurement.Verdict != analysis.VerdictPass {
		eventType = corev1.EventTypeWarning
	}
	return eventType, "Analysis" + t.Measurement.Verdict.Phase(), fmt.Sprintf("analysis %s step %d (%s): %s [result %s]",
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
		t, ok := takeDue(ctx, c, profile, m, view, now, kernels)
		if !ok {
			continue
		}
		results = append(results, t.Result)
		taken = append(taken, t)
		view = planner.WithResult(view, t.Result)
	}
	return results, taken
}

// takeDue takes one measurement of the analysis m if it is due (st is the
// status the planner asked from).
func takeDue(ctx context.Context, c Config, profile string, m *planner.Measure, st v1alpha1.NetTuningProfileStatus, now time.Time, kernels Kernels) (Taken, bool) {
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
	// The cohorts settled when the analysis took its first measurement
	// (a judge counts messages only from one step after that).
	since := analysis.StartedAt(prev, now)
	meas := Take(ctx, c, "spec.rollout.analyses[].address", profile, spec,
		analysis.Cohort{Vehicles: m.Canary, Revision: m.CanaryRevision, Since: since, Kernels: kernels(m.Canary), VerifiedAt: m.VerifiedAt},
		analysis.Cohort{Vehicles: m.Baseline, Revision: m.BaselineRevision, Since: since, Kernels: kernels(m.Baseline), VerifiedAt: m.VerifiedAt}, now)
	res := analysis.Accumulate(prev, meas, spec)
	res.Name, res.Step = m.Analysis, m.Step
	return Taken{Spec: spec, Step: m.Step, Measurement: meas, Result: res}, true
}

// Take takes one measurement of spec on the canary cohort against the
// baseline cohort at now, within 30 seconds, from the backend c gives for
// spec; field names where spec sets its address, for the error when it
// has none. Without a usable backend (no address, credentials missing)
// the measurement is one that could not be taken (analysis.ErrorMeasurement).
func Take(ctx context.Context, c Config, field, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline analysis.Cohort, now time.Time) analysis.Measurement {
	q, err := c.QuerierFor(ctx, spec, field)
	if err != nil {
		return analysis.ErrorMeasurement(now, err)
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return analysis.Measure(qctx, q, profile, spec, canary, baseline, now)
}
