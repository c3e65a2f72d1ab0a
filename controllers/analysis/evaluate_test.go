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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func str(s string) *string { return &s }
func i32(v int32) *int32   { return &v }
func i64(v int64) *int64   { return &v }
func f(v float64) *float64 { return &v }

// v2Spec is the analysis of config/samples/xavier-lan-v2.yaml.
func v2Spec() *v1alpha1.AnalysisSpec {
	return &v1alpha1.AnalysisSpec{
		Name:              "p9999-latency",
		Provider:          v1alpha1.ProviderLoki,
		Query:             `quantile_over_time(0.9999, {job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} | json | unwrap latency_ms [{{ .Window }}]) by ()`,
		SamplesQuery:      str(`sum(count_over_time({job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} [{{ .Window }}]))`),
		Interval:          &metav1.Duration{Duration: time.Minute},
		Window:            &metav1.Duration{Duration: 5 * time.Minute},
		Measurements:      i32(3),
		MinSamples:        i64(10000),
		MaxValue:          str("20"),
		MaxBaselineFactor: str("1.10"),
		MaxBaselineOffset: str("1"),
		FailureLimit:      i32(0),
	}
}

func TestEvaluate(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	mod := func(fn func(*v1alpha1.AnalysisSpec)) *v1alpha1.AnalysisSpec {
		s := v2Spec()
		fn(s)
		return s
	}
	tests := []struct {
		name          string
		spec          *v1alpha1.AnalysisSpec
		in            Measurement
		wantVerdict   Verdict
		wantThreshold *float64
		wantMessage   string
	}{
		{
			name:          "healthy canary, both ceilings, relative binds",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(18.2), Baseline: f(17), CanarySamples: f(12000), BaselineSamples: f(90000)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(19.7),
			wantMessage:   "canary 18.2 <= maxValue 20; canary 18.2 <= baseline 17 x 1.1 + 1 = 19.7 [canary samples 12000, baseline samples 90000]",
		},
		{
			name:          "above maxValue only",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(23.4), Baseline: f(25), CanarySamples: f(12000), BaselineSamples: f(90000)},
			wantVerdict:   VerdictFail,
			wantThreshold: f(20),
			wantMessage:   "canary 23.4 > maxValue 20 [canary samples 12000, baseline samples 90000]",
		},
		{
			name:          "above relative ceiling only",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(19.5), Baseline: f(15), CanarySamples: f(12000), BaselineSamples: f(90000)},
			wantVerdict:   VerdictFail,
			wantThreshold: f(17.5),
			wantMessage:   "canary 19.5 > baseline 15 x 1.1 + 1 = 17.5 [canary samples 12000, baseline samples 90000]",
		},
		{
			name:          "above both",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(27), Baseline: f(18), CanarySamples: f(12000), BaselineSamples: f(90000)},
			wantVerdict:   VerdictFail,
			wantThreshold: f(20),
			wantMessage:   "canary 27 > maxValue 20; canary 27 > baseline 18 x 1.1 + 1 = 20.8 [canary samples 12000, baseline samples 90000]",
		},
		{
			name:          "equal to threshold passes",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(20), CanarySamples: f(10000)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(20),
			wantMessage:   "canary 20 <= maxValue 20; relative check skipped: no baseline value [canary samples 10000]",
		},
		{
			name:        "too few canary samples",
			spec:        v2Spec(),
			in:          Measurement{Canary: f(30), Baseline: f(17), CanarySamples: f(42), BaselineSamples: f(90000)},
			wantVerdict: VerdictInconclusive,
			wantMessage: "too few canary samples: 42 < 10000",
		},
		{
			name:        "no canary value",
			spec:        v2Spec(),
			in:          Measurement{Baseline: f(17), CanarySamples: f(20000), BaselineSamples: f(90000)},
			wantVerdict: VerdictInconclusive,
			wantMessage: "canary query returned no value",
		},
		{
			name:        "no canary value without samplesQuery",
			spec:        mod(func(s *v1alpha1.AnalysisSpec) { s.SamplesQuery = nil }),
			in:          Measurement{},
			wantVerdict: VerdictInconclusive,
			wantMessage: "canary query returned no value",
		},
		{
			name:          "baseline with too few samples: relative check skipped, not inconclusive",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(19.5), Baseline: f(10), CanarySamples: f(12000), BaselineSamples: f(500)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(20),
			wantMessage:   "canary 19.5 <= maxValue 20; relative check skipped: too few baseline samples: 500 < 10000 (baseline 10) [canary samples 12000, baseline samples 500]",
		},
		{
			name:        "only relative ceiling, no baseline: report-only success",
			spec:        mod(func(s *v1alpha1.AnalysisSpec) { s.MaxValue = nil }),
			in:          Measurement{Canary: f(50), CanarySamples: f(12000)},
			wantVerdict: VerdictPass,
			wantMessage: "canary 50 (report only: no ceiling applied); relative check skipped: no baseline value [canary samples 12000]",
		},
		{
			name: "no ceilings at all: report only",
			spec: mod(func(s *v1alpha1.AnalysisSpec) {
				s.MaxValue, s.MaxBaselineFactor, s.MaxBaselineOffset = nil, nil, nil
			}),
			in:          Measurement{Canary: f(500), Baseline: f(1), CanarySamples: f(12000), BaselineSamples: f(12000)},
			wantVerdict: VerdictPass,
			wantMessage: "canary 500 (report only: no ceiling applied) [canary samples 12000, baseline samples 12000]",
		},
		{
			name: "offset only: factor defaults to 1",
			spec: mod(func(s *v1alpha1.AnalysisSpec) {
				s.MaxValue, s.MaxBaselineFactor, s.MaxBaselineOffset = nil, nil, str("2")
			}),
			in:            Measurement{Canary: f(12.5), Baseline: f(10), CanarySamples: f(12000), BaselineSamples: f(12000)},
			wantVerdict:   VerdictFail,
			wantThreshold: f(12),
			wantMessage:   "canary 12.5 > baseline 10 x 1 + 2 = 12 [canary samples 12000, baseline samples 12000]",
		},
		{
			name: "factor only: offset defaults to 0",
			spec: mod(func(s *v1alpha1.AnalysisSpec) {
				s.MaxValue, s.MaxBaselineFactor, s.MaxBaselineOffset = nil, str("1.5"), nil
			}),
			in:            Measurement{Canary: f(14.9), Baseline: f(10), CanarySamples: f(12000), BaselineSamples: f(12000)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(15),
			wantMessage:   "canary 14.9 <= baseline 10 x 1.5 + 0 = 15 [canary samples 12000, baseline samples 12000]",
		},
		{
			name:        "nil minSamples defaults to 100",
			spec:        mod(func(s *v1alpha1.AnalysisSpec) { s.MinSamples = nil }),
			in:          Measurement{Canary: f(10), CanarySamples: f(99)},
			wantVerdict: VerdictInconclusive,
			wantMessage: "too few canary samples: 99 < 100",
		},
		{
			name:          "no samplesQuery: samples not checked",
			spec:          mod(func(s *v1alpha1.AnalysisSpec) { s.SamplesQuery = nil }),
			in:            Measurement{Canary: f(10), Baseline: f(10)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(12),
			wantMessage:   "canary 10 <= maxValue 20; canary 10 <= baseline 10 x 1.1 + 1 = 12",
		},
		{
			name:          "long fractions rounded in message",
			spec:          v2Spec(),
			in:            Measurement{Canary: f(17.123456789), Baseline: f(16.987654321), CanarySamples: f(12000), BaselineSamples: f(12000)},
			wantVerdict:   VerdictPass,
			wantThreshold: f(16.987654321*1.1 + 1),
			wantMessage:   "canary 17.1235 <= maxValue 20; canary 17.1235 <= baseline 16.9877 x 1.1 + 1 = 19.6864 [canary samples 12000, baseline samples 12000]",
		},
		{
			name:        "invalid maxValue",
			spec:        mod(func(s *v1alpha1.AnalysisSpec) { s.MaxValue = str("20ms") }),
			in:          Measurement{Canary: f(10), CanarySamples: f(12000)},
			wantVerdict: VerdictError,
			wantMessage: `invalid maxValue "20ms": want a decimal number`,
		},
		{
			name:        "error measurement passes through",
			spec:        v2Spec(),
			in:          Measurement{Verdict: VerdictError, Message: "loki query: HTTP 502: bad gateway"},
			wantVerdict: VerdictError,
			wantMessage: "loki query: HTTP 502: bad gateway",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.At = at
			got := Evaluate(tt.spec, tt.in)
			if got.Verdict != tt.wantVerdict {
				t.Errorf("Verdict = %s, want %s (message %q)", got.Verdict, tt.wantVerdict, got.Message)
			}
			if got.Message != tt.wantMessage {
				t.Errorf("Message\n got %q\nwant %q", got.Message, tt.wantMessage)
			}
			if !floatPtrEqual(got.Threshold, tt.wantThreshold) {
				t.Errorf("Threshold = %s, want %s", fmtPtr(got.Threshold), fmtPtr(tt.wantThreshold))
			}
			if !got.At.Equal(at) || !floatPtrEqual(got.Canary, tt.in.Canary) || !floatPtrEqual(got.Baseline, tt.in.Baseline) {
				t.Errorf("Evaluate changed the inputs: %+v", got)
			}
		})
	}
}

