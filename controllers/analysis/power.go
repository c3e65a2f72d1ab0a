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
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
)

// DefaultPower is the probability of a Fail the canary-length figures are
// stated at: a regression "detectable" in a window is failed by the judge
// in at least this share of canaries that have it.
const DefaultPower = 0.8

// powerMaxStep bounds how long a canary step Power looks for when a
// regression cannot be detected within the analysis' own limits.
const powerMaxStep = 7 * 24 * time.Hour

// Schedule is when a judge analysis measures and over what window.
type Schedule struct {
	// Window is the analysis' window, Interval the time between two
	// measurements, Step the judge's step (a measurement's messages start
	// one step after the analysis started).
	Window, Interval, Step time.Duration
	// InconclusiveLimit is how many Inconclusive measurements the analysis
	// tolerates: measurement number InconclusiveLimit+1 (at
	// InconclusiveLimit x Interval) is the last one that can still decide.
	InconclusiveLimit int32
	// RankIntervals is how many per-step values each cohort needs before a
	// candidate Fail can be confirmed (the rank test of an analysis with an
	// intervalQuery); 0 when a Fail needs no rank test.
	RankIntervals int
}

// ScheduleFor reads an analysis' schedule, with the defaults.
func ScheduleFor(spec *v1alpha1.AnalysisSpec) Schedule {
	s := Schedule{
		Window:            spec.GetWindow(),
		Interval:          spec.GetInterval(),
		InconclusiveLimit: int32Or(spec.InconclusiveLimit, DefaultInconclusiveLimit),
		Step:              spec.Judge.GetStep(),
	}
	if spec.Judge != nil && hasIntervalQuery(spec.Judge) {
		s.RankIntervals = DefaultJudgeMinIntervals
	}
	return s
}

// LastMeasurement is when, after the analysis started, its last measurement
// that can still decide is taken: InconclusiveLimit x Interval.
func (s Schedule) LastMeasurement() time.Duration {
	return time.Duration(s.InconclusiveLimit) * s.Interval
}

// WindowAt is the window of the measurement taken at after the analysis
// started (MeasureJudge: from one step after the start, at most Window,
// in whole seconds), 0 while it is still collecting its first step.
func (s Schedule) WindowAt(at time.Duration) time.Duration {
	w := (at - s.Step).Truncate(time.Second)
	if w > s.Window {
		w = s.Window
	}
	if w < s.Step {
		return 0
	}
	return w
}

// rankReady reports whether a window holds the rank test's values (one per
// step).
func (s Schedule) rankReady(w time.Duration) bool {
	return s.RankIntervals == 0 || (s.Step > 0 && int(w/s.Step) >= s.RankIntervals)
}

// Problems are what makes the schedule unable ever to decide, from the
// schedule alone: every measurement before the analysis gives up still
// collecting its first step, or a rank test that never gets its values
// before then (the analysis can then never Fail). Each is one sentence
// naming the fields and the numbers.
func (s Schedule) Problems() []string {
	var out []string
	last := s.LastMeasurement()
	widest := s.WindowAt(last)
	if widest == 0 {
		return append(out, fmt.Sprintf("every measurement is still collecting: the last one that can decide is at inconclusiveLimit %d x interval %s = %s, before one judge.step (%s) of messages is in after the first",
			s.InconclusiveLimit, s.Interval, last, s.Step))
	}
	if !s.rankReady(widest) {
		need := time.Duration(s.RankIntervals) * s.Step
		why := fmt.Sprintf("window %s", s.Window)
		if widest < s.Window {
			why = fmt.Sprintf("the widest window before the analysis gives up, inconclusiveLimit %d x interval %s - judge.step %s = %s", s.InconclusiveLimit, s.Interval, s.Step, widest)
		}
		out = append(out, fmt.Sprintf("the rank test (intervalQuery) needs %d values of judge.step %s, a window of %s, but %s holds %d: the analysis can never fail",
			s.RankIntervals, s.Step, need, why, int(widest/s.Step)))
	}
	return out
}

