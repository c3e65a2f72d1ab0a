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

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/dashboards"
	"github.com/nettune/nettune/test/framework/testenv"
)

// The vehicle whose agents revert and whose host drifts: the dashboards are
// checked with it selected.
const (
	revertVehicle = "av-003"
	blockedHost   = "xavier-c" // refuses new connections to its probe port
	driftHost     = "xavier-a"
	agentProbe    = "9102" // the agents' default --probe-port
)

// iptables runs iptables inside a host's namespace.
func iptables(netns string, args ...string) error {
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns, "iptables"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s in %s: %w\n%s", strings.Join(args, " "), netns, err, out)
	}
	return nil
}

// testRevert: one host of the canary vehicle refuses new connections to its
// probe port (a firewall rule, as a misconfigured host would), so the post-apply
// connect probe of its two peers fails: their agents undo the apply on the
// host by themselves, report RolledBack, and the controller, with a failure
// budget of 0, rolls the rollout back to the stable revision.
func testRevert(t *testing.T) {
	stable := getProfile(t).Status.StableRevision
	netns := f.Vehicles[revertVehicle].Host(blockedHost).Netns
	rule := []string{"INPUT", "-p", "tcp", "--syn", "--dport", agentProbe, "-j", "REJECT", "--reject-with", "tcp-reset"}
	if err := iptables(netns, append([]string{"-A"}, rule...)...); err != nil {
		t.Fatal(err)
	}
	blocked := true
	unblock := func() {
		if blocked {
			blocked = false
			if err := iptables(netns, append([]string{"-D"}, rule...)...); err != nil {
				t.Error(err)
			}
		}
	}
	defer unblock()
	peers := fmt.Sprintf(`node=~"%s|%s"`, fleet.NodeName(revertVehicle, "xavier-a"), fleet.NodeName(revertVehicle, "xavier-b"))
	before := testenv.Prometheus{Prometheus: f.Prometheus}.WaitForQuery(t, `sum(nettune_agent_reverts_total{`+peers+`})`, 30*time.Second)

	began := time.Now()
	edit(t, func(p *v1alpha1.NetTuningProfile) {
		p.Spec.Defaults.Ssthresh = ptr(int32(26))
		p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{revertVehicle}}
		p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}}
		p.Spec.Rollout.FailureBudget = ptr(intstr.FromInt32(0))
	})
	p := waitProfile(t, 2*time.Minute, "rolled back on the failure budget", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack && p.Status.FailedRevision == revision.Name(p)
	})
	t.Logf("kubectl edit -> rolled back: %s", time.Since(began).Round(time.Millisecond))
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Reason != "FailureBudgetExceeded" || !strings.Contains(c.Message, revertVehicle) {
		t.Errorf("RolledBack condition %+v, want FailureBudgetExceeded naming %s", c, revertVehicle)
	} else {
		t.Logf("RolledBack: %s", c.Message)
	}
	// Both peers of the blocked host reverted on their own, for the probe.
	got := testenv.Prometheus{Prometheus: f.Prometheus}.WaitForQuery(t, fmt.Sprintf(`sum(nettune_agent_reverts_total{%s}) >= %g`, peers, before+2), 30*time.Second)
	t.Logf("agent reverts on %s: %g -> %g", peers, before, got)
	for _, host := range []string{"xavier-a", "xavier-b"} {
		node := fleet.NodeName(revertVehicle, host)
		out, err := f.Kubectl(context.Background(), "get", "events", "-A", "--field-selector", "reason=RolledBack,involvedObject.name="+node,
			"-o", "jsonpath={.items[*].message}")
		if err != nil || !strings.Contains(out, "probe failed") || !strings.Contains(out, blockedHost) {
			t.Errorf("%s: RolledBack events %q (%v), want the failed probe to %s", node, out, err, blockedHost)
		} else {
			t.Logf("%s: %s", node, out)
		}
	}
	waitFor(t, time.Minute, "every node back on "+stable, func() bool { return allVerified(t, stable) })
	unblock()
}

