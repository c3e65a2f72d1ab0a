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
	"sort"
	"strings"
)

// Counts are the messages of one cohort on one host pair: Slow is how many
// were slower than the latency threshold, out of Total. They are floats
// because Prometheus' increase() extrapolates; the judge rounds them to the
// nearest integer, treats negative and NaN values as 0 and clamps Slow to
// Total.
type Counts struct{ Slow, Total float64 }

// PairData is the evidence for one host pair.
type PairData struct {
	// Pair names the pair by the labels of its series, e.g. "peer=xavier-a"
	// or "host=xavier-b,peer=xavier-a".
	Pair string
	// Canary and Baseline are the message counts of the two cohorts over the
	// same time window.
	Canary, Baseline Counts
	// CanaryIntervals and BaselineIntervals are a latency quantile of each
	// interval of the window (e.g. the p99 of every 5 s), one value per
	// interval, for the rank test; nil when not measured. NaN values are
	// ignored.
	CanaryIntervals, BaselineIntervals []float64
	// CanaryVehicles, when not empty, are the canary's per-interval values
	// split by canary vehicle (vehicle name -> its values) and replace
	// CanaryIntervals in the rank test: each canary vehicle is ranked
	// against the baseline on its own, and a Fail needs every one of them to
	// confirm. One canary vehicle that is unlucky for the whole window (a
	// stalled host, a burst of foreign traffic) then cannot roll back an
	// edit the other canary vehicles do not suffer from.
	CanaryVehicles map[string][]float64
}

// JudgeConfig are the judge's parameters.
type JudgeConfig struct {
	// Quantile is the latency tail the verdict is about, 0 < q < 1 (e.g.
	// 0.999). It sets the sample minimum ceil(3/(1-q)) per cohort and pair.
	Quantile float64
	// MinSamples is a floor on the messages per cohort and pair, >= 0.
	MinSamples int64
	// Confidence is the probability a Pass or a Fail needs over all pairs
	// together, 0.5 < c < 1 (e.g. 0.99).
	Confidence float64
	// MaxIncrease is the tolerated increase of the slow share of the canary
	// over the baseline's, absolute (0.002 is 0.2 percentage points), >= 0.
	MaxIncrease float64
	// MaxRatio is how many times the baseline's slow share the canary's may
	// be before MaxIncrease is added: the canary is worse when its share
	// exceeds MaxRatio x baseline + MaxIncrease. 0 means 1.
	MaxRatio float64
	// MinIntervals is the fewest per-interval values each cohort needs for
	// the rank test to run, >= 0; 0 means 5.
	MinIntervals int
	// RequireRank makes a rank test that could not run yet (fewer than
	// MinIntervals values) hold a candidate Fail as Inconclusive instead of
	// letting the exceedance test fail the pair alone: set when the
	// analysis has an intervalQuery, so that a first measurement over a few
	// seconds, where one stalled host can dominate, never rolls back alone.
	RequireRank bool
}

// PairResult is the verdict on one host pair.
type PairResult struct {
	// Pair is the pair's name, as in PairData.
	Pair string
	// Verdict is the decision on this pair.
	Verdict Verdict
	// CanarySlow, CanaryTotal, BaselineSlow and BaselineTotal are the counts
	// after rounding and clamping.
	CanarySlow, CanaryTotal, BaselineSlow, BaselineTotal int64
	// CanaryShare and BaselineShare are Slow/Total (0 when Total is 0).
	CanaryShare, BaselineShare float64
	// Effect is CanaryShare - BaselineShare.
	Effect float64
	// PWorse is the posterior probability that the canary's slow share
	// exceeds MaxRatio x the baseline's + MaxIncrease; NaN when not computed
	// (too few samples).
	PWorse float64
	// RankP is the one-sided Mann-Whitney p-value that the canary's
	// per-interval quantiles are stochastically greater than the baseline's;
	// with CanaryVehicles, the largest of the canary vehicles' p-values (the
	// least convinced vehicle); NaN when the rank test did not run.
	RankP float64
	// RankVehicle is the canary vehicle whose p-value is RankP, "" without
	// CanaryVehicles.
	RankVehicle string
	// Reason is one line saying why, with the numbers.
	Reason string
}

