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
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/latency"
	"github.com/nettune/nettune/test/framework/testenv"
)

// probeLines draws n probe lines over span ending at end: latencies of a
// busy but healthy pair (2-60 ms) with exactly slow of them at 250-900 ms
// (a segment waiting for the default 200 ms retransmission timer).
func probeLines(seed uint64, n, slow int, end time.Time, span time.Duration) ([]testenv.LokiEntry, []float64) {
	r := rand.New(rand.NewPCG(seed, seed*7919+3))
	slowAt := map[int]bool{}
	for len(slowAt) < slow {
		slowAt[r.IntN(n)] = true
	}
	entries := make([]testenv.LokiEntry, n)
	vals := make([]float64, n)
	for i := range entries {
		v := 2 + 58*r.Float64()*r.Float64()
		if slowAt[i] {
			v = 250 + 650*r.Float64()
		}
		v = float64(int(v*1000)) / 1000
		vals[i] = v
		ts := end.Add(-span + time.Duration(i)*span/time.Duration(n) + time.Duration(seed)*time.Microsecond)
		entries[i] = testenv.LokiEntry{Time: ts, Line: fmt.Sprintf(`{"latency_ms":%g,"topic":"planning","seq":%d,"size":65536}`, v, i)}
	}
	return entries, vals
}

