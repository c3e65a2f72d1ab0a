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

import "github.com/nettune/nettune/api/v1alpha1"

// Verdict is the outcome of one measurement, and the one type it has from
// its decision to the status: the judge decides it for a host pair and for
// all of them (PairResult, JudgeResult), Evaluate for a query analysis, a
// Measurement carries it, and Accumulate alone turns it into the status
// (v1alpha1.AnalysisResult: the counter and phase it counts toward, and
// for a judge analysis the verdict and each pair's).
type Verdict string

// The verdicts. Pass, Fail and Inconclusive are verdicts on the canary (the
// judge's three); Error and Unavailable say that a measurement could not be
// taken, and so reached none.
const (
	// VerdictPass means the canary is, with the confidence asked, no worse
	// than the baseline by more than the tolerated increase (a query
	// analysis: within its ceilings).
	VerdictPass Verdict = "Pass"
	// VerdictFail means the canary is, with the confidence asked, worse than
	// the baseline by more than the tolerated increase (a query analysis:
	// above a ceiling).
	VerdictFail Verdict = "Fail"
	// VerdictInconclusive means the evidence supports neither a Pass nor a
	// Fail, or there are too few samples to decide.
	VerdictInconclusive Verdict = "Inconclusive"
	// VerdictError is a measurement that could not be taken: a template,
	// configuration or query error. It counts toward consecutiveErrorLimit.
	VerdictError Verdict = "Error"
	// VerdictUnavailable is a measurement the backend did not let happen
	// (UnavailableError): it counts toward consecutiveErrorLimit like an
	// Error, and past it the analysis waits (v1alpha1.AnalysisUnavailable)
	// instead of ending Inconclusive.
	VerdictUnavailable Verdict = "Unavailable"
)

// Phase is the word a measurement with verdict v is announced with (its
// event's reason, the phase label of its metric, the message of the
// analysis result it goes into): the analysis phase it counts toward
// (Successful, Failed, Inconclusive, Unavailable), or Error.
func (v Verdict) Phase() string {
	switch v {
	case VerdictPass:
		return v1alpha1.AnalysisSuccessful
	case VerdictFail:
		return v1alpha1.AnalysisFailed
	case VerdictInconclusive:
		return v1alpha1.AnalysisInconclusive
	case VerdictUnavailable:
		return v1alpha1.AnalysisUnavailable
	}
	return string(v)
}

// decided reports whether v is a verdict on the canary (Pass, Fail or
// Inconclusive), not a measurement that could not be taken.
func (v Verdict) decided() bool {
	return v == VerdictPass || v == VerdictFail || v == VerdictInconclusive
}
