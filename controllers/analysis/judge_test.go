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
	"math/rand/v2"
	"strings"
	"testing"
)

// judgeTestGamma draws from Gamma(a, 1) (Marsaglia and Tsang; a < 1 by
// boosting with U^(1/a)).
func judgeTestGamma(r *rand.Rand, a float64) float64 {
	if a < 1 {
		return judgeTestGamma(r, a+1) * math.Pow(r.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// judgeTestBeta draws from Beta(a, b).
func judgeTestBeta(r *rand.Rand, a, b float64) float64 {
	x := judgeTestGamma(r, a)
	return x / (x + judgeTestGamma(r, b))
}

// judgeTestBinomial draws the number of successes of n trials of
// probability p.
func judgeTestBinomial(r *rand.Rand, n int, p float64) float64 {
	k := 0
	for i := 0; i < n; i++ {
		if r.Float64() < p {
			k++
		}
	}
	return float64(k)
}

// judgeTestIntervals draws n per-interval quantiles, lognormal around scale.
func judgeTestIntervals(r *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * math.Exp(0.4*r.NormFloat64())
	}
	return v
}

// judgeTestAA runs trials of an A/A comparison: both cohorts of every pair
// draw from the same distribution, except that with spread > 0 each cohort's
// slow share and interval scale are multiplied by an independent factor in
// [2^-spread/2, 2^spread/2] per trial.
func judgeTestAA(t *testing.T, cfg JudgeConfig, seed uint64, trials int, spread float64) map[Verdict]int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	got := map[Verdict]int{}
	names := []string{"host=a,peer=b", "host=a,peer=c", "host=b,peer=a", "host=b,peer=c", "host=c,peer=a", "host=c,peer=b"}
	for trial := 0; trial < trials; trial++ {
		var data []PairData
		for _, name := range names {
			fc := math.Pow(2, spread*(r.Float64()-0.5))
			fb := math.Pow(2, spread*(r.Float64()-0.5))
			data = append(data, PairData{
				Pair:              name,
				Canary:            Counts{Slow: judgeTestBinomial(r, 2000, 0.003*fc), Total: 2000},
				Baseline:          Counts{Slow: judgeTestBinomial(r, 6000, 0.003*fb), Total: 6000},
				CanaryIntervals:   judgeTestIntervals(r, 24, 10*fc),
				BaselineIntervals: judgeTestIntervals(r, 24, 10*fb),
			})
		}
		res := Judge(cfg, data)
		got[res.Verdict]++
		if res.Verdict == VerdictFail {
			t.Errorf("trial %d: A/A failed: %s", trial, res.Message)
		}
	}
	return got
}

func TestJudgeAA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     JudgeConfig
		minPass float64
		spread  float64
	}{
		{"tolerance 0.01", JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.01}, 0.8, 0},
		{"tolerance 0.005", JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.005}, 0, 0},
		{"tolerance 0", JudgeConfig{Quantile: 0.99, Confidence: 0.99}, 0, 0},
		{"overdispersed tolerance 0.005", JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.005}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const trials = 500
			got := judgeTestAA(t, tc.cfg, 7, trials, tc.spread)
			if got[VerdictFail] != 0 {
				t.Errorf("%d of %d A/A trials failed", got[VerdictFail], trials)
			}
			pass := float64(got[VerdictPass]) / trials
			t.Logf("A/A over %d trials: %d Pass (%.1f%%), %d Inconclusive, %d Fail",
				trials, got[VerdictPass], 100*pass, got[VerdictInconclusive], got[VerdictFail])
			if pass < tc.minPass {
				t.Errorf("Pass share %.3f, want >= %.2f", pass, tc.minPass)
			}
		})
	}
}

// judgeTestSteps returns n evenly spaced values from lo.
func judgeTestSteps(n int, lo, step float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo + float64(i)*step
	}
	return v
}

