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
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Measurement is one evaluation of an analysis: the canary and baseline
// values at one instant and the verdict on them.
type Measurement struct {
	// Verdict is the measurement's outcome; a judge analysis' is its
	// Judge's.
	Verdict Verdict
	At      time.Time
	// Canary is the canary cohort's value; nil when the query returned nothing.
	Canary *float64
	// Baseline is the baseline cohort's value; nil when there is no baseline
	// cohort or its query returned nothing.
	Baseline *float64
	// CanarySamples and BaselineSamples come from samplesQuery (an empty
	// result counts as 0); nil when the spec has no samplesQuery or the
	// cohort was not measured.
	CanarySamples   *float64
	BaselineSamples *float64
	// Threshold is the ceiling the canary was held to: the smaller of maxValue
	// and baseline*maxBaselineFactor+maxBaselineOffset (those that applied).
	Threshold *float64
	// Message says which check decided the verdict, with values and
	// thresholds.
	Message string
	// Judge is the judge's verdict per host pair (judge analyses only; nil
	// when the queries failed).
	Judge *JudgeResult
}

// Defaults applied when an AnalysisSpec field is nil (the same as the CRD's
// +kubebuilder:default values).
const (
	DefaultInterval              = v1alpha1.DefaultAnalysisInterval
	DefaultWindow                = v1alpha1.DefaultAnalysisWindow
	DefaultMeasurements          = int32(3)
	DefaultMinSamples            = int64(100)
	DefaultFailureLimit          = int32(0)
	DefaultConsecutiveErrorLimit = int32(4)
	DefaultInconclusiveLimit     = int32(3)
)

// Interval returns spec.interval or its default (spec.GetInterval).
func Interval(spec *v1alpha1.AnalysisSpec) time.Duration { return spec.GetInterval() }

func measurements(spec *v1alpha1.AnalysisSpec) int32 {
	if spec.Measurements != nil && *spec.Measurements > 0 {
		return *spec.Measurements
	}
	return DefaultMeasurements
}

func minSamples(spec *v1alpha1.AnalysisSpec) int64 {
	if spec.MinSamples != nil {
		return *spec.MinSamples
	}
	return DefaultMinSamples
}

func int32Or(p *int32, def int32) int32 {
	if p != nil {
		return *p
	}
	return def
}

// Measure renders and runs the analysis queries for the canary cohort and,
// when baseline has vehicles, the baseline cohort, all at the instant at, then
// decides the measurement with Evaluate. A template or query error gives
// VerdictError with the error in Message; an empty result is not an error (the
// value stays nil and Evaluate decides).
//
// A judge analysis (spec.judge) is measured by MeasureJudge instead.
//
// Before any query, the cohorts' kernels (Cohort.Kernels) are checked
// against the tcp_info counters the queries read: a canary vehicle that
// cannot measure one makes the measurement Inconclusive, naming the counter,
// the kernel and the vehicle; baseline vehicles that cannot are left out of
// the baseline, and the message says so.
func Measure(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline Cohort, at time.Time) Measurement {
	if usesRevision(spec) {
		// nettune's revision label keeps every sample of another revision
		// out of the cohort's queries already.
		return measureSettled(ctx, q, profile, spec, canary, baseline, at)
	}
	// The application's own latency knows no revision: only vehicles that
	// verified their revision before the window starts are measured.
	from := at.Add(-spec.GetWindow())
	if spec.Judge != nil && !canary.Since.IsZero() {
		if s := canary.Since.Add(spec.Judge.GetStep()); s.After(from) {
			from = s
		}
	}
	var left []string
	hadCanary := len(canary.Vehicles) > 0
	canary, cnote := canary.settled("canary", from)
	baseline, bnote := baseline.settled("baseline", from)
	for _, n := range []string{cnote, bnote} {
		if n != "" {
			left = append(left, n)
		}
	}
	if hadCanary && len(canary.Vehicles) == 0 {
		msg := "collecting: " + strings.Join(left, "; ")
		m := Measurement{Verdict: VerdictInconclusive, At: at, Message: msg}
		if spec.Judge != nil {
			m.Judge = &JudgeResult{Verdict: VerdictInconclusive, Message: msg}
		}
		return m
	}
	m := measureSettled(ctx, q, profile, spec, canary, baseline, at)
	if len(left) > 0 {
		m.Message += "; " + strings.Join(left, "; ")
	}
	return m
}

func measureSettled(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline Cohort, at time.Time) Measurement {
	spec, fallback := withNodeFallback(spec, canary, baseline)
	spec, estimate := withRTOEstimate(spec, canary, baseline)
	if estimate != "" {
		fallback = strings.Join(slices.DeleteFunc([]string{fallback, estimate}, func(s string) bool { return s == "" }), "; ")
	}
	m := measureChecked(ctx, q, profile, spec, canary, baseline, at)
	if fallback != "" {
		m.Message = fallback + ": " + m.Message
		if m.Judge != nil {
			m.Judge.Message = fallback + ": " + m.Judge.Message
		}
	}
	return m
}

