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
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nettune/nettune/internal/localcp"
)

func loadChart(t *testing.T) map[string]*Dashboard {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := LoadAll(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Dashboard{}
	for _, d := range ds {
		out[filepath.Base(d.Path)] = d
	}
	for _, want := range []string{"rollout-health.json", "vehicle.json", "experiment.json"} {
		if out[want] == nil {
			t.Fatalf("%s/%s is missing", Dir, want)
		}
	}
	return out
}

// TestChartDashboardsAreValid: every dashboard of the chart passes Validate
// and every query of it can be listed (a datasource and a kind each).
func TestChartDashboardsAreValid(t *testing.T) {
	for name, d := range loadChart(t) {
		for _, p := range Validate(d) {
			t.Errorf("%s: %s", name, p)
		}
		qs, err := d.Queries()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		kinds := map[string]int{}
		for _, q := range qs {
			kinds[q.Datasource+" "+q.Kind]++
		}
		t.Logf("%s (uid %s): %d panels, %d queries %v, %d annotations, %d variables", name, d.UID, len(d.AllPanels()), len(qs), kinds,
			len(d.Annotations.List), len(d.Templating.List))
	}
}

// TestDashboardsShowWhatTheyPromise: the rollout, vehicle and experiment dashboards
// query the metrics and streams they are for, with the variables they offer.
func TestDashboardsShowWhatTheyPromise(t *testing.T) {
	chart := loadChart(t)
	want := map[string][]string{
		"rollout-health.json": {
			"nettune_rollout_step", "nettune_rollout_phase", "nettune_rollout_vehicles", "nettune_agent_revision_info",
			"nettune_probe_latency_seconds_bucket", "nettune_analysis_value", "nettune_rollbacks_total", "nettune_agent_reverts_total",
			`quantile_over_time(0.5,`, `quantile_over_time(0.99,`, `quantile_over_time(0.999,`, `quantile_over_time(0.9999,`,
			`histogram_quantile(0.5,`, `histogram_quantile(0.99,`, `histogram_quantile(0.999,`, `histogram_quantile(0.9999,`,
			`unwrap latency_ms`, `revision="$revision"`, `revision!="$revision"`,
			`{job="nettune-controller", profile="$profile"}`, `event="RolledBack"`, `{job="nettune-agent"`, `reverted`,
			`event=~"RolloutStarted|RolloutRestarted|Promoted|RolloutComplete"`, `event="StepAdvanced"`, `phase="Paused"`,
		},
		"vehicle.json": {
			"nettune_tcp_rtt_seconds", "nettune_tcp_rto_seconds", "nettune_tcp_retrans_segments_total", "nettune_tcp_snd_cwnd",
			"nettune_tcp_rto_timeouts_total", "nettune_tcp_dsack_dups_total",
			"nettune_agent_drift_repairs_total", "nettune_agent_revision_info", "nettune_agent_applies_total", "nettune_agent_reverts_total",
			`event="drift_repaired"`, "nettune_probe_latency_seconds_bucket", `{job="nettune-probe", vehicle="$vehicle", node=~"$node"}`,
		},
		"experiment.json": {
			"nettune_experiment_phase", "nettune_experiment_arm_vehicle", "nettune_experiment_arm_messages", "nettune_experiment_arm_effect_points",
			`{job="nettune-probe", profile=~"$experiment-.+"`, `{job="nettune-probe", profile="$base", vehicle=~"$control"`,
			`latency_ms > 5 `, `latency_ms > 200 `, `quantile_over_time(0.999,`,
			"nettune_tcp_rto_timeouts_total", "nettune_tcp_dsack_dups_total", `on (vehicle) group_left (arm)`,
			`{job="nettune-controller", experiment="$experiment"}`,
		},
	}
	wantVars := map[string][]string{
		"rollout-health.json": {"DS_PROMETHEUS", "DS_LOKI", "profile", "revision", "vehicle"},
		"vehicle.json":        {"DS_PROMETHEUS", "DS_LOKI", "vehicle", "node"},
		"experiment.json":     {"DS_PROMETHEUS", "DS_LOKI", "experiment", "base", "control"},
	}
	for name, d := range chart {
		qs, err := d.Queries()
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, q := range qs {
			all.WriteString(q.Expr + "\n")
		}
		for _, s := range want[name] {
			if !strings.Contains(all.String(), s) {
				t.Errorf("%s: no query contains %s", name, s)
			}
		}
		var vars []string
		for _, v := range d.Templating.List {
			vars = append(vars, v.Name)
			if v.Type == "query" && !strings.HasPrefix(v.QueryString(), "label_values(") {
				t.Errorf("%s: variable %s is not a label_values() query: %s", name, v.Name, v.QueryString())
			}
		}
		if !slices.Equal(vars, wantVars[name]) {
			t.Errorf("%s: variables %v, want %v", name, vars, wantVars[name])
		}
	}
}

// TestValidateCatches: each rule of Validate reports a dashboard that breaks
// it (so a passing TestChartDashboardsAreValid means something).
func TestValidateCatches(t *testing.T) {
	good := loadChart(t)["rollout-health.json"]
	if p := Validate(good); len(p) != 0 {
		t.Fatalf("the starting point is not valid: %v", p)
	}
	firstPanel := func(d *Dashboard) *Panel {
		for i := range d.Panels {
			if d.Panels[i].Type != "row" {
				return &d.Panels[i]
			}
		}
		t.Fatal("no panel")
		return nil
	}
	cases := []struct {
		name   string
		mutate func(d *Dashboard)
		want   string
	}{
		{"no uid", func(d *Dashboard) { d.UID = "" }, "no uid"},
		{"no title", func(d *Dashboard) { d.Title = "" }, "no title"},
		{"old schema", func(d *Dashboard) { d.SchemaVersion = 27 }, "schemaVersion 27"},
		{"no Loki datasource variable", func(d *Dashboard) { d.Templating.List = d.Templating.List[:1:1] }, "no datasource variable DS_LOKI"},
		{"fixed datasource uid", func(d *Dashboard) {
			firstPanel(d).Datasource = json.RawMessage(`{"type":"prometheus","uid":"P1809F7CD0C75ACF3"}`)
		}, `datasource uid "P1809F7CD0C75ACF3" is not a declared datasource variable`},
		{"legacy string datasource", func(d *Dashboard) { firstPanel(d).Datasource = json.RawMessage(`"Prometheus"`) }, "is not an object"},
		{"datasource type mismatch", func(d *Dashboard) {
			firstPanel(d).Datasource = json.RawMessage(`{"type":"loki","uid":"${DS_PROMETHEUS}"}`)
		}, `datasource type "loki" but ${DS_PROMETHEUS} is a "prometheus" datasource`},
		{"target of another datasource", func(d *Dashboard) {
			firstPanel(d).Targets[0].Datasource = json.RawMessage(`{"type":"loki","uid":"${DS_LOKI}"}`)
		}, "a loki target in a prometheus panel"},
		{"duplicate panel id", func(d *Dashboard) { *d.Panels[2].ID = *d.Panels[1].ID }, "id also used by"},
		{"no gridPos", func(d *Dashboard) { firstPanel(d).GridPos = nil }, "no gridPos"},
		{"too wide", func(d *Dashboard) { firstPanel(d).GridPos.W = 30 }, "outside the 24-column grid"},
		{"overlap", func(d *Dashboard) { *d.Panels[2].GridPos = *d.Panels[1].GridPos }, "overlaps panel"},
		{"unknown variable in a query", func(d *Dashboard) {
			firstPanel(d).Targets[0].Expr = `nettune_rollout_step{profile="$profil"}`
		}, "$profil is not a variable"},
		{"unknown variable in braces", func(d *Dashboard) {
			firstPanel(d).Targets[0].Expr += ` or nettune_rollout_step{profile="${nope:regex}"}`
		}, "$nope is not a variable"},
		{"unknown variable in a title", func(d *Dashboard) { firstPanel(d).Title = "Phase of [[profiles]]" }, "$profiles is not a variable"},
		{"query without variables", func(d *Dashboard) { firstPanel(d).Targets[0].Expr = `nettune_rollout_step` }, "uses no template variable"},
		{"no expr", func(d *Dashboard) { firstPanel(d).Targets[0].Expr = " " }, "no expr"},
		{"no targets", func(d *Dashboard) { firstPanel(d).Targets = nil }, "no targets"},
		{"repeated refId", func(d *Dashboard) {
			p := firstPanel(d)
			p.Targets = append(p.Targets, p.Targets[0])
		}, "missing or repeated refId"},
		{"variable used before it is declared", func(d *Dashboard) {
			for i := range d.Templating.List {
				if d.Templating.List[i].Name == "profile" {
					d.Templating.List[i].Query = json.RawMessage(`"label_values(nettune_rollout_phase{profile=\"$revision\"}, profile)"`)
				}
			}
		}, "variable profile query: $revision is not a variable"},
		{"variable of a fixed datasource", func(d *Dashboard) {
			for i := range d.Templating.List {
				if d.Templating.List[i].Name == "profile" {
					d.Templating.List[i].Datasource = json.RawMessage(`{"type":"prometheus","uid":"prom-1"}`)
				}
			}
		}, `variable profile: datasource uid "prom-1"`},
		{"unused variable", func(d *Dashboard) {
			d.Templating.List = append(d.Templating.List, Variable{Name: "peer", Type: "query",
				Query: json.RawMessage(`"label_values(nettune_probe_messages_total, peer)"`), Datasource: json.RawMessage(`{"type":"prometheus","uid":"${DS_PROMETHEUS}"}`)})
		}, "variable peer is used by no panel query"},
		{"duplicate variable", func(d *Dashboard) { d.Templating.List = append(d.Templating.List, d.Templating.List[2]) }, "declared twice"},
		{"annotation of an unknown datasource", func(d *Dashboard) {
			d.Annotations.List[0].Datasource = json.RawMessage(`{"type":"loki","uid":"${DS_LOGS}"}`)
		}, `annotation "Rollbacks": datasource uid "${DS_LOGS}"`},
		{"annotation with an unknown variable", func(d *Dashboard) {
			d.Annotations.List[0].Expr = `{job="nettune-controller", profile="$prof"}`
		}, "$prof is not a variable"},
		{"annotation without expr", func(d *Dashboard) { d.Annotations.List[0].Expr = "" }, `annotation "Rollbacks": no expr`},
		{"annotation on some panels only", func(d *Dashboard) {
			d.Annotations.List[0].Filter = json.RawMessage(`{"exclude":false,"ids":[2,3]}`)
		}, `annotation "Rollbacks": a panel filter`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(good)
			if err != nil {
				t.Fatal(err)
			}
			d := &Dashboard{}
			if err := json.Unmarshal(b, d); err != nil {
				t.Fatal(err)
			}
			c.mutate(d)
			problems := Validate(d)
			for _, p := range problems {
				if strings.Contains(p, c.want) {
					return
				}
			}
			t.Errorf("want a problem containing %q, got %q", c.want, problems)
		})
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"profile": "xavier-lan", "node": "av-001-xavier-a", "__interval": "15s"}
	got, err := Substitute(`q{profile="$profile", node=~"${node}", n2=~"${node:regex}", x="[[profile]]"}[$__interval] $__intervalx`, map[string]string{
		"profile": vars["profile"], "node": vars["node"], "__interval": "15s", "__intervalx": "y",
	})
	if err != nil || got != `q{profile="xavier-lan", node=~"av-001-xavier-a", n2=~"av-001-xavier-a", x="xavier-lan"}[15s] y` {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := Substitute(`q{vehicle="$vehicle"}`, vars); err == nil || !strings.Contains(err.Error(), "vehicle") {
		t.Errorf("a missing variable: %v", err)
	}
	// LogQL templates and PromQL regexps are not variables.
	if refs := Refs(`{job="x"} | line_format "{{.event}}" | a=~"b$" | c="$$"`); len(refs) != 0 {
		t.Errorf("refs %v", refs)
	}
}
