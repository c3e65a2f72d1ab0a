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
