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
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/test/framework/testenv"
)

// lokiLog ships the controller's event lines to a test Loki, as the
// controller's shipper does.
type lokiLog struct {
	t     *testing.T
	loki  *testenv.Loki
	lines int
}

func (l *lokiLog) Add(labels map[string]string, at time.Time, line string) {
	l.loki.Push(l.t, labels, []testenv.LokiEntry{{Time: at, Line: line}})
	l.lines++
}

// TestRolloutAnnotationsFindTheirEvents: the rollout health dashboard's
// annotations of a rollout's events — canary started, step promoted, rolled
// back, paused — run against a real Loki holding the event lines the
// controller ships (written by controllers/eventlog) and a real Prometheus
// scraping the phase gauge, each find the events of their kind of the
// profile chosen, and nothing else.
func TestRolloutAnnotationsFindTheirEvents(t *testing.T) {
	l := testenv.StartLoki(t)
	// The controller's phase gauge (controllers/profile): xavier-lan is
	// paused, orin-lan is not.
	reg := prometheus.NewRegistry()
	phase := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nettune_rollout_phase", Help: "1 for the profile's current rollout phase"},
		[]string{"profile", "phase"})
	for _, ph := range []string{v1alpha1.PhaseProgressing, v1alpha1.PhasePaused, v1alpha1.PhaseHealthy, v1alpha1.PhaseRolledBack} {
		phase.WithLabelValues("xavier-lan", ph).Set(0)
		phase.WithLabelValues("orin-lan", ph).Set(0)
	}
	phase.WithLabelValues("xavier-lan", v1alpha1.PhasePaused).Set(1)
	phase.WithLabelValues("orin-lan", v1alpha1.PhaseProgressing).Set(1)
	reg.MustRegister(phase)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	p := testenv.StartPrometheus(t, strings.TrimPrefix(srv.URL, "http://"))

	// Two profiles' rollouts, as the reconciler announces them.
	log := &lokiLog{t: t, loki: l}
	began := time.Now().Add(-2 * time.Minute)
	at := began
	emit := func(name, phase, reason string, warning bool, msg string) {
		pr := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
		pr.Status.CurrentRevision, pr.Status.StableRevision, pr.Status.Phase = name+"-2", name+"-1", phase
		pr.Status.CurrentStep = new(int32(1))
		if reason == v1alpha1.ReasonRolledBack {
			pr.Status.FailedRevision = name + "-2"
			pr.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionRolledBack, Status: metav1.ConditionTrue,
				Reason: v1alpha1.ReasonAnalysisFailed, Message: msg}}
		}
		at = at.Add(3 * time.Second)
		eventlog.Rollout(log, pr, planner.Event{Reason: reason, Warning: warning, Message: msg}, at)
	}
	emit("xavier-lan", v1alpha1.PhaseProgressing, "RolloutStarted", false, "revision xavier-lan-2: canary vehicles av-001")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "CanaryTruncated", true, "the canary selects 600 vehicles")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "StepAdvanced", false, "revision xavier-lan-2: step 1/3 analysis slow-messages")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "AnalysisFailedDryRun", true, "analysis p99 failed (dry run, not acted on)")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "Promoted", false, "step 1 (pause) promoted by the user")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "StepAdvanced", false, "revision xavier-lan-2: step 2/3 setVehicles 100%")
	emit("xavier-lan", v1alpha1.PhaseHealthy, "RolloutComplete", false, "revision xavier-lan-2 is stable on 4 vehicle(s)")
	emit("xavier-lan", v1alpha1.PhaseProgressing, "RolloutRestarted", false, "revision xavier-lan-3 replaces xavier-lan-2 mid-rollout")
	emit("xavier-lan", v1alpha1.PhaseRolledBack, v1alpha1.ReasonRolledBack, true, "AnalysisFailed: analysis slow-messages at step 0 failed")
	emit("orin-lan", v1alpha1.PhaseProgressing, "RolloutStarted", false, "revision orin-lan-2: canary vehicles av-009")
	emit("orin-lan", v1alpha1.PhaseProgressing, "StepAdvanced", false, "revision orin-lan-2: step 1/2 setVehicles 50%")
	emit("orin-lan", v1alpha1.PhaseRolledBack, v1alpha1.ReasonRolledBack, true, "AnalysisFailed: analysis p99 at step 1 failed")
	l.WaitForCount(t, `{job="`+eventlog.ControllerJob+`"}`, log.lines, 30*time.Second)
	p.WaitForQuery(t, `count_over_time(nettune_rollout_phase{phase="Paused"}[1m]) >= 3`, 30*time.Second)

	d := loadChart(t)["rollout-health.json"]
	qs, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	annotation := func(name string) Query {
		for _, q := range qs {
			if q.Where == fmt.Sprintf("rollout-health.json annotation %q", name) {
				return q
			}
		}
		t.Fatalf("rollout-health.json has no annotation %q", name)
		return Query{}
	}
	r := &Runner{LokiURL: l.URL, PrometheusURL: p.URL, Start: began.Add(-time.Minute), End: time.Now(), Step: 5 * time.Second}
	run := func(q Query, profile string) Result {
		t.Helper()
		vars := r.Vars(time.Second)
		vars["profile"] = profile
		expr, res, err := r.Run(context.Background(), q, vars)
		if err != nil {
			t.Fatalf("%s: %v\n    query: %s", q.Where, err, expr)
		}
		return res
	}

	// The events kinds, by the annotation that draws them, and the event
	// lines of xavier-lan each returns.
	for _, c := range []struct {
		kind, annotation string
		events           []string // every event line returned, sorted
	}{
		{"canary started", "Rollout milestones", []string{"Promoted", "RolloutComplete", "RolloutRestarted", "RolloutStarted"}},
		{"step promoted", "Steps promoted", []string{"StepAdvanced", "StepAdvanced"}},
		{"rolled back", "Rollbacks", []string{"RolledBack"}},
	} {
		q := annotation(c.annotation)
		if q.Datasource != "loki" || q.Kind != KindLogs {
			t.Errorf("%s: a %s %s query, want Loki log lines", q.Where, q.Datasource, q.Kind)
			continue
		}
		var events []string
		for _, lb := range run(q, "xavier-lan").Labels {
			if lb["profile"] != "xavier-lan" {
				t.Errorf("%s (%s): a line of profile %q", q.Where, c.kind, lb["profile"])
			}
			events = append(events, lb["event"])
		}
		sort.Strings(events)
		if !slices.Equal(events, c.events) {
			t.Errorf("%s (%s): events %v, want %v", q.Where, c.kind, events, c.events)
		} else {
			t.Logf("%s (%s): %v", q.Where, c.kind, events)
		}
	}

	// Paused: Grafana draws a region where the value is above 0.
	q := annotation("Paused")
	if q.Datasource != "prometheus" {
		t.Fatalf("%s: a %s query, want Prometheus", q.Where, q.Datasource)
	}
	if res := run(q, "xavier-lan"); res.Empty() || !(res.Max > 0) {
		t.Errorf("%s: paused xavier-lan: %+v, want a value above 0", q.Where, res)
	} else {
		t.Logf("%s (paused): xavier-lan %d points, max %g", q.Where, res.Points, res.Max)
	}
	if res := run(q, "orin-lan"); res.Max > 0 {
		t.Errorf("%s: orin-lan, never paused: largest value %g, want none above 0", q.Where, res.Max)
	}
}