// JudgeResult is the verdict on all pairs.
type JudgeResult struct {
	// Verdict is the overall decision.
	Verdict Verdict
	// PairConfidence is the confidence each pair was judged at, by the
	// Bonferroni correction 1-(1-Confidence)/m for m judged pairs; 0 when no
	// pair was judged.
	PairConfidence float64
	// MinSamples is the per-cohort per-pair sample minimum applied.
	MinSamples int64
	// Pairs holds the deciding pair first, then the others sorted by name.
	Pairs []PairResult
	// Message is one line: the verdict, the deciding pair, its effect,
	// probability and counts.
	Message string
}

// Judge decides whether a canary cohort is worse than a baseline cohort,
// pair by pair, from the share of slow messages. It is pure and
// deterministic. The rules:
//
//  1. The configuration is checked first: Quantile must be in (0, 1),
//     Confidence in (0.5, 1), MaxIncrease finite and >= 0, MaxRatio 0 (one)
//     or finite and >= 1, MinSamples and
//     MinIntervals >= 0. A violation gives Inconclusive with a message
//     naming the field.
//  2. Counts are rounded to the nearest integer, negatives and NaN become
//     0, and Slow is clamped to Total. Pairs whose canary Total is 0 are
//     left out (the canary does not use that pair). When no pair is left the
//     verdict is Inconclusive with the message "no canary samples".
//  3. With m pairs left, every pair is judged at the confidence
//     c' = 1-(1-Confidence)/m (Bonferroni), so that the chance of a false
//     verdict over all pairs stays below 1-Confidence.
//  4. The sample minimum is N = max(MinSamples, ceil(3/(1-Quantile))): by
//     the rule of three, fewer messages cannot bound a share at the quantile
//     asked. A pair whose canary or baseline Total is below N is
//     Inconclusive ("too few samples: canary 812 < 3000"), never Pass.
//  5. The exceedance test: PWorse = ProbExceeds(canary, baseline,
//     MaxRatio, MaxIncrease), the posterior probability under Jeffreys
//     priors that the canary's slow share exceeds MaxRatio times the
//     baseline's plus MaxIncrease.
//     PWorse >= c' makes the pair a candidate Fail, PWorse <= 1-c' a Pass,
//     anything between Inconclusive.
//  6. The rank test, a second opinion that only confirms a rollback: when
//     both interval lists have at least MinIntervals values (NaN values
//     ignored), RankP = MannWhitneyGreater(canary intervals, baseline
//     intervals). A candidate Fail is a Fail when RankP <= 1-c', or when the
//     rank test did not run and RequireRank is false; when it ran and
//     RankP > 1-c' the pair is Inconclusive ("exceedance says worse, rank
//     test does not confirm"), and when it could not run yet and
//     RequireRank is set, too ("rank test waiting for N intervals").
//     The rank test never blocks nor causes a Pass.
//     With CanaryVehicles, the rank test runs once per canary vehicle
//     (sorted by name) against the baseline intervals; it has run when every
//     canary vehicle has MinIntervals values, and RankP is the largest
//     p-value: a Fail needs the effect in each canary vehicle.
//  7. Overall, any Fail makes the verdict Fail, decided by the failing pair
//     with the largest Effect; else any Inconclusive makes it Inconclusive,
//     decided by a pair with too few samples (the one with the fewest canary
//     messages) if there is one, else by the inconclusive pair with the
//     largest PWorse; else the verdict is Pass, decided by the pair with the
//     largest PWorse. Ties are broken by pair name. The deciding pair comes
//     first in Pairs, the others follow sorted by name.
func Judge(cfg JudgeConfig, data []PairData) JudgeResult {
	if msg := judgeConfigError(cfg); msg != "" {
		return JudgeResult{Verdict: VerdictInconclusive, Message: "invalid judge configuration: " + msg}
	}
	minIntervals := cfg.MinIntervals
	if minIntervals == 0 {
		minIntervals = DefaultJudgeMinIntervals
	}
	minN := judgeSampleMinimum(cfg.Quantile, cfg.MinSamples)

	var used []PairData
	for _, d := range data {
		if judgeCount(d.Canary.Total) > 0 {
			used = append(used, d)
		}
	}
	if len(used) == 0 {
		return JudgeResult{Verdict: VerdictInconclusive, MinSamples: minN, Message: "no canary samples"}
	}
	m := len(used)
	pc := 1 - (1-cfg.Confidence)/float64(m)

	pairs := make([]PairResult, m)
	tooFew := make([]bool, m)
	for i, d := range used {
		pairs[i], tooFew[i] = judgeOnePair(cfg, d, minN, pc, minIntervals)
	}

	// Choose the deciding pair.
	nFail, nInc, nPass := 0, 0, 0
	for _, p := range pairs {
		switch p.Verdict {
		case VerdictFail:
			nFail++
		case VerdictInconclusive:
			nInc++
		default:
			nPass++
		}
	}
	verdict := VerdictPass
	switch {
	case nFail > 0:
		verdict = VerdictFail
	case nInc > 0:
		verdict = VerdictInconclusive
	}
	anyTooFew := false
	for _, f := range tooFew {
		anyTooFew = anyTooFew || f
	}
	// better reports whether pair i should decide rather than pair j; both
	// have the overall verdict.
	better := func(i, j int) bool {
		a, b := pairs[i], pairs[j]
		switch {
		case verdict == VerdictFail && a.Effect != b.Effect:
			return a.Effect > b.Effect
		case verdict == VerdictInconclusive && anyTooFew:
			if a.CanaryTotal != b.CanaryTotal {
				return a.CanaryTotal < b.CanaryTotal
			}
		case verdict != VerdictFail && judgeNaNLow(a.PWorse) != judgeNaNLow(b.PWorse):
			return judgeNaNLow(a.PWorse) > judgeNaNLow(b.PWorse)
		}
		return a.Pair < b.Pair
	}
	decide := -1
	for i, p := range pairs {
		if p.Verdict != verdict || (verdict == VerdictInconclusive && anyTooFew && !tooFew[i]) {
			continue
		}
		if decide < 0 || better(i, decide) {
			decide = i
		}
	}

	d := pairs[decide]
	rest := make([]PairResult, 0, m-1)
	rest = append(rest, pairs[:decide]...)
	rest = append(rest, pairs[decide+1:]...)
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Pair < rest[j].Pair })
	ordered := append([]PairResult{d}, rest...)

	var msg strings.Builder
	fmt.Fprintf(&msg, "%s on %s: ", verdict, d.Pair)
	if verdict == VerdictInconclusive {
		msg.WriteString(d.Reason)
		msg.WriteString("; ")
	}
	msg.WriteString(judgeEvidence(d, cfg, pc))
	fmt.Fprintf(&msg, " (%d pairs: %d Fail, %d Inconclusive, %d Pass)", m, nFail, nInc, nPass)

	return JudgeResult{
		Verdict:        verdict,
		PairConfidence: pc,
		MinSamples:     minN,
		Pairs:          ordered,
		Message:        msg.String(),
	}
}