func TestJudgeBad(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.99, MinSamples: 1000, Confidence: 0.99, MaxIncrease: 0.002}
	r := rand.New(rand.NewPCG(11, 12))
	good := func(name string) PairData {
		return PairData{
			Pair:              name,
			Canary:            Counts{Slow: judgeTestBinomial(r, 3000, 0.002), Total: 3000},
			Baseline:          Counts{Slow: judgeTestBinomial(r, 9000, 0.002), Total: 9000},
			CanaryIntervals:   judgeTestIntervals(r, 24, 10),
			BaselineIntervals: judgeTestIntervals(r, 24, 10),
		}
	}
	bad := PairData{
		Pair:              "host=xavier-b,peer=xavier-a",
		Canary:            Counts{Slow: 60.4, Total: 1200.2},
		Baseline:          Counts{Slow: 7, Total: 3600},
		CanaryIntervals:   judgeTestSteps(24, 50, 1),
		BaselineIntervals: judgeTestSteps(24, 10, 1),
	}
	data := []PairData{good("host=xavier-a,peer=xavier-b"), bad, good("host=xavier-c,peer=xavier-a"),
		{Pair: "host=xavier-z,peer=unused", Canary: Counts{Slow: 0, Total: 0.3}, Baseline: Counts{Slow: 1, Total: 100}}}

	res := Judge(cfg, data)
	if res.Verdict != VerdictFail {
		t.Fatalf("verdict %s (%s), want Fail", res.Verdict, res.Message)
	}
	if len(res.Pairs) != 3 {
		t.Fatalf("%d pairs, want 3 (the unused one left out)", len(res.Pairs))
	}
	d := res.Pairs[0]
	if d.Pair != bad.Pair || d.Verdict != VerdictFail {
		t.Errorf("deciding pair %s %s, want %s Fail", d.Pair, d.Verdict, bad.Pair)
	}
	if d.CanarySlow != 60 || d.CanaryTotal != 1200 || d.BaselineSlow != 7 || d.BaselineTotal != 3600 {
		t.Errorf("counts %d/%d vs %d/%d", d.CanarySlow, d.CanaryTotal, d.BaselineSlow, d.BaselineTotal)
	}
	if math.Abs(d.Effect-(0.05-7.0/3600)) > 1e-12 || math.Abs(d.Effect-0.048) > 0.001 {
		t.Errorf("effect %v, want ~+0.048", d.Effect)
	}
	if !(d.PWorse > 0.9999) || !(d.RankP < 1e-6) {
		t.Errorf("PWorse %v, RankP %v", d.PWorse, d.RankP)
	}
	if res.MinSamples != 1000 {
		t.Errorf("MinSamples %d, want 1000", res.MinSamples)
	}
	if math.Abs(res.PairConfidence-(1-0.01/3)) > 1e-12 {
		t.Errorf("PairConfidence %v", res.PairConfidence)
	}
	if res.Pairs[1].Pair > res.Pairs[2].Pair {
		t.Errorf("other pairs not sorted: %s, %s", res.Pairs[1].Pair, res.Pairs[2].Pair)
	}
	for _, want := range []string{"Fail on host=xavier-b,peer=xavier-a", "5.00% (60/1200)", "0.19% (7/3600)", "effect +4.81 pp", "P(worse by >0.20 pp)=1.0000 at 99.67%", "rank p="} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q lacks %q", res.Message, want)
		}
	}
	t.Log(res.Message)
	t.Log(d.Reason)

	// Without intervals the exceedance test alone fails the pair.
	bad2 := bad
	bad2.CanaryIntervals, bad2.BaselineIntervals = nil, nil
	if res := Judge(cfg, []PairData{bad2}); res.Verdict != VerdictFail || !math.IsNaN(res.Pairs[0].RankP) {
		t.Errorf("without intervals: %s, RankP %v (%s)", res.Verdict, res.Pairs[0].RankP, res.Message)
	}
	// Too few intervals (below MinIntervals) do not run the rank test either.
	bad2.CanaryIntervals, bad2.BaselineIntervals = []float64{1, 1, 1}, []float64{1, 1, 1, 1, 1}
	if res := Judge(cfg, []PairData{bad2}); res.Verdict != VerdictFail || !math.IsNaN(res.Pairs[0].RankP) {
		t.Errorf("with 3 intervals: %s, RankP %v (%s)", res.Verdict, res.Pairs[0].RankP, res.Message)
	}
	// With RequireRank (the analysis has an intervalQuery), a rank test that
	// cannot run yet holds the Fail: Inconclusive, saying why.
	req := cfg
	req.RequireRank = true
	if res := Judge(req, []PairData{bad2}); res.Verdict != VerdictInconclusive || !strings.Contains(res.Pairs[0].Reason, "rank test waiting for 5 intervals per cohort (canary 3, baseline 5)") {
		t.Errorf("RequireRank with 3 intervals: %s (%s), want Inconclusive waiting for the rank test", res.Verdict, res.Pairs[0].Reason)
	}
	if res := Judge(req, []PairData{bad}); res.Verdict != VerdictFail {
		t.Errorf("RequireRank with enough intervals: %s (%s), want Fail", res.Verdict, res.Message)
	}

	// Two failing pairs: the larger effect decides.
	worse := bad
	worse.Pair = "host=a,peer=b"
	worse.Canary.Slow = 120
	res = Judge(cfg, []PairData{bad, worse})
	if res.Verdict != VerdictFail || res.Pairs[0].Pair != "host=a,peer=b" {
		t.Errorf("two failing pairs: deciding %s (%s)", res.Pairs[0].Pair, res.Message)
	}
}

