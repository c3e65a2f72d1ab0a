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

package analysis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/text"
)

// Defaults of a JudgeSpec (the same as the CRD's +kubebuilder:default values).
const (
	DefaultJudgeQuantile    = 0.99
	DefaultJudgeConfidence  = 0.99
	DefaultJudgeMaxIncrease = 0.005
	DefaultJudgeStep        = v1alpha1.DefaultJudgeStep
	// DefaultJudgeMinIntervals is the fewest per-interval values per cohort
	// the rank test runs on (JudgeConfig.MinIntervals 0 means this).
	DefaultJudgeMinIntervals = 5
)

// JudgeConfigFor reads a judge analysis' parameters, applying the defaults.
func JudgeConfigFor(spec *v1alpha1.AnalysisSpec) (JudgeConfig, error) {
	j := spec.Judge
	if j == nil {
		return JudgeConfig{}, errors.New("not a judge analysis")
	}
	cfg := JudgeConfig{MinSamples: minSamples(spec), MinIntervals: DefaultJudgeMinIntervals,
		RequireRank: hasIntervalQuery(j)}
	var err error
	if cfg.Quantile, err = parseDecimal("judge.quantile", j.Quantile, DefaultJudgeQuantile); err != nil {
		return cfg, err
	}
	if cfg.Confidence, err = parseDecimal("judge.confidence", j.Confidence, DefaultJudgeConfidence); err != nil {
		return cfg, err
	}
	if cfg.MaxIncrease, err = parseDecimal("judge.maxIncrease", j.MaxIncrease, DefaultJudgeMaxIncrease); err != nil {
		return cfg, err
	}
	if cfg.MaxRatio, err = parseDecimal("judge.maxRatio", j.MaxRatio, 1); err != nil {
		return cfg, err
	}
	uses := strings.Contains(j.SlowQuery, ".Threshold") || strings.Contains(j.TotalQuery, ".Threshold") ||
		(j.IntervalQuery != nil && strings.Contains(*j.IntervalQuery, ".Threshold"))
	threshold := judgeThreshold(j)
	switch {
	case j.Threshold != nil && threshold <= 0:
		return cfg, fmt.Errorf("judge.threshold %s must be positive", threshold)
	case uses && j.Threshold == nil:
		return cfg, errors.New("judge.threshold is required: a query uses .ThresholdMs or .ThresholdSeconds")
	}
	// A Prometheus threshold that is not a bucket bound would match no
	// bucket: no message would ever count as slow.
	if spec.Provider == v1alpha1.ProviderPrometheus && strings.Contains(j.SlowQuery, ".ThresholdSeconds") &&
		!slices.Contains(v1alpha1.ProbeLatencyThresholds, threshold.Seconds()) {
		var bounds []string
		for _, b := range v1alpha1.ProbeLatencyThresholds {
			bounds = append(bounds, time.Duration(b*float64(time.Second)).String())
		}
		return cfg, fmt.Errorf("judge.threshold %s is not a bucket bound of nettune_probe_latency_seconds (%s): the slow query would match no bucket",
			threshold, strings.Join(bounds, ", "))
	}
	return cfg, nil
}

// hasIntervalQuery reports whether the judge has a rank test to run.
func hasIntervalQuery(j *v1alpha1.JudgeSpec) bool {
	return j.IntervalQuery != nil && strings.TrimSpace(*j.IntervalQuery) != ""
}

// judgeThreshold is judge.threshold, 0 when unset.
func judgeThreshold(j *v1alpha1.JudgeSpec) time.Duration {
	if j.Threshold == nil {
		return 0
	}
	return j.Threshold.Duration
}