// testDrift: a route of a tuned host is changed behind the agent's back
// (`ip route change` without the metrics, as a hand-typed command or a DHCP
// client would); the agent re-tunes it and counts the repair.
func testDrift(t *testing.T) {
	v := f.Vehicles[revertVehicle]
	h, peer := v.Host(driftHost), v.Host("xavier-b")
	node := fleet.NodeName(revertVehicle, driftHost)
	want := "cwnd lock 40" // the stable revision, v1
	before := testenv.Prometheus{Prometheus: f.Prometheus}.WaitForQuery(t, `sum(nettune_agent_drift_repairs_total{node="`+node+`"})`, 30*time.Second)
	routeTo := func() string {
		out, err := f.Routes(revertVehicle, driftHost)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, peer.Addr.String()+" ") {
				return line
			}
		}
		return ""
	}
	if r := routeTo(); !strings.Contains(r, want) {
		t.Fatalf("route to %s before the drift: %q, want %q", peer.Addr, r, want)
	}
	if out, err := exec.Command("ip", "-n", h.Netns, "route", "change", peer.Addr.String(), "dev", h.Dev, "proto", "static", "scope", "link").CombinedOutput(); err != nil {
		t.Fatalf("ip route change: %v\n%s", err, out)
	}
	began := time.Now()
	waitFor(t, 30*time.Second, "the route re-tuned", func() bool { return strings.Contains(routeTo(), want) })
	t.Logf("route to %s changed without metrics -> re-tuned: %s (%s)", peer.Addr, time.Since(began).Round(time.Millisecond), routeTo())
	got := testenv.Prometheus{Prometheus: f.Prometheus}.WaitForQuery(t, fmt.Sprintf(`sum(nettune_agent_drift_repairs_total{node="%s"}) >= %g`, node, before+1), 30*time.Second)
	t.Logf("drift repairs on %s: %g -> %g", node, before, got)
}

// positive are queries whose largest value must be above 0 after the run,
// not merely present: by dashboard file and `"panel title" target X`.
var positive = []struct{ file, panel string }{
	{"rollout-health.json", `"Rollbacks" target A`},
	{"rollout-health.json", `"Agent reverts" target A`},
	{"rollout-health.json", `"Vehicles per revision" target A`},
	{"vehicle.json", `"Reverts and drift repairs in range" target A`},
	{"vehicle.json", `"Reverts and drift repairs in range" target B`},
	{"vehicle.json", `"Drift repairs" target A`},
	{"vehicle.json", `"Applies in range" target A`},
}

// testDashboards runs every query of the chart's dashboards — panel
// targets, annotations, template variables — against the fleet's Loki and
// Prometheus over the whole run, as Grafana would with profile xavier-lan,
// revision (the canary) rev, the vehicle that reverted and drifted and its
// drifted host selected; each must return data, and each variable's values
// must include the value chosen.
func testDashboards(t *testing.T, rev string) {
	if rev == "" {
		t.Skip("the good rollout did not complete: no canary revision to select")
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	all, err := dashboards.LoadAll(root)
	if err != nil {
		t.Fatal(err)
	}
	// The experiment dashboard has data only once an experiment ran:
	// TestExperiment checks it.
	var ds []*dashboards.Dashboard
	for _, d := range all {
		if filepath.Base(d.Path) != experimentDashboard {
			ds = append(ds, d)
		}
	}
	if len(ds) < 2 {
		t.Fatalf("%d dashboards in %s", len(ds), dashboards.Dir)
	}
	node := fleet.NodeName(revertVehicle, driftHost)
	// What the annotations show has reached Loki (the shippers batch for 1s).
	for _, q := range []string{
		`{job="nettune-controller", profile="` + profile + `"} | json | event="RolledBack" | reason="FailureBudgetExceeded"`,
		`{job="nettune-agent", vehicle="` + revertVehicle + `", node="` + node + `"} | json | event="reverted"`,
		`{job="nettune-agent", vehicle="` + revertVehicle + `", node="` + node + `"} | json | event="drift_repaired"`,
	} {
		testenv.Loki{Loki: f.Loki}.WaitForCount(t, q, 1, 30*time.Second)
	}

	// As Grafana would: Loki through the gateway with a tenant and basic
	// auth, Prometheus with TLS and basic auth.
	r := &dashboards.Runner{LokiURL: f.LokiAddress(), PrometheusURL: f.Prometheus.URL, Client: f.QueryClient(), Start: fleetUp, End: time.Now(), Step: 10 * time.Second}
	vars := r.Vars(time.Second) // internal/stack's Prometheus scrapes every second
	vars["profile"], vars["revision"], vars["vehicle"], vars["node"] = profile, rev, revertVehicle, node
	began := time.Now()
	outcomes, err := r.RunAll(context.Background(), ds, vars)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)

	kinds := map[string]int{}
	nonEmpty := 0
	for _, o := range outcomes {
		kinds[o.Query.Datasource+" "+o.Query.Kind]++
		if why := o.Failed(vars); why != "" {
			t.Errorf("%s: %s\n    query: %s", o.Query.Where, why, o.Expr)
			continue
		}
		nonEmpty++
		t.Logf("ok %s: %d series, %d points, %s", o.Query.Where, o.Result.Series, o.Result.Points, o.Took.Round(time.Millisecond))
	}
	for _, p := range positive {
		matched := false
		for _, o := range outcomes {
			if strings.HasPrefix(o.Query.Where, p.file+" ") && strings.HasSuffix(o.Query.Where, p.panel) {
				matched = true
				if o.Err == nil && !o.Result.Empty() && !(o.Result.Max > 0) {
					t.Errorf("%s: largest value %g, want > 0\n    query: %s", o.Query.Where, o.Result.Max, o.Expr)
				}
			}
		}
		if !matched {
			t.Errorf("%s has no panel %s (renamed? update the positive list)", p.file, p.panel)
		}
	}
	t.Logf("%d dashboard queries run over %s of the run (%v) in %s: %d returned data; variables %v",
		len(outcomes), r.End.Sub(r.Start).Round(time.Second), kinds, took.Round(time.Millisecond), nonEmpty,
		map[string]string{"profile": vars["profile"], "revision": vars["revision"], "vehicle": vars["vehicle"], "node": vars["node"]})
}

