package analysis

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/gonum/mathext"
)

// Verdict is the judge's decision on a canary.
type Verdict string

// Verdicts.
const (
	// VerdictPass: confidently no worse than the baseline.
	VerdictPass Verdict = "Pass"
	// VerdictFail: confidently worse than the baseline.
	VerdictFail Verdict = "Fail"
	// VerdictInconclusive: neither, or too few samples to say.
	VerdictInconclusive Verdict = "Inconclusive"
)

// Counts are one cohort's messages on one host pair: how many were slower
// than the threshold, out of how many. They are floats because Prometheus'
// increase() extrapolates; the judge rounds them to whole messages, clamps
// negatives to 0 and Slow to Total.
type Counts struct{ Slow, Total float64 }

// PairData is the evidence on one host pair.
type PairData struct {
	// Pair names the pair by the labels of its series, e.g.
	// "host=xavier-b,peer=xavier-a".
	Pair             string
	Canary, Baseline Counts
	// CanaryIntervals and BaselineIntervals are a latency quantile of each
	// interval of the window, for the rank test; nil when not measured.
	CanaryIntervals, BaselineIntervals []float64
}

// JudgeConfig are the judge's parameters.
type JudgeConfig struct {
	// Quantile is the tail the verdict is about, 0 < q < 1 (e.g. 0.999):
	// every cohort needs at least 3/(1-q) messages on a pair.
	Quantile float64
	// MinSamples is a floor on the messages per cohort and pair.
	MinSamples int64
	// Confidence is the probability a Pass or a Fail needs over all pairs,
	// 0.5 < c < 1.
	Confidence float64
	// MaxIncrease is how much larger the canary's slow share may be than the
	// baseline's (absolute, e.g. 0.01 = one percentage point), >= 0.
	MaxIncrease float64
	// MinIntervals is the fewest per-interval values each cohort needs for
	// the rank test to run (DefaultJudgeMinIntervals when 0).
	MinIntervals int
}

// PairResult is the verdict on one host pair.
type PairResult struct {
	Pair                                                 string
	Verdict                                              Verdict
	CanarySlow, CanaryTotal, BaselineSlow, BaselineTotal int64
	// CanaryShare and BaselineShare are Slow/Total (0 when Total is 0).
	CanaryShare, BaselineShare float64
	// Effect is CanaryShare - BaselineShare.
	Effect float64
	// PWorse is the posterior probability that the canary's slow share
	// exceeds the baseline's by more than MaxIncrease; NaN when not computed.
	PWorse float64
	// RankP is the one-sided Mann-Whitney p-value that the canary's
	// per-interval quantiles are stochastically greater; NaN when the rank
	// test did not run.
	RankP float64
	// Reason says why, with the numbers.
	Reason string
}

// JudgeResult is the verdict on every pair.
type JudgeResult struct {
	Verdict Verdict
	// PairConfidence is the confidence each pair was judged at:
	// 1-(1-Confidence)/pairs (Bonferroni).
	PairConfidence float64
	// MinSamples is the messages per cohort and pair a pair needed.
	MinSamples int64
	// Pairs holds the deciding pair first, then the others by name.
	Pairs []PairResult
	// Message says the verdict, the deciding pair, its effect, probability
	// and counts.
	Message string
}

