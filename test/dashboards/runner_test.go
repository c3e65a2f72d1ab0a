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

package dashboards

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nettune/nettune/test/framework/testenv"
)

// TestRunnerTellsDataFromNothing: against a real Loki and Prometheus, the
// runner finds what is there and calls empty what a panel would draw
// nothing of — no series, or only NaN — and reports refused queries.
func TestRunnerTellsDataFromNothing(t *testing.T) {
	l := testenv.StartLoki(t)
	reg := prometheus.NewRegistry()
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dash_test_gauge", Help: "x"}, []string{"profile"})
	gauge.WithLabelValues("xavier-lan").Set(3)
	idle := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dash_test_idle_seconds", Help: "never observed"})
	reg.MustRegister(gauge, idle)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	p := testenv.StartPrometheus(t, strings.TrimPrefix(srv.URL, "http://"))

	now := time.Now()
	var entries []testenv.LokiEntry
	for i := range 30 {
		entries = append(entries, testenv.LokiEntry{Time: now.Add(-time.Duration(30-i) * time.Second), Line: fmt.Sprintf(`{"latency_ms":%d.5}`, i)})
	}
	l.Push(t, map[string]string{"job": "nettune-probe", "profile": "xavier-lan", "peer": "xavier-a"}, entries)
	l.WaitForCount(t, `{job="nettune-probe"}`, 30, 30*time.Second)
	p.WaitForQuery(t, `count_over_time(dash_test_gauge[1m]) >= 5`, 30*time.Second)

	r := &Runner{LokiURL: l.URL, PrometheusURL: p.URL, Start: now.Add(-2 * time.Minute), End: time.Now(), Step: 5 * time.Second}
	vars := r.Vars(time.Second)
	vars["profile"] = "xavier-lan"
	cases := []struct {
		q         Query
		empty     bool
		nanOnly   bool // empty, but with series
		err       string
		minPoints int
	}{
		{q: Query{Datasource: "loki", Kind: KindLogs, Expr: `{job="nettune-probe", profile="$profile"}`}, minPoints: 30},
		{q: Query{Datasource: "loki", Kind: KindLogs, Expr: `{job="nettune-probe", profile="orin-lan"}`}, empty: true},
		{q: Query{Datasource: "loki", Kind: KindRange, Expr: `quantile_over_time(0.99, {job="nettune-probe", profile="$profile"} | json | unwrap latency_ms [$__interval]) by (peer)`}, minPoints: 3},
		{q: Query{Datasource: "loki", Kind: KindInstant, Expr: `sum(count_over_time({job="nettune-probe"} [$__range]))`}, minPoints: 1},
		{q: Query{Datasource: "loki", Kind: KindRange, Expr: `sum(count_over_time({job="nettune-agent"} [$__interval]))`}, empty: true},
		{q: Query{Datasource: "loki", Kind: KindRange, Expr: `sum(count_over_time({job="nettune-probe"} [$__interval]`}, err: "HTTP 400"},
		{q: Query{Datasource: "loki", Kind: KindLabelValues, Expr: `{job="nettune-probe"}`, Label: "peer"}, minPoints: 1},
		{q: Query{Datasource: "prometheus", Kind: KindRange, Expr: `dash_test_gauge{profile="$profile"}`}, minPoints: 1},
		{q: Query{Datasource: "prometheus", Kind: KindInstant, Expr: `dash_test_gauge{profile="$profile"}`}, minPoints: 1},
		{q: Query{Datasource: "prometheus", Kind: KindRange, Expr: `dash_test_gauge{profile="orin-lan"}`}, empty: true},
		// Present, but only NaN: a panel would draw nothing.
		{q: Query{Datasource: "prometheus", Kind: KindRange, Expr: `histogram_quantile(0.99, rate(dash_test_idle_seconds_bucket[$__rate_interval]))`}, empty: true, nanOnly: true},
		{q: Query{Datasource: "prometheus", Kind: KindRange, Expr: `dash_test_gauge{`}, err: "HTTP 400"},
		{q: Query{Datasource: "prometheus", Kind: KindLabelValues, Expr: `dash_test_gauge`, Label: "profile", Variable: "profile"}, minPoints: 1},
		{q: Query{Datasource: "prometheus", Kind: KindLabelValues, Expr: `dash_test_gauge`, Label: "vehicle"}, empty: true},
		{q: Query{Datasource: "prometheus", Kind: KindRange, Expr: `dash_test_gauge{profile="$nope"}`}, err: "no value for nope"},
	}
	for _, c := range cases {
		expr, res, err := r.Run(context.Background(), c.q, vars)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.q.Expr, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", expr, err)
		case res.Empty() != c.empty:
			t.Errorf("%s: empty %t (%+v), want %t", expr, res.Empty(), res, c.empty)
		case c.nanOnly && res.Series == 0:
			t.Errorf("%s: no series, want series of NaN", expr)
		case !c.empty && res.Points < c.minPoints:
			t.Errorf("%s: %d points, want at least %d", expr, res.Points, c.minPoints)
		}
	}
	// A variable whose values lack the value chosen fails the check.
	o := Outcome{Query: Query{Kind: KindLabelValues, Variable: "profile"}, Result: Result{Series: 1, Points: 1, Values: []string{"orin-lan"}}}
	if why := o.Failed(vars); !strings.Contains(why, `lack "xavier-lan"`) {
		t.Errorf("Failed: %q", why)
	}
	// Several values chosen (a regex alternation): each must be among them.
	multi := Outcome{Query: Query{Kind: KindLabelValues, Variable: "control"}, Result: Result{Series: 1, Points: 1, Values: []string{"av-001", "av-002", "av-003"}}}
	if why := multi.Failed(map[string]string{"control": "av-001|av-003"}); why != "" {
		t.Errorf("Failed with both values present: %q", why)
	}
	if why := multi.Failed(map[string]string{"control": "av-001|av-004"}); !strings.Contains(why, `lack "av-004"`) {
		t.Errorf("Failed with av-004 absent: %q", why)
	}
}
