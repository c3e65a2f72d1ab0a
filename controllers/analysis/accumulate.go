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
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/text"
)

// maxMessage is the MaxLength of AnalysisResult.Message.
const maxMessage = 1024

// Accumulate folds one measurement into the running result of an analysis
// step (pure). It is where a measurement's verdict becomes the status: a
// cluster's and a hub's rollout, and an experiment, record it only through
// it.
//
// Counters: Successful, Failed and Inconclusive count the measurements
// whose verdict was Pass, Fail and Inconclusive over the whole analysis.
// Errors counts CONSECUTIVE measurements that could not be taken (Error,
// Unavailable): any other measurement resets it to 0, so a flapping backend
// that answers every other time never exhausts consecutiveErrorLimit.
//
// Phase, in this order:
//   - Failed when Failed > failureLimit (default 0);
//   - Unavailable (not terminal) when Errors > consecutiveErrorLimit
//     (default 4) and the latest measurement is Unavailable: the backend
//     refused or did not answer, which says nothing of the canaries; the
//     next measurement that is taken resets Errors and the phase;
//   - Inconclusive when Inconclusive > inconclusiveLimit (default 3) or
//     Errors > consecutiveErrorLimit (default 4);
//   - Successful when Successful >= measurements (default 3);
//   - Running otherwise.
//
// CanaryValue, BaselineValue and Threshold are the latest measurement's values
// as decimal strings (6 significant digits, empty when the value is absent);
// for a judge analysis, so are Verdict (the measurement's), Pair, Effect,
// Probability, Confidence, the samples and Pairs (each pair's verdict). A
// measurement that could not be taken keeps the previous ones. LastMeasured
// is m.At and Message explains the phase with the latest measurement's
// verdict (its Phase word) and message.
//
// A terminal result (Successful, Failed, Inconclusive) is returned unchanged.
func Accumulate(prev v1alpha1.AnalysisResult, m Measurement, spec *v1alpha1.AnalysisSpec) v1alpha1.AnalysisResult {
	if v1alpha1.AnalysisTerminal(prev.Phase) {
		return prev
	}
	r := prev
	if r.Name == "" {
		r.Name = spec.Name
	}
	switch m.Verdict {
	case VerdictPass:
		r.Successful++
	case VerdictFail:
		r.Failed++
	case VerdictInconclusive:
		r.Inconclusive++
	default: // VerdictError, VerdictUnavailable and anything unknown
		r.Errors++
	}
	if m.Verdict.decided() {
		r.Errors = 0
		r.CanaryValue = decimal(m.Canary)
		r.BaselineValue = decimal(m.Baseline)
		r.Threshold = decimal(m.Threshold)
		if m.Judge != nil {
			judgeFields(&r, m.Verdict, m.Judge)
		}
	}
	at := metav1.NewTime(m.At)
	r.LastMeasured = &at
	if r.Started == nil {
		r.Started = &at
	}

	want := measurements(spec)
	failureLimit := int32Or(spec.FailureLimit, DefaultFailureLimit)
	inconclusiveLimit := int32Or(spec.InconclusiveLimit, DefaultInconclusiveLimit)
	errorLimit := int32Or(spec.ConsecutiveErrorLimit, DefaultConsecutiveErrorLimit)
	last := fmt.Sprintf("latest measurement %s: %s", phaseOrUnknown(m.Verdict), m.Message)

	var msg string
	switch {
	case r.Failed > failureLimit:
		r.Phase = v1alpha1.AnalysisFailed
		msg = fmt.Sprintf("%d failed measurement(s) > failureLimit %d; %s", r.Failed, failureLimit, last)
	case r.Inconclusive > inconclusiveLimit:
		r.Phase = v1alpha1.AnalysisInconclusive
		msg = fmt.Sprintf("%d inconclusive measurement(s) > inconclusiveLimit %d; %s", r.Inconclusive, inconclusiveLimit, last)
	case r.Errors > errorLimit && m.Verdict == VerdictUnavailable:
		r.Phase = v1alpha1.AnalysisUnavailable
		msg = fmt.Sprintf("backend unavailable: %d consecutive measurements refused or unanswered > consecutiveErrorLimit %d; the rollout waits and goes on once a measurement is taken; %s", r.Errors, errorLimit, last)
	case r.Errors > errorLimit:
		r.Phase = v1alpha1.AnalysisInconclusive
		msg = fmt.Sprintf("%d consecutive query errors > consecutiveErrorLimit %d; %s", r.Errors, errorLimit, last)
	case r.Successful >= want:
		r.Phase = v1alpha1.AnalysisSuccessful
		msg = fmt.Sprintf("%d/%d measurements successful; %s", r.Successful, want, last)
	default:
		r.Phase = v1alpha1.AnalysisRunning
		msg = fmt.Sprintf("%d/%d measurements successful (%d failed, %d inconclusive, %d consecutive errors); %s",
			r.Successful, want, r.Failed, r.Inconclusive, r.Errors, last)
	}
	r.Message = text.Truncate(msg, maxMessage)
	return r
}

func phaseOrUnknown(v Verdict) string {
	if v == "" {
		return "(no phase)"
	}
	return v.Phase()
}

// decimal formats an optional value for AnalysisResult (MaxLength 32).
func decimal(v *float64) string {
	if v == nil {
		return ""
	}
	return fmtNum(*v)
}

// StartedAt is when the analysis of r took its first measurement, or now
// when it has taken none: the instant its cohorts settled (Cohort.Since).
func StartedAt(r v1alpha1.AnalysisResult, now time.Time) time.Time {
	if r.Started != nil {
		return r.Started.Time
	}
	return now
}

// Due reports whether the next measurement should be taken at now and when
// the following one is due (for RequeueAfter):
//
//   - a finished analysis (terminal phase) is never due; next is the zero time;
//   - with no measurement yet, one is due now; next is now + interval;
//   - otherwise a measurement is due once now >= lastMeasured + interval
//     (default 1m); when due, next is now + interval (the one after the
//     measurement about to be taken), else next is lastMeasured + interval.
//
// lastMeasured is stored with second precision in the API, so a measurement
// may come up to a second early after a round trip, never late.
func Due(prev v1alpha1.AnalysisResult, spec *v1alpha1.AnalysisSpec, now time.Time) (bool, time.Time) {
	if v1alpha1.AnalysisTerminal(prev.Phase) {
		return false, time.Time{}
	}
	interval := Interval(spec)
	if prev.LastMeasured == nil || prev.LastMeasured.IsZero() {
		return true, now.Add(interval)
	}
	next := prev.LastMeasured.Add(interval)
	if now.Before(next) {
		return false, next
	}
	return true, now.Add(interval)
}
