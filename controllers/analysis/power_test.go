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
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// slowMessages is the demo's judge (config/samples/demo/02-xavier-lan-v2.yaml).
var slowMessages = JudgeConfig{Quantile: 0.99, MinSamples: 1000, Confidence: 0.99, MaxRatio: 2, MaxIncrease: 0.005,
	MinIntervals: DefaultJudgeMinIntervals, RequireRank: true}

var slowMessagesSchedule = Schedule{Window: 90 * time.Second, Interval: 10 * time.Second, Step: 5 * time.Second,
	InconclusiveLimit: 15, RankIntervals: DefaultJudgeMinIntervals}

// spuriousRetransmissions is the demo's guard.
var spuriousRetransmissions = JudgeConfig{Quantile: 0.999, MinSamples: 20000, Confidence: 0.95, MaxRatio: 2, MaxIncrease: 0.0002,
	MinIntervals: DefaultJudgeMinIntervals, RequireRank: true}

func TestBinomialTails(t *testing.T) {
	for _, c := range []struct {
		n int64
		p float64
	}{{10, 0.3}, {50, 0.02}, {200, 0.5}, {1000, 0.001}, {37, 0.97}} {
		var cum float64
		for k := int64(0); k <= c.n; k++ {
			// direct: the pmf from its definition
			pmf := math.Exp(binomLogPMF(c.n, k, c.p))
			if got := binomLower(c.n, k-1, c.p); math.Abs(got-cum) > 1e-12 {
				t.Fatalf("binomLower(%d, %d, %g) = %g, the sum of the pmf is %g", c.n, k-1, c.p, got, cum)
			}
			if got := binomUpper(c.n, k, c.p); math.Abs(got-(1-cum)) > 1e-12 {
				t.Fatalf("binomUpper(%d, %d, %g) = %g, 1 - the sum of the pmf is %g", c.n, k, c.p, got, 1-cum)
			}
			cum += pmf
		}
		if math.Abs(cum-1) > 1e-12 {
			t.Fatalf("binomial(%d, %g): the pmf sums to %g", c.n, c.p, cum)
		}
	}
	if binomUpper(5, 1, 0) != 0 || binomUpper(5, 5, 1) != 1 || binomPMF(5, 0, 0) != 1 {
		t.Fatal("binomial with p 0 or 1")
	}
}

// TestFailTableIsTheJudgesThreshold checks the table against the judge
// itself: below kStar the judge does not fail the pair, at kStar it does.
func TestFailTableIsTheJudgesThreshold(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.99, MinSamples: 100, Confidence: 0.95, MaxRatio: 2, MaxIncrease: 0.01}
	const nC, nB = 300, 600
	tab := newFailTable(cfg, cfg.Confidence, nC, nB, 0.02)
	lo, _ := binomRange(nB, 0.02, powerTail)
	for i, k := range tab.kStar {
		kB := lo + int64(i)
		verdict := func(kC int64) Verdict {
			return Judge(cfg, []PairData{{Pair: "p", Canary: Counts{float64(kC), nC}, Baseline: Counts{float64(kB), nB}}}).Verdict
		}
		if k > nC {
			t.Fatalf("baseline %d/%d: no canary count fails", kB, nB)
		}
		if got := verdict(k); got != VerdictFail {
			t.Errorf("baseline %d/%d, canary %d/%d (kStar): judge says %s, want Fail", kB, nB, k, nC, got)
		}
		if k > 0 {
			if got := verdict(k - 1); got == VerdictFail {
				t.Errorf("baseline %d/%d, canary %d/%d (kStar-1): judge says Fail", kB, nB, k-1, nC)
			}
		}
	}
}

