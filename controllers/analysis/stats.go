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
	"sort"
)

// jeffreysGridPoints is the number of intervals of the grid on which a
// posterior is tabulated.
const jeffreysGridPoints = 1024

// jeffreysGrid tabulates the Jeffreys posterior Beta(k+1/2, n-k+1/2) of a
// share p in the variable theta = asin(sqrt(p)). In theta the density is
// proportional to sin(theta)^(2k) * cos(theta)^(2(n-k)): bounded, smooth and
// log-concave with curvature at least 2n, so it is negligible more than
// 12/sqrt(2n) from its mode asin(sqrt(k/n)), where it falls by a factor of
// at least e^72.
type jeffreysGrid struct {
	lo, h float64   // first node and node spacing
	dens  []float64 // unnormalized density at the nodes
	cdf   []float64 // cumulative distribution at the nodes (trapezoid rule)
}

// newJeffreysGrid tabulates the posterior of k successes out of n.
func newJeffreysGrid(k, n int64) *jeffreysGrid {
	lo, hi := 0.0, math.Pi/2
	ek, em := 2*float64(k), 2*float64(n-k)
	mode := math.Pi / 4
	if n > 0 {
		mode = math.Asin(math.Sqrt(float64(k) / float64(n)))
		w := 12 / math.Sqrt(2*float64(n))
		lo, hi = math.Max(0, mode-w), math.Min(math.Pi/2, mode+w)
	}
	logDens := func(t float64) float64 {
		s, c := math.Sincos(t)
		v := 0.0
		if ek > 0 {
			v += ek * math.Log(s)
		}
		if em > 0 {
			v += em * math.Log(c)
		}
		return v
	}
	top := logDens(mode)
	g := &jeffreysGrid{lo: lo, h: (hi - lo) / jeffreysGridPoints}
	g.dens = make([]float64, jeffreysGridPoints+1)
	g.cdf = make([]float64, jeffreysGridPoints+1)
	for i := range g.dens {
		g.dens[i] = math.Exp(logDens(lo+float64(i)*g.h) - top)
		if i > 0 {
			g.cdf[i] = g.cdf[i-1] + g.h*(g.dens[i-1]+g.dens[i])/2
		}
	}
	total := g.cdf[jeffreysGridPoints]
	for i := range g.cdf {
		g.cdf[i] /= total
	}
	return g
}

// at returns the cumulative distribution at theta, interpolated linearly
// between nodes.
func (g *jeffreysGrid) at(theta float64) float64 {
	x := (theta - g.lo) / g.h
	switch {
	case x <= 0:
		return 0
	case x >= jeffreysGridPoints:
		return 1
	}
	i := int(x)
	f := x - float64(i)
	return g.cdf[i] + f*(g.cdf[i+1]-g.cdf[i])
}

// ProbDiffExceeds returns P(pC - pB > delta), where pC and pB are
// independent with the Jeffreys posteriors Beta(0.5+slow, 0.5+total-slow)
// of the canary's and the baseline's slow share. Negative counts are
// treated as 0 and slow is clamped to total.
//
// It integrates deterministically: both posteriors are tabulated on fine
// grids in theta = asin(sqrt(p)), where their densities are bounded and
// smooth even for tiny shares, and P = E_B[1 - F_C(pB + delta)] is summed
// by the trapezoid rule over the baseline grid. The error is below about
// 1e-4. delta >= 1 gives 0, delta <= -1 gives 1 and NaN gives NaN.
func ProbDiffExceeds(slowC, totalC, slowB, totalB int64, delta float64) float64 {
	return ProbExceeds(slowC, totalC, slowB, totalB, 1, delta)
}

// ProbExceeds returns P(pC > ratio*pB + delta) under the same posteriors
// as ProbDiffExceeds (which is ratio 1), computed the same way.
func ProbExceeds(slowC, totalC, slowB, totalB int64, ratio, delta float64) float64 {
	switch {
	case math.IsNaN(delta):
		return math.NaN()
	case delta >= 1:
		return 0
	case delta <= -1:
		return 1
	case math.IsNaN(ratio) || ratio < 0:
		return math.NaN()
	}
	totalC, totalB = max(totalC, 0), max(totalB, 0)
	slowC, slowB = min(max(slowC, 0), totalC), min(max(slowB, 0), totalB)
	return probExceedsGrids(newJeffreysGrid(slowC, totalC), newJeffreysGrid(slowB, totalB), ratio, delta)
}

