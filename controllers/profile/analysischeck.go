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

package profile

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/planner"
)

// analysisCheckRetry is how soon a rate check whose query failed is tried
// again.
const analysisCheckRetry = time.Minute

// analysisCheckTimeout bounds the rate check's queries of one analysis: the
// check runs in the reconcile that starts a rollout, which a backend that
// does not answer must not hold for the measurements' 30 s.
const analysisCheckTimeout = 5 * time.Second

// analysisChecks caches, per profile, the analyses' rate check: it queries
// the backends once per profile generation, stable revision and cohort
// sizes, not at every reconcile.
type analysisChecks struct {
	mu      sync.Mutex
	entries map[string]analysisCheck
}

type analysisCheck struct {
	key      string
	warnings []string
	retryAt  time.Time // set when a query failed: the check is incomplete
}

// analysisFindings says which of the profile's judge analyses cannot decide
// on its fleet f: from their schedule alone (analysis.Schedule.Problems),
// and at the stable revision's message rate per host pair, measured over
// each analysis' window on the vehicles not excluded and scaled to the
// canary's vehicles against the rest (analysis.SampleProblems). The rate
// check runs when the profile, its stable revision or the cohorts change,
// so a rollout's first reconcile reports it, before its canary's analysis
// takes a measurement. A backend that does not answer leaves the rate
// check out (the schedule's findings stay) and it is tried again a minute
// later; its queries have 5 s. nil for a hub's copy (the hub judges).
func (r *Reconciler) analysisFindings(ctx context.Context, p *v1alpha1.NetTuningProfile, f *fleetmodel.Fleet) *planner.AnalysisFindings {
	ro := p.Spec.Rollout
	if p.Spec.HubAssignment != nil {
		return nil
	}
	out := &planner.AnalysisFindings{}
	if ro == nil {
		return out
	}
	vehicles, excluded := fleetmodel.NotExcluded(p, f)
	canary := fleetmodel.CanaryCount(p, f, excluded)
	stable := p.Status.StableRevision
	key := fmt.Sprintf("%d/%s/%d/%d", p.Generation, stable, len(vehicles), canary)

	r.checks.mu.Lock()
	cached, ok := r.checks.entries[p.Name]
	r.checks.mu.Unlock()
	now := r.Now()
	if ok && cached.key == key && (cached.retryAt.IsZero() || now.Before(cached.retryAt)) {
		out.Warnings = cached.warnings
		return out
	}

	check := analysisCheck{key: key}
	for i := range ro.Analyses {
		spec := &ro.Analyses[i]
		if spec.Judge == nil {
			continue
		}
		cfg, err := analysis.JudgeConfigFor(spec)
		if err != nil {
			continue // every measurement says so
		}
		s := analysis.ScheduleFor(spec)
		problems := s.Problems()
		if len(problems) == 0 && stable != "" && canary > 0 && canary < len(vehicles) {
			pairs, err := r.stableRates(ctx, p.Name, spec, analysis.Cohort{Vehicles: vehicles, Revision: stable}, canary, len(vehicles)-canary, now)
			if err != nil {
				log.FromContext(ctx).Info("cannot check the analysis' samples against the stable revision's rate", "analysis", spec.Name, "error", err.Error())
				check.retryAt = now.Add(analysisCheckRetry)
			} else if len(pairs) > 0 {
				problems = analysis.SampleProblems(cfg, s, pairs)
				if len(problems) > 0 {
					problems[0] = fmt.Sprintf("at the stable revision %s's message rate over the last %s, with %d canary and %d baseline vehicles, %s",
						stable, s.Window, canary, len(vehicles)-canary, problems[0])
				}
			}
		}
		for _, pr := range problems {
			check.warnings = append(check.warnings, fmt.Sprintf("analysis %s: %s", spec.Name, pr))
		}
	}
	r.checks.mu.Lock()
	if r.checks.entries == nil {
		r.checks.entries = map[string]analysisCheck{}
	}
	r.checks.entries[p.Name] = check
	r.checks.mu.Unlock()
	out.Warnings = check.warnings
	return out
}

// stableRates measures the stable cohort's messages per host pair over the
// analysis' window and scales them to the rollout's cohorts.
func (r *Reconciler) stableRates(ctx context.Context, profile string, spec *v1alpha1.AnalysisSpec, stable analysis.Cohort, canary, baseline int, at time.Time) ([]analysis.PairRate, error) {
	ctx, cancel := context.WithTimeout(ctx, analysisCheckTimeout)
	defer cancel()
	q, err := r.Backends.QuerierFor(ctx, spec, fmt.Sprintf("spec.rollout.analyses[%s].address", spec.Name))
	if err != nil {
		return nil, err
	}
	window := spec.GetWindow()
	counts, err := analysis.StableCounts(ctx, q, profile, spec, stable, window, at)
	if err != nil {
		return nil, err
	}
	var out []analysis.PairRate
	for pair, n := range counts {
		if !(n.Total > 0) {
			continue
		}
		v := n.Total / window.Seconds() / float64(len(stable.Vehicles))
		share := n.Slow / n.Total
		out = append(out, analysis.PairRate{Pair: pair, CanaryRate: v * float64(canary), BaselineRate: v * float64(baseline), BaselineShare: min(1, max(0, share))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pair < out[j].Pair })
	return out, nil
}