// Judge decides a canary against its baseline, per host pair (pure):
//
//  1. Pairs the canary has no message on are left out; none left is
//     Inconclusive ("no canary samples").
//  2. With m pairs left, each is judged at confidence c' = 1-(1-c)/m, so
//     that the chance of a false verdict over all pairs stays below 1-c.
//  3. A pair with fewer than max(MinSamples, ceil(3/(1-Quantile)))
//     messages in either cohort is Inconclusive: fewer messages cannot bound
//     a share at the quantile asked (the rule of three), so a p99.99 verdict
//     is never drawn from a few thousand messages.
//  4. The exceedance test: with Jeffreys Beta(1/2, 1/2) priors, the
//     posterior probability PWorse that the canary's slow share exceeds the
//     baseline's by more than MaxIncrease. PWorse >= c' makes the pair a
//     candidate Fail; PWorse <= 1-c' a Pass; otherwise Inconclusive.
//  5. The rank test (a second opinion that confirms rollbacks only): when
//     both cohorts have MinIntervals per-interval quantiles, the one-sided
//     Mann-Whitney p-value RankP that the canary's are greater. A candidate
//     Fail is a Fail when the rank test did not run or RankP <= 1-c', and
//     Inconclusive when it ran and does not confirm: slow messages bunched
//     in a few intervals (a host stalled for CPU) must not roll back a
//     good change. The rank test never blocks a Pass.
//  6. Any Fail fails the canary (the failing pair with the largest effect
//     decides); else any Inconclusive makes it Inconclusive (a pair short
//     of samples decides first, then the largest PWorse); else it passes
//     (the pair with the largest PWorse decides).
func Judge(cfg JudgeConfig, data []PairData) JudgeResult {
	if err := cfg.validate(); err != nil {
		return JudgeResult{Verdict: VerdictInconclusive, Message: err.Error()}
	}
	minIntervals := cfg.MinIntervals
	if minIntervals <= 0 {
		minIntervals = DefaultJudgeMinIntervals
	}
	var pairs []PairData
	for _, d := range data {
		if count(d.Canary.Total) > 0 {
			pairs = append(pairs, d)
		}
	}
	minN := max(cfg.MinSamples, int64(math.Ceil(3/(1-cfg.Quantile)-1e-9)))
	res := JudgeResult{MinSamples: minN}
	if len(pairs) == 0 {
		res.Verdict = VerdictInconclusive
		res.Message = "no canary samples"
		return res
	}
	pc := 1 - (1-cfg.Confidence)/float64(len(pairs))
	res.PairConfidence = pc
	short := map[string]bool{}
	for _, d := range pairs {
		r := judgePair(cfg, d, minN, pc, minIntervals)
		if r.Verdict == VerdictInconclusive && math.IsNaN(r.PWorse) {
			short[r.Pair] = true
		}
		res.Pairs = append(res.Pairs, r)
	}
	sort.Slice(res.Pairs, func(i, j int) bool { return res.Pairs[i].Pair < res.Pairs[j].Pair })
	deciding := -1
	better := func(i int, cmp func(a, b PairResult) bool) {
		if deciding < 0 || cmp(res.Pairs[i], res.Pairs[deciding]) {
			deciding = i
		}
	}
	has := func(v Verdict) bool {
		for _, p := range res.Pairs {
			if p.Verdict == v {
				return true
			}
		}
		return false
	}
	switch {
	case has(VerdictFail):
		res.Verdict = VerdictFail
		for i, p := range res.Pairs {
			if p.Verdict == VerdictFail {
				better(i, func(a, b PairResult) bool { return a.Effect > b.Effect })
			}
		}
	case has(VerdictInconclusive):
		res.Verdict = VerdictInconclusive
		for i, p := range res.Pairs {
			if p.Verdict == VerdictInconclusive {
				better(i, func(a, b PairResult) bool {
					if short[a.Pair] != short[b.Pair] {
						return short[a.Pair]
					}
					return nanLow(a.PWorse) > nanLow(b.PWorse)
				})
			}
		}
	default:
		res.Verdict = VerdictPass
		for i := range res.Pairs {
			better(i, func(a, b PairResult) bool { return a.PWorse > b.PWorse })
		}
	}
	d := res.Pairs[deciding]
	res.Pairs = append([]PairResult{d}, append(res.Pairs[:deciding:deciding], res.Pairs[deciding+1:]...)...)
	res.Message = fmt.Sprintf("%s on %s (%d pair(s), each at %s confidence): %s", res.Verdict, d.Pair, len(res.Pairs), fmtPct(pc, 2), d.Reason)
	return res
}