// experimentDashboard is the chart's dashboard of one experiment's arms.
const experimentDashboard = "experiment.json"

// testExperimentDashboard runs every query of the experiment dashboard over
// the experiment's run, as Grafana would with the experiment, its base
// profile and its control vehicles selected: each must return data and each
// variable's values must include the value chosen; the cohorts, the
// judged messages and the bad arm's share of messages over the judge's
// threshold must be above 0.
func testExperimentDashboard(t *testing.T, x *v1alpha1.NetTuningExperiment, began time.Time, threshold time.Duration) {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboards.Load(filepath.Join(root, dashboards.Dir, experimentDashboard))
	if err != nil {
		t.Fatal(err)
	}
	var control []string
	for _, a := range x.Status.Arms {
		if a.Name != v1alpha1.ControlArm {
			continue
		}
		for _, c := range a.Cohorts {
			control = append(control, c.Vehicles...)
		}
	}
	if len(control) == 0 {
		t.Fatalf("the experiment has no control vehicles: %+v", x.Status.Arms)
	}
	// What the annotations show has reached Loki (the shippers batch for 1s).
	testenv.Loki{Loki: f.Loki}.WaitForCount(t, `{job="nettune-controller", experiment="`+x.Name+`"} | json | event="ArmStopped"`, 1, 30*time.Second)
	r := &dashboards.Runner{LokiURL: f.LokiAddress(), PrometheusURL: f.Prometheus.URL, Client: f.QueryClient(), Start: began, End: time.Now(), Step: 5 * time.Second}
	vars := r.Vars(time.Second)
	// A multi-value variable with several values chosen is a regex.
	vars["experiment"], vars["base"], vars["control"] = x.Name, x.Spec.Profile, strings.Join(control, "|")
	outcomes, err := r.RunAll(context.Background(), []*dashboards.Dashboard{d}, vars)
	if err != nil {
		t.Fatal(err)
	}
	slowTarget := fmt.Sprintf("> %d ms", threshold.Milliseconds())
	positive := map[string]bool{`"Arms and cohorts" target A`: false, `"Messages judged per arm" target A`: false}
	for _, o := range outcomes {
		// Failed checks each control vehicle among the control variable's
		// values.
		if why := o.Failed(vars); why != "" {
			t.Errorf("%s: %s\n    query: %s", o.Query.Where, why, o.Expr)
			continue
		}
		for p := range positive {
			if strings.HasSuffix(o.Query.Where, p) {
				positive[p] = true
				if !(o.Result.Max > 0) {
					t.Errorf("%s: largest value %g, want > 0\n    query: %s", o.Query.Where, o.Result.Max, o.Expr)
				}
			}
		}
		if strings.Contains(o.Query.Where, `"Latency CCDF per arm"`) && strings.Contains(o.Expr, `profile=~"`) &&
			strings.Contains(o.Expr, fmt.Sprintf("latency_ms > %d ", threshold.Milliseconds())) {
			positive[slowTarget] = true
			if !(o.Result.Max > 0) {
				t.Errorf("%s: the arms' share over the judge's %s is %g, want > 0 (the bad arm was stopped for it)\n    query: %s", o.Query.Where, threshold, o.Result.Max, o.Expr)
			}
		}
		t.Logf("ok %s: %d series, %d points, max %g, %s", o.Query.Where, o.Result.Series, o.Result.Points, o.Result.Max, o.Took.Round(time.Millisecond))
	}
	for p, seen := range positive {
		if !seen {
			t.Errorf("%s has no query %s (renamed? update the test)", experimentDashboard, p)
		}
	}
}