// judgeOnePair judges one pair at the pair confidence pc and reports
// whether it was short of samples.
func judgeOnePair(cfg JudgeConfig, d PairData, minN int64, pc float64, minIntervals int) (PairResult, bool) {
	r := PairResult{Pair: d.Pair, PWorse: math.NaN(), RankP: math.NaN()}
	r.CanarySlow, r.CanaryTotal = judgeCounts(d.Canary)
	r.BaselineSlow, r.BaselineTotal = judgeCounts(d.Baseline)
	r.CanaryShare = judgeShare(r.CanarySlow, r.CanaryTotal)
	r.BaselineShare = judgeShare(r.BaselineSlow, r.BaselineTotal)
	r.Effect = r.CanaryShare - r.BaselineShare
	alpha := 1 - pc

	bi := judgeFinite(d.BaselineIntervals)
	rankRan, fewest := judgeRank(&r, d, bi, minIntervals)

	if r.CanaryTotal < minN || r.BaselineTotal < minN {
		var short []string
		if r.CanaryTotal < minN {
			short = append(short, fmt.Sprintf("canary %d < %d", r.CanaryTotal, minN))
		}
		if r.BaselineTotal < minN {
			short = append(short, fmt.Sprintf("baseline %d < %d", r.BaselineTotal, minN))
		}
		r.Verdict = VerdictInconclusive
		r.Reason = "too few samples: " + strings.Join(short, ", ")
		return r, true
	}

	r.PWorse = ProbExceeds(r.CanarySlow, r.CanaryTotal, r.BaselineSlow, r.BaselineTotal, judgeRatio(cfg), cfg.MaxIncrease)
	conf := judgeConfPct(pc)
	switch {
	case r.PWorse >= pc:
		if !rankRan && cfg.RequireRank {
			r.Verdict = VerdictInconclusive
			r.Reason = fmt.Sprintf("exceedance says worse (effect %+.4f, P(worse)=%.4f at %s), rank test waiting for %d intervals per cohort (canary %s, baseline %d)",
				r.Effect, r.PWorse, conf, minIntervals, fewest, len(bi))
			break
		}
		if rankRan && r.RankP > alpha {
			r.Verdict = VerdictInconclusive
			r.Reason = fmt.Sprintf("exceedance says worse (effect %+.4f, P(worse)=%.4f at %s), rank test does not confirm%s: p=%.2g",
				r.Effect, r.PWorse, conf, judgeOn(r.RankVehicle), r.RankP)
			break
		}
		r.Verdict = VerdictFail
		rank := "rank test not run"
		if rankRan {
			rank = fmt.Sprintf("rank p=%.2g", r.RankP)
			if r.RankVehicle != "" {
				rank = fmt.Sprintf("rank p<=%.2g in each of %d canary vehicles", r.RankP, len(d.CanaryVehicles))
			}
		}
		r.Reason = fmt.Sprintf("effect %+.4f worse than tolerance %.4f at %s: P(worse)=%.4f, %s",
			r.Effect, cfg.MaxIncrease, conf, r.PWorse, rank)
	case r.PWorse <= alpha:
		r.Verdict = VerdictPass
		r.Reason = fmt.Sprintf("effect %+.4f within tolerance %.4f at %s: P(worse)=%.4f",
			r.Effect, cfg.MaxIncrease, conf, r.PWorse)
	default:
		r.Verdict = VerdictInconclusive
		r.Reason = fmt.Sprintf("effect %+.4f not decided at %s: P(worse)=%.4f", r.Effect, conf, r.PWorse)
	}
	return r, false
}

