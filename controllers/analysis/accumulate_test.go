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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ok(c, b float64) Measurement {
	return Measurement{Verdict: VerdictPass, Canary: f(c), Baseline: f(b), Threshold: f(b*1.1 + 1), Message: "ok"}
}
func bad(c, b float64) Measurement {
	return Measurement{Verdict: VerdictFail, Canary: f(c), Baseline: f(b), Threshold: f(b*1.1 + 1), Message: "too slow"}
}
func inc() Measurement {
	return Measurement{Verdict: VerdictInconclusive, Message: "too few canary samples: 42 < 100"}
}
func qerr() Measurement {
	return Measurement{Verdict: VerdictError, Message: "canary query: loki query: HTTP 502: bad gateway"}
}

func TestAccumulate(t *testing.T) {
	type want struct {
		phase                                    string
		successful, failed, inconclusive, errors int32
		canary, baseline, threshold              string
		message                                  string // prefix
	}
	tests := []struct {
		name string
		spec *v1alpha1.AnalysisSpec
		seq  []Measurement
		want want
	}{
		{
			name: "first success is running",
			spec: v2Spec(),
			seq:  []Measurement{ok(18, 17)},
			want: want{phase: "Running", successful: 1, canary: "18", baseline: "17", threshold: "19.7",
				message: "1/3 measurements successful (0 failed, 0 inconclusive, 0 consecutive errors); latest measurement Successful: ok"},
		},
		{
			name: "three successes pass",
			spec: v2Spec(),
			seq:  []Measurement{ok(18, 17), ok(18.5, 17), ok(17.9, 17.2)},
			want: want{phase: "Successful", successful: 3, canary: "17.9", baseline: "17.2", threshold: "19.92",
				message: "3/3 measurements successful; latest measurement Successful: ok"},
		},
		{
			name: "one failure with failureLimit 0 fails",
			spec: v2Spec(),
			seq:  []Measurement{ok(18, 17), bad(23.4, 17)},
			want: want{phase: "Failed", successful: 1, failed: 1, canary: "23.4", baseline: "17", threshold: "19.7",
				message: "1 failed measurement(s) > failureLimit 0; latest measurement Failed: too slow"},
		},
		{
			name: "failureLimit 1 tolerates one failure",
			spec: withSpec(func(s *v1alpha1.AnalysisSpec) { s.FailureLimit = i32(1) }),
			seq:  []Measurement{bad(23.4, 17), ok(18, 17), ok(18, 17), ok(18, 17)},
			want: want{phase: "Successful", successful: 3, failed: 1, canary: "18", baseline: "17", threshold: "19.7",
				message: "3/3 measurements successful"},
		},
		{
			name: "failureLimit 1, second failure fails",
			spec: withSpec(func(s *v1alpha1.AnalysisSpec) { s.FailureLimit = i32(1) }),
			seq:  []Measurement{bad(23.4, 17), ok(18, 17), bad(21, 17)},
			want: want{phase: "Failed", successful: 1, failed: 2, canary: "21", baseline: "17", threshold: "19.7",
				message: "2 failed measurement(s) > failureLimit 1"},
		},
		{
			name: "inconclusive up to limit keeps running",
			spec: v2Spec(),
			seq:  []Measurement{inc(), inc(), inc()},
			want: want{phase: "Running", inconclusive: 3,
				message: "0/3 measurements successful (0 failed, 3 inconclusive, 0 consecutive errors); latest measurement Inconclusive: too few canary samples: 42 < 100"},
		},
		{
			name: "one more inconclusive than the limit",
			spec: v2Spec(),
			seq:  []Measurement{inc(), ok(18, 17), inc(), inc(), inc()},
			want: want{phase: "Inconclusive", successful: 1, inconclusive: 4,
				message: "4 inconclusive measurement(s) > inconclusiveLimit 3; latest measurement Inconclusive: too few canary samples: 42 < 100"},
		},
		{
			name: "inconclusiveLimit 0",
			spec: withSpec(func(s *v1alpha1.AnalysisSpec) { s.InconclusiveLimit = i32(0) }),
			seq:  []Measurement{inc()},
			want: want{phase: "Inconclusive", inconclusive: 1, message: "1 inconclusive measurement(s) > inconclusiveLimit 0"},
		},
		{
			name: "errors are consecutive: reset by a success",
			spec: v2Spec(),
			seq:  []Measurement{qerr(), qerr(), qerr(), qerr(), ok(18, 17), qerr(), qerr(), qerr(), qerr()},
			want: want{phase: "Running", successful: 1, errors: 4, canary: "18", baseline: "17", threshold: "19.7",
				message: "1/3 measurements successful (0 failed, 0 inconclusive, 4 consecutive errors); latest measurement Error: canary query: loki query: HTTP 502: bad gateway"},
		},
		{
			name: "errors reset by an inconclusive measurement too",
			spec: v2Spec(),
			seq:  []Measurement{qerr(), qerr(), inc(), qerr()},
			want: want{phase: "Running", inconclusive: 1, errors: 1},
		},
		{
			name: "five consecutive errors are inconclusive",
			spec: v2Spec(),
			seq:  []Measurement{ok(18, 17), qerr(), qerr(), qerr(), qerr(), qerr()},
			want: want{phase: "Inconclusive", successful: 1, errors: 5, canary: "18", baseline: "17", threshold: "19.7",
				message: "5 consecutive query errors > consecutiveErrorLimit 4; latest measurement Error: canary query: loki query: HTTP 502: bad gateway"},
		},
		{
			name: "consecutiveErrorLimit 0",
			spec: withSpec(func(s *v1alpha1.AnalysisSpec) { s.ConsecutiveErrorLimit = i32(0) }),
			seq:  []Measurement{qerr()},
			want: want{phase: "Inconclusive", errors: 1, message: "1 consecutive query errors > consecutiveErrorLimit 0"},
		},
		{
			name: "terminal stays terminal",
			spec: v2Spec(),
			seq:  []Measurement{bad(30, 17), ok(18, 17), ok(18, 17), ok(18, 17)},
			want: want{phase: "Failed", failed: 1, canary: "30", baseline: "17", threshold: "19.7",
				message: "1 failed measurement(s) > failureLimit 0; latest measurement Failed: too slow"},
		},
		{
			name: "all-nil spec uses defaults (3 measurements, failureLimit 0)",
			spec: &v1alpha1.AnalysisSpec{Name: "bare", Query: "x"},
			seq:  []Measurement{ok(1, 1), ok(1, 1), ok(1, 1)},
			want: want{phase: "Successful", successful: 3, canary: "1", baseline: "1", threshold: "2.1"},
		},
		{
			name: "measurements 1",
			spec: withSpec(func(s *v1alpha1.AnalysisSpec) { s.Measurements = i32(1) }),
			seq:  []Measurement{ok(18, 17)},
			want: want{phase: "Successful", successful: 1, canary: "18", baseline: "17", threshold: "19.7"},
		},
		{
			name: "absent baseline clears the previous baseline value",
			spec: v2Spec(),
			seq:  []Measurement{ok(18, 17), {Verdict: VerdictPass, Canary: f(18.25), Threshold: f(20), Message: "no baseline"}},
			want: want{phase: "Running", successful: 2, canary: "18.25", threshold: "20"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := v1alpha1.AnalysisResult{Step: 2}
			for i, m := range tt.seq {
				m.At = t0.Add(time.Duration(i) * time.Minute)
				res = Accumulate(res, m, tt.spec)
			}
			w := tt.want
			if res.Phase != w.phase || res.Successful != w.successful || res.Failed != w.failed ||
				res.Inconclusive != w.inconclusive || res.Errors != w.errors {
				t.Errorf("phase/counts = %s s%d f%d i%d e%d, want %s s%d f%d i%d e%d (message %q)",
					res.Phase, res.Successful, res.Failed, res.Inconclusive, res.Errors,
					w.phase, w.successful, w.failed, w.inconclusive, w.errors, res.Message)
			}
			if res.CanaryValue != w.canary || res.BaselineValue != w.baseline || res.Threshold != w.threshold {
				t.Errorf("values = %q/%q/%q, want %q/%q/%q", res.CanaryValue, res.BaselineValue, res.Threshold, w.canary, w.baseline, w.threshold)
			}
			if !strings.HasPrefix(res.Message, w.message) {
				t.Errorf("message\n got %q\nwant prefix %q", res.Message, w.message)
			}
			if res.Name != tt.spec.Name || res.Step != 2 {
				t.Errorf("name/step = %q/%d", res.Name, res.Step)
			}
			if res.LastMeasured == nil {
				t.Fatal("LastMeasured not set")
			}
		})
	}
}

