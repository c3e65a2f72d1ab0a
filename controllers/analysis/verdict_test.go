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
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
)

// TestVerdictFromJudgeToStatus: the judge's verdict is the measurement's,
// unchanged; Accumulate counts it, records it for a judge analysis, and
// names it with its Phase word, the one events and metrics use.
func TestVerdictFromJudgeToStatus(t *testing.T) {
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	spec := &v1alpha1.AnalysisSpec{Name: "slow", Judge: &v1alpha1.JudgeSpec{}, Measurements: ptrInt32(5)}
	for _, c := range []struct {
		verdict Verdict
		phase   string
		count   func(v1alpha1.AnalysisResult) int32
	}{
		{VerdictPass, "Successful", func(r v1alpha1.AnalysisResult) int32 { return r.Successful }},
		{VerdictFail, "Failed", func(r v1alpha1.AnalysisResult) int32 { return r.Failed }},
		{VerdictInconclusive, "Inconclusive", func(r v1alpha1.AnalysisResult) int32 { return r.Inconclusive }},
	} {
		m := judgeMeasurement(at, JudgeConfig{}, JudgeResult{Verdict: c.verdict, Message: "m"})
		if m.Verdict != c.verdict || m.Verdict.Phase() != c.phase {
			t.Errorf("judge %s: measurement %s (%s), want %s (%s)", c.verdict, m.Verdict, m.Verdict.Phase(), c.verdict, c.phase)
		}
		r := Accumulate(v1alpha1.AnalysisResult{}, m, spec)
		if c.count(r) != 1 || r.Verdict != string(c.verdict) || !strings.Contains(r.Message, "latest measurement "+c.phase+": m") {
			t.Errorf("judge %s: result %+v", c.verdict, r)
		}
	}
	for _, c := range []struct {
		verdict Verdict
		phase   string
	}{{VerdictError, "Error"}, {VerdictUnavailable, v1alpha1.AnalysisUnavailable}} {
		r := Accumulate(v1alpha1.AnalysisResult{Verdict: "Pass"}, Measurement{Verdict: c.verdict, At: at, Message: "m"}, spec)
		if c.verdict.Phase() != c.phase || r.Errors != 1 || r.Verdict != "Pass" || !strings.Contains(r.Message, "latest measurement "+c.phase+": m") {
			t.Errorf("%s: phase %s, result %+v; want %s, one error, the verdict before kept", c.verdict, c.verdict.Phase(), r, c.phase)
		}
	}
}