// PairRate is what the stable revision showed on one host pair, scaled to
// the cohorts of a rollout.
type PairRate struct {
	// Pair names the pair as the judge does ("host=xavier-b,peer=xavier-a").
	Pair string
	// CanaryRate and BaselineRate are the messages per second the canary
	// cohort and the baseline cohort send on the pair.
	CanaryRate, BaselineRate float64
	// BaselineShare is the stable revision's slow share on the pair.
	BaselineShare float64
}

// Regression is a canary slow share to detect: Ratio times the baseline's
// share when Ratio > 0, else Share.
type Regression struct {
	Ratio, Share float64
}

// ParseRegression reads a regression: "3x" (three times the baseline's slow
// share), "2%" or "0.02" (a slow share of 2 %).
func ParseRegression(s string) (Regression, error) {
	t := strings.TrimSpace(s)
	switch {
	case strings.HasSuffix(t, "x"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(t, "x"), 64)
		if err != nil || !(v > 1) || math.IsInf(v, 0) {
			return Regression{}, fmt.Errorf("regression %q: a ratio to the baseline's slow share must be a number > 1 followed by x, e.g. 3x", s)
		}
		return Regression{Ratio: v}, nil
	case strings.HasSuffix(t, "%"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
		if err != nil || !(v > 0 && v <= 100) {
			return Regression{}, fmt.Errorf("regression %q: a slow share in percent must be in (0, 100], e.g. 2%%", s)
		}
		return Regression{Share: v / 100}, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0 && v <= 1) {
		return Regression{}, fmt.Errorf("regression %q: give a ratio to the baseline's slow share (3x), a share in percent (2%%) or a share in (0, 1] (0.02)", s)
	}
	return Regression{Share: v}, nil
}

// ShareFor is the canary's slow share under the regression, on a pair whose
// baseline share is p0 (at most 1).
func (r Regression) ShareFor(p0 float64) float64 {
	if r.Ratio > 0 {
		return math.Min(1, r.Ratio*p0)
	}
	return r.Share
}

// String is the regression as ParseRegression reads it.
func (r Regression) String() string {
	if r.Ratio > 0 {
		return strconv.FormatFloat(r.Ratio, 'g', -1, 64) + "x"
	}
	return strconv.FormatFloat(100*r.Share, 'g', 4, 64) + "%"
}

// PowerInput is what Power needs about one judge analysis.
type PowerInput struct {
	// Config is the judge's configuration (JudgeConfigFor).
	Config JudgeConfig
	// Schedule is when it measures (ScheduleFor).
	Schedule Schedule
	// Pairs are the host pairs' rates; pairs without canary messages are
	// left out, as the judge leaves them out.
	Pairs []PairRate
	// Power is the probability of a Fail the figures are stated at; 0
	// means DefaultPower.
	Power float64
	// Detect, when set, is a regression to say the canary step's length
	// for.
	Detect *Regression
}

// PairPower is what one pair can decide.
type PairPower struct {
	PairRate
	// Tolerance is the canary share the judge tolerates on the pair:
	// maxRatio x BaselineShare + maxIncrease.
	Tolerance float64
	// MinSamplesAt is the first measurement (after the analysis started)
	// with the sample minimum in both cohorts; negative when none before
	// the analysis gives up.
	MinSamplesAt time.Duration
	// Window is the widest window the analysis measures before it gives
	// up; CanarySamples and BaselineSamples the messages it holds.
	Window                         time.Duration
	CanarySamples, BaselineSamples int64
	// Detectable is the smallest canary slow share failed with the power
	// asked in that window; NaN when the window cannot fail the pair (too
	// few samples, no rank test, or no share can).
	Detectable float64
	// DetectShare is the canary share of the regression asked (NaN when
	// none was); DetectAt the measurement at which it is failed with the
	// power asked, DetectPower the power there; DetectAt is negative when
	// no length up to a week does. DetectWithin is whether that measurement
	// is one the analysis takes before it gives up; when it is not,
	// DetectAt is the canary step's length with the window and
	// inconclusiveLimit raised to it.
	DetectShare  float64
	DetectAt     time.Duration
	DetectPower  float64
	DetectWithin bool
	// PassAt is the first measurement, before the analysis gives up, at
	// which the judge passes the pair for a canary without a regression
	// (its slow share the baseline's) with the power asked, PassPower the
	// probability there; PassAt is negative when no such measurement does.
	PassAt    time.Duration
	PassPower float64
}

// PowerResult is what one judge analysis can decide on a fleet.
type PowerResult struct {
	// Power is the probability the figures are stated at.
	Power float64
	// PairConfidence is the confidence each pair is judged at (Bonferroni
	// over the pairs), MinSamples the per-cohort per-pair minimum.
	PairConfidence float64
	MinSamples     int64
	// LastMeasurement is when the last measurement that can decide is
	// taken, Window the widest window measured by then.
	LastMeasurement, Window time.Duration
	// Pairs are the pairs, in the input's order.
	Pairs []PairPower
	// Detect is the regression asked (nil when none); DetectAt the canary
	// step length that detects it on every pair with the power asked (the
	// largest of the pairs' DetectAt; negative when a pair never does),
	// DetectWithin whether the analysis' own limits allow it.
	Detect       *Regression
	DetectAt     time.Duration
	DetectWithin bool
	// PassAt is the first measurement, before the analysis gives up, at
	// which a canary without a regression passes the analysis (every pair
	// in the same measurement) with the power asked, PassPower the
	// probability there (the product of the pairs', whose counts are
	// independent); PassAt is negative when no such measurement does.
	PassAt    time.Duration
	PassPower float64
	// Problems are the reasons the analysis can never decide on this fleet
	// (Schedule.Problems, and pairs that never collect the sample minimum
	// before the analysis gives up), one sentence each.
	Problems []string
}

// Power computes, for one judge analysis on a fleet with the given rates,
// when each pair reaches the sample minimum, the smallest canary slow share
// each pair's widest window fails with the power asked, for a regression,
// how long the canary step must last to fail it, and when a canary without
// a regression passes.
//
// The model is the judge's own: at the measurement taken at t after the
// analysis started, each cohort's messages on a pair are its rate times the
// window at t (Schedule.WindowAt); the baseline's slow messages are binomial
// with the pair's baseline share and the canary's with the regressed share;
// a pair fails when ProbExceeds reaches the pair confidence 1-(1-c)/m with
// both cohorts at the sample minimum and, with a rank test, a window that
// holds its values. The rank test itself is taken to confirm (it has its
// own power, on the per-step quantiles, which the counts do not give).
// The power is computed exactly over both binomials; it is that of one
// measurement, on one pair: an analysis measuring again, or a regression on
// several pairs, fails sooner. A pass likewise: the probability that one
// measurement passes a canary whose share is the baseline's on every pair;
// an analysis measuring again passes sooner.
func Power(in PowerInput) (PowerResult, error) {
	cfg := in.Config
	if msg := judgeConfigError(cfg); msg != "" {
		return PowerResult{}, errors.New("invalid judge configuration: " + msg)
	}
	power := in.Power
	if power == 0 {
		power = DefaultPower
	}
	if !(power > 0 && power < 1) {
		return PowerResult{}, fmt.Errorf("power %v is not in (0, 1)", power)
	}
	s := in.Schedule
	if s.Interval <= 0 || s.Window <= 0 || s.Step <= 0 {
		return PowerResult{}, fmt.Errorf("schedule: interval %s, window %s and step %s must be positive", s.Interval, s.Window, s.Step)
	}
	var pairs []PairRate
	for _, p := range in.Pairs {
		if p.CanaryRate > 0 {
			pairs = append(pairs, p)
		}
	}
	res := PowerResult{
		Power:           power,
		MinSamples:      judgeSampleMinimum(cfg.Quantile, cfg.MinSamples),
		LastMeasurement: s.LastMeasurement(),
		Detect:          in.Detect,
		DetectWithin:    in.Detect != nil,
		PassAt:          -1,
		PassPower:       math.NaN(),
		Problems:        s.Problems(),
	}
	res.Window = s.WindowAt(res.LastMeasurement)
	if len(pairs) == 0 {
		res.Problems = append(res.Problems, "no host pair has messages of the stable revision to scale a canary from")
		return res, nil
	}
	res.PairConfidence = 1 - (1-cfg.Confidence)/float64(len(pairs))
	m := powerModel{cfg: cfg, pc: res.PairConfidence, minN: res.MinSamples, power: power, s: s}

	// Pairs with the same rates and share have the same figures.
	type rates struct{ c, b, s float64 }
	done := map[rates]PairPower{}
	for _, p := range pairs {
		key := rates{p.CanaryRate, p.BaselineRate, p.BaselineShare}
		pp, ok := done[key]
		if !ok {
			pp = m.pair(p, res.Window, in.Detect)
			done[key] = pp
		}
		pp.PairRate = p
		res.Pairs = append(res.Pairs, pp)
		if in.Detect != nil {
			switch {
			case pp.DetectAt < 0 || res.DetectAt < 0:
				res.DetectAt = -1
			case pp.DetectAt > res.DetectAt:
				res.DetectAt = pp.DetectAt
			}
			res.DetectWithin = res.DetectWithin && pp.DetectWithin
		}
	}
	m.passing(&res)
	if short := shortPairs(res.MinSamples, s, pairs); short != "" {
		res.Problems = append(res.Problems, short)
	}
	return res, nil
}

// SampleProblems is what makes a judge analysis unable ever to decide on a
// fleet with these rates (Schedule.Problems, and pairs that never collect
// the sample minimum before the analysis gives up): Power's Problems
// without its power figures, cheap enough for every rollout.
func SampleProblems(cfg JudgeConfig, s Schedule, pairs []PairRate) []string {
	out := s.Problems()
	var used []PairRate
	for _, p := range pairs {
		if p.CanaryRate > 0 {
			used = append(used, p)
		}
	}
	if short := shortPairs(judgeSampleMinimum(cfg.Quantile, cfg.MinSamples), s, used); short != "" {
		out = append(out, short)
	}
	return out
}

// shortPairs names the pairs whose widest window holds fewer than minN
// messages of either cohort, "" when none does.
func shortPairs(minN int64, s Schedule, pairs []PairRate) string {
	widest := s.WindowAt(s.LastMeasurement())
	m := powerModel{minN: minN, s: s}
	var short []string
	for _, p := range pairs {
		if nC, nB := m.samples(p, widest); widest == 0 || nC < minN || nB < minN {
			short = append(short, fmt.Sprintf("%s (canary %d, baseline %d)", p.Pair, nC, nB))
		}
	}
	if len(short) == 0 {
		return ""
	}
	const maxNamed = 5
	n, more := len(short), ""
	if len(short) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(short)-maxNamed)
		short = short[:maxNamed]
	}
	return fmt.Sprintf("%d of %d host pairs never collect minSamples %d per cohort before the analysis gives up (window %s by its last measurement at inconclusiveLimit %d x interval %s): %s%s",
		n, len(pairs), minN, widest, s.InconclusiveLimit, s.Interval, strings.Join(short, ", "), more)
}