func measureChecked(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline Cohort, at time.Time) Measurement {
	unmeasurable, baseline, note := checkKernels(spec, canary, baseline)
	if unmeasurable != "" {
		m := Measurement{Verdict: VerdictInconclusive, At: at, Message: unmeasurable}
		if spec.Judge != nil {
			m.Judge = &JudgeResult{Verdict: VerdictInconclusive, Message: unmeasurable}
		}
		return m
	}
	var m Measurement
	if spec.Judge != nil {
		m = MeasureJudge(ctx, q, profile, spec, canary, baseline, at)
	} else {
		m = measureQuery(ctx, q, profile, spec, canary, baseline, at)
	}
	if note != "" {
		m.Message += "; " + note
	}
	return m
}

// measureQuery is Measure of a query analysis.
func measureQuery(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, canary, baseline Cohort, at time.Time) Measurement {
	m := Measurement{At: at}
	window := spec.GetWindow()
	samplesTmpl := ""
	if spec.SamplesQuery != nil {
		samplesTmpl = strings.TrimSpace(*spec.SamplesQuery)
	}

	run := func(cohort, what, tmpl string, c Cohort) (*float64, error) {
		query, err := RenderQuery(tmpl, profile, c, window)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cohort, what, err)
		}
		v, ok, err := q.Query(ctx, query, at)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cohort, what, err)
		}
		if !ok {
			return nil, nil
		}
		return &v, nil
	}
	measure := func(name string, c Cohort) (value, samples *float64, err error) {
		if value, err = run(name, "query", spec.Query, c); err != nil {
			return nil, nil, err
		}
		if samplesTmpl == "" {
			return value, nil, nil
		}
		if samples, err = run(name, "samplesQuery", samplesTmpl, c); err != nil {
			return nil, nil, err
		}
		if samples == nil { // count_over_time over nothing returns an empty vector
			samples = ptr(0)
		}
		return value, samples, nil
	}

	var err error
	if m.Canary, m.CanarySamples, err = measure("canary", canary); err != nil {
		return errorMeasurement(at, err)
	}
	baselineNote := "no baseline value"
	if len(baseline.Vehicles) == 0 {
		baselineNote = "no baseline vehicles"
	} else if m.Baseline, m.BaselineSamples, err = measure("baseline", baseline); err != nil {
		return errorMeasurement(at, err)
	}
	return evaluate(spec, m, baselineNote)
}

// ErrorMeasurement is the measurement of a query that could not be taken:
// VerdictUnavailable for an UnavailableError, VerdictError otherwise.
func ErrorMeasurement(at time.Time, err error) Measurement {
	if IsUnavailable(err) {
		return Measurement{Verdict: VerdictUnavailable, At: at, Message: err.Error()}
	}
	return Measurement{Verdict: VerdictError, At: at, Message: err.Error()}
}

func errorMeasurement(at time.Time, err error) Measurement { return ErrorMeasurement(at, err) }

// Evaluate decides one measurement from its values (pure):
//
//   - A measurement that could not be taken (VerdictError or
//     VerdictUnavailable) is returned unchanged.
//   - Canary samples below minSamples (when measured) or no canary value:
//     VerdictInconclusive.
//   - The relative ceiling baseline*maxBaselineFactor+maxBaselineOffset
//     (factor defaults to 1, offset to 0; applies when either is set) is used
//     only when there is a baseline value backed by at least minSamples
//     baseline samples (when measured); otherwise it is skipped and the
//     message says so — that alone does not make the measurement
//     Inconclusive.
//   - Canary above maxValue or above the relative ceiling: VerdictFail.
//     Otherwise VerdictPass; with no ceiling at all the measurement is
//     report-only and a Pass.
//
// Threshold is set to the smaller of the ceilings that applied. An
// unparsable maxValue/maxBaselineFactor/maxBaselineOffset gives VerdictError.
func Evaluate(spec *v1alpha1.AnalysisSpec, m Measurement) Measurement {
	return evaluate(spec, m, "no baseline value")
}