// TestPassTableIsTheJudgesThreshold checks the pass table against the
// judge itself: at kMax the judge passes the pair, one more slow canary
// message and it does not.
func TestPassTableIsTheJudgesThreshold(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.99, MinSamples: 100, Confidence: 0.95, MaxRatio: 2, MaxIncrease: 0.01}
	const nC, nB = 300, 600
	tab := newPassTable(cfg, cfg.Confidence, nC, nB, 0.02)
	lo, _ := binomRange(nB, 0.02, powerTail)
	if len(tab.kMax) < 10 {
		t.Fatalf("%d baseline counts in the table, want the likely range of Bin(600, 0.02)", len(tab.kMax))
	}
	for i, k := range tab.kMax {
		kB := lo + int64(i)
		verdict := func(kC int64) Verdict {
			return Judge(cfg, []PairData{{Pair: "p", Canary: Counts{float64(kC), nC}, Baseline: Counts{float64(kB), nB}}}).Verdict
		}
		if k < 0 {
			t.Fatalf("baseline %d/%d: no canary count passes", kB, nB)
		}
		if got := verdict(k); got != VerdictPass {
			t.Errorf("baseline %d/%d, canary %d/%d (kMax): judge says %s, want Pass", kB, nB, k, nC, got)
		}
		if got := verdict(k + 1); got == VerdictPass {
			t.Errorf("baseline %d/%d, canary %d/%d (kMax+1): judge says Pass", kB, nB, k+1, nC)
		}
	}
}

// TestPassMonteCarlo: at the measurement Power says a canary without a
// regression passes every pair with 80 %, and at the one before, the judge,
// given binomial counts at the baseline's share in both cohorts, passes the
// share of draws predicted there.
func TestPassMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 4))
	for _, c := range []struct {
		name  string
		cfg   JudgeConfig
		pairs []PairRate
	}{
		{"slow-messages, 0.2 % slow", slowMessages, demoPairs(0.002)},
		{"spurious-retransmissions, 0.04 % D-SACK", spuriousRetransmissions, []PairRate{
			{Pair: "a", CanaryRate: 2 * 900, BaselineRate: 2 * 900, BaselineShare: 0.0004},
			{Pair: "b", CanaryRate: 2 * 900, BaselineRate: 2 * 900, BaselineShare: 0.0004},
			{Pair: "c", CanaryRate: 2 * 900, BaselineRate: 2 * 900, BaselineShare: 0.0003},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.RequireRank = false // the rank test never blocks a Pass
			s := slowMessagesSchedule
			r, err := Power(PowerInput{Config: cfg, Schedule: s, Pairs: c.pairs})
			if err != nil {
				t.Fatal(err)
			}
			if r.PassAt <= 0 || r.PassPower < DefaultPower {
				t.Fatalf("a canary without a regression: pass at %s with %g", r.PassAt, r.PassPower)
			}
			for _, p := range r.Pairs {
				if p.PassAt < 0 || p.PassAt > r.PassAt {
					t.Errorf("pair %s passes on its own at %s, after every pair together (%s)", p.Pair, p.PassAt, r.PassAt)
				}
			}
			m := powerModel{cfg: cfg, pc: r.PairConfidence, minN: r.MinSamples, power: DefaultPower, s: s}
			passes := func(at time.Duration, runs int) float64 {
				w := s.WindowAt(at)
				n := 0
				for range runs {
					var data []PairData
					for _, q := range c.pairs {
						nC, nB := m.samples(q, w)
						data = append(data, PairData{Pair: q.Pair,
							Canary:   Counts{float64(binomSample(rng, nC, q.BaselineShare)), float64(nC)},
							Baseline: Counts{float64(binomSample(rng, nB, q.BaselineShare)), float64(nB)}})
					}
					if Judge(cfg, data).Verdict == VerdictPass {
						n++
					}
				}
				return float64(n) / float64(runs)
			}
			// 800 draws: a standard deviation of at most 1.8 points.
			const runs = 800
			for _, at := range []time.Duration{r.PassAt - s.Interval, r.PassAt} {
				want := passEvery(m, c.pairs, s.WindowAt(at))
				if at == r.PassAt && want != r.PassPower {
					t.Errorf("at %s: the pass probability %g, Power said %g", at, want, r.PassPower)
				}
				if at < r.PassAt && want >= DefaultPower {
					t.Errorf("at %s, before the predicted %s, the pass probability is already %g", at, r.PassAt, want)
				}
				got := passes(at, runs)
				if math.Abs(got-want) > 0.06 {
					t.Errorf("at %s Power says a canary without a regression passes with %.1f%%; the judge passed %.1f%% of %d draws",
						at, 100*want, 100*got, runs)
				}
				t.Logf("%s: at %s a pass with %.1f%% predicted, %.1f%% of %d draws (pass at %s)", c.name, at, 100*want, 100*got, runs, r.PassAt)
			}
		})
	}
}

