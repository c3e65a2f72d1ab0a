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
	"testing"
)

// judgeTestIncBeta is a reference regularized incomplete beta function
// I_x(a, b) by Lentz's continued fraction, independent of the grid.
func judgeTestIncBeta(a, b, x float64) float64 {
	if x <= 0 {
		return 0
	}
	if x >= 1 {
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x > (a+1)/(a+b+2) {
		return 1 - judgeTestIncBeta(b, a, 1-x)
	}
	const tiny = 1e-300
	f, c, d := 1.0, 1.0, 0.0
	for i := 0; i <= 100000; i++ {
		m := float64(i / 2)
		var num float64
		switch {
		case i == 0:
			num = 1
		case i%2 == 0:
			num = m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		default:
			num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		}
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		d = 1 / d
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		cd := c * d
		f *= cd
		if math.Abs(1-cd) < 1e-15 {
			break
		}
	}
	return front * (f - 1) / a
}

func TestBetaJeffreysGridCDF(t *testing.T) {
	cases := []struct{ k, n int64 }{
		{0, 0}, {0, 1}, {1, 1}, {0, 5000}, {3, 100000}, {51, 1211}, {600, 1200}, {1199, 1200}, {1200, 1200}, {7, 3600000},
	}
	for _, tc := range cases {
		g := newJeffreysGrid(tc.k, tc.n)
		a, b := float64(tc.k)+0.5, float64(tc.n-tc.k)+0.5
		mean := a / (a + b)
		sd := math.Sqrt(a * b / ((a + b) * (a + b) * (a + b + 1)))
		worst := 0.0
		for _, z := range []float64{-3, -1.5, -0.5, 0, 0.3, 1, 2, 4, 8} {
			p := mean + z*sd
			if p <= 0 || p >= 1 {
				continue
			}
			got := g.at(math.Asin(math.Sqrt(p)))
			want := judgeTestIncBeta(a, b, p)
			worst = math.Max(worst, math.Abs(got-want))
		}
		if worst > 1e-4 {
			t.Errorf("k=%d n=%d: grid CDF off the incomplete beta by %.3g", tc.k, tc.n, worst)
		}
	}
}

func TestProbDiffExceedsMonteCarlo(t *testing.T) {
	cases := []struct {
		kc, nc, kb, nb int64
		delta          float64
	}{
		{3, 100000, 3, 100000, 0},
		{3, 100000, 1, 100000, 0},
		{3, 100000, 8, 100000, -0.00002},
		{0, 5000, 0, 5000, 0.0001},
		{6, 2000, 17, 6000, 0.002},
		{9, 2000, 17, 6000, 0.001},
		{51, 1211, 3, 3620, 0.002},
		{10, 20, 5, 20, 0.1},
		{600, 1200, 550, 1000, 0.03},
		{1, 1, 0, 1, 0.3},
		{0, 0, 0, 0, 0.2},
	}
	r := rand.New(rand.NewPCG(1, 2))
	const draws = 400000
	for _, tc := range cases {
		got := ProbDiffExceeds(tc.kc, tc.nc, tc.kb, tc.nb, tc.delta)
		ac, bc := float64(tc.kc)+0.5, float64(tc.nc-tc.kc)+0.5
		ab, bb := float64(tc.kb)+0.5, float64(tc.nb-tc.kb)+0.5
		hits := 0
		for i := 0; i < draws; i++ {
			if judgeTestBeta(r, ac, bc)-judgeTestBeta(r, ab, bb) > tc.delta {
				hits++
			}
		}
		mc := float64(hits) / draws
		se := math.Sqrt(mc*(1-mc)/draws) + 1/float64(draws)
		if math.Abs(got-mc) > 1e-3+4*se {
			t.Errorf("P(C %d/%d - B %d/%d > %v) = %.5f, Monte Carlo %.5f ± %.5f", tc.kc, tc.nc, tc.kb, tc.nb, tc.delta, got, mc, se)
		}
	}
}

func TestProbDiffExceedsKnown(t *testing.T) {
	for _, tc := range []struct{ k, n int64 }{{0, 0}, {0, 100}, {3, 100000}, {51, 1211}, {500, 1000}, {1000, 1000}} {
		if p := ProbDiffExceeds(tc.k, tc.n, tc.k, tc.n, 0); math.Abs(p-0.5) > 1e-4 {
			t.Errorf("identical %d/%d, delta 0: %v, want 0.5", tc.k, tc.n, p)
		}
		for _, d := range []float64{1, 1.5} {
			if p := ProbDiffExceeds(tc.k, tc.n, tc.k, tc.n, d); p != 0 {
				t.Errorf("%d/%d, delta %v: %v, want 0", tc.k, tc.n, d, p)
			}
		}
		if p := ProbDiffExceeds(tc.k, tc.n, tc.k, tc.n, -1); p != 1 {
			t.Errorf("%d/%d, delta -1: %v, want 1", tc.k, tc.n, p)
		}
	}
	if p := ProbDiffExceeds(1, 1, 0, 1, math.NaN()); !math.IsNaN(p) {
		t.Errorf("NaN delta: %v, want NaN", p)
	}
	// Out-of-range counts are clamped: slow > total is slow = total.
	if a, b := ProbDiffExceeds(9, 5, -3, 10, 0.1), ProbDiffExceeds(5, 5, 0, 10, 0.1); a != b {
		t.Errorf("clamping: %v != %v", a, b)
	}
}

func TestProbDiffExceedsSymmetry(t *testing.T) {
	cases := []struct {
		kc, nc, kb, nb int64
		delta          float64
	}{
		{3, 100000, 1, 100000, 0},
		{6, 2000, 17, 6000, 0.002},
		{51, 1211, 3, 3620, 0.04},
		{10, 20, 5, 20, 0.1},
		{0, 3000, 2, 3000, -0.0005},
	}
	for _, tc := range cases {
		p := ProbDiffExceeds(tc.kc, tc.nc, tc.kb, tc.nb, tc.delta)
		// Swapping the cohorts and negating delta gives the complement.
		q := ProbDiffExceeds(tc.kb, tc.nb, tc.kc, tc.nc, -tc.delta)
		if math.Abs(p+q-1) > 2e-4 {
			t.Errorf("%+v: P=%v, swapped %v, sum %v, want 1", tc, p, q, p+q)
		}
		// Counting fast instead of slow messages mirrors the shares.
		m := ProbDiffExceeds(tc.nb-tc.kb, tc.nb, tc.nc-tc.kc, tc.nc, tc.delta)
		if math.Abs(p-m) > 2e-4 {
			t.Errorf("%+v: P=%v, mirrored %v", tc, p, m)
		}
	}
}

func TestProbDiffExceedsMonotone(t *testing.T) {
	for _, tc := range []struct{ kc, nc, kb, nb int64 }{{6, 2000, 17, 6000}, {3, 100000, 1, 100000}, {51, 1211, 3, 3620}, {0, 0, 0, 0}} {
		prev := 1.0
		for d := -1.0; d <= 1.0; d += 0.004 {
			p := ProbDiffExceeds(tc.kc, tc.nc, tc.kb, tc.nb, d)
			if p > prev+1e-12 {
				t.Fatalf("%+v: P(delta=%v)=%v > P(previous delta)=%v", tc, d, p, prev)
			}
			prev = p
		}
	}
	// More slow canary messages make worse more likely.
	prev := 0.0
	for k := int64(0); k <= 40; k++ {
		p := ProbDiffExceeds(k, 2000, 6, 2000, 0.001)
		if p < prev-1e-12 {
			t.Fatalf("k=%d: P=%v < %v", k, p, prev)
		}
		prev = p
	}
}

func TestMannWhitneyExactSmall(t *testing.T) {
	cases := []struct {
		name string
		x, y []float64
		u, p float64
	}{
		// U is uniform on {0, 1, 2}.
		{"1x2 top", []float64{3}, []float64{1, 2}, 2, 1.0 / 3},
		{"1x2 bottom", []float64{0}, []float64{1, 2}, 0, 1},
		// The 6 arrangements of 2 and 2 have U = 0, 1, 2, 2, 3, 4.
		{"2x2 U=3", []float64{2, 4}, []float64{1, 3}, 3, 2.0 / 6},
		{"2x2 U=2", []float64{1, 4}, []float64{2, 3}, 2, 4.0 / 6},
		// Complete separation: 1/C(6,3).
		{"3x3 separated", []float64{5, 6, 7}, []float64{1, 2, 3}, 9, 1.0 / 20},
		// 1/C(20,10).
		{"10x10 separated", []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 100, 1.0 / 184756},
		// U=8 of 3x3: arrangements with U >= 8 are U=8 (1) and U=9 (1): 2/20.
		{"3x3 U=8", []float64{3.5, 6, 7}, []float64{1, 2, 4}, 8, 2.0 / 20},
	}
	for _, tc := range cases {
		u, p := MannWhitneyGreater(tc.x, tc.y)
		if u != tc.u || math.Abs(p-tc.p) > 1e-12 {
			t.Errorf("%s: U=%v p=%v, want U=%v p=%v", tc.name, u, p, tc.u, tc.p)
		}
	}
}

// judgeTestPermutationP estimates P(U >= observed U) by random
// permutations of the pooled sample.
func judgeTestPermutationP(r *rand.Rand, x, y []float64, perms int) float64 {
	u0, _ := MannWhitneyGreater(x, y)
	pool := append(append([]float64(nil), x...), y...)
	hits := 0
	for i := 0; i < perms; i++ {
		r.Shuffle(len(pool), func(a, b int) { pool[a], pool[b] = pool[b], pool[a] })
		u := 0.0
		for _, a := range pool[:len(x)] {
			for _, b := range pool[len(x):] {
				switch {
				case a > b:
					u++
				case a == b:
					u += 0.5
				}
			}
		}
		if u >= u0-1e-9 {
			hits++
		}
	}
	return float64(hits) / float64(perms)
}

func TestMannWhitneyApproximation(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// Hand-computed: U = 12.5 = n1*n2/2, ties of 2 at 5 values:
	// var = 25/12 * (11 - 30/90), z = -0.5/sqrt(var), p = 0.5422.
	u, p := MannWhitneyGreater([]float64{1, 2, 3, 4, 5}, []float64{1, 2, 3, 4, 5})
	if u != 12.5 || math.Abs(p-0.54220) > 1e-4 {
		t.Errorf("identical samples: U=%v p=%v, want 12.5, 0.5422", u, p)
	}
	// Ties count 1/2: x=2 ties y=2, beats y=1.
	if u, _ := MannWhitneyGreater([]float64{2, 2}, []float64{1, 2}); u != 3 {
		t.Errorf("ties: U=%v, want 3", u)
	}
	// All tied: no evidence at all.
	if _, p := MannWhitneyGreater([]float64{7, 7, 7}, []float64{7, 7}); p != 1 {
		t.Errorf("all tied: p=%v, want 1", p)
	}
	// Empty input and NaN.
	if _, p := MannWhitneyGreater(nil, []float64{1}); !math.IsNaN(p) {
		t.Errorf("empty x: p=%v, want NaN", p)
	}
	if _, p := MannWhitneyGreater([]float64{1, 2}, []float64{math.NaN()}); !math.IsNaN(p) {
		t.Errorf("only NaN in y: p=%v, want NaN", p)
	}
	// Complete separation of 30 and 30 values.
	x, y := make([]float64, 30), make([]float64, 30)
	for i := range x {
		x[i], y[i] = float64(100+i), float64(i)
	}
	if u, p := MannWhitneyGreater(x, y); u != 900 || p > 1e-9 {
		t.Errorf("separated 30x30: U=%v p=%v, want 900 and tiny", u, p)
	}
	if _, p := MannWhitneyGreater(y, x); p < 0.999999 {
		t.Errorf("separated the other way: p=%v, want ~1", p)
	}
	// The normal approximation against a permutation test, with and without
	// ties.
	for i, tc := range []struct {
		n1, n2 int
		shift  float64
		round  bool
	}{
		{15, 15, 0.5, true}, {12, 20, 0.8, false}, {25, 25, 0.3, false}, {10, 14, 1, true}, {8, 8, 0, true},
	} {
		x, y := make([]float64, tc.n1), make([]float64, tc.n2)
		for j := range x {
			x[j] = r.NormFloat64() + tc.shift
		}
		for j := range y {
			y[j] = r.NormFloat64()
		}
		if tc.round {
			for j := range x {
				x[j] = math.Round(2 * x[j])
			}
			for j := range y {
				y[j] = math.Round(2 * y[j])
			}
		}
		_, p := MannWhitneyGreater(x, y)
		perm := judgeTestPermutationP(r, x, y, 40000)
		if math.Abs(p-perm) > 0.02 {
			t.Errorf("case %d: normal approximation p=%.4f, permutation %.4f", i, p, perm)
		}
	}
}

func BenchmarkProbDiffExceeds(b *testing.B) {
	for i := 0; i < b.N; i++ {
		ProbDiffExceeds(6, 2000, 17, 6000, 0.002)
	}
}
