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
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
)

var (
	rolloutStep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_rollout_step", Help: "Index of the rollout step in progress (number of steps when complete).",
	}, []string{"profile"})
	rolloutPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_rollout_phase", Help: "1 for the profile's current rollout phase, 0 for the others.",
	}, []string{"profile", "phase"})
	rolloutVehicles = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_rollout_vehicles", Help: "Vehicles of a profile by state (total, updated, verified, unreachable, failed, deferred).",
	}, []string{"profile", "state"})
	rollbacksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nettune_rollbacks_total", Help: "Automatic and manual rollbacks, by reason.",
	}, []string{"profile", "reason"})
	analysisValue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_analysis_value", Help: "Latest analysis value by cohort (canary, baseline) and the threshold applied.",
	}, []string{"profile", "analysis", "series"})
	judgeSlowShare = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_analysis_judge_slow_share", Help: "A judge's latest share of slow messages per host pair and cohort (canary, baseline).",
	}, []string{"profile", "analysis", "pair", "cohort"})
	judgeProbability = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_analysis_judge_probability", Help: "A judge's latest posterior probability, per host pair, that the canary is worse than its tolerance.",
	}, []string{"profile", "analysis", "pair"})
	analysisMeasurements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nettune_analysis_measurements_total", Help: "Analysis measurements by phase.",
	}, []string{"profile", "analysis", "phase"})
)

func init() {
	metrics.Registry.MustRegister(rolloutStep, rolloutPhase, rolloutVehicles, rollbacksTotal, analysisValue, judgeSlowShare, judgeProbability, analysisMeasurements)
}

func recordMetrics(p *v1alpha1.NetTuningProfile) {
	st := p.Status
	if st.CurrentStep != nil {
		rolloutStep.WithLabelValues(p.Name).Set(float64(*st.CurrentStep))
	}
	for _, ph := range []string{v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseHealthy, v1alpha1.PhaseRolledBack, v1alpha1.PhaseDegraded} {
		v := 0.0
		if st.Phase == ph {
			v = 1
		}
		rolloutPhase.WithLabelValues(p.Name, ph).Set(v)
	}
	for state, n := range map[string]int32{"total": st.Vehicles.Total, "updated": st.Vehicles.Updated, "verified": st.Vehicles.Verified,
		"unreachable": st.Vehicles.Unreachable, "failed": st.Vehicles.Failed, "deferred": st.Vehicles.Deferred} {
		rolloutVehicles.WithLabelValues(p.Name, state).Set(float64(n))
	}
}

func recordMeasurement(profile string, spec *v1alpha1.AnalysisSpec, m analysis.Measurement) {
	analysisMeasurements.WithLabelValues(profile, spec.Name, m.Verdict.Phase()).Inc()
	for series, v := range map[string]*float64{"canary": m.Canary, "baseline": m.Baseline, "threshold": m.Threshold} {
		if v != nil {
			analysisValue.WithLabelValues(profile, spec.Name, series).Set(*v)
		}
	}
	if m.Judge != nil {
		for _, pr := range m.Judge.Pairs {
			judgeSlowShare.WithLabelValues(profile, spec.Name, pr.Pair, "canary").Set(pr.CanaryShare)
			judgeSlowShare.WithLabelValues(profile, spec.Name, pr.Pair, "baseline").Set(pr.BaselineShare)
			if !math.IsNaN(pr.PWorse) {
				judgeProbability.WithLabelValues(profile, spec.Name, pr.Pair).Set(pr.PWorse)
			}
		}
	}
}

func deleteMetrics(profile string) {
	for _, v := range []*prometheus.GaugeVec{rolloutStep, rolloutPhase, rolloutVehicles, analysisValue, judgeSlowShare, judgeProbability} {
		v.DeletePartialMatch(prometheus.Labels{"profile": profile})
	}
}