func withSpec(fn func(*v1alpha1.AnalysisSpec)) *v1alpha1.AnalysisSpec {
	s := v2Spec()
	fn(s)
	return s
}

func TestAccumulateLastMeasuredAndTerminal(t *testing.T) {
	spec := v2Spec()
	res := Accumulate(v1alpha1.AnalysisResult{}, ok(18, 17), spec)
	if res.LastMeasured == nil || !res.LastMeasured.IsZero() { // ok() has a zero At
		t.Fatalf("LastMeasured = %v", res.LastMeasured)
	}
	m := ok(18, 17)
	m.At = t0.Add(3 * time.Minute)
	res = Accumulate(res, m, spec)
	if !res.LastMeasured.Time.Equal(m.At) {
		t.Fatalf("LastMeasured = %v, want %v", res.LastMeasured, m.At)
	}
	// Error keeps the previous values but moves LastMeasured.
	e := qerr()
	e.At = t0.Add(4 * time.Minute)
	res = Accumulate(res, e, spec)
	if res.CanaryValue != "18" || res.BaselineValue != "17" || !res.LastMeasured.Time.Equal(e.At) || res.Errors != 1 {
		t.Fatalf("after error: %+v", res)
	}
	// A terminal result is returned as is, LastMeasured included.
	done := v1alpha1.AnalysisResult{Name: "x", Phase: "Successful", Successful: 3, LastMeasured: &metav1.Time{Time: t0}}
	if got := Accumulate(done, bad(99, 1), spec); got.Phase != "Successful" || got.Failed != 0 || !got.LastMeasured.Time.Equal(t0) || got.CanaryValue != "" {
		t.Fatalf("terminal changed: %+v", got)
	}
}

