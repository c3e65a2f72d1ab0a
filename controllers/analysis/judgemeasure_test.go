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
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestJudgeWindow(t *testing.T) {
	at := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	step := 5 * time.Second
	for _, c := range []struct {
		name    string
		since   time.Time
		want    time.Duration
		wantErr string
	}{
		{"no since: the whole window", time.Time{}, time.Minute, ""},
		{"started long ago: the whole window", at.Add(-10 * time.Minute), time.Minute, ""},
		{"started 30s ago: 25s from one step after", at.Add(-30 * time.Second), 25 * time.Second, ""},
		{"started 30.7s ago: whole seconds", at.Add(-30*time.Second - 700*time.Millisecond), 25 * time.Second, ""},
		{"started just now: collecting", at, 0, "collecting: messages count from 2026-11-23T09:00:05Z"},
		{"started 9s ago: less than a step", at.Add(-9 * time.Second), 0, "1s from now"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := judgeWindow(time.Minute, step, c.since, at)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want it to contain %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestJudgeConfigFor(t *testing.T) {
	s := func(v string) *string { return &v }
	spec := &v1alpha1.AnalysisSpec{Name: "j", Judge: &v1alpha1.JudgeSpec{Threshold: &metav1.Duration{Duration: 100 * time.Millisecond}}}
	cfg, err := JudgeConfigFor(spec)
	if err != nil || cfg.Quantile != DefaultJudgeQuantile || cfg.Confidence != DefaultJudgeConfidence ||
		cfg.MaxIncrease != DefaultJudgeMaxIncrease || cfg.MinSamples != DefaultMinSamples {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	spec.Judge.Quantile, spec.Judge.Confidence, spec.Judge.MaxIncrease = s("0.999"), s("0.95"), s("0.01")
	if cfg, err = JudgeConfigFor(spec); err != nil || cfg.Quantile != 0.999 || cfg.Confidence != 0.95 || cfg.MaxIncrease != 0.01 {
		t.Fatalf("set: %+v %v", cfg, err)
	}
	spec.Judge.Confidence = s("high")
	if _, err = JudgeConfigFor(spec); err == nil || !strings.Contains(err.Error(), "judge.confidence") {
		t.Fatalf("bad confidence: %v", err)
	}
}

// A judge's verdict lands in the result; the first measurement sets Started
// and later ones keep it.
// A guard counts without a latency threshold; a query that uses one needs it.
func TestJudgeConfigForThreshold(t *testing.T) {
	guard := &v1alpha1.AnalysisSpec{Name: "g", Provider: v1alpha1.ProviderPrometheus, Judge: &v1alpha1.JudgeSpec{
		SlowQuery: "sum by (host, peer) (increase(nettune_tcp_dsack_dups_total[{{ .Window }}]))", TotalQuery: "t"}}
	if _, err := JudgeConfigFor(guard); err != nil {
		t.Errorf("guard without threshold: %v", err)
	}
	latency := guard.DeepCopy()
	latency.Judge.SlowQuery = "x > {{ .ThresholdMs }}"
	if _, err := JudgeConfigFor(latency); err == nil || !strings.Contains(err.Error(), "judge.threshold is required") {
		t.Errorf("query using an unset threshold: %v, want judge.threshold is required", err)
	}
	latency.Judge.Threshold = &metav1.Duration{Duration: 0}
	if _, err := JudgeConfigFor(latency); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("zero threshold: %v, want must be positive", err)
	}
}

func TestAccumulateJudge(t *testing.T) {
	spec := &v1alpha1.AnalysisSpec{Name: "slow", Judge: &v1alpha1.JudgeSpec{}, Measurements: ptrInt32(1), InconclusiveLimit: ptrInt32(3)}
	t0 := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	inconclusive := judgeMeasurement(t0, JudgeConfig{MaxIncrease: 0.01}, JudgeResult{Verdict: VerdictInconclusive, Message: "collecting"})
	r := Accumulate(v1alpha1.AnalysisResult{}, inconclusive, spec)
	if r.Phase != v1alpha1.AnalysisRunning || r.Started == nil || !r.Started.Time.Equal(t0) || r.Verdict != "Inconclusive" {
		t.Fatalf("after the first measurement: %+v", r)
	}
	fail := JudgeResult{Verdict: VerdictFail, PairConfidence: 0.998, Message: "Fail on p", Pairs: []PairResult{
		{Pair: "host=b,peer=a", Verdict: VerdictFail, CanarySlow: 60, CanaryTotal: 1000, BaselineSlow: 3, BaselineTotal: 3000,
			CanaryShare: 0.06, BaselineShare: 0.001, Effect: 0.059, PWorse: 1, RankP: 1e-5},
		{Pair: "host=a,peer=b", Verdict: VerdictPass, CanaryTotal: 1000, BaselineTotal: 3000, PWorse: 0, RankP: math.NaN()},
	}}
	r = Accumulate(r, judgeMeasurement(t0.Add(10*time.Second), JudgeConfig{MaxIncrease: 0.01}, fail), spec)
	if r.Phase != v1alpha1.AnalysisFailed || !r.Started.Time.Equal(t0) || r.Verdict != "Fail" || r.Pair != "host=b,peer=a" ||
		r.Effect != "0.059" || r.Probability != "1" || r.Confidence != "0.998" || *r.CanarySamples != 1000 || *r.BaselineSamples != 3000 ||
		len(r.Pairs) != 2 || r.Pairs[0].RankP != "0.00001" || r.Pairs[1].RankP != "" ||
		r.CanaryValue != "6" || r.BaselineValue != "0.1" || r.Threshold != "1.1" {
		t.Fatalf("after a failing verdict: %+v", r)
	}
}

func ptrInt32(v int32) *int32 { return &v }

// ProbExceeds with a ratio: a canary at 0.4 % against a baseline at 0.3 %
// is not worse than twice the baseline plus 0.3 points, but it is worse
// than the baseline plus 0.05 points; ratio 1 is ProbDiffExceeds.
func TestProbExceedsRatio(t *testing.T) {
	relaxed := ProbExceeds(40, 10000, 90, 30000, 2, 0.003)
	strict := ProbExceeds(40, 10000, 90, 30000, 1, 0.0005)
	if relaxed > 0.001 || strict < 0.5 {
		t.Fatalf("P(> 2b + 0.3pp) = %v (want ~0), P(> b + 0.05pp) = %v (want > 0.5)", relaxed, strict)
	}
	if a, b := ProbExceeds(40, 10000, 90, 30000, 1, 0.001), ProbDiffExceeds(40, 10000, 90, 30000, 0.001); a != b {
		t.Fatalf("ratio 1: %v != %v", a, b)
	}
	cfg := JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.003, MaxRatio: 2}
	res := Judge(cfg, []PairData{{Pair: "p", Canary: Counts{Slow: 40, Total: 10000}, Baseline: Counts{Slow: 90, Total: 30000}}})
	if res.Verdict != VerdictPass || !strings.Contains(res.Message, "2 x baseline") {
		t.Fatalf("verdict %s: %s", res.Verdict, res.Message)
	}
	if res := Judge(JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxRatio: 0.5}, nil); res.Verdict != VerdictInconclusive || !strings.Contains(res.Message, "MaxRatio") {
		t.Fatalf("ratio below 1: %s %s", res.Verdict, res.Message)
	}
}
