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
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/testenv"
)

// every calls observe at once and then every period until the test ends.
func every(t *testing.T, period time.Duration, observe func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			observe()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// scrapedBy starts a real Prometheus scraping reg (served over HTTP until
// the test ends).
func scrapedBy(t *testing.T, reg *prometheus.Registry) *testenv.Prometheus {
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(target.Close)
	return testenv.StartPrometheus(t, strings.TrimPrefix(target.URL, "http://"))
}

// sampleAnalysis loads the named analysis of a profile in config/samples.
func sampleAnalysis(t *testing.T, file, name string) *v1alpha1.AnalysisSpec {
	t.Helper()
	data, err := os.ReadFile("../../config/samples/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var p v1alpha1.NetTuningProfile
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for i := range p.Spec.Rollout.Analyses {
		if a := &p.Spec.Rollout.Analyses[i]; a.Name == name {
			return a
		}
	}
	t.Fatalf("%s has no analysis %q", file, name)
	return nil
}

// promQuantile is Prometheus' quantile(): linear interpolation between the
// closest ranks of the sorted values (rank = q*(n-1)), which Loki's
// quantile_over_time uses as well.
func promQuantile(q float64, values []float64) float64 {
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	rank := q * float64(len(s)-1)
	lo := math.Floor(rank)
	hi := math.Min(lo+1, float64(len(s)-1))
	w := rank - lo
	return s[int(lo)]*(1-w) + s[int(hi)]*w
}

func within(got *float64, want, frac float64) bool {
	return got != nil && math.Abs(*got-want) <= frac*math.Abs(want)
}

// latencies draws n probe latencies (ms): 4 + 10*u^3, a long-ish tail up to
// 14 ms, scaled by factor.
func latencies(seed uint64, n int, factor float64) []float64 {
	r := rand.New(rand.NewPCG(seed, seed*7919+1))
	out := make([]float64, n)
	for i := range out {
		u := r.Float64()
		out[i] = math.Round((4+10*u*u*u)*factor*1000) / 1000
	}
	return out
}

func TestLokiIntegration(t *testing.T) {
	loki := testenv.StartLoki(t)
	now := time.Now()
	const perVehicle = 1000
	span := 4 * time.Minute

	// pushed[revision] = every latency pushed for that revision.
	pushed := map[string][]float64{}
	push := func(vehicle, revision string, seed uint64, factor float64) {
		vals := latencies(seed, perVehicle, factor)
		entries := make([]testenv.LokiEntry, len(vals))
		for i, v := range vals {
			ts := now.Add(-span + time.Duration(i)*span/perVehicle + time.Duration(seed)*time.Millisecond)
			entries[i] = testenv.LokiEntry{Time: ts, Line: fmt.Sprintf(`{"latency_ms": %g, "topic": "planning"}`, v)}
		}
		loki.Push(t, map[string]string{"job": "nettune-probe", "vehicle": vehicle, "revision": revision}, entries)
		pushed[revision] = append(pushed[revision], vals...)
	}
	// Baseline: av-003, av-004 on the stable revision r1.
	push("av-003", "r1", 3, 1)
	push("av-004", "r1", 4, 1)
	// Regressed canary: av-001, av-002 on r2, ~30 % slower.
	push("av-001", "r2", 1, 1.3)
	push("av-002", "r2", 2, 1.3)
	// Healthy canary: the same vehicles on r3, same distribution as r1.
	push("av-001", "r3", 11, 1)
	push("av-002", "r3", 12, 1)
	loki.WaitForCount(t, `{job="nettune-probe"}`, 6*perVehicle, time.Minute)

	sample := sampleAnalysis(t, "xavier-lan-v2.yaml", "p9999-latency")
	spec := sample.DeepCopy()
	spec.MinSamples = ptrInt64(1000) // the sample wants 10000; this test pushes 2000 per cohort
	q := NewLoki(loki.URL, nil)
	ctx := context.Background()
	at := time.Now()
	baseline := Cohort{Vehicles: []string{"av-003", "av-004"}, Revision: "r1"}

	wantBaseline := promQuantile(0.9999, pushed["r1"])
	t.Run("regressed canary fails the relative check", func(t *testing.T) {
		wantCanary := promQuantile(0.9999, pushed["r2"])
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r2"}, baseline, at)
		t.Logf("measurement: %s (want canary %.3f, baseline %.3f)", describe(m), wantCanary, wantBaseline)
		if m.Verdict != VerdictFail {
			t.Fatalf("verdict %s (%s), want Fail", m.Verdict, m.Message)
		}
		if !within(m.Canary, wantCanary, 0.05) {
			t.Errorf("canary p99.99 = %s, want %.3f ±5%%", fmtPtr(m.Canary), wantCanary)
		}
		if !within(m.Baseline, wantBaseline, 0.05) {
			t.Errorf("baseline p99.99 = %s, want %.3f ±5%%", fmtPtr(m.Baseline), wantBaseline)
		}
		if m.CanarySamples == nil || *m.CanarySamples != 2*perVehicle || m.BaselineSamples == nil || *m.BaselineSamples != 2*perVehicle {
			t.Errorf("samples %s/%s, want %d each", fmtPtr(m.CanarySamples), fmtPtr(m.BaselineSamples), 2*perVehicle)
		}
		if *m.Canary > 20 {
			t.Fatalf("test data broken: canary %v above maxValue 20, the relative check should decide", *m.Canary)
		}
		if m.Threshold == nil || math.Abs(*m.Threshold-(*m.Baseline*1.1+1)) > 1e-9 {
			t.Errorf("threshold %s, want baseline*1.1+1", fmtPtr(m.Threshold))
		}
		if !strings.Contains(m.Message, " > baseline ") {
			t.Errorf("message %q should name the relative check", m.Message)
		}
		res := Accumulate(v1alpha1.AnalysisResult{}, m, spec)
		if res.Phase != v1alpha1.AnalysisFailed || res.CanaryValue != fmtNum(*m.Canary) || res.Threshold != fmtNum(*m.Threshold) {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("healthy canary succeeds", func(t *testing.T) {
		wantCanary := promQuantile(0.9999, pushed["r3"])
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r3"}, baseline, at)
		t.Logf("measurement: %s (want canary %.3f)", describe(m), wantCanary)
		if m.Verdict != VerdictPass {
			t.Fatalf("verdict %s (%s), want Pass", m.Verdict, m.Message)
		}
		if !within(m.Canary, wantCanary, 0.05) {
			t.Errorf("canary p99.99 = %s, want %.3f ±5%%", fmtPtr(m.Canary), wantCanary)
		}
		if m.Threshold == nil || *m.Threshold != math.Min(20, *m.Baseline*1.1+1) {
			t.Errorf("threshold %s", fmtPtr(m.Threshold))
		}
	})
	t.Run("sample's minSamples above the count is inconclusive", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", sample, Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r2"}, baseline, at)
		if m.Verdict != VerdictInconclusive || m.Message != "too few canary samples: 2000 < 10000" {
			t.Fatalf("got %s %q, want Inconclusive too few canary samples: 2000 < 10000", m.Verdict, m.Message)
		}
	})
	t.Run("one vehicle only", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001"}, Revision: "r2"}, Cohort{}, at)
		if m.CanarySamples == nil || *m.CanarySamples != perVehicle || m.Baseline != nil {
			t.Fatalf("got %s", describe(m))
		}
	})
	t.Run("unknown revision has no samples", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan", spec, Cohort{Vehicles: []string{"av-001"}, Revision: "nope"}, baseline, at)
		if m.Verdict != VerdictInconclusive || m.Message != "too few canary samples: 0 < 1000" {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("log query is an error", func(t *testing.T) {
		// Loki 3 refuses log queries on the instant endpoint (older versions
		// answered resultType "streams", which NewLoki reports as an error too;
		// see TestQueriers).
		_, _, err := q.Query(ctx, `{job="nettune-probe"}`, at)
		if err == nil || !strings.HasPrefix(err.Error(), "loki query: HTTP 400: log queries are not supported as an instant query") {
			t.Fatalf("error %v", err)
		}
		m := Measure(ctx, q, "xavier-lan", &v1alpha1.AnalysisSpec{Name: "lines", Query: `{vehicle=~"{{ .Vehicles }}"}`}, baseline, Cohort{}, at)
		if m.Verdict != VerdictError || !strings.HasPrefix(m.Message, "canary query: loki query: HTTP 400: ") {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("parse error carries Loki's message", func(t *testing.T) {
		_, _, err := q.Query(ctx, `sum(count_over_time({job=nettune-probe}[5m]))`, at)
		if err == nil || !strings.HasPrefix(err.Error(), "loki query: HTTP 400: ") || !strings.Contains(err.Error(), "parse error") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestPrometheusIntegration(t *testing.T) {
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nettune_test_latency_ms", Help: "test latency"}, []string{"vehicle", "revision"})
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nettune_probe_latency_seconds", Help: "probe latency",
		Buckets: []float64{0.005, 0.01, 0.015, 0.02, 0.05},
	}, []string{"vehicle", "revision"})
	reg.MustRegister(gauge, hist)
	for _, g := range []struct {
		vehicle, revision string
		v                 float64
	}{
		{"av-001", "r2", 31}, {"av-002", "r2", 29.5}, // regressed canary
		{"av.003", "r1", 20}, {"av-004", "r1", 21}, // baseline (a dotted name checks regexp escaping)
		{"av-001", "r3", 20.5}, {"av-002", "r3", 21}, // healthy canary
		{"av-001", "r9", math.NaN()}, // broken exporter
	} {
		gauge.WithLabelValues(g.vehicle, g.revision).Set(g.v)
	}
	// Histogram traffic for the xavier-lan-v1 sample queries: the canary's
	// observations all fall in (15ms, 20ms], the baseline's in (5ms, 10ms].
	every(t, 100*time.Millisecond, func() {
		for i := 0; i < 20; i++ {
			hist.WithLabelValues("av-001", "r2").Observe(0.017)
			hist.WithLabelValues("av-002", "r2").Observe(0.018)
			hist.WithLabelValues("av.003", "r1").Observe(0.007)
			hist.WithLabelValues("av-004", "r1").Observe(0.008)
			hist.WithLabelValues("av-001", "r3").Observe(0.006)
		}
	})
	prom := scrapedBy(t, reg)
	prom.WaitForQuery(t, `count(nettune_test_latency_ms) == 7`, time.Minute)
	prom.WaitForQuery(t, `count_over_time(nettune_probe_latency_seconds_count{vehicle="av-001",revision="r3"}[1m]) >= 4`, time.Minute)

	q := NewPrometheus(prom.URL, nil)
	ctx := context.Background()
	canary := Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r2"}
	healthy := Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r3"}
	baseline := Cohort{Vehicles: []string{"av.003", "av-004"}, Revision: "r1"}

	gaugeSpec := &v1alpha1.AnalysisSpec{
		Name:              "max-latency",
		Provider:          v1alpha1.ProviderPrometheus,
		Query:             `max(nettune_test_latency_ms{vehicle=~"{{ .Vehicles }}",revision="{{ .Revision }}"})`,
		SamplesQuery:      ptrString(`sum(count_over_time(nettune_test_latency_ms{vehicle=~"{{ .Vehicles }}",revision="{{ .Revision }}"}[{{ .Window }}]))`),
		Window:            &metav1.Duration{Duration: time.Minute},
		MinSamples:        ptrInt64(2),
		MaxValue:          ptrString("40"),
		MaxBaselineFactor: ptrString("1.10"),
		MaxBaselineOffset: ptrString("1"),
	}

	t.Run("gauge: regressed canary fails", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", gaugeSpec, canary, baseline, time.Now())
		t.Logf("measurement: %s", describe(m))
		if m.Verdict != VerdictFail || *m.Canary != 31 || *m.Baseline != 21 || !floatPtrEqual(m.Threshold, f(24.1)) {
			t.Fatalf("got %s %q canary %s baseline %s threshold %s", m.Verdict, m.Message, fmtPtr(m.Canary), fmtPtr(m.Baseline), fmtPtr(m.Threshold))
		}
		if want := "canary 31 > baseline 21 x 1.1 + 1 = 24.1"; !strings.HasPrefix(m.Message, want) {
			t.Fatalf("message %q, want prefix %q", m.Message, want)
		}
	})
	t.Run("gauge: healthy canary succeeds", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", gaugeSpec, healthy, baseline, time.Now())
		if m.Verdict != VerdictPass || *m.Canary != 21 || !floatPtrEqual(m.Threshold, f(24.1)) {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("gauge: dotted vehicle name is matched literally", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", gaugeSpec, Cohort{Vehicles: []string{"av.003"}, Revision: "r1"}, Cohort{}, time.Now())
		if m.Canary == nil || *m.Canary != 20 {
			t.Fatalf("got %s", describe(m))
		}
		m = Measure(ctx, q, "xavier-lan-v1", gaugeSpec, Cohort{Vehicles: []string{"av.00"}, Revision: "r1"}, Cohort{}, time.Now())
		if m.Canary != nil {
			t.Fatalf("av.00 should match nothing (anchored, quoted): %+v", m)
		}
	})
	t.Run("gauge: absolute ceiling", func(t *testing.T) {
		s := gaugeSpec.DeepCopy()
		s.MaxValue = ptrString("30")
		m := Measure(ctx, q, "xavier-lan-v1", s, canary, Cohort{}, time.Now())
		if m.Verdict != VerdictFail || !strings.HasPrefix(m.Message, "canary 31 > maxValue 30; relative check skipped: no baseline vehicles") {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("gauge: too few samples", func(t *testing.T) {
		s := gaugeSpec.DeepCopy()
		s.MinSamples = ptrInt64(1000000)
		m := Measure(ctx, q, "xavier-lan-v1", s, canary, baseline, time.Now())
		if m.Verdict != VerdictInconclusive || !strings.HasPrefix(m.Message, "too few canary samples: ") {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("gauge: NaN is no value", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", gaugeSpec, Cohort{Vehicles: []string{"av-001"}, Revision: "r9"}, baseline, time.Now())
		if m.Verdict != VerdictInconclusive || m.Message != "canary query returned no value" {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})
	t.Run("bad query is an error measurement", func(t *testing.T) {
		s := gaugeSpec.DeepCopy()
		s.Query = `max(nettune_test_latency_ms{vehicle=~"{{ .Vehicles }}"}`
		m := Measure(ctx, q, "xavier-lan-v1", s, canary, baseline, time.Now())
		if m.Verdict != VerdictError || !strings.HasPrefix(m.Message, "canary query: prometheus query: HTTP 400: bad_data: ") {
			t.Fatalf("got %s %q", m.Verdict, m.Message)
		}
	})

	// The xavier-lan-v1 sample's own histogram queries.
	v1 := sampleAnalysis(t, "xavier-lan-v1.yaml", "p99-latency")
	t.Run("v1 sample: canary in the 15-20ms bucket fails", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", v1, canary, baseline, time.Now())
		t.Logf("measurement: %s", describe(m))
		// histogram_quantile interpolates inside the bucket: 15 + 0.99*5 ms.
		if m.Verdict != VerdictFail || !within(m.Canary, 19.95, 1e-6) || !within(m.Baseline, 9.95, 1e-6) {
			t.Fatalf("got %s %q canary %s baseline %s", m.Verdict, m.Message, fmtPtr(m.Canary), fmtPtr(m.Baseline))
		}
		if !within(m.Threshold, 9.95*1.1+1, 1e-6) || *m.CanarySamples < 100 || *m.BaselineSamples < 100 {
			t.Fatalf("threshold %s samples %s/%s", fmtPtr(m.Threshold), fmtPtr(m.CanarySamples), fmtPtr(m.BaselineSamples))
		}
		res := Accumulate(v1alpha1.AnalysisResult{}, m, v1)
		if res.Phase != v1alpha1.AnalysisFailed || res.CanaryValue != "19.95" || res.BaselineValue != "9.95" || res.Threshold != "11.945" {
			t.Fatalf("result %+v", res)
		}
	})
	t.Run("v1 sample: healthy canary succeeds", func(t *testing.T) {
		m := Measure(ctx, q, "xavier-lan-v1", v1, Cohort{Vehicles: []string{"av-001"}, Revision: "r3"}, baseline, time.Now())
		if m.Verdict != VerdictPass || !within(m.Canary, 9.95, 1e-6) {
			t.Fatalf("got %s %q canary %s", m.Verdict, m.Message, fmtPtr(m.Canary))
		}
	})
}

func ptrString(s string) *string { return &s }
func ptrInt64(v int64) *int64    { return &v }

func describe(m Measurement) string {
	return fmt.Sprintf("%s canary=%s baseline=%s samples=%s/%s threshold=%s: %s", m.Verdict,
		fmtPtr(m.Canary), fmtPtr(m.Baseline), fmtPtr(m.CanarySamples), fmtPtr(m.BaselineSamples), fmtPtr(m.Threshold), m.Message)
}