// powerModel holds what every pair's computation shares.
type powerModel struct {
	cfg   JudgeConfig
	pc    float64
	minN  int64
	power float64
	s     Schedule
}

func (m powerModel) samples(p PairRate, w time.Duration) (nC, nB int64) {
	return int64(math.Round(p.CanaryRate * w.Seconds())), int64(math.Round(p.BaselineRate * w.Seconds()))
}

// enough reports whether a measurement over w has the sample minimum in
// both cohorts: a pair short of it is Inconclusive, never Pass nor Fail.
func (m powerModel) enough(p PairRate, w time.Duration) bool {
	nC, nB := m.samples(p, w)
	return w > 0 && nC >= m.minN && nB >= m.minN
}

// canFail reports whether a measurement over w can fail the pair at all.
func (m powerModel) canFail(p PairRate, w time.Duration) bool {
	return m.enough(p, w) && m.s.rankReady(w)
}

func (m powerModel) pair(p PairRate, widest time.Duration, detect *Regression) PairPower {
	pp := PairPower{PairRate: p, MinSamplesAt: -1, Window: widest, Detectable: math.NaN(),
		DetectShare: math.NaN(), DetectAt: -1, DetectPower: math.NaN(), PassAt: -1, PassPower: math.NaN()}
	pp.Tolerance = judgeRatio(m.cfg)*p.BaselineShare + m.cfg.MaxIncrease
	pp.CanarySamples, pp.BaselineSamples = m.samples(p, widest)
	last := m.s.LastMeasurement()
	for at := time.Duration(0); at <= last; at += m.s.Interval {
		if m.enough(p, m.s.WindowAt(at)) {
			pp.MinSamplesAt = at
			break
		}
	}
	if m.canFail(p, widest) {
		nC, nB := m.samples(p, widest)
		pp.Detectable = newFailTable(m.cfg, m.pc, nC, nB, p.BaselineShare).detectable(m.power)
	}
	if detect == nil {
		return pp
	}
	share := detect.ShareFor(p.BaselineShare)
	pp.DetectShare = share
	if share <= pp.Tolerance {
		// Within the tolerance: the judge fails it no more often than a
		// canary without a regression.
		return pp
	}
	powerAt := func(w time.Duration) float64 {
		if !m.canFail(p, w) {
			return 0
		}
		nC, nB := m.samples(p, w)
		return newFailTable(m.cfg, m.pc, nC, nB, p.BaselineShare).power(share)
	}
	// Within the analysis' own limits: its measurements, in order.
	for at := time.Duration(0); at <= last; at += m.s.Interval {
		if pw := powerAt(m.s.WindowAt(at)); pw >= m.power {
			pp.DetectAt, pp.DetectPower, pp.DetectWithin = at, pw, true
			return pp
		}
	}
	// Beyond them: the window grows with the step (window and
	// inconclusiveLimit raised), one measurement per interval; the first
	// measurement that fails it, by doubling and bisection.
	grown := m.s
	grown.Window = powerMaxStep
	powerAtK := func(k int64) float64 { return powerAt(grown.WindowAt(time.Duration(k) * m.s.Interval)) }
	maxK := int64(powerMaxStep / m.s.Interval)
	lo, hi := int64(0), int64(1)
	for powerAtK(hi) < m.power {
		lo, hi = hi, 2*hi
		if lo > maxK {
			return pp
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if powerAtK(mid) >= m.power {
			hi = mid
		} else {
			lo = mid
		}
	}
	pp.DetectAt = time.Duration(hi) * m.s.Interval
	pp.DetectPower = powerAtK(hi)
	return pp
}

// passing fills in when a canary without a regression passes: each pair on
// its own (PairPower.PassAt) and the analysis, every pair in one
// measurement (PowerResult.PassAt), at the measurements the analysis takes
// before it gives up. A pair passes only with both cohorts at the sample
// minimum; the rank test never blocks a Pass.
func (m powerModel) passing(res *PowerResult) {
	// Pairs with the same rates and share, in windows of the same width,
	// pass alike (the window stops growing at the analysis' window).
	type key struct {
		c, b, s float64
		w       time.Duration
	}
	each := map[key]float64{}
	last := m.s.LastMeasurement()
	for at := time.Duration(0); at <= last; at += m.s.Interval {
		w := m.s.WindowAt(at)
		all := 1.0
		for i := range res.Pairs {
			pp := &res.Pairs[i]
			k := key{pp.CanaryRate, pp.BaselineRate, pp.BaselineShare, w}
			pw, ok := each[k]
			if !ok {
				pw = m.passPower(pp.PairRate, w)
				each[k] = pw
			}
			if pp.PassAt < 0 && pw >= m.power {
				pp.PassAt, pp.PassPower = at, pw
			}
			all *= pw
		}
		if all >= m.power {
			res.PassAt, res.PassPower = at, all
			return
		}
	}
}

// passPower is the probability that a measurement over w passes the pair
// for a canary whose slow share is the baseline's.
func (m powerModel) passPower(p PairRate, w time.Duration) float64 {
	if !m.enough(p, w) {
		return 0
	}
	nC, nB := m.samples(p, w)
	return newPassTable(m.cfg, m.pc, nC, nB, p.BaselineShare).power(p.BaselineShare)
}

// passTable is, for nC canary and nB baseline messages on a pair whose
// baseline share is p0, the most slow canary messages with which the judge
// passes the pair (ProbExceeds <= 1 - the pair confidence) for every likely
// count of slow baseline messages.
type passTable struct {
	nC    int64
	probB []float64 // P(baseline slow = kB[i])
	kMax  []int64   // most canary slow messages that pass at kB[i]; -1 when none
}

func newPassTable(cfg JudgeConfig, pc float64, nC, nB int64, p0 float64) passTable {
	t := passTable{nC: nC}
	first, prev := true, int64(-1)
	exceedsRows(cfg, nC, nB, p0, func(probB float64, pAt func(kC int64) float64) {
		// kMax does not decrease with kB (a worse baseline tolerates
		// more): a binary search for the first, then a walk up from the
		// previous one.
		k := prev
		if first {
			l, h := int64(-1), nC
			for l < h {
				mid := (l + h + 1) / 2
				if pAt(mid) <= 1-pc {
					l = mid
				} else {
					h = mid - 1
				}
			}
			k = l
		} else {
			for k < nC && pAt(k+1) <= 1-pc {
				k++
			}
		}
		first, prev = false, k
		t.probB = append(t.probB, probB)
		t.kMax = append(t.kMax, k)
	})
	return t
}

// power is the probability that a canary with slow share p1 passes the
// pair.
func (t passTable) power(p1 float64) float64 {
	var sum float64
	for i, k := range t.kMax {
		if k >= 0 {
			sum += t.probB[i] * binomLower(t.nC, k, p1)
		}
	}
	return math.Min(1, sum)
}

// failTable is, for nC canary and nB baseline messages on a pair whose
// baseline share is p0, the fewest slow canary messages that make the judge
// fail the pair (ProbExceeds >= the pair confidence) for every likely
// count of slow baseline messages.
type failTable struct {
	nC    int64
	probB []float64 // P(baseline slow = kB[i])
	kStar []int64   // fewest canary slow messages that fail at kB[i]; nC+1 when none
}

// powerTail is the probability mass of the baseline's binomial left out of
// a failTable, at each end.
const powerTail = 1e-9

func newFailTable(cfg JudgeConfig, pc float64, nC, nB int64, p0 float64) failTable {
	t := failTable{nC: nC}
	first, prev := true, int64(0)
	exceedsRows(cfg, nC, nB, p0, func(probB float64, pAt func(kC int64) float64) {
		// kStar does not decrease with kB: a binary search for the first,
		// then a walk up from the previous one.
		var k int64
		if first {
			l, h := int64(0), nC+1
			for l < h {
				mid := (l + h) / 2
				if pAt(mid) >= pc {
					h = mid
				} else {
					l = mid + 1
				}
			}
			k = l
		} else {
			k = prev
			for k <= nC && pAt(k) < pc {
				k++
			}
		}
		first, prev = false, k
		t.probB = append(t.probB, probB)
		t.kStar = append(t.kStar, k)
	})
	return t
}

// exceedsRows calls row for every likely count kB of slow baseline
// messages (binomial(nB, p0), all but powerTail of each tail), in
// increasing order, with its probability and ProbExceeds of kC slow canary
// messages of nC against it (the canary's grids shared by the rows).
func exceedsRows(cfg JudgeConfig, nC, nB int64, p0 float64, row func(probB float64, pAt func(kC int64) float64)) {
	ratio := judgeRatio(cfg)
	lo, hi := binomRange(nB, p0, powerTail)
	cGrids := map[int64]*jeffreysGrid{}
	for kB := lo; kB <= hi; kB++ {
		b := newJeffreysGrid(kB, nB)
		row(binomPMF(nB, kB, p0), func(kC int64) float64 {
			g := cGrids[kC]
			if g == nil {
				g = newJeffreysGrid(kC, nC)
				cGrids[kC] = g
			}
			return probExceedsGrids(g, b, ratio, cfg.MaxIncrease)
		})
	}
}

// power is the probability that a canary with slow share p1 fails the pair.
func (t failTable) power(p1 float64) float64 {
	var sum float64
	for i, k := range t.kStar {
		if k <= t.nC {
			sum += t.probB[i] * binomUpper(t.nC, k, p1)
		}
	}
	return math.Min(1, sum)
}

// detectable is the smallest canary slow share failed with probability
// power, NaN when even a share of 1 is not.
func (t failTable) detectable(power float64) float64 {
	if t.power(1) < power {
		return math.NaN()
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if t.power(mid) >= power {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// binomRange is the range of a binomial(n, p) count outside which each tail
// holds less than eps.
func binomRange(n int64, p, eps float64) (lo, hi int64) {
	if p <= 0 || n <= 0 {
		return 0, 0
	}
	if p >= 1 {
		return n, n
	}
	mean := float64(n) * p
	sd := math.Sqrt(mean * (1 - p))
	lo = max(0, int64(math.Floor(mean-10*sd-10)))
	hi = min(n, int64(math.Ceil(mean+10*sd+10)))
	for lo < hi && binomLower(n, lo, p) < eps {
		lo++
	}
	for hi > lo && binomUpper(n, hi, p) < eps {
		hi--
	}
	return lo, hi
}

// binomLogPMF is log P(X = k) for X ~ binomial(n, p), 0 < p < 1.
func binomLogPMF(n, k int64, p float64) float64 {
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c + float64(k)*math.Log(p) + float64(n-k)*math.Log1p(-p)
}

// binomPMF is P(X = k) for X ~ binomial(n, p).
func binomPMF(n, k int64, p float64) float64 {
	switch {
	case k < 0 || k > n:
		return 0
	case p <= 0:
		return b2f(k == 0)
	case p >= 1:
		return b2f(k == n)
	}
	return math.Exp(binomLogPMF(n, k, p))
}

// binomUpper is P(X >= k) for X ~ binomial(n, p).
func binomUpper(n, k int64, p float64) float64 {
	switch {
	case k <= 0:
		return 1
	case k > n:
		return 0
	case p <= 0:
		return 0
	case p >= 1:
		return 1
	}
	if float64(k) < float64(n)*p {
		return 1 - binomLower(n, k-1, p)
	}
	// Sum up from k, the terms falling from there on.
	term := binomPMF(n, k, p)
	sum := term
	q := p / (1 - p)
	for j := k; j < n && term > 1e-17*sum; j++ {
		term *= float64(n-j) / float64(j+1) * q
		sum += term
	}
	return math.Min(1, sum)
}

// binomLower is P(X <= k) for X ~ binomial(n, p).
func binomLower(n, k int64, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n:
		return 1
	case p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	if float64(k) > float64(n)*p {
		return 1 - binomUpper(n, k+1, p)
	}
	term := binomPMF(n, k, p)
	sum := term
	q := (1 - p) / p
	for j := k; j > 0 && term > 1e-17*sum; j-- {
		term *= float64(j) / float64(n-j+1) * q
		sum += term
	}
	return math.Min(1, sum)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// StableCounts runs a judge analysis' totalQuery and slowQuery for one
// cohort (the vehicles on the stable revision) over window, at the instant
// at, and returns the counts per host pair, named as the judge names them.
func StableCounts(ctx context.Context, q Querier, profile string, spec *v1alpha1.AnalysisSpec, c Cohort, window time.Duration, at time.Time) (map[string]Counts, error) {
	if spec.Judge == nil {
		return nil, errors.New("not a judge analysis")
	}
	vq, ok := q.(VectorQuerier)
	if !ok {
		return nil, fmt.Errorf("the %s client cannot run per-pair queries", spec.Provider)
	}
	j := spec.Judge
	extra := func(d *TemplateData) error {
		threshold := judgeThreshold(j)
		d.ThresholdMs = strconv.FormatFloat(float64(threshold)/float64(time.Millisecond), 'f', -1, 64)
		d.ThresholdSeconds = strconv.FormatFloat(threshold.Seconds(), 'f', -1, 64)
		s, err := FormatDuration(j.GetStep())
		d.Step = s
		return err
	}
	out := map[string]Counts{}
	for _, qq := range []struct {
		what, tmpl string
		slow       bool
	}{{"totalQuery", j.TotalQuery, false}, {"slowQuery", j.SlowQuery, true}} {
		query, err := renderQuery(qq.tmpl, profile, c, window, extra)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", qq.what, err)
		}
		series, err := vq.QueryVector(ctx, query, at)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", qq.what, err)
		}
		for _, s := range series {
			k := pairName(s.Key)
			n := out[k]
			if qq.slow {
				n.Slow += s.Value
			} else {
				n.Total += s.Value
			}
			out[k] = n
		}
	}
	return out, nil
}