// TestJudgeLokiIntegration runs the demo's judge analysis (the sample
// config/samples/demo/02-xavier-lan-v2.yaml, unchanged) against a real Loki
// holding probe lines of three cohorts, and checks the counts per host pair
// are exact and the verdicts right.
func TestJudgeLokiIntegration(t *testing.T) {
	loki := testenv.StartLoki(t)
	end := time.Now().Add(-2 * time.Second)
	const span = 80 * time.Second // inside the sample's 90s window
	pairs := [][2]string{{"xavier-b", "xavier-a"}, {"xavier-c", "xavier-a"}, {"xavier-a", "xavier-b"}}

	type key struct{ vehicle, revision, host, peer string }
	slowOf := map[key]int{}
	push := func(vehicle, revision string, n int, slow func(host, peer string) int, seed uint64) {
		for i, p := range pairs {
			k := key{vehicle, revision, p[0], p[1]}
			slowOf[k] = slow(p[0], p[1])
			entries, _ := probeLines(seed+uint64(i)*101, n, slowOf[k], end, span)
			loki.Push(t, map[string]string{"job": "nettune-probe", "vehicle": vehicle, "node": vehicle + "-" + p[0],
				"host": p[0], "peer": p[1], "profile": "xavier-lan", "revision": revision}, entries)
		}
	}
	none := func(string, string) int { return 0 }
	// Baseline: three vehicles on the stable revision, one message in a
	// thousand slow on the busy pairs.
	for i, v := range []string{"av-002", "av-003", "av-004"} {
		push(v, "stable", 3000, func(_, peer string) int {
			if peer == "xavier-a" {
				return 1
			}
			return 0
		}, uint64(10+i))
	}
	// Bad canary: 2 % of the messages into xavier-a slow.
	push("av-001", "bad", 3000, func(_, peer string) int {
		if peer == "xavier-a" {
			return 60
		}
		return 0
	}, 20)
	intoA := func(_, peer string) int {
		if peer == "xavier-a" {
			return 60
		}
		return 0
	}
	// Two more vehicles on the bad revision: av-007 healthy (whatever
	// hurt av-001 was that vehicle's, not the revision's), av-008 hurt as
	// av-001.
	push("av-007", "bad", 3000, none, 50)
	push("av-008", "bad", 3000, intoA, 60)
	// Good canary: as healthy as the baseline.
	push("av-005", "good", 3000, none, 30)
	// Young canary: 100 messages per pair, below the sample's minimum.
	push("av-006", "young", 100, none, 40)
	loki.WaitForCount(t, `{job="nettune-probe"}`, 3*(3*3000+3000+2*3000+3000+100), time.Minute)

	spec := sampleAnalysis(t, "demo/02-xavier-lan-v2.yaml", "slow-messages")
	q := NewLoki(loki.URL, nil)
	ctx := context.Background()
	// Measure just after the last line, not at time.Now(): on a busy
	// machine the pushes take long enough for the window to slide past the
	// first lines.
	at := end.Add(time.Second)
	baseline := Cohort{Vehicles: []string{"av-002", "av-003", "av-004"}, Revision: "stable"}

	t.Run("bad canary fails on a busy pair, counts exact", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001"}, Revision: "bad"}, baseline, at)
		t.Logf("measurement: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictFail || m.Judge == nil || m.Judge.Verdict != VerdictFail {
			t.Fatalf("verdict %s: %s, want Fail", m.Verdict, m.Message)
		}
		d := m.Judge.Pairs[0]
		if !strings.HasPrefix(d.Pair, "host=xavier-") || !strings.HasSuffix(d.Pair, ",peer=xavier-a") {
			t.Errorf("deciding pair %q, want a pair into xavier-a", d.Pair)
		}
		if d.CanarySlow != 60 || d.CanaryTotal != 3000 || d.BaselineSlow != 3 || d.BaselineTotal != 9000 {
			t.Errorf("counts canary %d/%d baseline %d/%d, want 60/3000 and 3/9000", d.CanarySlow, d.CanaryTotal, d.BaselineSlow, d.BaselineTotal)
		}
		if len(m.Judge.Pairs) != 3 {
			t.Errorf("%d pairs judged, want 3", len(m.Judge.Pairs))
		}
		for _, p := range m.Judge.Pairs {
			if strings.HasSuffix(p.Pair, "peer=xavier-b") && p.Verdict != VerdictPass {
				t.Errorf("untouched pair %s: %s (%s), want Pass", p.Pair, p.Verdict, p.Reason)
			}
			if p.Verdict == VerdictFail && !(p.RankP < 0.01) {
				t.Errorf("pair %s failed without the rank test confirming it (p=%v)", p.Pair, p.RankP)
			}
		}
		res := Accumulate(v1alpha1.AnalysisResult{}, m, spec)
		if res.Phase != v1alpha1.AnalysisFailed || res.Verdict != "Fail" || res.Pair != d.Pair || res.CanarySamples == nil || *res.CanarySamples != 3000 ||
			len(res.Pairs) != 3 || res.Probability == "" || res.Confidence == "" {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("two canary vehicles: a Fail needs the effect in each", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001", "av-007"}, Revision: "bad"}, baseline, at)
		t.Logf("one hurt, one healthy: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "rank test does not confirm on av-007") {
			t.Errorf("verdict %s: %s, want Inconclusive, av-007 not confirming", m.Verdict, m.Message)
		}
		m = Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001", "av-008"}, Revision: "bad"}, baseline, at)
		t.Logf("both hurt: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictFail || m.Judge.Pairs[0].CanarySlow != 120 || m.Judge.Pairs[0].CanaryTotal != 6000 ||
			!strings.Contains(m.Judge.Pairs[0].Reason, "in each of 2 canary vehicles") {
			t.Errorf("verdict %s: %s, want Fail on 120/6000 confirmed in each vehicle", m.Verdict, m.Message)
		}
	})
	t.Run("good canary passes", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-005"}, Revision: "good"}, baseline, at)
		t.Logf("measurement: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictPass || len(m.Judge.Pairs) != 3 {
			t.Fatalf("verdict %s: %s, want Pass on 3 pairs", m.Verdict, m.Message)
		}
		for _, p := range m.Judge.Pairs {
			if p.CanaryTotal != 3000 || p.BaselineTotal != 9000 || p.CanarySlow != 0 {
				t.Errorf("pair %s counts canary %d/%d baseline %d/%d", p.Pair, p.CanarySlow, p.CanaryTotal, p.BaselineSlow, p.BaselineTotal)
			}
		}
	})
	t.Run("too few canary messages is inconclusive", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-006"}, Revision: "young"}, baseline, at)
		if m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "too few samples") {
			t.Fatalf("verdict %s: %s, want Inconclusive (too few samples)", m.Verdict, m.Message)
		}
	})
	t.Run("no baseline vehicles is inconclusive", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001"}, Revision: "bad"}, Cohort{}, at)
		if m.Verdict != VerdictInconclusive {
			t.Fatalf("verdict %s: %s, want Inconclusive", m.Verdict, m.Message)
		}
	})
	t.Run("a broken query is an error naming the cohort and query", func(t *testing.T) {
		broken := spec.DeepCopy()
		broken.Judge.SlowQuery = `sum by (host, peer) (count_over_time({job=nettune-probe}[{{ .Window }}]))`
		m := Measure(ctx, q, "xavier-lan", broken, Cohort{Vehicles: []string{"av-001"}, Revision: "bad"}, baseline, at)
		if m.Verdict != VerdictError || !strings.HasPrefix(m.Message, "canary slowQuery: loki query: HTTP 400") {
			t.Fatalf("verdict %s: %q", m.Verdict, m.Message)
		}
	})
}