func TestJudgeRankDoesNotConfirm(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.999, Confidence: 0.99, MaxIncrease: 0.002}
	iv := judgeTestSteps(24, 10, 1)
	data := []PairData{{
		Pair:              "peer=xavier-a",
		Canary:            Counts{Slow: 60, Total: 3200},
		Baseline:          Counts{Slow: 7, Total: 3600},
		CanaryIntervals:   iv,
		BaselineIntervals: iv,
	}}
	res := Judge(cfg, data)
	p := res.Pairs[0]
	if res.Verdict != VerdictInconclusive || p.Verdict != VerdictInconclusive {
		t.Fatalf("verdict %s / %s (%s), want Inconclusive", res.Verdict, p.Verdict, res.Message)
	}
	if !(p.PWorse >= res.PairConfidence) || !(p.RankP > 0.5) {
		t.Errorf("PWorse %v, RankP %v", p.PWorse, p.RankP)
	}
	if !strings.Contains(p.Reason, "exceedance says worse") || !strings.Contains(p.Reason, "rank test does not confirm: p=0.5") {
		t.Errorf("reason %q", p.Reason)
	}
	if !strings.Contains(res.Message, "rank test does not confirm") {
		t.Errorf("message %q", res.Message)
	}
	t.Log(res.Message)

	// The rank test never blocks a Pass: intervals that look much worse do
	// not matter when the shares are equal.
	data[0].Canary.Slow = 0
	data[0].Baseline.Slow = 0
	data[0].CanaryIntervals = judgeTestSteps(24, 100, 1)
	if res := Judge(cfg, data); res.Verdict != VerdictPass || !(res.Pairs[0].RankP < 1e-6) {
		t.Errorf("rank test changed a Pass: %s, RankP %v (%s)", res.Verdict, res.Pairs[0].RankP, res.Message)
	}
}

func TestJudgeSmallSample(t *testing.T) {
	data := []PairData{{Pair: "peer=xavier-a", Canary: Counts{Slow: 0, Total: 5000}, Baseline: Counts{Slow: 0, Total: 5000}}}
	res := Judge(JudgeConfig{Quantile: 0.9999, Confidence: 0.99, MaxIncrease: 0.002}, data)
	if res.Verdict != VerdictInconclusive || !strings.Contains(res.Message, "too few samples: canary 5000 < 30000, baseline 5000 < 30000") {
		t.Errorf("p99.99 from 5000: %s (%s), want Inconclusive, too few samples", res.Verdict, res.Message)
	}
	if res.MinSamples != 30000 || !math.IsNaN(res.Pairs[0].PWorse) {
		t.Errorf("MinSamples %d, PWorse %v", res.MinSamples, res.Pairs[0].PWorse)
	}
	res = Judge(JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.002}, data)
	if res.Verdict != VerdictPass || res.MinSamples != 300 {
		t.Errorf("p99 from 5000: %s, MinSamples %d (%s), want Pass, 300", res.Verdict, res.MinSamples, res.Message)
	}
	// MinSamples raises the rule-of-three floor.
	res = Judge(JudgeConfig{Quantile: 0.99, MinSamples: 6000, Confidence: 0.99, MaxIncrease: 0.002}, data)
	if res.Verdict != VerdictInconclusive || res.MinSamples != 6000 {
		t.Errorf("MinSamples 6000: %s, %d (%s)", res.Verdict, res.MinSamples, res.Message)
	}
	// One short pair makes the canary Inconclusive even when the others
	// pass, and decides; the shortest canary comes first.
	data = append(data,
		PairData{Pair: "peer=xavier-b", Canary: Counts{Total: 812}, Baseline: Counts{Total: 5000}},
		PairData{Pair: "peer=xavier-c", Canary: Counts{Total: 2000}, Baseline: Counts{Total: 5000}})
	res = Judge(JudgeConfig{Quantile: 0.999, Confidence: 0.99, MaxIncrease: 0.002}, data)
	if res.Verdict != VerdictInconclusive || res.Pairs[0].Pair != "peer=xavier-b" || res.Pairs[0].Reason != "too few samples: canary 812 < 3000" {
		t.Errorf("short pair: %s, %s %q (%s)", res.Verdict, res.Pairs[0].Pair, res.Pairs[0].Reason, res.Message)
	}
	if res.Pairs[1].Pair != "peer=xavier-a" || res.Pairs[1].Verdict != VerdictPass {
		t.Errorf("second pair %s %s", res.Pairs[1].Pair, res.Pairs[1].Verdict)
	}
}