// TestPowerExactCase: with a baseline of no slow message (share 0) the
// baseline count is 0 for certain, and the power is one binomial tail.
func TestPowerExactCase(t *testing.T) {
	cfg := JudgeConfig{Quantile: 0.999, Confidence: 0.99, MaxIncrease: 0.001}
	tab := newFailTable(cfg, 0.99, 3000, 3000, 0)
	if len(tab.kStar) != 1 || tab.probB[0] != 1 {
		t.Fatalf("a baseline share of 0: table %+v, want one row with probability 1", tab)
	}
	k := tab.kStar[0]
	// The judge's own threshold.
	if p := ProbExceeds(k, 3000, 0, 3000, 1, 0.001); p < 0.99 {
		t.Fatalf("kStar %d: P(worse) %g < 0.99", k, p)
	}
	if p := ProbExceeds(k-1, 3000, 0, 3000, 1, 0.001); p >= 0.99 {
		t.Fatalf("kStar-1 %d: P(worse) %g >= 0.99", k-1, p)
	}
	for _, p1 := range []float64{0.002, 0.004, 0.008} {
		if got, want := tab.power(p1), binomUpper(3000, k, p1); got != want {
			t.Errorf("power(%g) = %g, want P(Bin(3000, %g) >= %d) = %g", p1, got, p1, k, want)
		}
	}
	d := tab.detectable(0.8)
	if got := tab.power(d); math.Abs(got-0.8) > 0.05 || got < 0.8 {
		t.Errorf("detectable(0.8) = %g with power %g", d, got)
	}
	if got := tab.power(d * 0.98); got >= 0.8 {
		t.Errorf("detectable(0.8) = %g is not the smallest: %g has power %g", d, d*0.98, got)
	}
}

func TestScheduleWindowsAndProblems(t *testing.T) {
	s := slowMessagesSchedule
	for at, want := range map[time.Duration]time.Duration{
		0: 0, 5 * time.Second: 0, 10 * time.Second: 5 * time.Second, 30 * time.Second: 25 * time.Second,
		95 * time.Second: 90 * time.Second, 150 * time.Second: 90 * time.Second,
	} {
		if got := s.WindowAt(at); got != want {
			t.Errorf("WindowAt(%s) = %s, want %s", at, got, want)
		}
	}
	if p := s.Problems(); len(p) != 0 {
		t.Errorf("the demo's schedule: problems %q", p)
	}
	short := s
	short.Window = 20 * time.Second
	if p := short.Problems(); len(p) != 1 || !strings.Contains(p[0], "needs 5 values of judge.step 5s, a window of 25s, but window 20s holds 4") {
		t.Errorf("window 20s with a rank test: problems %q", p)
	}
	early := s
	early.InconclusiveLimit = 1
	if p := early.Problems(); len(p) != 1 || !strings.Contains(p[0], "inconclusiveLimit 1 x interval 10s - judge.step 5s = 5s holds 1") {
		t.Errorf("inconclusiveLimit 1: problems %q", p)
	}
	never := s
	never.InconclusiveLimit = 0
	if p := never.Problems(); len(p) != 1 || !strings.Contains(p[0], "every measurement is still collecting") {
		t.Errorf("inconclusiveLimit 0: problems %q", p)
	}
}

// demoPairs are the demo fleet's six pairs with two canary vehicles against
// two: 36.8 messages a second per vehicle and pair (1840 in 25 s over two
// vehicles, docs/benchmarks-detection-d19866f.md trial 2).
func demoPairs(share float64) []PairRate {
	var out []PairRate
	for _, p := range []string{"a,b", "a,c", "b,a", "b,c", "c,a", "c,b"} {
		h, peer, _ := strings.Cut(p, ",")
		out = append(out, PairRate{Pair: "host=xavier-" + h + ",peer=xavier-" + peer, CanaryRate: 2 * 36.8, BaselineRate: 2 * 36.8, BaselineShare: share})
	}
	return out
}