func TestAccumulateMessageBounded(t *testing.T) {
	m := Measurement{Verdict: VerdictError, At: t0, Message: strings.Repeat("é", 2000)}
	res := Accumulate(v1alpha1.AnalysisResult{}, m, v2Spec())
	if len(res.Message) > 1024 || !strings.HasSuffix(res.Message, "...") {
		t.Fatalf("message length %d", len(res.Message))
	}
	if !strings.HasPrefix(res.Message, "0/3 measurements successful (0 failed, 0 inconclusive, 1 consecutive errors); latest measurement Error: éé") {
		t.Fatalf("message %q", res.Message[:120])
	}
	for _, r := range res.Message {
		if r == '\uFFFD' {
			t.Fatal("message cut inside a rune")
		}
	}
}

func TestAccumulateValueStrings(t *testing.T) {
	m := Measurement{Verdict: VerdictFail, At: t0, Canary: f(1e300), Baseline: f(0.1 + 0.2), Threshold: f(18*1.1 + 1)}
	res := Accumulate(v1alpha1.AnalysisResult{}, m, v2Spec())
	if res.CanaryValue != "1e+300" || res.BaselineValue != "0.3" || res.Threshold != "20.8" {
		t.Fatalf("values %q %q %q", res.CanaryValue, res.BaselineValue, res.Threshold)
	}
}