func (cfg JudgeConfig) validate() error {
	var bad []string
	if !(cfg.Quantile > 0 && cfg.Quantile < 1) {
		bad = append(bad, fmt.Sprintf("quantile %v must be between 0 and 1", cfg.Quantile))
	}
	if !(cfg.Confidence > 0.5 && cfg.Confidence < 1) {
		bad = append(bad, fmt.Sprintf("confidence %v must be between 0.5 and 1", cfg.Confidence))
	}
	if !(cfg.MaxIncrease >= 0 && cfg.MaxIncrease < 1) {
		bad = append(bad, fmt.Sprintf("maxIncrease %v must be at least 0 and below 1", cfg.MaxIncrease))
	}
	if cfg.MinSamples < 0 {
		bad = append(bad, fmt.Sprintf("minSamples %d must not be negative", cfg.MinSamples))
	}
	if len(bad) > 0 {
		return fmt.Errorf("invalid judge: %s", strings.Join(bad, "; "))
	}
	return nil
}

func nanLow(v float64) float64 {
	if math.IsNaN(v) {
		return -1
	}
	return v
}

// count rounds a provider's count to whole messages, at least 0.
func count(v float64) int64 {
	if math.IsNaN(v) || v <= 0 {
		return 0
	}
	return int64(math.Round(v))
}

func judgePair(cfg JudgeConfig, d PairData, minN int64, pc float64, minIntervals int) PairResult {
	r := PairResult{Pair: d.Pair, PWorse: math.NaN(), RankP: math.NaN()}
	r.CanaryTotal, r.BaselineTotal = count(d.Canary.Total), count(d.Baseline.Total)
	r.CanarySlow, r.BaselineSlow = min(count(d.Canary.Slow), r.CanaryTotal), min(count(d.Baseline.Slow), r.BaselineTotal)
	if r.CanaryTotal > 0 {
		r.CanaryShare = float64(r.CanarySlow) / float64(r.CanaryTotal)
	}
	if r.BaselineTotal > 0 {
		r.BaselineShare = float64(r.BaselineSlow) / float64(r.BaselineTotal)
	}
	r.Effect = r.CanaryShare - r.BaselineShare
	shares := fmt.Sprintf("slow share canary %s (%d/%d) vs baseline %s (%d/%d), effect %+.2f pp",
		fmtPct(r.CanaryShare, 2), r.CanarySlow, r.CanaryTotal, fmtPct(r.BaselineShare, 2), r.BaselineSlow, r.BaselineTotal, 100*r.Effect)
	if r.CanaryTotal < minN || r.BaselineTotal < minN {
		r.Verdict = VerdictInconclusive
		var parts []string
		if r.CanaryTotal < minN {
			parts = append(parts, fmt.Sprintf("canary %d < %d", r.CanaryTotal, minN))
		}
		if r.BaselineTotal < minN {
			parts = append(parts, fmt.Sprintf("baseline %d < %d", r.BaselineTotal, minN))
		}
		r.Reason = "too few samples: " + strings.Join(parts, ", ") + "; " + shares
		return r
	}
	r.PWorse = ProbDiffExceeds(r.CanarySlow, r.CanaryTotal, r.BaselineSlow, r.BaselineTotal, cfg.MaxIncrease)
	prob := fmt.Sprintf("P(worse by > %.2f pp) = %.4f", 100*cfg.MaxIncrease, r.PWorse)
	if len(d.CanaryIntervals) >= minIntervals && len(d.BaselineIntervals) >= minIntervals {
		_, r.RankP = MannWhitneyGreater(d.CanaryIntervals, d.BaselineIntervals)
	}
	rank := ""
	if !math.IsNaN(r.RankP) {
		rank = fmt.Sprintf(", rank test p = %.2g (%d vs %d intervals)", r.RankP, len(d.CanaryIntervals), len(d.BaselineIntervals))
	}
	switch {
	case r.PWorse >= pc && (math.IsNaN(r.RankP) || r.RankP <= 1-pc):
		r.Verdict = VerdictFail
		r.Reason = shares + ", " + prob + rank
	case r.PWorse >= pc:
		r.Verdict = VerdictInconclusive
		r.Reason = shares + ", " + prob + rank + ": the exceedance test says worse, the rank test does not confirm"
	case r.PWorse <= 1-pc:
		r.Verdict = VerdictPass
		r.Reason = shares + ", " + prob + rank
	default:
		r.Verdict = VerdictInconclusive
		r.Reason = shares + ", " + prob + rank + ": not decided at this confidence"
	}
	return r
}

