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
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
)

// ccdfThresholds are the latencies (ms) at which the experiment dashboard
// reads each arm's latency CCDF: the share of messages slower than each.
var ccdfThresholds = []int{5, 10, 20, 50, 100, 200}

// experiment is one NetTuningExperiment's arms side by side: phase and
// cohorts, the judge's slow share and each variant's effect against the
// control with its interval, each arm's latency CCDF and percentiles from
// the probe's samples, and the guard metrics (retransmission timeouts,
// spurious retransmissions) per arm.
func experiment() *dashboardBuilder {
	b := newBoard("nettune-experiment", "nettune / Experiment",
		"A NetTuningExperiment's arms side by side: the cohorts, the judge's slow share and each variant's effect against the control "+
			"(from the controller's status), each arm's latency CCDF and percentiles from the probe's Loki samples, and the guards "+
			"(retransmission timeouts, spurious retransmissions) from the agents' sock_diag metrics, joined to the arms by vehicle.",
		promVar("experiment", "Experiment", `label_values(nettune_experiment_phase, experiment)`, "The NetTuningExperiment."),
		promVar("base", "Base profile", `label_values(nettune_experiment_arm_vehicle{experiment="$experiment", arm="control"}, profile)`,
			"The experiment's base profile: the control runs on it."),
		multi(promVar("control", "Control vehicles", `label_values(nettune_experiment_arm_vehicle{experiment="$experiment", arm="control"}, vehicle)`,
			"The control cohort: the vehicles kept on the base profile for the experiment (others on the base are not in it)."), ""),
	)
	b.annotate(
		lokiAnnotation("Experiment events", "blue", `{job="nettune-controller", experiment="$experiment"} | json`,
			"{{event}}", "{{message}}", "event"),
	)
	const arm = `experiment="$experiment"`

	b.row("Experiment")
	place(b, statPanel("Phase", "The experiment's phase now.", "", common.BigValueTextModeName,
		promInstant(`max by (phase) (nettune_experiment_phase{`+arm+`}) == 1`, "{{phase}}")), 4, 6)
	place(b, tablePanel("Arms and cohorts", "Vehicles per arm and hardware model, with the profile each arm runs on and the arm's phase (Applying, Measuring, Stopped, Done).", "none",
		promTable(`count by (arm, profile, phase, hardware) (nettune_experiment_arm_vehicle{`+arm+`})`)), 20, 6)

	b.row("Judge: each arm against the control")
	place(b, timeseriesPanel("Slow share per arm", "The share of each arm's messages slower than the judge's threshold since measuring began, per hardware model, as the controller judged it (cumulative).", "percentunit", lines,
		promRange(`sum by (arm, hardware) (nettune_experiment_arm_messages{`+arm+`, kind="slow"}) / sum by (arm, hardware) (nettune_experiment_arm_messages{`+arm+`, kind="total"})`, "{{arm}} {{hardware}}")), 8, 8)
	place(b, dashed(timeseriesPanel("Effect against the control", "Each variant's slow share minus the control's, in percentage points (positive: worse), with its interval at the judge's confidence (dashed): a variant is better or worse only when the whole interval is.", "none", lines,
		promRange(`max by (arm, hardware, bound) (nettune_experiment_arm_effect_points{`+arm+`})`, "{{arm}} {{hardware}} {{bound}}")), ".*(low|high)$"), 8, 8)
	place(b, timeseriesPanel("Messages judged per arm", "Messages each arm has been judged on since measuring began (the evidence behind the effect).", "none", lines,
		promRange(`sum by (arm, hardware) (nettune_experiment_arm_messages{`+arm+`, kind="total"})`, "{{arm}} {{hardware}}")), 8, 8)

	// The variants' samples carry their arm profile (<experiment>-<variant>);
	// the control's carry the base profile, on the control's vehicles.
	const variants = `job="nettune-probe", profile=~"$experiment-.+"`
	const control = `job="nettune-probe", profile="$base", vehicle=~"$control"`
	b.row("Latency per arm (Loki probe samples)")
	var ccdf []query
	for _, ms := range ccdfThresholds {
		for _, sel := range []struct{ selector, legend string }{{variants, "{{profile}}"}, {control, "control"}} {
			ccdf = append(ccdf, lokiInstant(exceedance(sel.selector, ms), fmt.Sprintf("> %d ms %s", ms, sel.legend)))
		}
	}
	place(b, tablePanel("Latency CCDF per arm", fmt.Sprintf("The share of each arm's messages slower than %v ms over the time range (choose the experiment's measurement): the arms' tails side by side; the control's row is labeled control.", ccdfThresholds), "percentunit",
		ccdf...), 12, 10)
	place(b, timeseriesPanel("p99.9 per arm", "The p99.9 message latency of each arm's samples, in windows of the interval.", "ms", lines,
		lokiRange(lokiQuantile("0.999", variants, "profile", "$__interval"), "{{profile}}"),
		lokiRange(lokiQuantile("0.999", control, "profile", "$__interval"), "control")), 12, 10)

	// The agents' TCP metrics carry vehicle; the arms come from the
	// controller's cohort series, one per vehicle and experiment.
	armOf := `* on (vehicle) group_left (arm) max by (vehicle, arm) (nettune_experiment_arm_vehicle{` + arm + `})`
	b.row("Guards per arm (sock_diag)")
	place(b, timeseriesPanel("Retransmission timeouts per arm", "RTO expiries per second on the arm's vehicles (each a message waiting at least rto_min; Linux 6.7+).", "none", lines,
		promRange(`sum by (arm) (sum by (vehicle) (rate(nettune_tcp_rto_timeouts_total[$__rate_interval])) `+armOf+`)`, "{{arm}}")), 12, 7)
	place(b, timeseriesPanel("Spurious retransmissions per arm", "Segments the peers received twice (D-SACK) per second on the arm's vehicles: retransmissions that were not needed, the cost of an rto_min below the delayed-ACK time (Linux 5.10+).", "none", lines,
		promRange(`sum by (arm) (sum by (vehicle) (rate(nettune_tcp_dsack_dups_total[$__rate_interval])) `+armOf+`)`, "{{arm}}")), 12, 7)
	return b.dashboardBuilder
}

// exceedance is the share of the probe samples of selector slower than ms,
// per profile, over the dashboard's range: 0, not nothing, when none was.
func exceedance(selector string, ms int) string {
	all := fmt.Sprintf(`sum by (profile) (count_over_time({%s} [$__range]))`, selector)
	slow := fmt.Sprintf(`sum by (profile) (count_over_time({%s} | json latency_ms | latency_ms > %d [$__range]))`, selector, ms)
	return fmt.Sprintf(`(%s / %s) or (%s * 0)`, slow, all, all)
}
