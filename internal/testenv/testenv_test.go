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

package testenv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// promQuantile is Prometheus' quantile (linear interpolation between closest
// ranks), which Loki's quantile_over_time also uses.
func promQuantile(q float64, values []float64) float64 {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := q * float64(len(sorted)-1)
	lower := math.Max(0, math.Floor(rank))
	upper := math.Min(float64(len(sorted)-1), lower+1)
	weight := rank - math.Floor(rank)
	return sorted[int(lower)]*(1-weight) + sorted[int(upper)]*weight
}

func TestLokiQuantileOverTime(t *testing.T) {
	t.Parallel()
	l := StartLoki(t)

	const n = 500
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	values := make([]float64, n)
	entries := make([]LokiEntry, n)
	for i := range n {
		// A long tail, so the 99th percentile is not near the maximum.
		v := math.Round((5+rng.ExpFloat64()*40)*1000) / 1000
		values[i] = v
		entries[i] = LokiEntry{
			Time: now.Add(-50 * time.Minute).Add(time.Duration(i) * (50 * time.Minute / n)),
			Line: fmt.Sprintf(`{"latency_ms": %v, "route": "10.0.%d.0/24"}`, v, i%4),
		}
	}
	labels := map[string]string{"job": "x", "vehicle": "veh-0001"}
	l.Push(t, labels, entries)
	l.WaitForCount(t, `{job="x"}`, n, time.Minute)

	query := `quantile_over_time(0.99, {job="x"} | json | unwrap latency_ms [1h]) by ()`
	got, err := l.instantQuery(query, time.Now())
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if len(got) != 1 {
		t.Fatalf("%s: got %d samples %v, want 1", query, len(got), got)
	}
	want := promQuantile(0.99, values)
	if math.Abs(got[0]-want) > 0.01*want {
		t.Fatalf("%s = %v, want %v (within 1%%)", query, got[0], want)
	}
	t.Logf("%s = %v (computed %v, max %v)", query, got[0], want, slices.Max(values))
}

func TestLokiAcceptsOldAndOutOfOrderEntries(t *testing.T) {
	t.Parallel()
	l := StartLoki(t)

	now := time.Now()
	labels := map[string]string{"job": "history"}
	var recent, old []LokiEntry
	for i := range 10 {
		recent = append(recent, LokiEntry{Time: now.Add(-10 * time.Minute).Add(time.Duration(i) * time.Second), Line: fmt.Sprintf("recent %d", i)})
	}
	for i := range 20 {
		old = append(old, LokiEntry{Time: now.Add(-3 * time.Hour).Add(time.Duration(i) * time.Second), Line: fmt.Sprintf("old %d", i)})
	}
	// Newest first: the old entries are almost 3h behind the stream's head.
	l.Push(t, labels, recent)
	l.Push(t, labels, old)

	// An instant metric query is used as given.
	l.WaitForCount(t, `sum(count_over_time({job="history"}[4h]))`, 30, time.Minute)

	// Queried at a time in the past, only the old entries are in range.
	query := `sum(count_over_time({job="history"} |= "old" [2h]))`
	got, err := l.instantQuery(query, now.Add(-2*time.Hour))
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if len(got) != 1 || got[0] != 20 {
		t.Fatalf("%s at now-2h = %v, want [20]", query, got)
	}
}

func gaugeTarget(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestPrometheusScrapesTarget(t *testing.T) {
	t.Parallel()
	target := gaugeTarget(t, "# HELP nettune_test_gauge A gauge for testenv.\n# TYPE nettune_test_gauge gauge\nnettune_test_gauge{route=\"10.0.0.0/24\"} 42.5\n")
	p := StartPrometheus(t, target)

	query := fmt.Sprintf(`nettune_test_gauge{job=%q, instance=%q}`, PrometheusJob, target)
	if got := p.WaitForQuery(t, query, time.Minute); got != 42.5 {
		t.Fatalf("%s = %v, want 42.5", query, got)
	}
	if got := p.WaitForQuery(t, `sum(up{job="nettune-test"})`, time.Minute); got != 1 {
		t.Fatalf("sum(up) = %v, want 1", got)
	}
}

func TestCleanupStopsProcessAndRemovesDir(t *testing.T) {
	t.Parallel()
	var p *Prometheus
	t.Run("start", func(t *testing.T) {
		p = StartPrometheus(t)
	})
	if p == nil {
		t.Fatal("StartPrometheus did not return")
	}
	if p.proc.running() {
		t.Errorf("prometheus (pid %d) still running after cleanup", p.proc.cmd.Process.Pid)
	}
	if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after cleanup (stat: %v)", p.dir, err)
	}
	if _, err := http.Get(p.URL + "/-/ready"); err == nil {
		t.Errorf("%s still answers after cleanup", p.URL)
	}
}