func TestDue(t *testing.T) {
	spec := v2Spec() // interval 1m
	spec90 := withSpec(func(s *v1alpha1.AnalysisSpec) { s.Interval = &metav1.Duration{Duration: 90 * time.Second} })
	bare := &v1alpha1.AnalysisSpec{Name: "bare"} // interval defaults to 1m
	last := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }
	tests := []struct {
		name     string
		prev     v1alpha1.AnalysisResult
		spec     *v1alpha1.AnalysisSpec
		now      time.Time
		wantDue  bool
		wantNext time.Time
	}{
		{"first measurement due immediately", v1alpha1.AnalysisResult{}, spec, t0, true, t0.Add(time.Minute)},
		{"first, default interval", v1alpha1.AnalysisResult{Name: "bare"}, bare, t0, true, t0.Add(time.Minute)},
		{"too early", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, spec, t0.Add(30 * time.Second), false, t0.Add(time.Minute)},
		{"exactly on time", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, spec, t0.Add(time.Minute), true, t0.Add(2 * time.Minute)},
		{"late: next counts from now", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, spec, t0.Add(5 * time.Minute), true, t0.Add(6 * time.Minute)},
		{"custom interval not yet", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, spec90, t0.Add(80 * time.Second), false, t0.Add(90 * time.Second)},
		{"custom interval due", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, spec90, t0.Add(90 * time.Second), true, t0.Add(180 * time.Second)},
		{"default interval not yet", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(0)}, bare, t0.Add(59 * time.Second), false, t0.Add(time.Minute)},
		{"clock went back", v1alpha1.AnalysisResult{Phase: "Running", LastMeasured: last(time.Minute)}, spec, t0, false, t0.Add(2 * time.Minute)},
		{"successful never due", v1alpha1.AnalysisResult{Phase: "Successful", LastMeasured: last(0)}, spec, t0.Add(time.Hour), false, time.Time{}},
		{"failed never due", v1alpha1.AnalysisResult{Phase: "Failed"}, spec, t0, false, time.Time{}},
		{"inconclusive never due", v1alpha1.AnalysisResult{Phase: "Inconclusive", LastMeasured: last(0)}, spec, t0.Add(time.Hour), false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due, next := Due(tt.prev, tt.spec, tt.now)
			if due != tt.wantDue || !next.Equal(tt.wantNext) {
				t.Fatalf("Due() = %v, %v; want %v, %v", due, next, tt.wantDue, tt.wantNext)
			}
		})
	}
}

// TestDueAccumulateLoop drives Due + Accumulate like the controller would.
func TestDueAccumulateLoop(t *testing.T) {
	spec := v2Spec()
	var res v1alpha1.AnalysisResult
	now := t0
	var measuredAt []time.Duration
	for i := 0; i < 20 && !v1alpha1.AnalysisTerminal(res.Phase); i++ {
		due, next := Due(res, spec, now)
		if due {
			m := ok(18, 17)
			m.At = now
			res = Accumulate(res, m, spec)
			measuredAt = append(measuredAt, now.Sub(t0))
		}
		now = next.Add(250 * time.Millisecond) // controller wakes a little late
	}
	if res.Phase != "Successful" || len(measuredAt) != 3 {
		t.Fatalf("phase %s after %v", res.Phase, measuredAt)
	}
	want := []time.Duration{0, 60250 * time.Millisecond, 120500 * time.Millisecond}
	for i := range want {
		if measuredAt[i] != want[i] {
			t.Fatalf("measured at %v, want %v", measuredAt, want)
		}
	}
}

// TestAccumulateUnavailable: refused or unanswered measurements count as
// consecutive errors; past consecutiveErrorLimit the analysis is
// Unavailable (not terminal, never Inconclusive), and the next measurement
// taken resets it, keeping the successes counted before.
func TestAccumulateUnavailable(t *testing.T) {
	spec := v2Spec()
	limit := int32(2)
	spec.ConsecutiveErrorLimit = &limit
	unavailable := Measurement{Verdict: VerdictUnavailable, At: time.Unix(100, 0), Message: "canary query: loki query: HTTP 401: no org id"}
	r := Accumulate(v1alpha1.AnalysisResult{}, ok(1, 1), spec)
	for i := 0; i < 5; i++ {
		r = Accumulate(r, unavailable, spec)
		want := v1alpha1.AnalysisRunning
		if r.Errors > limit {
			want = v1alpha1.AnalysisUnavailable
		}
		if r.Phase != want {
			t.Fatalf("after %d unavailable: phase %s, want %s", i+1, r.Phase, want)
		}
	}
	if v1alpha1.AnalysisTerminal(r.Phase) || !strings.Contains(r.Message, "HTTP 401") || !strings.Contains(r.Message, "backend unavailable") {
		t.Fatalf("result %+v: want a non-terminal Unavailable naming the status", r)
	}
	r = Accumulate(r, ok(1, 1), spec)
	if r.Phase != v1alpha1.AnalysisRunning || r.Errors != 0 || r.Successful != 2 {
		t.Fatalf("after the backend answered: %+v, want Running with 2 successes and no errors", r)
	}
	// A query error (not the backend's) still ends Inconclusive.
	for i := 0; i <= int(limit); i++ {
		r = Accumulate(r, qerr(), spec)
	}
	if r.Phase != v1alpha1.AnalysisInconclusive {
		t.Fatalf("after %d query errors: %s, want Inconclusive", limit+1, r.Phase)
	}
}