// fmtPct formats a share as a percentage with the given decimals.
func fmtPct(v float64, decimals int) string {
	return fmt.Sprintf("%.*f%%", decimals, 100*v)
}

// probGrid is the number of baseline posterior quantiles ProbDiffExceeds
// integrates over.
const probGrid = 2000

// ProbDiffExceeds is the posterior probability that pC - pB > delta, where
// pC and pB are the slow shares of the canary and the baseline, each with a
// Jeffreys prior Beta(1/2, 1/2), so posteriors Beta(1/2+slow, 1/2+total-slow).
// It integrates P(pC > y + delta) over the baseline's posterior, at the
// midpoints of probGrid equal-probability slices (deterministic; error
// about 1/probGrid at most).
func ProbDiffExceeds(slowC, totalC, slowB, totalB int64, delta float64) float64 {
	if delta >= 1 {
		return 0
	}
	aC, bC := 0.5+float64(slowC), 0.5+float64(totalC-slowC)
	aB, bB := 0.5+float64(slowB), 0.5+float64(totalB-slowB)
	sum := 0.0
	for i := 0; i < probGrid; i++ {
		u := (float64(i) + 0.5) / probGrid
		y := mathext.InvRegIncBeta(aB, bB, u) + delta
		switch {
		case y <= 0:
			sum++
		case y < 1:
			sum += 1 - mathext.RegIncBeta(aC, bC, y)
		}
	}
	return sum / probGrid
}

// MannWhitneyGreater is the one-sided Mann-Whitney U test that x is
// stochastically greater than y: U counts the pairs with x_i > y_j (ties
// count one half), and p is the probability of a U at least as large if both
// came from one distribution. Without ties and with len(x)+len(y) <= 20 the
// p-value is exact; otherwise it is the normal approximation with the tie
// correction and a continuity correction. Empty input gives p = NaN.
func MannWhitneyGreater(x, y []float64) (u, p float64) {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return math.NaN(), math.NaN()
	}
	ties := false
	for _, a := range x {
		for _, b := range y {
			switch {
			case a > b:
				u++
			case a == b:
				u += 0.5
				ties = true
			}
		}
	}
	// Ties inside a sample matter for the variance too.
	all := append(append([]float64{}, x...), y...)
	sort.Float64s(all)
	var tieTerm float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j] == all[i] {
			j++
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		i = j
	}
	if !ties && n1+n2 <= 20 {
		return u, exactUpperTail(n1, n2, int(u))
	}
	N := float64(n1 + n2)
	mean := float64(n1*n2) / 2
	variance := float64(n1*n2) / 12 * ((N + 1) - tieTerm/(N*(N-1)))
	if variance <= 0 {
		return u, 0.5
	}
	z := (u - mean - 0.5) / math.Sqrt(variance)
	return u, 0.5 * math.Erfc(z/math.Sqrt2)
}

// exactUpperTail is P(U >= u) for samples of n1 and n2 without ties: the
// number of arrangements with U = k follows the recurrence
// c(n1, n2, k) = c(n1-1, n2, k-n2) + c(n1, n2-1, k).
func exactUpperTail(n1, n2, u int) float64 {
	maxU := n1 * n2
	// dist[i][j] is the distribution of U for i and j elements.
	dist := make([][][]float64, n1+1)
	for i := range dist {
		dist[i] = make([][]float64, n2+1)
		for j := range dist[i] {
			d := make([]float64, i*j+1)
			switch {
			case i == 0 || j == 0:
				d[0] = 1
			default:
				for k := range d {
					if k-j >= 0 && k-j < len(dist[i-1][j]) {
						d[k] += dist[i-1][j][k-j]
					}
					if k < len(dist[i][j-1]) {
						d[k] += dist[i][j-1][k]
					}
				}
			}
			dist[i][j] = d
		}
	}
	d := dist[n1][n2]
	var total, tail float64
	for k := 0; k <= maxU; k++ {
		total += d[k]
		if k >= u {
			tail += d[k]
		}
	}
	return tail / total
}