// TestJudgePrometheusIntegration runs the production sample's judge
// (config/samples/xavier-lan-v2.yaml, counts from the probe histogram's
// bucket at the threshold) against a real Prometheus scraping histograms
// with the agent's bucket bounds, on a shorter window so the test takes
// seconds, not minutes.
func TestJudgePrometheusIntegration(t *testing.T) {
	reg := prometheus.NewRegistry()
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nettune_probe_latency_seconds", Help: "probe latency", Buckets: latency.LatencyBuckets,
	}, []string{"vehicle", "host", "peer", "revision"})
	reg.MustRegister(hist)
	type series struct {
		vehicle, revision string
		slowEvery         int // one observation in slowEvery is 50 ms (0 = none)
	}
	all := []series{
		{"av-001", "bad", 20},   // 5 % slow on every pair
		{"av-002", "good", 0},   // healthy
		{"av-003", "stable", 0}, // baseline
		{"av-004", "stable", 0},
	}
	pairs := [][2]string{{"xavier-b", "xavier-a"}, {"xavier-a", "xavier-b"}}
	n := 0
	every(t, 50*time.Millisecond, func() {
		for range 5 { // 100 observations a second per series
			n++
			for _, s := range all {
				for _, p := range pairs {
					v := 0.004
					if s.slowEvery > 0 && n%s.slowEvery == 0 {
						v = 0.05
					}
					hist.WithLabelValues(s.vehicle, p[0], p[1], s.revision).Observe(v)
				}
			}
		}
	})
	prom := scrapedBy(t, reg)
	prom.WaitForQuery(t, `count_over_time(nettune_probe_latency_seconds_count{vehicle="av-001"}[1m]) >= 20`, time.Minute)

	spec := sampleAnalysis(t, "xavier-lan-v2.yaml", "slow-messages").DeepCopy()
	spec.Window = &metav1.Duration{Duration: 15 * time.Second}
	spec.Judge.Step = &metav1.Duration{Duration: 3 * time.Second}
	spec.MinSamples = ptrInt64(1000)
	spec.Judge.Quantile = ptrString("0.99")
	spec.Judge.MaxIncrease = ptrString("0.01")
	q := NewPrometheus(prom.URL, nil)
	ctx := context.Background()
	baseline := Cohort{Vehicles: []string{"av-003", "av-004"}, Revision: "stable"}
	at := time.Now()

	t.Run("bad canary fails", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001"}, Revision: "bad"}, baseline, at)
		t.Logf("measurement: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictFail || len(m.Judge.Pairs) != 2 {
			t.Fatalf("verdict %s: %s, want Fail on 2 pairs", m.Verdict, m.Message)
		}
		for _, p := range m.Judge.Pairs {
			// increase() extrapolates to the window's edges: about 1500
			// messages and 5 % of them slow, not exactly.
			share := float64(p.CanarySlow) / float64(p.CanaryTotal)
			if p.CanaryTotal < 1000 || p.CanaryTotal > 2000 || share < 0.04 || share > 0.06 || p.BaselineSlow != 0 || p.BaselineTotal < 2000 {
				t.Errorf("pair %s: canary %d/%d baseline %d/%d", p.Pair, p.CanarySlow, p.CanaryTotal, p.BaselineSlow, p.BaselineTotal)
			}
			if !strings.HasPrefix(p.Pair, "host=xavier-") {
				t.Errorf("pair %q is not keyed by host and peer", p.Pair)
			}
		}
	})
	t.Run("good canary passes", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-002"}, Revision: "good"}, baseline, at)
		t.Logf("measurement: %s %s", m.Verdict, m.Message)
		if m.Verdict != VerdictPass {
			t.Fatalf("verdict %s: %s, want Pass", m.Verdict, m.Message)
		}
	})
	t.Run("the threshold must be a bucket bound", func(t *testing.T) {
		off := spec.DeepCopy()
		off.Judge.Threshold = &metav1.Duration{Duration: 21 * time.Millisecond}
		m := Measure(ctx, q, "xavier-lan", off, Cohort{Vehicles: []string{"av-001"}, Revision: "bad"}, baseline, at)
		// No bucket le="0.021": the subtraction would match nothing and no
		// message would ever be slow; refused instead of passing.
		if m.Verdict != VerdictError || !strings.Contains(m.Message, "judge.threshold 21ms is not a bucket bound") {
			t.Fatalf("verdict %s: %s, want Error naming the threshold", m.Verdict, m.Message)
		}
	})
}