// MeasureJudge takes one measurement of a judge analysis at the instant at:
// it renders and runs slowQuery and totalQuery (and intervalQuery as a range
// query over the window, when set) for the canary and the baseline cohort,
// over the window shortened to start one step after canary.Since (when
// set; until one step of messages is in, the measurement is Inconclusive),
// matches their series by labels (one per host pair), and decides with
// Judge: the measurement's verdict is the judge's; a template or query error
// is VerdictError (VerdictUnavailable when the backend refused). Canary and
// Baseline are the deciding pair's slow shares in percent, Threshold the
// baseline's share times maxRatio plus maxIncrease (percent), CanarySamples and
// BaselineSamples the deciding pair's message counts.
func MeasureJudge(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline Cohort, at time.Time) Measurement {
	cfg, err := JudgeConfigFor(spec)
	if err != nil {
		return errorMeasurement(at, err)
	}
	if len(baseline.Vehicles) == 0 {
		r := JudgeResult{Verdict: VerdictInconclusive, Message: "no baseline vehicles to compare the canary with"}
		return Measurement{Verdict: r.Verdict, At: at, Message: r.Message, Judge: &r}
	}
	vq, ok := q.(VectorQuerier)
	if !ok {
		return errorMeasurement(at, fmt.Errorf("the %s client cannot run per-pair queries", spec.Provider))
	}
	j := spec.Judge
	step := j.GetStep()
	window, err := judgeWindow(spec.GetWindow(), step, canary.Since, at)
	if err != nil {
		r := JudgeResult{Verdict: VerdictInconclusive, Message: err.Error()}
		return Measurement{Verdict: r.Verdict, At: at, Message: r.Message, Judge: &r}
	}
	extra := func(d *TemplateData) error {
		threshold := judgeThreshold(j)
		d.ThresholdMs = strconv.FormatFloat(float64(threshold)/float64(time.Millisecond), 'f', -1, 64)
		d.ThresholdSeconds = strconv.FormatFloat(threshold.Seconds(), 'f', -1, 64)
		s, err := FormatDuration(step)
		d.Step = s
		return err
	}
	render := func(cohort, what, tmpl string, c Cohort) (string, error) {
		query, err := renderQuery(tmpl, profile, c, window, extra)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", cohort, what, err)
		}
		return query, nil
	}
	counts := func(cohort, what, tmpl string, c Cohort) (map[string]float64, error) {
		query, err := render(cohort, what, tmpl, c)
		if err != nil {
			return nil, err
		}
		series, err := vq.QueryVector(ctx, query, at)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cohort, what, err)
		}
		out := make(map[string]float64, len(series))
		for _, s := range series {
			out[s.Key] += s.Value
		}
		return out, nil
	}
	intervals := func(cohort string, c Cohort) (intervalData, error) {
		if !hasIntervalQuery(j) {
			return intervalData{}, nil
		}
		query, err := render(cohort, "intervalQuery", *j.IntervalQuery, c)
		if err != nil {
			return intervalData{}, err
		}
		// The first point covers [at-window, at-window+step].
		series, err := vq.QueryRange(ctx, query, at.Add(-window).Add(step), at, step)
		if err != nil {
			return intervalData{}, fmt.Errorf("%s intervalQuery: %w", cohort, err)
		}
		// A series per vehicle (by (host, peer, vehicle)) makes each
		// vehicle's interval one value of its pair: the canary's intervals
		// and the baseline's then each cover one vehicle's messages. The
		// canary's are also kept per vehicle, for the rank test of each.
		out := intervalData{all: make(map[string][]float64, len(series)), byVehicle: map[string]map[string][]float64{}}
		for _, s := range series {
			labels := maps.Clone(s.Labels)
			vehicle, hasVehicle := labels["vehicle"]
			delete(labels, "vehicle")
			key := SeriesKey(labels)
			out.all[key] = append(out.all[key], s.Values...)
			if hasVehicle && vehicle != "" {
				if out.byVehicle[key] == nil {
					out.byVehicle[key] = map[string][]float64{}
				}
				out.byVehicle[key][vehicle] = append(out.byVehicle[key][vehicle], s.Values...)
			}
		}
		return out, nil
	}

	type cohortData struct {
		slow, total map[string]float64
		iv          intervalData
	}
	get := func(name string, c Cohort) (d cohortData, err error) {
		if d.total, err = counts(name, "totalQuery", j.TotalQuery, c); err != nil {
			return d, err
		}
		if d.slow, err = counts(name, "slowQuery", j.SlowQuery, c); err != nil {
			return d, err
		}
		d.iv, err = intervals(name, c)
		return d, err
	}
	cd, err := get("canary", canary)
	if err != nil {
		return errorMeasurement(at, err)
	}
	bd, err := get("baseline", baseline)
	if err != nil {
		return errorMeasurement(at, err)
	}
	var data []PairData
	for key, total := range cd.total {
		data = append(data, PairData{
			Pair:              pairName(key),
			Canary:            Counts{Slow: cd.slow[key], Total: total},
			Baseline:          Counts{Slow: bd.slow[key], Total: bd.total[key]},
			CanaryIntervals:   cd.iv.all[key],
			BaselineIntervals: bd.iv.all[key],
			CanaryVehicles:    canaryVehicles(cd.iv.byVehicle[key], len(canary.Vehicles)),
		})
	}
	res := Judge(cfg, data)
	return judgeMeasurement(at, cfg, res)
}