func TestJudgeUndecided(t *testing.T) {
	// An effect near the tolerance is neither Pass nor Fail.
	cfg := JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.002}
	data := []PairData{
		{Pair: "b", Canary: Counts{Slow: 250, Total: 50000}, Baseline: Counts{Slow: 150, Total: 50000}},
		{Pair: "a", Canary: Counts{Slow: 0, Total: 50000}, Baseline: Counts{Slow: 0, Total: 50000}},
	}
	res := Judge(cfg, data)
	if res.Verdict != VerdictInconclusive || res.Pairs[0].Pair != "b" || !strings.Contains(res.Pairs[0].Reason, "not decided at 99.5%") {
		t.Errorf("%s: %s %q (%s)", res.Verdict, res.Pairs[0].Pair, res.Pairs[0].Reason, res.Message)
	}
	// Pass: the largest PWorse decides.
	data[0].Canary.Slow = 150
	res = Judge(cfg, data)
	if res.Verdict != VerdictPass || res.Pairs[0].Pair != "b" || res.Pairs[1].Pair != "a" {
		t.Errorf("%s: %s (%s)", res.Verdict, res.Pairs[0].Pair, res.Message)
	}
}

func TestJudgeNoSamplesAndInvalid(t *testing.T) {
	ok := JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.002}
	for _, data := range [][]PairData{
		nil,
		{{Pair: "a", Canary: Counts{Slow: 0, Total: 0}, Baseline: Counts{Slow: 3, Total: 5000}}},
		{{Pair: "a", Canary: Counts{Slow: 2, Total: -4}, Baseline: Counts{Slow: 3, Total: 5000}}},
		{{Pair: "a", Canary: Counts{Slow: 1, Total: math.NaN()}, Baseline: Counts{Slow: 3, Total: 5000}}},
	} {
		res := Judge(ok, data)
		if res.Verdict != VerdictInconclusive || res.Message != "no canary samples" || len(res.Pairs) != 0 {
			t.Errorf("%v: %s %q", data, res.Verdict, res.Message)
		}
	}
	data := []PairData{{Pair: "a", Canary: Counts{Total: 5000}, Baseline: Counts{Total: 5000}}}
	for _, tc := range []struct {
		field string
		mod   func(*JudgeConfig)
	}{
		{"Quantile", func(c *JudgeConfig) { c.Quantile = 0 }},
		{"Quantile", func(c *JudgeConfig) { c.Quantile = 1 }},
		{"Quantile", func(c *JudgeConfig) { c.Quantile = math.NaN() }},
		{"Confidence", func(c *JudgeConfig) { c.Confidence = 0.5 }},
		{"Confidence", func(c *JudgeConfig) { c.Confidence = 1 }},
		{"MaxIncrease", func(c *JudgeConfig) { c.MaxIncrease = -0.001 }},
		{"MaxIncrease", func(c *JudgeConfig) { c.MaxIncrease = math.Inf(1) }},
		{"MinSamples", func(c *JudgeConfig) { c.MinSamples = -1 }},
		{"MinIntervals", func(c *JudgeConfig) { c.MinIntervals = -1 }},
	} {
		cfg := ok
		tc.mod(&cfg)
		res := Judge(cfg, data)
		if res.Verdict != VerdictInconclusive || !strings.Contains(res.Message, tc.field) {
			t.Errorf("%+v: %s %q, want Inconclusive naming %s", cfg, res.Verdict, res.Message, tc.field)
		}
	}
	if res := Judge(ok, data); res.Verdict != VerdictPass {
		t.Errorf("valid config: %s (%s)", res.Verdict, res.Message)
	}
}

