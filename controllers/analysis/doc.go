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

// Package analysis measures a canary cohort against a baseline cohort in Loki
// or Prometheus and decides the outcome of a rollout analysis step.
//
// It is split in three layers so the rollout controller can test its own logic
// without a metrics backend:
//
//   - RenderQuery turns an AnalysisSpec query template into a concrete LogQL or
//     PromQL instant query for one cohort (vehicles + revision).
//   - Querier (NewLoki, NewPrometheus) runs such a query and returns one scalar.
//   - Measure runs the queries of one measurement; Evaluate (pure) decides a
//     single Measurement; Accumulate (pure) folds it into the running
//     v1alpha1.AnalysisResult; Due (pure) says when the next one is due.
//
// A measurement's outcome is a Verdict, one type from the decision to the
// status: the judge's (Judge, MeasureJudge) or Evaluate's Pass, Fail or
// Inconclusive, or Error and Unavailable for a measurement that could not be
// taken. A Measurement carries it, and Accumulate is the one place it
// becomes status: the counter and phase of the AnalysisResult, and for a
// judge analysis its verdict and each pair's. Its Phase word names it in
// events and metrics.
//
// A typical reconcile:
//
//	due, next := analysis.Due(res, spec, now)
//	if due {
//		m := analysis.Measure(ctx, q, profile, spec, canary, baseline, now)
//		res = analysis.Accumulate(res, m, spec)
//	}
//	if !v1alpha1.AnalysisTerminal(res.Phase) {
//		return ctrl.Result{RequeueAfter: next.Sub(now)}, nil
//	}
package analysis