// judgeRank runs the rank test of one pair into r.RankP (and
// r.RankVehicle) and reports whether it ran, with the canary's interval
// count for a message ("7", or "av-002 3" for the vehicle with the fewest).
func judgeRank(r *PairResult, d PairData, bi []float64, minIntervals int) (ran bool, fewest string) {
	if len(d.CanaryVehicles) == 0 {
		ci := judgeFinite(d.CanaryIntervals)
		ran = len(ci) >= minIntervals && len(bi) >= minIntervals && len(ci) > 0 && len(bi) > 0
		if ran {
			_, r.RankP = MannWhitneyGreater(ci, bi)
		}
		return ran, fmt.Sprint(len(ci))
	}
	names := make([]string, 0, len(d.CanaryVehicles))
	for v := range d.CanaryVehicles {
		names = append(names, v)
	}
	sort.Strings(names)
	ran = len(bi) >= minIntervals && len(bi) > 0
	least := -1
	for _, v := range names {
		ci := judgeFinite(d.CanaryVehicles[v])
		if least < 0 || len(ci) < least {
			least, fewest = len(ci), fmt.Sprintf("%s %d", v, len(ci))
		}
		if len(ci) < minIntervals || len(ci) == 0 {
			ran = false
		}
	}
	if !ran {
		return false, fewest
	}
	for _, v := range names {
		_, p := MannWhitneyGreater(d.CanaryVehicles[v], bi)
		if r.RankVehicle == "" || p > r.RankP || math.IsNaN(p) {
			r.RankP, r.RankVehicle = p, v
		}
	}
	return true, fewest
}

// judgeOn is " on <vehicle>", or "" for no vehicle.
func judgeOn(vehicle string) string {
	if vehicle == "" {
		return ""
	}
	return " on " + vehicle
}