func TestJudgeBonferroni(t *testing.T) {
	var data []PairData
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		data = append(data, PairData{Pair: name, Canary: Counts{Total: 5000}, Baseline: Counts{Total: 5000}})
	}
	res := Judge(JudgeConfig{Quantile: 0.99, Confidence: 0.99, MaxIncrease: 0.002}, data)
	if want := 1 - 0.01/6; math.Abs(res.PairConfidence-want) > 1e-12 || math.Abs(res.PairConfidence-0.998333) > 1e-6 {
		t.Errorf("PairConfidence %v, want %v", res.PairConfidence, want)
	}
	if !strings.Contains(res.Message, "at 99.83%") {
		t.Errorf("message %q", res.Message)
	}
}

func TestJudgeSampleMinimum(t *testing.T) {
	for _, tc := range []struct {
		q    float64
		min  int64
		want int64
	}{
		{0.9, 0, 30}, {0.99, 0, 300}, {0.999, 0, 3000}, {0.9999, 0, 30000}, {0.5, 0, 6}, {0.995, 0, 600}, {0.999, 5000, 5000}, {0.97, 0, 100},
	} {
		if got := judgeSampleMinimum(tc.q, tc.min); got != tc.want {
			t.Errorf("q=%v min=%d: %d, want %d", tc.q, tc.min, got, tc.want)
		}
	}
}

// With two canary vehicles, a Fail needs the rank test to confirm in each:
// one vehicle stalled for the whole window (its intervals far above the
// baseline's) beside one at the baseline's level is Inconclusive, naming the
// vehicle that does not confirm; both worse is a Fail.
func TestJudgeEachCanaryVehicle(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.99, MinSamples: 1000, Confidence: 0.99, MaxIncrease: 0.002, RequireRank: true}
	base := judgeTestSteps(36, 10, 1)
	stalled := judgeTestSteps(18, 50, 1)
	usual := judgeTestSteps(18, 10.5, 2)
	d := PairData{
		Pair:              "host=xavier-b,peer=xavier-a",
		Canary:            Counts{Slow: 60, Total: 2400},
		Baseline:          Counts{Slow: 7, Total: 3600},
		CanaryIntervals:   append(append([]float64{}, stalled...), usual...),
		BaselineIntervals: base,
		CanaryVehicles:    map[string][]float64{"av-001": stalled, "av-002": usual},
	}
	res := Judge(cfg, []PairData{d})
	p := res.Pairs[0]
	if res.Verdict != VerdictInconclusive || p.RankVehicle != "av-002" || !(p.RankP > 0.1) {
		t.Fatalf("one stalled canary vehicle: %s, rank p %v on %q (%s), want Inconclusive, av-002 not confirming", res.Verdict, p.RankP, p.RankVehicle, res.Message)
	}
	if !(p.PWorse >= res.PairConfidence) || !strings.Contains(p.Reason, "rank test does not confirm on av-002") {
		t.Errorf("PWorse %v, reason %q", p.PWorse, p.Reason)
	}
	// The pooled intervals alone would have confirmed: this is what the
	// split changes.
	pooled := d
	pooled.CanaryVehicles = nil
	if res := Judge(cfg, []PairData{pooled}); res.Verdict != VerdictFail {
		t.Errorf("pooled intervals: %s (%s), want Fail (the case the split guards against)", res.Verdict, res.Message)
	}

	// Both canary vehicles worse: Fail, the least convinced one reported.
	d.CanaryVehicles = map[string][]float64{"av-001": stalled, "av-002": judgeTestSteps(18, 40, 1)}
	res = Judge(cfg, []PairData{d})
	p = res.Pairs[0]
	if res.Verdict != VerdictFail || p.RankVehicle != "av-002" || !(p.RankP < 1e-6) {
		t.Fatalf("both worse: %s, rank p %v on %q (%s), want Fail", res.Verdict, p.RankP, p.RankVehicle, res.Message)
	}
	if !strings.Contains(p.Reason, "in each of 2 canary vehicles") {
		t.Errorf("reason %q", p.Reason)
	}

	// A canary vehicle short of intervals holds the Fail while RequireRank
	// is set, naming it.
	d.CanaryVehicles["av-002"] = judgeTestSteps(3, 40, 1)
	res = Judge(cfg, []PairData{d})
	if res.Verdict != VerdictInconclusive || !strings.Contains(res.Pairs[0].Reason, "rank test waiting for 5 intervals per cohort (canary av-002 3, baseline 36)") {
		t.Errorf("short vehicle: %s (%s)", res.Verdict, res.Pairs[0].Reason)
	}
}