// intervalData are a cohort's per-interval values by pair key, pooled over
// its vehicles (all) and per vehicle (byVehicle[key][vehicle]).
type intervalData struct {
	all       map[string][]float64
	byVehicle map[string]map[string][]float64
}

// canaryVehicles is the per-vehicle split of a pair's canary intervals when
// the canary has more than one vehicle (nil otherwise: one vehicle's split
// is the pooled list).
func canaryVehicles(byVehicle map[string][]float64, vehicles int) map[string][]float64 {
	if vehicles < 2 || len(byVehicle) == 0 {
		return nil
	}
	return byVehicle
}

// judgeWindow is the window a judge measures at at: the analysis' window,
// shortened to start one step after since (when set), in whole seconds. Less
// than one step is an error saying when the first verdict can come.
func judgeWindow(window, step time.Duration, since, at time.Time) (time.Duration, error) {
	if since.IsZero() {
		return window, nil
	}
	from := since.Add(step)
	if w := at.Sub(from).Truncate(time.Second); w < window {
		if w < step {
			return 0, fmt.Errorf("collecting: messages count from %s (one step of %s after the analysis started), %s from now",
				from.UTC().Format(time.RFC3339), step, from.Add(step).Sub(at).Round(time.Second))
		}
		return w, nil
	}
	return window, nil
}

// pairName is the pair's series key, or "(all)" for a series without labels.
func pairName(key string) string {
	if key == "" {
		return "(all)"
	}
	return key
}

func judgeMeasurement(at time.Time, cfg JudgeConfig, res JudgeResult) Measurement {
	m := Measurement{Verdict: res.Verdict, At: at, Message: res.Message, Judge: &res}
	if len(res.Pairs) > 0 {
		d := res.Pairs[0]
		m.Canary = ptr(100 * d.CanaryShare)
		m.Baseline = ptr(100 * d.BaselineShare)
		m.Threshold = ptr(100 * (judgeRatio(cfg)*d.BaselineShare + cfg.MaxIncrease))
		m.CanarySamples = ptr(float64(d.CanaryTotal))
		m.BaselineSamples = ptr(float64(d.BaselineTotal))
	}
	return m
}

// maxPairs is the MaxItems of AnalysisResult.Pairs.
const maxPairs = 32

// judgeFields copies a judge's measurement into an AnalysisResult: its
// verdict v, and the judge's evidence and verdict on every pair.
func judgeFields(r *v1alpha1.AnalysisResult, v Verdict, res *JudgeResult) {
	r.Verdict = string(v)
	r.Pair, r.Effect, r.Probability = "", "", ""
	r.CanarySamples, r.BaselineSamples = nil, nil
	r.Confidence = ""
	if res.PairConfidence > 0 {
		r.Confidence = fmtNum(res.PairConfidence)
	}
	r.Pairs = nil
	for i, p := range res.Pairs {
		if i == 0 {
			r.Pair = text.Truncate(p.Pair, 253)
			r.Effect = fmtNum(p.Effect)
			r.Probability = fmtProb(p.PWorse)
			ct, bt := p.CanaryTotal, p.BaselineTotal
			r.CanarySamples, r.BaselineSamples = &ct, &bt
		}
		if i >= maxPairs {
			break
		}
		r.Pairs = append(r.Pairs, v1alpha1.PairVerdict{
			Pair: text.Truncate(p.Pair, 253), Verdict: string(p.Verdict),
			CanarySlow: p.CanarySlow, CanaryTotal: p.CanaryTotal, BaselineSlow: p.BaselineSlow, BaselineTotal: p.BaselineTotal,
			Probability: fmtProb(p.PWorse), RankP: fmtProb(p.RankP),
		})
	}
}

// fmtProb formats a probability for status; "" for NaN (not computed).
func fmtProb(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return fmtNum(v)
}