// judgeEvidence formats a pair's shares, counts, effect and probabilities
// for the overall message.
func judgeEvidence(r PairResult, cfg JudgeConfig, pc float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slow share canary %.2f%% (%d/%d) vs baseline %.2f%% (%d/%d), effect %+.2f pp",
		100*r.CanaryShare, r.CanarySlow, r.CanaryTotal,
		100*r.BaselineShare, r.BaselineSlow, r.BaselineTotal, 100*r.Effect)
	if !math.IsNaN(r.PWorse) {
		if ratio := judgeRatio(cfg); ratio != 1 {
			fmt.Fprintf(&b, ", P(canary > %g x baseline + %.2f pp)=%.4f at %s", ratio, 100*cfg.MaxIncrease, r.PWorse, judgeConfPct(pc))
		} else {
			fmt.Fprintf(&b, ", P(worse by >%.2f pp)=%.4f at %s", 100*cfg.MaxIncrease, r.PWorse, judgeConfPct(pc))
		}
	}
	if !math.IsNaN(r.RankP) {
		fmt.Fprintf(&b, ", rank p=%.2g%s", r.RankP, judgeOn(r.RankVehicle))
	}
	return b.String()
}

// judgeConfigError returns what is wrong with cfg, naming the field, or ""
// when it is valid.
func judgeConfigError(cfg JudgeConfig) string {
	switch {
	case !(cfg.Quantile > 0 && cfg.Quantile < 1):
		return fmt.Sprintf("Quantile %v is not in (0, 1)", cfg.Quantile)
	case !(cfg.Confidence > 0.5 && cfg.Confidence < 1):
		return fmt.Sprintf("Confidence %v is not in (0.5, 1)", cfg.Confidence)
	case !(cfg.MaxRatio == 0 || cfg.MaxRatio >= 1) || math.IsInf(cfg.MaxRatio, 0):
		return fmt.Sprintf("MaxRatio %v is not a finite number >= 1", cfg.MaxRatio)
	case !(cfg.MaxIncrease >= 0) || math.IsInf(cfg.MaxIncrease, 0):
		return fmt.Sprintf("MaxIncrease %v is not a finite number >= 0", cfg.MaxIncrease)
	case cfg.MinSamples < 0:
		return fmt.Sprintf("MinSamples %d is negative", cfg.MinSamples)
	case cfg.MinIntervals < 0:
		return fmt.Sprintf("MinIntervals %d is negative", cfg.MinIntervals)
	}
	return ""
}

// judgeSampleMinimum is max(minSamples, ceil(3/(1-q))). The quotient is
// snapped to the nearest integer when it is within rounding error of it, so
// that q = 0.999 gives 3000 and not 3001.
func judgeSampleMinimum(q float64, minSamples int64) int64 {
	x := 3 / (1 - q)
	if r := math.Round(x); math.Abs(x-r) <= 1e-9*r {
		x = r
	}
	n := int64(math.Ceil(x))
	if minSamples > n {
		n = minSamples
	}
	return n
}

// judgeMaxCount bounds a count so that it converts to int64 exactly.
const judgeMaxCount = 1e15

// judgeCount rounds a count to the nearest integer, with negative and NaN
// values as 0.
func judgeCount(v float64) int64 {
	if !(v > 0) {
		return 0
	}
	if v > judgeMaxCount {
		v = judgeMaxCount
	}
	return int64(math.Round(v))
}

// judgeCounts rounds a cohort's counts and clamps Slow to Total.
func judgeCounts(c Counts) (slow, total int64) {
	slow, total = judgeCount(c.Slow), judgeCount(c.Total)
	return min(slow, total), total
}

// judgeShare is slow/total, or 0 when total is 0.
func judgeShare(slow, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(slow) / float64(total)
}

// judgeFinite returns the values of v that are not NaN.
func judgeFinite(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// judgeNaNLow maps NaN to -Inf so that it sorts below every number.
func judgeNaNLow(v float64) float64 {
	if math.IsNaN(v) {
		return math.Inf(-1)
	}
	return v
}

// judgeConfPct formats a confidence as a percentage with up to four
// significant digits, e.g. "99.83%".
func judgeConfPct(c float64) string {
	return fmt.Sprintf("%.4g%%", 100*c)
}

// judgeRatio is cfg.MaxRatio, 1 when unset.
func judgeRatio(cfg JudgeConfig) float64 {
	if cfg.MaxRatio == 0 {
		return 1
	}
	return cfg.MaxRatio
}