func floatPtrEqual(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	d := *a - *b
	return d < 1e-9 && d > -1e-9
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func TestFmtNum(t *testing.T) {
	for v, want := range map[float64]string{
		20:             "20",
		19.7:           "19.7",
		18*1.1 + 1:     "20.8", // 20.800000000000004 in binary
		0.000123456789: "0.000123457",
		123456789:      "123457000",
		1e40:           "1e+40",
		17.123456789:   "17.1235",
		-3.5:           "-3.5",
		posInf:         "+Inf",
	} {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
		if len(fmtNum(v)) > 32 {
			t.Errorf("fmtNum(%v) longer than 32", v)
		}
	}
}

// fakeQuerier answers rendered queries from a map and records them.
type fakeQuerier struct {
	answers map[string]float64 // query -> value; missing = empty result
	errs    map[string]error
	asked   []string
	at      []time.Time
}

func (f *fakeQuerier) Query(_ context.Context, q string, at time.Time) (float64, bool, error) {
	f.asked = append(f.asked, q)
	f.at = append(f.at, at)
	if err := f.errs[q]; err != nil {
		return 0, false, err
	}
	v, ok := f.answers[q]
	return v, ok, nil
}

func TestMeasure(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	spec := &v1alpha1.AnalysisSpec{
		Name:              "p",
		Query:             `max(lat{vehicle=~"{{ .Vehicles }}",revision="{{ .Revision }}",profile="{{ .Profile }}"}[{{ .Window }}])`,
		SamplesQuery:      str(`count(lat{vehicle=~"{{ .Vehicles }}",revision="{{ .Revision }}"}[{{ .Window }}])`),
		Window:            &metav1.Duration{Duration: 90 * time.Second},
		MinSamples:        i64(100),
		MaxValue:          str("20"),
		MaxBaselineFactor: str("1.1"),
	}
	canary := Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "r2"}
	baseline := Cohort{Vehicles: []string{"av-003"}, Revision: "r1"}
	const (
		cq = `max(lat{vehicle=~"av-001|av-002",revision="r2",profile="xl"}[90s])`
		cs = `count(lat{vehicle=~"av-001|av-002",revision="r2"}[90s])`
		bq = `max(lat{vehicle=~"av-003",revision="r1",profile="xl"}[90s])`
		bs = `count(lat{vehicle=~"av-003",revision="r1"}[90s])`
	)

	t.Run("failed against baseline", func(t *testing.T) {
		q := &fakeQuerier{answers: map[string]float64{cq: 15, cs: 500, bq: 10, bs: 800}}
		m := Measure(context.Background(), q, "xl", spec, canary, baseline, at)
		if want := []string{cq, cs, bq, bs}; strings.Join(q.asked, "\n") != strings.Join(want, "\n") {
			t.Fatalf("queries\n%s\nwant\n%s", strings.Join(q.asked, "\n"), strings.Join(want, "\n"))
		}
		for _, a := range q.at {
			if !a.Equal(at) {
				t.Errorf("query at %v, want %v", a, at)
			}
		}
		if m.Verdict != VerdictFail || *m.Canary != 15 || *m.Baseline != 10 || *m.CanarySamples != 500 || *m.BaselineSamples != 800 || !floatPtrEqual(m.Threshold, f(11)) || !m.At.Equal(at) {
			t.Fatalf("got %+v", m)
		}
		if want := "canary 15 > baseline 10 x 1.1 + 0 = 11 [canary samples 500, baseline samples 800]"; m.Message != want {
			t.Fatalf("message\n got %q\nwant %q", m.Message, want)
		}
	})
	t.Run("no baseline vehicles", func(t *testing.T) {
		q := &fakeQuerier{answers: map[string]float64{cq: 15, cs: 500}}
		m := Measure(context.Background(), q, "xl", spec, canary, Cohort{Revision: "r1"}, at)
		if len(q.asked) != 2 {
			t.Fatalf("asked %q, want only the canary queries", q.asked)
		}
		if m.Verdict != VerdictPass || m.Baseline != nil || m.BaselineSamples != nil || *m.Threshold != 20 {
			t.Fatalf("got %+v", m)
		}
		if want := "canary 15 <= maxValue 20; relative check skipped: no baseline vehicles [canary samples 500]"; m.Message != want {
			t.Fatalf("message\n got %q\nwant %q", m.Message, want)
		}
	})
	t.Run("empty samples result counts as zero", func(t *testing.T) {
		q := &fakeQuerier{answers: map[string]float64{bq: 10, bs: 800}}
		m := Measure(context.Background(), q, "xl", spec, canary, baseline, at)
		if m.Verdict != VerdictInconclusive || m.Canary != nil || m.CanarySamples == nil || *m.CanarySamples != 0 {
			t.Fatalf("got %+v", m)
		}
		if m.Message != "too few canary samples: 0 < 100" {
			t.Fatalf("message %q", m.Message)
		}
	})
	t.Run("baseline query error", func(t *testing.T) {
		q := &fakeQuerier{answers: map[string]float64{cq: 15, cs: 500}, errs: map[string]error{bq: errors.New("prometheus query: HTTP 503: timeout: query timed out")}}
		m := Measure(context.Background(), q, "xl", spec, canary, baseline, at)
		if m.Verdict != VerdictError || m.Message != "baseline query: prometheus query: HTTP 503: timeout: query timed out" || m.Canary != nil || !m.At.Equal(at) {
			t.Fatalf("got %+v", m)
		}
	})
	t.Run("template error", func(t *testing.T) {
		s := *spec
		s.SamplesQuery = str(`count({{ .Nope }})`)
		q := &fakeQuerier{answers: map[string]float64{cq: 15}}
		m := Measure(context.Background(), q, "xl", &s, canary, baseline, at)
		want := `canary samplesQuery: rendering query template: template: query:1:9: executing "query" at <.Nope>: can't evaluate field Nope in type analysis.TemplateData`
		if m.Verdict != VerdictError || m.Message != want {
			t.Fatalf("got %q %q", m.Verdict, m.Message)
		}
	})
	t.Run("no samplesQuery", func(t *testing.T) {
		s := *spec
		s.SamplesQuery = nil
		q := &fakeQuerier{answers: map[string]float64{cq: 15, bq: 14}}
		m := Measure(context.Background(), q, "xl", &s, canary, baseline, at)
		if len(q.asked) != 2 || m.Verdict != VerdictPass || m.CanarySamples != nil || m.BaselineSamples != nil || !floatPtrEqual(m.Threshold, f(15.4)) {
			t.Fatalf("asked %q got %+v", q.asked, m)
		}
	})
}