// probExceedsGrids is ProbExceeds on tabulated posteriors of the canary (c)
// and the baseline (b), for a ratio and delta ProbExceeds has checked; the
// power computation reuses a grid over many calls.
func probExceedsGrids(c, b *jeffreysGrid, ratio, delta float64) float64 {
	var num, den float64
	for i, dens := range b.dens {
		w := dens
		if i == 0 || i == jeffreysGridPoints {
			w /= 2
		}
		if w == 0 {
			continue
		}
		s := math.Sin(b.lo + float64(i)*b.h)
		t := ratio*s*s + delta
		var tail float64
		switch {
		case t <= 0:
			tail = 1
		case t >= 1:
			tail = 0
		default:
			tail = 1 - c.at(math.Asin(math.Sqrt(t)))
		}
		num += w * tail
		den += w
	}
	return math.Min(1, math.Max(0, num/den))
}

// mannWhitneyExactMax is the largest len(x)+len(y) for which
// MannWhitneyGreater computes the exact distribution of U.
const mannWhitneyExactMax = 20

// MannWhitneyGreater is the one-sided Mann-Whitney U test that x is
// stochastically greater than y. NaN values are ignored. U counts the pairs
// (x_i, y_j) with x_i > y_j, plus 1/2 for every tie. The p-value is
// P(U >= observed U) under the null hypothesis that x and y come from one
// distribution: exact, from the distribution of U over all arrangements,
// when there are no ties and len(x)+len(y) <= 20; otherwise from the normal
// approximation with tie correction and continuity correction. When every
// value is tied p is 1. When x or y is empty, u is 0 and p is NaN.
func MannWhitneyGreater(x, y []float64) (u float64, p float64) {
	x, y = judgeFinite(x), judgeFinite(y)
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return 0, math.NaN()
	}
	type obs struct {
		v   float64
		isX bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })

	// Average ranks (1-based) over tie groups; rank sum of x; tie sizes.
	var rankSumX, tieTerm float64
	ties := false
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of ranks i+1 .. j
		for k := i; k < j; k++ {
			if all[k].isX {
				rankSumX += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		i = j
	}
	u = rankSumX - float64(n1)*float64(n1+1)/2

	if !ties && n1+n2 <= mannWhitneyExactMax {
		return u, mannWhitneyExactUpper(n1, n2, int(math.Round(u)))
	}
	nn := float64(n1 + n2)
	mean := float64(n1) * float64(n2) / 2
	variance := float64(n1) * float64(n2) / 12 * ((nn + 1) - tieTerm/(nn*(nn-1)))
	if !(variance > 0) {
		return u, 1
	}
	z := (u - mean - 0.5) / math.Sqrt(variance)
	return u, 0.5 * math.Erfc(z/math.Sqrt2)
}

// mannWhitneyExactUpper returns P(U >= u) for samples of sizes n1 and n2
// without ties, counting the arrangements of the pooled sample: with
// c(i, j, u) the arrangements of i x's and j y's with statistic u,
// c(i, j, u) = c(i-1, j, u-j) + c(i, j-1, u), since the largest value is
// either an x, above all j y's, or a y.
func mannWhitneyExactUpper(n1, n2, u int) float64 {
	maxU := n1 * n2
	if u <= 0 {
		return 1
	}
	if u > maxU {
		return 0
	}
	// c[i][j] is the distribution of U for i x's and j y's.
	c := make([][][]float64, n1+1)
	for i := range c {
		c[i] = make([][]float64, n2+1)
		for j := range c[i] {
			d := make([]float64, i*j+1)
			switch {
			case i == 0 || j == 0:
				d[0] = 1
			default:
				for v, w := range c[i-1][j] {
					d[v+j] += w
				}
				for v, w := range c[i][j-1] {
					d[v] += w
				}
			}
			c[i][j] = d
		}
	}
	var tail, total float64
	for v, w := range c[n1][n2] {
		total += w
		if v >= u {
			tail += w
		}
	}
	return tail / total
}
