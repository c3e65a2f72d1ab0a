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

package experiment

import (
	"math"
	"sort"
	"strconv"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/internal/text"
)

// ArmCounts are one arm's messages for one hardware model, and the
// control's of the same model measured over the same window.
type ArmCounts struct {
	Arm                       string
	Slow, Total               int64
	ControlSlow, ControlTotal int64
	// Stopped arms are ranked but never win.
	Stopped bool
	// Unguarded, when set, says why the arm may not win: a guard that has
	// not passed on its vehicles (ranked, reported, never recommended).
	Unguarded string
}

// Rank orders the arms of one hardware model, control included (its row
// has Arm == v1alpha1.ControlArm and its own counts as Slow/Total), best
// first: the arms still running (and the control) before the arms stopped
// (an arm stops when the judge finds it worse than the control), each group
// by its effect against the control over the arm's own window — the Jeffreys
// posterior mean of its slow share minus the control's of the same window;
// the control's effect is 0. A stopped arm's window ends when it stopped,
// so its raw share is not comparable with the others'; the effect is. Arms
// without messages go last, unnumbered. Each variant's Effect is its share
// minus the control's of the same window, in percentage points, with the
// central credible interval at confidence; probBetter is P(arm's share <
// control's) and probAboveNext P(this arm's share < the next arm's), the
// latter only between arms measured over the same window (neither
// stopped), under independent Jeffreys posteriors (analysis.ProbDiffExceeds).
//
// The winner is the best-ranked variant that was not stopped, and whose
// guards all passed (Unguarded empty), whose
// probBetter reaches 1-(1-confidence)/v, v the number of variants (a
// Bonferroni correction: with v variants compared to one control, the
// chance that any of them is declared better by luck stays below
// 1-confidence); control when none does.
func Rank(rows []ArmCounts, confidence float64) (ranking []v1alpha1.ArmRanking, winner string) {
	rows = append([]ArmCounts{}, rows...)
	mean := func(slow, total int64) float64 { return (float64(slow) + 0.5) / (float64(total) + 1) }
	effect := func(r ArmCounts) float64 {
		if r.Total <= 0 {
			return math.Inf(1)
		}
		if r.Arm == v1alpha1.ControlArm || r.ControlTotal <= 0 {
			return 0
		}
		return mean(r.Slow, r.Total) - mean(r.ControlSlow, r.ControlTotal)
	}
	group := func(r ArmCounts) int {
		switch {
		case r.Total <= 0:
			return 2
		case r.Stopped:
			return 1
		}
		return 0
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if gi, gj := group(rows[i]), group(rows[j]); gi != gj {
			return gi < gj
		}
		if ei, ej := effect(rows[i]), effect(rows[j]); ei != ej {
			return ei < ej
		}
		return rows[i].Arm < rows[j].Arm
	})
	variants := 0
	for _, r := range rows {
		if r.Arm != v1alpha1.ControlArm {
			variants++
		}
	}
	need := 1 - (1-confidence)/float64(max(variants, 1))
	winner = v1alpha1.ControlArm
	for i, r := range rows {
		out := v1alpha1.ArmRanking{Arm: r.Arm, Slow: r.Slow, Total: r.Total, Stopped: r.Stopped, Unguarded: text.Truncate(r.Unguarded, 1024)}
		if r.Total > 0 {
			out.Rank = int32(i + 1)
			out.Share = num(100 * float64(r.Slow) / float64(r.Total))
			if r.Arm != v1alpha1.ControlArm && r.ControlTotal > 0 {
				ctrl := float64(r.ControlSlow) / float64(r.ControlTotal)
				out.Effect = num(100 * (float64(r.Slow)/float64(r.Total) - ctrl))
				lo, hi := EffectInterval(r.Slow, r.Total, r.ControlSlow, r.ControlTotal, confidence)
				out.EffectLow, out.EffectHigh = num(100*lo), num(100*hi)
				better := 1 - analysis.ProbDiffExceeds(r.Slow, r.Total, r.ControlSlow, r.ControlTotal, 0)
				out.ProbBetter = num(better)
				if winner == v1alpha1.ControlArm && !r.Stopped && r.Unguarded == "" && better >= need {
					winner = r.Arm
				}
			}
			if i+1 < len(rows) && rows[i+1].Total > 0 && !r.Stopped && !rows[i+1].Stopped {
				n := rows[i+1]
				out.ProbAboveNext = num(analysis.ProbDiffExceeds(n.Slow, n.Total, r.Slow, r.Total, 0))
			}
		}
		ranking = append(ranking, out)
	}
	// The winner must also rank above the control: a variant below it
	// cannot have probBetter >= need > 1/2, but say so explicitly.
	for _, r := range ranking {
		if r.Arm == v1alpha1.ControlArm {
			break
		}
		if r.Arm == winner {
			return ranking, winner
		}
	}
	return ranking, v1alpha1.ControlArm
}

// EffectInterval is the central credible interval, at confidence, of
// pA - pB under the Jeffreys posteriors of slowA/totalA and slowB/totalB, by
// bisection on analysis.ProbDiffExceeds (monotone in its delta).
func EffectInterval(slowA, totalA, slowB, totalB int64, confidence float64) (lo, hi float64) {
	tail := (1 - confidence) / 2
	// quantile returns the delta with P(diff > delta) = p.
	quantile := func(p float64) float64 {
		a, b := -1.0, 1.0
		for range 50 {
			m := (a + b) / 2
			if analysis.ProbDiffExceeds(slowA, totalA, slowB, totalB, m) > p {
				a = m
			} else {
				b = m
			}
		}
		return (a + b) / 2
	}
	return quantile(1 - tail), quantile(tail)
}

// num formats a number for status (6 significant digits).
func num(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