func evaluate(spec *v1alpha1.AnalysisSpec, m Measurement, noBaseline string) Measurement {
	if m.Verdict == VerdictError || m.Verdict == VerdictUnavailable {
		return m
	}
	m.Threshold = nil
	m.Message = ""
	fail := func(err error) Measurement {
		m.Verdict, m.Message = VerdictError, err.Error()
		return m
	}
	maxValue, err := parseDecimal("maxValue", spec.MaxValue, math.NaN())
	if err != nil {
		return fail(err)
	}
	factor, err := parseDecimal("maxBaselineFactor", spec.MaxBaselineFactor, 1)
	if err != nil {
		return fail(err)
	}
	offset, err := parseDecimal("maxBaselineOffset", spec.MaxBaselineOffset, 0)
	if err != nil {
		return fail(err)
	}
	relative := spec.MaxBaselineFactor != nil || spec.MaxBaselineOffset != nil
	minN := float64(minSamples(spec))

	if m.CanarySamples != nil && *m.CanarySamples < minN {
		m.Verdict = VerdictInconclusive
		m.Message = fmt.Sprintf("too few canary samples: %s < %s", fmtNum(*m.CanarySamples), fmtNum(minN))
		return m
	}
	if m.Canary == nil {
		m.Verdict = VerdictInconclusive
		m.Message = "canary query returned no value"
		return m
	}
	canary := *m.Canary

	var failed, passed, notes []string
	setThreshold := func(t float64) {
		if m.Threshold == nil || t < *m.Threshold {
			m.Threshold = ptr(t)
		}
	}
	if !math.IsNaN(maxValue) {
		setThreshold(maxValue)
		if canary > maxValue {
			failed = append(failed, fmt.Sprintf("canary %s > maxValue %s", fmtNum(canary), fmtNum(maxValue)))
		} else {
			passed = append(passed, fmt.Sprintf("canary %s <= maxValue %s", fmtNum(canary), fmtNum(maxValue)))
		}
	}
	if relative {
		switch {
		case m.Baseline == nil:
			notes = append(notes, "relative check skipped: "+noBaseline)
		case m.BaselineSamples != nil && *m.BaselineSamples < minN:
			notes = append(notes, fmt.Sprintf("relative check skipped: too few baseline samples: %s < %s (baseline %s)",
				fmtNum(*m.BaselineSamples), fmtNum(minN), fmtNum(*m.Baseline)))
		default:
			ceiling := *m.Baseline*factor + offset
			setThreshold(ceiling)
			formula := fmt.Sprintf("baseline %s x %s + %s = %s", fmtNum(*m.Baseline), fmtNum(factor), fmtNum(offset), fmtNum(ceiling))
			if canary > ceiling {
				failed = append(failed, fmt.Sprintf("canary %s > %s", fmtNum(canary), formula))
			} else {
				passed = append(passed, fmt.Sprintf("canary %s <= %s", fmtNum(canary), formula))
			}
		}
	}

	switch {
	case len(failed) > 0:
		m.Verdict = VerdictFail
		m.Message = strings.Join(append(failed, notes...), "; ")
	case len(passed) > 0:
		m.Verdict = VerdictPass
		m.Message = strings.Join(append(passed, notes...), "; ")
	default:
		m.Verdict = VerdictPass
		m.Message = strings.Join(append([]string{fmt.Sprintf("canary %s (report only: no ceiling applied)", fmtNum(canary))}, notes...), "; ")
	}
	if m.CanarySamples != nil {
		m.Message += fmt.Sprintf(" [canary samples %s", fmtNum(*m.CanarySamples))
		if m.BaselineSamples != nil {
			m.Message += fmt.Sprintf(", baseline samples %s", fmtNum(*m.BaselineSamples))
		}
		m.Message += "]"
	}
	return m
}

// parseDecimal parses an optional decimal-string threshold.
func parseDecimal(field string, s *string, def float64) (float64, error) {
	if s == nil {
		return def, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(*s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid %s %q: want a decimal number", field, *s)
	}
	return v, nil
}

// fmtNum formats v for messages and status: at most 6 significant digits,
// without exponent for ordinary magnitudes, at most 32 characters.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if s := strconv.FormatFloat(r, 'f', -1, 64); len(s) <= 32 {
		return s
	}
	return strconv.FormatFloat(r, 'g', 6, 64)
}

func ptr(v float64) *float64 { return &v }

// revisionRE is a template action reading .Revision.
var revisionRE = regexp.MustCompile(`{{-? *\.Revision *-?}}`)

// usesRevision reports whether every query of spec selects by nettune's
// revision (a .Revision action): then no sample of another revision can
// reach the cohort's value, whatever the window.
func usesRevision(spec *v1alpha1.AnalysisSpec) bool {
	var qs []string
	if spec.Judge != nil {
		qs = append(qs, spec.Judge.SlowQuery, spec.Judge.TotalQuery)
		if spec.Judge.IntervalQuery != nil {
			qs = append(qs, *spec.Judge.IntervalQuery)
		}
	} else {
		qs = append(qs, spec.Query)
		if spec.SamplesQuery != nil && strings.TrimSpace(*spec.SamplesQuery) != "" {
			qs = append(qs, *spec.SamplesQuery)
		}
	}
	for _, q := range qs {
		if strings.TrimSpace(q) != "" && !revisionRE.MatchString(q) {
			return false
		}
	}
	return true
}