// TestPowerOnTheDemo: the demo's judge reaches its 1000 messages at the
// measurement at 20 s (15 s of 73.6 a second) and, with its rank test
// needing five 5 s values, can fail no sooner than 30 s: the benchmark's
// untuned arm failed at 30 s in 19 of 20 trials.
func TestPowerOnTheDemo(t *testing.T) {
	r, err := Power(PowerInput{Config: slowMessages, Schedule: slowMessagesSchedule, Pairs: demoPairs(0.0001),
		Detect: &Regression{Share: 0.036}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 0 {
		t.Fatalf("problems: %q", r.Problems)
	}
	if math.Abs(r.PairConfidence-(1-0.01/6)) > 1e-12 || r.MinSamples != 1000 || r.Window != 90*time.Second || r.LastMeasurement != 150*time.Second {
		t.Errorf("result %+v", r)
	}
	p := r.Pairs[0]
	if p.MinSamplesAt != 20*time.Second || p.CanarySamples != 6624 {
		t.Errorf("min samples at %s, %d canary messages in 90 s; want 20s and 6624", p.MinSamplesAt, p.CanarySamples)
	}
	if !(p.Detectable > p.Tolerance && p.Detectable < 0.012) {
		t.Errorf("detectable share %g, tolerance %g", p.Detectable, p.Tolerance)
	}
	if p.DetectAt != 30*time.Second || !p.DetectWithin || r.DetectAt != 30*time.Second {
		t.Errorf("a 3.6 %% share detected at %s (within %v, power %g), want 30s", p.DetectAt, p.DetectWithin, p.DetectPower)
	}
	// Within the tolerance: never.
	r, err = Power(PowerInput{Config: slowMessages, Schedule: slowMessagesSchedule, Pairs: demoPairs(0.0001),
		Detect: &Regression{Ratio: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if r.DetectAt >= 0 || r.DetectWithin {
		t.Errorf("3x a 0.01 %% share, within the 0.5 pp tolerance: detected at %s", r.DetectAt)
	}
	// Too few messages: one vehicle at 2 messages a second never collects
	// 1000 in 90 s.
	slow := demoPairs(0.0001)
	slow[2].CanaryRate = 2
	r, err = Power(PowerInput{Config: slowMessages, Schedule: slowMessagesSchedule, Pairs: slow})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "1 of 6 host pairs never collect minSamples 1000 per cohort before the analysis gives up (window 1m30s by its last measurement at inconclusiveLimit 15 x interval 10s): host=xavier-b,peer=xavier-a (canary 180, baseline 6624)") {
		t.Errorf("problems %q", r.Problems)
	}
	if !math.IsNaN(r.Pairs[2].Detectable) || r.Pairs[2].MinSamplesAt >= 0 {
		t.Errorf("a pair short of samples: %+v", r.Pairs[2])
	}
}

// TestPowerBeyondTheLimits: a regression the analysis' window cannot detect
// gets the length of step that would.
func TestPowerBeyondTheLimits(t *testing.T) {
	pairs := demoPairs(0.0001)
	r, err := Power(PowerInput{Config: slowMessages, Schedule: slowMessagesSchedule, Pairs: pairs, Detect: &Regression{Share: 0.0065}})
	if err != nil {
		t.Fatal(err)
	}
	if r.DetectWithin || r.DetectAt <= r.LastMeasurement {
		t.Fatalf("a 0.65 %% share against a 0.51 %% tolerance: detected at %s within %v", r.DetectAt, r.DetectWithin)
	}
	// The length found is the first that fails with 80 %: check it and the
	// measurement before it directly.
	m := powerModel{cfg: slowMessages, pc: r.PairConfidence, minN: 1000, power: 0.8, s: slowMessagesSchedule}
	at := func(d time.Duration) float64 {
		nC, nB := m.samples(pairs[0], d-5*time.Second)
		return newFailTable(slowMessages, r.PairConfidence, nC, nB, 0.0001).power(0.0065)
	}
	if got := at(r.DetectAt); got < 0.8 {
		t.Errorf("at %s the power is %g", r.DetectAt, got)
	}
	if got := at(r.DetectAt - 10*time.Second); got >= 0.8 {
		t.Errorf("at %s, one interval sooner, the power is already %g", r.DetectAt-10*time.Second, got)
	}
}

// TestPowerMonteCarlo runs the judge itself on simulated counts: at the
// smallest detectable share the power computation gives, the judge fails
// in about 80 % of canaries (and at the tolerance almost never).
func TestPowerMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 3))
	for _, c := range []struct {
		name   string
		cfg    JudgeConfig
		window time.Duration
		pairs  []PairRate
	}{
		{"slow-messages 90s", slowMessages, 90 * time.Second, demoPairs(0.0002)},
		{"slow-messages 40s", slowMessages, 40 * time.Second, demoPairs(0.002)},
		{"spurious-retransmissions 40s", spuriousRetransmissions, 40 * time.Second, []PairRate{
			{Pair: "a", CanaryRate: 1300, BaselineRate: 2000, BaselineShare: 0.0004},
			{Pair: "b", CanaryRate: 1300, BaselineRate: 2000, BaselineShare: 0.0004},
			{Pair: "c", CanaryRate: 1300, BaselineRate: 2000, BaselineShare: 0.0004},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.RequireRank = false // no intervals simulated: the exceedance test alone
			s := slowMessagesSchedule
			s.Window, s.InconclusiveLimit, s.RankIntervals = c.window, int32((c.window+s.Step)/s.Interval)+1, 0
			r, err := Power(PowerInput{Config: cfg, Schedule: s, Pairs: c.pairs})
			if err != nil {
				t.Fatal(err)
			}
			p := r.Pairs[0]
			if math.IsNaN(p.Detectable) {
				t.Fatalf("nothing detectable: %+v", r)
			}
			nC, nB := p.CanarySamples, p.BaselineSamples
			fails := func(share float64, runs int) float64 {
				n := 0
				for range runs {
					var data []PairData
					for i, q := range c.pairs {
						pc := q.BaselineShare
						if i == 0 {
							pc = share
						}
						data = append(data, PairData{Pair: q.Pair,
							Canary:   Counts{float64(binomSample(rng, nC, pc)), float64(nC)},
							Baseline: Counts{float64(binomSample(rng, nB, q.BaselineShare)), float64(nB)}})
					}
					res := Judge(cfg, data)
					if res.Verdict == VerdictFail && res.Pairs[0].Pair == c.pairs[0].Pair {
						n++
					}
				}
				return float64(n) / float64(runs)
			}
			const runs = 1500
			got := fails(p.Detectable, runs)
			// 1500 runs at 80 %: standard deviation 1.0 point.
			if math.Abs(got-0.8) > 0.04 {
				t.Errorf("at the detectable share %.4f%% (%d/%d canary messages), the judge failed %.1f%% of %d runs, want 80%% +- 4",
					100*p.Detectable, nC, r.Pairs[0].BaselineSamples, 100*got, runs)
			}
			// At the tolerance a pair fails about as often as 1 - its
			// confidence (1.7 % for the guard's three pairs at 95 %).
			if lower := fails(p.Tolerance, 300); lower > 2*(1-r.PairConfidence)+0.02 {
				t.Errorf("at the tolerance %.4f%%, the judge failed %.1f%% of runs", 100*p.Tolerance, 100*lower)
			}
			t.Logf("%s: %d/%d messages, tolerance %.3f%%, detectable %.3f%%: judge failed %.1f%% of %d runs",
				c.name, nC, nB, 100*p.Tolerance, 100*p.Detectable, 100*got, runs)
		})
	}
}

// passEvery is the probability that one measurement over w passes every
// pair for a canary without a regression: the product of the pairs'
// (Power's PassPower at its PassAt).
// fleetPairs is the detection benchmark's 6 host pairs (3 hosts), each at
// the cohorts' rates and the baseline share given.
func fleetPairs(canaryRate, baselineRate, share float64) []PairRate {
	var pairs []PairRate
	for i := range 6 {
		pairs = append(pairs, PairRate{Pair: fmt.Sprint("pair-", i), CanaryRate: canaryRate, BaselineRate: baselineRate, BaselineShare: share})
	}
	return pairs
}

func passEvery(m powerModel, pairs []PairRate, w time.Duration) float64 {
	all := 1.0
	for _, p := range pairs {
		all *= m.passPower(p, w)
	}
	return all
}

// binomSample draws a binomial(n, p) count by inversion of its
// distribution function.
func binomSample(rng *rand.Rand, n int64, p float64) int64 {
	u := rng.Float64()
	lo, hi := int64(0), n
	for lo < hi {
		mid := (lo + hi) / 2
		if binomLower(n, mid, p) >= u {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func TestParseRegression(t *testing.T) {
	for in, want := range map[string]Regression{"3x": {Ratio: 3}, "2%": {Share: 0.02}, "0.02": {Share: 0.02}, " 1.5x ": {Ratio: 1.5}} {
		got, err := ParseRegression(in)
		if err != nil || got != want {
			t.Errorf("ParseRegression(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "1x", "0.5x", "0%", "101%", "2", "-0.1", "abc"} {
		if _, err := ParseRegression(in); err == nil {
			t.Errorf("ParseRegression(%q): no error", in)
		}
	}
	if got := fmt.Sprint((Regression{Ratio: 3}).String(), " ", (Regression{Share: 0.036}).String()); got != "3x 3.6%" {
		t.Errorf("String: %s", got)
	}
}

// benchmarkArm is one arm of the detection benchmark
// (docs/benchmarks-detection-d19866f.md, 2026-11-23 21:15 UTC): the messages (or
// segments) per second per vehicle on the deciding pair, from the trials'
// verdicts, and the slow shares of the two cohorts on it.
type benchmarkArm struct {
	name                  string
	cfg                   JudgeConfig
	canaryRate, baseRate  float64 // per vehicle
	baselineShare, canary float64
	// wantFrom and wantTo bound the predicted time of an 80 % Fail: the
	// trials' median and p90 (-1: never).
	wantFrom, wantTo        time.Duration
	trialsMedian, trialsP90 string
}

// TestPowerPredictsTheDetectionBenchmark checks Power against what the
// benchmark's trials decided, two canary vehicles against two, on the
// demo's judge (slow-messages) and guard (spurious-retransmissions), both
// with a rank test, every 10 s over at most 90 s. docs/canary-length.md
// shows the same table.
func TestPowerPredictsTheDetectionBenchmark(t *testing.T) {
	arms := []benchmarkArm{
		// untuned: xavier-b -> xavier-a, canary 66/1840 .. 80/1778 slow
		// (3.6-4.5 %) in 25 s against 0/1916; 36.8 messages a second per
		// vehicle. Trials: Fail at 30 s (median), 40 s (p90).
		{"untuned judge", slowMessages, 36.8, 38.3, 0.0001, 0.036, 30 * time.Second, 40 * time.Second, "30s", "40s"},
		// cwnd1: xavier-a -> xavier-b, 588/1840 .. 884/1862 (32-47 %).
		{"cwnd1 judge", slowMessages, 36.8, 38.3, 0.0001, 0.32, 30 * time.Second, 30 * time.Second, "30s", "30s"},
		// rto2ms-noquickack on the judge: 0.10 against 0.17 slow per 1000:
		// nothing to detect (trials: Pass, 0/20 detected).
		{"rto2ms-noquickack judge", slowMessages, 38.3, 38.3, 0.00017, 0.00010, -1, -1, "Pass", "Pass"},
		// rto2ms-noquickack on the guard: xavier-b -> xavier-c, D-SACK
		// segments 88/45923 .. 91/45067 (0.19-0.20 %) in 35 s against
		// 29/70321 .. 35/70686 (0.04-0.05 %): 656 segments a second per
		// canary vehicle, 1005 per baseline vehicle. Trials: Fail at 40 s
		// (median), 1m0s (p90), 2 of 20 undecided in 2 minutes.
		{"rto2ms-noquickack guard", spuriousRetransmissions, 656, 1005, 0.00045, 0.0019, 40 * time.Second, time.Minute, "40s", "1m0s"},
	}
	for _, a := range arms {
		// Bonferroni over the fleet's 6 pairs: the deciding one first, the
		// other 5 at the same rates and share.
		pairs := fleetPairs(2*a.canaryRate, 2*a.baseRate, a.baselineShare)
		r, err := Power(PowerInput{Config: a.cfg, Schedule: slowMessagesSchedule, Pairs: pairs, Detect: &Regression{Share: a.canary}})
		if err != nil {
			t.Fatal(err)
		}
		p := r.Pairs[0]
		// The power of each measurement, for the table.
		m := powerModel{cfg: a.cfg, pc: r.PairConfidence, minN: r.MinSamples, power: DefaultPower, s: slowMessagesSchedule}
		var each []string
		for at := 20 * time.Second; at <= time.Minute; at += 10 * time.Second {
			w := slowMessagesSchedule.WindowAt(at)
			pw := 0.0
			if m.canFail(pairs[0], w) {
				nC, nB := m.samples(pairs[0], w)
				pw = newFailTable(a.cfg, r.PairConfidence, nC, nB, a.baselineShare).power(a.canary)
			}
			each = append(each, fmt.Sprintf("%s %.2f", at, pw))
		}
		t.Logf("%s: min samples at %s; detectable in 90 s %.3f%% (tolerated %.3f%%); a %.3f%% canary failed with 80%% at %s; power per measurement: %s; trials: median %s, p90 %s",
			a.name, p.MinSamplesAt, 100*p.Detectable, 100*p.Tolerance, 100*a.canary, p.DetectAt, strings.Join(each, ", "), a.trialsMedian, a.trialsP90)
		if p.DetectAt < a.wantFrom || p.DetectAt > a.wantTo {
			t.Errorf("%s: predicted detection at %s, want between the trials' median %s and p90 %s", a.name, p.DetectAt, a.trialsMedian, a.trialsP90)
		}
	}

	// A/A on the guard: a canary without a regression, on the benchmark's
	// two fleet shapes (docs/benchmarks-detection.md, commit 5ddcb064e0af).
	// With 4 vehicles (2 baseline), 120 A/A trials: the pair deciding each
	// pass had a median baseline D-SACK share of 0.045 % and 1009 segments
	// a second per baseline vehicle; the guard passed at 30 s (median) and
	// 50 s (p90), at idle and with both CPUs busy alike. With 6 vehicles (4
	// baseline), 20 idle A/A trials: 0.032 % and 991 segments a second; the
	// guard passed at 30 s (median) and 40 s (p90). Six pairs at that share
	// and rate must pass together; the canary is 2 vehicles in both.
	for _, f := range []struct {
		name                    string
		baseline                int
		share, rate             float64
		trialsMedian, trialsP90 time.Duration
	}{
		{"4 vehicles", 2, 0.00045, 1009, 30 * time.Second, 50 * time.Second},
		{"6 vehicles", 4, 0.00032, 991, 30 * time.Second, 40 * time.Second},
	} {
		aa := fleetPairs(2*f.rate, float64(f.baseline)*f.rate, f.share)
		r, err := Power(PowerInput{Config: spuriousRetransmissions, Schedule: slowMessagesSchedule, Pairs: aa})
		if err != nil {
			t.Fatal(err)
		}
		m := powerModel{cfg: spuriousRetransmissions, pc: r.PairConfidence, minN: r.MinSamples, power: DefaultPower, s: slowMessagesSchedule}
		var each []string
		for at := 20 * time.Second; at <= time.Minute; at += 10 * time.Second {
			each = append(each, fmt.Sprintf("%s %.2f", at, passEvery(m, aa, slowMessagesSchedule.WindowAt(at))))
		}
		t.Logf("A/A guard, %s: min samples at %s; a canary without a regression passes every pair with 80%% at %s (%.2f); pass per measurement: %s; trials: median %s, p90 %s",
			f.name, r.Pairs[0].MinSamplesAt, r.PassAt, r.PassPower, strings.Join(each, ", "), f.trialsMedian, f.trialsP90)
		if r.PassAt < f.trialsMedian || r.PassAt > f.trialsP90 {
			t.Errorf("A/A guard, %s: predicted pass at %s, want between the trials' median (%s) and p90 (%s)", f.name, r.PassAt, f.trialsMedian, f.trialsP90)
		}
		if f.baseline == 2 && r.Pairs[0].MinSamplesAt >= r.PassAt-2*slowMessagesSchedule.Interval {
			t.Errorf("A/A guard, %s: min samples at %s, pass at %s: the record's late decisions are the pass, not the minimum", f.name, r.Pairs[0].MinSamplesAt, r.PassAt)
		}
		if f.baseline == 4 && r.PassAt > r.Pairs[0].MinSamplesAt+2*slowMessagesSchedule.Interval {
			t.Errorf("A/A guard, %s: pass at %s, more than two intervals after the minimum samples at %s: the larger baseline's trials passed within them in 18 of 20", f.name, r.PassAt, r.Pairs[0].MinSamplesAt)
		}
	}
}

// TestPowerSizesTheUntunedEditWithBothCPUsBusy explains the record's three
// promotions of the untuned edit with both CPUs busy (docs/benchmarks-detection.md,
// commit 5ddcb064e0af, 40 trials): the promoted canaries' worst pair held
// 0.11-0.31 % slow messages (2/1841, 16/6967, 22/7076 on
// xavier-b -> xavier-a) against a baseline near 0.01 %, at 39.3 messages a
// second per vehicle and pair. The demo's judge tolerates twice the baseline
// plus 0.5 points on a pair, so no canary step of any length fails such a
// canary; a tolerance that does makes both the Fail and the pass of a good
// canary take minutes, beyond the demo's 90 s analysis.
func TestPowerSizesTheUntunedEditWithBothCPUsBusy(t *testing.T) {
	const share, base, rate = 0.003, 0.0001, 39.3
	long := slowMessagesSchedule
	long.Window, long.InconclusiveLimit = time.Hour, 360
	size := func(maxIncrease float64) PowerResult {
		cfg := slowMessages
		cfg.MaxIncrease = maxIncrease
		r, err := Power(PowerInput{Config: cfg, Schedule: long, Pairs: fleetPairs(2*rate, 2*rate, base), Detect: &Regression{Share: share}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("maxIncrease %.2f points: tolerated %.3f %%; a %.1f %% canary failed with 80 %% at %s; a canary without a regression passes at %s (%.2f)",
			100*maxIncrease, 100*r.Pairs[0].Tolerance, 100*share, r.DetectAt, r.PassAt, r.PassPower)
		return r
	}
	demo := size(slowMessages.MaxIncrease)
	if demo.DetectAt >= 0 {
		t.Errorf("the demo's tolerance (%.3f %%) fails a %.1f %% canary at %s; the record promoted such canaries", 100*demo.Pairs[0].Tolerance, 100*share, demo.DetectAt)
	}
	if demo.PassAt < 0 || demo.PassAt > slowMessagesSchedule.Window {
		t.Errorf("the demo's judge passes a good canary at %s, want within its %s window", demo.PassAt, slowMessagesSchedule.Window)
	}
	prevPass := demo.PassAt
	for _, inc := range []float64{0.002, 0.001, 0.0005} {
		r := size(inc)
		if r.Pairs[0].Tolerance < share && r.DetectAt < 0 {
			t.Errorf("maxIncrease %.2f points tolerates %.3f %%, below %.1f %%, but no step length fails it", 100*inc, 100*r.Pairs[0].Tolerance, 100*share)
		}
		if r.DetectAt >= 0 && r.DetectAt <= slowMessagesSchedule.Window {
			t.Errorf("maxIncrease %.2f points fails a %.1f %% canary at %s, within the demo's %s window: a tighter tolerance would catch it there", 100*inc, 100*share, r.DetectAt, slowMessagesSchedule.Window)
		}
		if r.PassAt <= prevPass {
			t.Errorf("maxIncrease %.2f points passes a good canary at %s, not later than a looser tolerance's %s", 100*inc, r.PassAt, prevPass)
		}
		prevPass = r.PassAt
	}
}
