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

package stack

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// startLoki runs Loki for t in a directory of t's, stops it when t ends and
// logs the tail of its log if t failed.
func startLoki(t *testing.T, opts LokiOptions) *Loki {
	t.Helper()
	l, err := RunLokiOpts(filepath.Join(t.TempDir(), "loki"), opts)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() { stopped(t, "Loki", l) })
	return l
}

// startPrometheus is startLoki for Prometheus.
func startPrometheus(t *testing.T, opts PrometheusOptions) *Prometheus {
	t.Helper()
	p, err := RunPrometheusOpts(filepath.Join(t.TempDir(), "prometheus"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped(t, "Prometheus", p) })
	return p
}

// startGateway is startLoki for the gateway.
func startGateway(t *testing.T, opts GatewayOptions) *Gateway {
	t.Helper()
	g, err := RunGateway(filepath.Join(t.TempDir(), "gateway"), opts)
	if err != nil {
		t.Fatal(err)
	}
	g.Logf = t.Logf
	t.Cleanup(func() {
		stopped(t, "the gateway", g)
		if t.Failed() {
			t.Logf("last %d lines of the gateway's access log:\n%s", logTailLines, g.AccessLog(logTailLines))
		}
	})
	return g
}

// stopped closes s and logs the tail of its log if t failed.
func stopped(t *testing.T, name string, s interface {
	Close() error
	LogPath() string
	LogTail(n int) string
}) {
	_ = s.Close()
	if t.Failed() {
		t.Logf("last %d lines of %s's log (%s):\n%s", logTailLines, name, s.LogPath(), s.LogTail(logTailLines))
	}
}

// must fails the test on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitForQuery is Prometheus.WaitForQuery failing the test on an error.
func waitForQuery(t *testing.T, p *Prometheus, promql string, timeout time.Duration) float64 {
	t.Helper()
	v, err := p.WaitForQuery(promql, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// client is Gateway.Client failing the test on an error.
func client(t *testing.T, g *Gateway) *http.Client {
	t.Helper()
	c, err := g.Client()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

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
	l := startLoki(t, LokiOptions{})

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
	must(t, l.Push(labels, entries))
	must(t, l.WaitForCount(`{job="x"}`, n, time.Minute))

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
	l := startLoki(t, LokiOptions{})

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
	must(t, l.Push(labels, recent))
	must(t, l.Push(labels, old))

	// An instant metric query is used as given.
	must(t, l.WaitForCount(`sum(count_over_time({job="history"}[4h]))`, 30, time.Minute))

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
	target := gaugeTarget(t, "# HELP nettune_test_gauge A gauge for internal/stack.\n# TYPE nettune_test_gauge gauge\nnettune_test_gauge{route=\"10.0.0.0/24\"} 42.5\n")
	p := startPrometheus(t, PrometheusOptions{Targets: []string{target}})

	query := fmt.Sprintf(`nettune_test_gauge{job=%q, instance=%q}`, PrometheusJob, target)
	if got := waitForQuery(t, p, query, time.Minute); got != 42.5 {
		t.Fatalf("%s = %v, want 42.5", query, got)
	}
	if got := waitForQuery(t, p, `sum(up{job="nettune-test"})`, time.Minute); got != 1 {
		t.Fatalf("sum(up) = %v, want 1", got)
	}
}
