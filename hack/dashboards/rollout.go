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

// quantiles are the latency percentiles shown side by side.
var quantiles = []struct {
	q     string
	title string
}{{"0.5", "p50"}, {"0.99", "p99"}, {"0.999", "p99.9"}, {"0.9999", "p99.99"}}

// lokiQuantile is a latency percentile (ms) of the probe samples of
// selector, by labels, over window.
func lokiQuantile(q, selector, by, window string) string {
	return fmt.Sprintf(`quantile_over_time(%s, {%s} | json latency_ms | unwrap latency_ms | __error__="" [%s]) by (%s)`, q, selector, window, by)
}

// promQuantile is a latency percentile (s) of the probe histogram of
// matchers, by labels.
func promQuantile(q, matchers, by string) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (%s, le) (rate(nettune_probe_latency_seconds_bucket{%s}[$__rate_interval])))`, q, by, matchers)
}

// Controller and agent event selectors.
const (
	rolloutEvents = `{job="nettune-controller", profile="$profile"} | json`
	agentEvents   = `{job="nettune-agent", vehicle=~"$vehicle"} | json`
	eventLine     = ` | line_format "{{.event}} {{.revision}}: {{.message}}"`
)

// rolloutHealth is one profile's rollout: phase and step, revisions and
// vehicles, canary against baseline latency, analyses, rollbacks and
// reverts.
func rolloutHealth() *dashboardBuilder {
	b := newBoard("nettune-rollout-health", "nettune / Rollout health",
		"A NetTuningProfile's rollout: phase and step, vehicles per revision and state, canary ($revision) against baseline "+
			"(every other revision of the profile) latency per destination host from the probe's Loki samples and Prometheus histogram, "+
			"the analyses against their thresholds, and as annotations the controller's rollout events (canary started, steps promoted, "+
			"paused, rolled back) and the agents' reverts.",
		promVar("profile", "Profile", `label_values(nettune_rollout_phase, profile)`, "The NetTuningProfile."),
		promVar("revision", "Canary revision", `label_values(nettune_agent_revision_info{profile="$profile"}, revision)`,
			"The revision compared (the canary); the baseline is every other revision of the profile."),
		multi(promVar("vehicle", "Vehicle", `label_values(nettune_agent_revision_info{profile="$profile"}, vehicle)`,
			"Vehicles whose latency and events are shown."), ".+"),
	)
	b.annotate(
		lokiAnnotation("Rollbacks", "red", rolloutEvents+` | event="RolledBack"`,
			"Rolled back: {{reason}}", "{{message}}", "event,reason"),
		// Canary started (RolloutStarted, RolloutRestarted: a new revision
		// on the canary vehicles), a pause or analysis step promoted by the
		// user, the revision stable.
		lokiAnnotation("Rollout milestones", "blue", rolloutEvents+` | event=~"RolloutStarted|RolloutRestarted|Promoted|RolloutComplete"`,
			"{{event}} {{revision}}", "{{message}}", "event"),
		lokiAnnotation("Agent reverts", "orange", agentEvents+` | event=~"reverted|refused"`,
			"{{event}} on {{node}}", "{{message}}", "event,vehicle,node"),
		// Every step the rollout moved past: its analysis passed, its pause
		// ran out or was promoted, its vehicles were updated.
		lokiAnnotation("Steps promoted", "green", rolloutEvents+` | event="StepAdvanced"`,
			"Step promoted: {{revision}}", "{{message}}", "event"),
		// A pause (a pause step, an inconclusive analysis,
		// spec.rollout.paused) drawn as a region from the phase gauge; the
		// controller's Paused and Resumed lines in Loki are single moments.
		// max_over_time keeps a pause shorter than the step.
		promAnnotation("Paused", "yellow", `max(max_over_time(nettune_rollout_phase{profile="$profile", phase="Paused"}[$__rate_interval]))`, "1m",
			"Rollout paused", "A pause step waiting for kubectl nettune promote, an inconclusive analysis, or spec.rollout.paused"),
	)

	b.row("Rollout")
	place(b, statPanel("Phase", "The profile's rollout phase now.", "", common.BigValueTextModeName,
		promInstant(`max by (phase) (nettune_rollout_phase{profile="$profile"}) == 1`, "{{phase}}")), 4, 4)
	place(b, statPanel("Step", "Index of the rollout step in progress (the number of steps once complete).", "none", common.BigValueTextModeValue,
		promInstant(`max(nettune_rollout_step{profile="$profile"})`, "step")), 3, 4)
	place(b, statPanel("Vehicles", "Vehicles of the profile by state, as the controller counts them.", "none", common.BigValueTextModeValueAndName,
		promInstant(`max by (state) (nettune_rollout_vehicles{profile="$profile"})`, "{{state}}")), 9, 4)
	place(b, statPanel("Rollbacks", "Rollbacks of the profile since the controller started, by reason.", "none", common.BigValueTextModeValueAndName,
		promInstant(`max by (reason) (nettune_rollbacks_total{profile="$profile"})`, "{{reason}}")), 4, 4)
	place(b, statPanel("Agent reverts", "Applies the agents of the selected vehicles undone on the host in the time range (failed verify or post-apply probe).", "none", common.BigValueTextModeValue,
		promInstant(`sum(increase(nettune_agent_reverts_total{vehicle=~"$vehicle"}[$__range]))`, "reverts")), 4, 4)

	place(b, stateTimeline("Phase", "The rollout phase over time.",
		promRange(`max by (phase) (nettune_rollout_phase{profile="$profile"})`, "{{phase}}")), 12, 6)
	place(b, timeseriesPanel("Step", "The rollout step over time.", "none", steps,
		promRange(`max(nettune_rollout_step{profile="$profile"})`, "step")), 12, 6)

	b.row("Revisions and vehicles")
	place(b, timeseriesPanel("Vehicles per revision", "Vehicles with at least one host on each revision of the profile, from the agents' committed (last-known-good) state: the revision timeline.", "none", stacked,
		promRange(`count by (revision) (group by (vehicle, revision) (nettune_agent_revision_info{profile="$profile", vehicle=~".+"}))`, "{{revision}}")), 12, 8)
	place(b, timeseriesPanel("Vehicles by state", "The controller's count of the profile's vehicles by state (total, updated, verified, unreachable, failed, deferred: waiting for their apply gate or a maintenance window).", "none", steps,
		promRange(`max by (state) (nettune_rollout_vehicles{profile="$profile"})`, "{{state}}")), 12, 8)
	place(b, tablePanel("Hosts per revision", "Hosts of the selected vehicles on each revision now.", "none",
		promTable(`count by (vehicle, revision) (nettune_agent_revision_info{profile="$profile", vehicle=~"$vehicle"})`)), 8, 8)
	place(b, logsPanel("Revision timeline", "The controller's rollout events: revisions started, steps, promotions, completions and rollbacks.",
		lokiLogs(rolloutEvents+` | event=~"RolloutStarted|RolloutRestarted|StepAdvanced|Promoted|RolloutComplete|RolledBack"`+
			` | line_format "{{.event}} {{.revision}} (stable {{.stable}}, step {{.step}}): {{.message}}"`)), 16, 8)

	const canary = `job="nettune-probe", profile="$profile", revision="$revision", vehicle=~"$vehicle"`
	const baseline = `job="nettune-probe", profile="$profile", revision!="$revision", vehicle=~"$vehicle"`
	b.row("Latency: canary ($revision) against baseline, Loki probe samples")
	for _, q := range quantiles {
		place(b, timeseriesPanel(q.title+" per destination host (Loki)",
			fmt.Sprintf("The %s message latency of the topic emulator's samples, by destination host, of the hosts on the canary revision and on every other revision, in windows of the interval.", q.title),
			"ms", lines,
			lokiRange(lokiQuantile(q.q, canary, "peer", "$__interval"), "canary → {{peer}}"),
			lokiRange(lokiQuantile(q.q, baseline, "peer", "$__interval"), "baseline → {{peer}}")), 6, 8)
	}
	place(b, tablePanel("Worst host pairs (p99.9 over the time range, Loki)", "The ten host pairs (node → peer) with the highest p99.9 over the time range, with their revision.", "ms",
		lokiInstant(`topk(10, `+lokiQuantile("0.999", `job="nettune-probe", profile="$profile", vehicle=~"$vehicle"`, "revision, vehicle, node, peer", "$__range")+`)`, "")), 24, 7)

	const canaryProm = `profile="$profile", revision="$revision", vehicle=~"$vehicle"`
	const baselineProm = `profile="$profile", revision!="$revision", vehicle=~"$vehicle"`
	b.row("Latency: canary ($revision) against baseline, Prometheus histogram")
	for _, q := range quantiles {
		place(b, timeseriesPanel(q.title+" per destination host (Prometheus)",
			fmt.Sprintf("The %s of nettune_probe_latency_seconds (buckets about 27 %% wide), by destination host, canary revision against every other revision.", q.title),
			"s", lines,
			promRange(promQuantile(q.q, canaryProm, "peer"), "canary → {{peer}}"),
			promRange(promQuantile(q.q, baselineProm, "peer"), "baseline → {{peer}}")), 6, 8)
	}

	b.row("Analysis")
	place(b, dashed(timeseriesPanel("Analysis values against thresholds", "The latest measurement of each analysis: canary and baseline values and the threshold the canary was held to (dashed).", "none", steps,
		promRange(`max by (analysis, series) (nettune_analysis_value{profile="$profile"})`, "{{analysis}} {{series}}")), ".*threshold.*"), 16, 8)
	place(b, timeseriesPanel("Judge: slow share per host pair", "A judge's latest share of messages slower than its threshold, per host pair, canary against baseline (the verdict compares them with a stated confidence; see docs/rollout.md).", "percentunit", steps,
		promRange(`max by (analysis, pair, cohort) (nettune_analysis_judge_slow_share{profile="$profile"})`, "{{analysis}} {{pair}} {{cohort}}")), 12, 8)
	place(b, timeseriesPanel("Judge: P(canary worse) per host pair", "The posterior probability that the canary's slow share exceeds its tolerance on each host pair; a rollback needs it above the pair's confidence and the rank test to agree.", "percentunit", steps,
		promRange(`max by (analysis, pair) (nettune_analysis_judge_probability{profile="$profile"})`, "{{analysis}} {{pair}}")), 12, 8)
	place(b, tablePanel("Measurements by result", "Analysis measurements since the controller started, by analysis and result (Successful, Failed, Inconclusive, Error).", "none",
		promTable(`max by (analysis, phase) (nettune_analysis_measurements_total{profile="$profile"})`)), 8, 8)

	b.row("Events")
	place(b, logsPanel("Rollout events (controller)", "Every rollout event of the profile, as the controller ships it to Loki.",
		lokiLogs(rolloutEvents+eventLine)), 12, 9)
	place(b, logsPanel("Agent reverts, refusals and drift repairs", "The agents of the selected vehicles: applies undone or refused, and items re-tuned after drift.",
		lokiLogs(agentEvents+` | event=~"reverted|refused|drift_repaired"`+` | line_format "{{.node}} {{.event}} {{.revision}}: {{.message}}"`)), 12, 9)
	place(b, timeseriesPanel("Agent events per interval", "Apply, verify, revert, refusal and drift-repair events of the selected vehicles' agents.", "none", bars,
		lokiRange(`sum by (event) (count_over_time(`+agentEvents+` [$__interval]))`, "{{event}}")), 24, 7)
	return b.dashboardBuilder
}

// nodeMatcher selects the chosen hosts in metrics that carry only node.
const nodeMatcher = `node=~"$node"`

// vehicle is one vehicle's hosts: revisions in force, applies and reverts,
// drift repairs, TCP state per tuned destination and latency per host pair.
func vehicle() *dashboardBuilder {
	b := newBoard("nettune-vehicle", "nettune / Vehicle",
		"One vehicle's hosts: the revision each has in force, applies, reverts and drift repairs, TCP state of the connections to every tuned destination "+
			"(sock_diag), and the probe's message latency per host pair.",
		promVar("vehicle", "Vehicle", `label_values(nettune_agent_applies_total, vehicle)`, "The vehicle."),
		multi(promVar("node", "Host", `label_values(nettune_agent_applies_total{vehicle="$vehicle"}, node)`, "Hosts (nodes) of the vehicle."), ""),
	)
	hostEvents := `{job="nettune-agent", vehicle="$vehicle", node=~"$node"} | json`
	b.annotate(
		lokiAnnotation("Agent reverts", "orange", hostEvents+` | event=~"reverted|refused"`, "{{event}} on {{node}}", "{{message}}", "event,node"),
		lokiAnnotation("Drift repairs", "yellow", hostEvents+` | event="drift_repaired"`, "drift repaired on {{node}}", "{{message}}", "event,node"),
		lokiAnnotation("Rollbacks", "red", `{job="nettune-controller"} | json | event="RolledBack"`, "{{profile}} rolled back: {{reason}}", "{{message}}", "event,profile,reason"),
	)

	b.row("Tuning")
	place(b, tablePanel("Revision in force per host", "Every profile revision in the hosts' committed (last-known-good) state, and the NodeNetTuning revision.", "none",
		promTable(`max by (node, profile, revision, node_revision) (nettune_agent_revision_info{`+nodeMatcher+`})`)), 12, 7)
	place(b, statPanel("Applies in range", "Applies of the selected hosts in the time range, by result.", "none", common.BigValueTextModeValueAndName,
		promInstant(`sum by (result) (increase(nettune_agent_applies_total{`+nodeMatcher+`}[$__range]))`, "{{result}}")), 6, 7)
	place(b, statPanel("Reverts and drift repairs in range", "Applies undone on the host (failed verify or post-apply probe) and items re-tuned after drift, in the time range.", "none", common.BigValueTextModeValueAndName,
		promInstant(`sum(increase(nettune_agent_reverts_total{`+nodeMatcher+`}[$__range]))`, "reverts"),
		promInstant(`sum(increase(nettune_agent_drift_repairs_total{`+nodeMatcher+`}[$__range]))`, "drift repairs")), 6, 7)
	place(b, timeseriesPanel("Revision per host", "The profile revisions in force on each host over time.", "none", steps,
		promRange(`max by (node, revision) (nettune_agent_revision_info{`+nodeMatcher+`})`, "{{node}} {{revision}}")), 12, 7)
	place(b, timeseriesPanel("Applies and reverts", "Applies per interval by result, and reverts.", "none", bars,
		promRange(`sum by (node, result) (increase(nettune_agent_applies_total{`+nodeMatcher+`}[$__rate_interval])) > 0`, "{{node}} {{result}}"),
		promRange(`sum by (node) (increase(nettune_agent_reverts_total{`+nodeMatcher+`}[$__rate_interval])) > 0`, "{{node}} reverted")), 12, 7)
	place(b, timeseriesPanel("Drift repairs", "Items re-tuned after drift (a route recreated without its metrics, a sysctl changed by someone else).", "none", bars,
		promRange(`sum by (node) (increase(nettune_agent_drift_repairs_total{`+nodeMatcher+`}[$__rate_interval]))`, "{{node}}")), 12, 7)
	place(b, timeseriesPanel("Apply duration (max)", "The longest apply transaction per host (preflight, snapshot, apply, verify, probes, commit or restore), as the upper bound of its histogram bucket.", "s", bars,
		promRange(`max by (node) (histogram_quantile(1, sum by (node, le) (increase(nettune_agent_apply_duration_seconds_bucket{`+nodeMatcher+`}[$__rate_interval]))))`, "{{node}}")), 12, 7)
	place(b, logsPanel("Drift repairs (agent events)", "Drift repairs as the agents ship them to Loki.",
		lokiLogs(hostEvents+` | event="drift_repaired"`+` | line_format "{{.node}} {{.revision}}: {{.message}}"`)), 12, 7)
	place(b, timeseriesPanel("Apply gate and deferred revisions", "Per host: whether its apply gate is open (1; 0 while the vehicle says it must not apply, e.g. driving) and whether a new revision waits for the gate or a maintenance window (1 while Deferred).", "none", steps,
		promRange(`max by (node) (nettune_agent_apply_gate_open{`+nodeMatcher+`})`, "{{node}} gate open"),
		promRange(`max by (node) (nettune_agent_apply_deferred{`+nodeMatcher+`})`, "{{node}} deferred")), 24, 7)
	place(b, logsPanel("Agent events", "Every apply, verify, revert, refusal, deferral and drift repair of the selected hosts.",
		lokiLogs(hostEvents+` | line_format "{{.node}} {{.event}} {{.revision}}: {{.message}}"`)), 24, 8)

	b.row("TCP per tuned destination (sock_diag)")
	tcp := func(metric, agg string) string {
		return fmt.Sprintf(`%s by (node, destination) (%s{%s})`, agg, metric, nodeMatcher)
	}
	place(b, timeseriesPanel("Smoothed RTT", "The highest smoothed RTT of the established connections to each tuned destination.", "s", lines,
		promRange(tcp("nettune_tcp_rtt_seconds", "max"), "{{node}} → {{destination}}")), 12, 7)
	place(b, timeseriesPanel("RTO", "The highest retransmission timeout of the connections to each destination: near rto_min when the route's rto_min applies.", "s", lines,
		promRange(tcp("nettune_tcp_rto_seconds", "max"), "{{node}} → {{destination}}")), 12, 7)
	place(b, timeseriesPanel("Congestion window", "The largest snd_cwnd (packets) of the connections to each destination: at most the locked clamp.", "none", lines,
		promRange(tcp("nettune_tcp_snd_cwnd", "max"), "{{node}} → {{destination}}")), 8, 7)
	place(b, timeseriesPanel("Retransmits", "Retransmitted segments per second to each destination.", "none", lines,
		promRange(`sum by (node, destination) (rate(nettune_tcp_retrans_segments_total{`+nodeMatcher+`}[$__rate_interval]))`, "{{node}} → {{destination}}")), 8, 7)
	place(b, timeseriesPanel("Sockets", "TCP sockets to each tuned destination.", "none", steps,
		promRange(tcp("nettune_tcp_sockets", "max"), "{{node}} → {{destination}}")), 8, 7)
	place(b, timeseriesPanel("Guards: retransmission timeouts and spurious retransmissions", "Per second to each destination: RTO expiries (each a message waiting at least rto_min; Linux 6.7+) and segments the peer received twice (D-SACK: retransmissions that were not needed, the cost of an rto_min below the delayed-ACK time; Linux 5.10+).", "none", lines,
		promRange(`sum by (node, destination) (rate(nettune_tcp_rto_timeouts_total{`+nodeMatcher+`}[$__rate_interval]))`, "RTOs {{node}} → {{destination}}"),
		promRange(`sum by (node, destination) (rate(nettune_tcp_dsack_dups_total{`+nodeMatcher+`}[$__rate_interval]))`, "D-SACKs {{node}} → {{destination}}")), 24, 7)

	b.row("Probe latency per host pair")
	const probeProm = `vehicle="$vehicle", node=~"$node"`
	place(b, timeseriesPanel("p99 and p99.9 per host pair (Prometheus)", "Quantiles of nettune_probe_latency_seconds per host pair (node → peer).", "s", lines,
		promRange(promQuantile("0.99", probeProm, "node, peer"), "p99 {{node}} → {{peer}}"),
		promRange(promQuantile("0.999", probeProm, "node, peer"), "p99.9 {{node}} → {{peer}}")), 12, 8)
	place(b, timeseriesPanel("p99.9 per host pair (Loki)", "The p99.9 of the probe's samples per host pair, in windows of the interval.", "ms", lines,
		lokiRange(lokiQuantile("0.999", `job="nettune-probe", vehicle="$vehicle", node=~"$node"`, "node, peer", "$__interval"), "{{node}} → {{peer}}")), 12, 8)
	place(b, timeseriesPanel("Samples per host pair and revision (Loki)", "Probe samples per interval per host pair, by the revision tuning the pair's route: when each pair changed revision.", "none", stacked,
		lokiRange(`sum by (node, peer, revision) (count_over_time({job="nettune-probe", vehicle="$vehicle", node=~"$node"} [$__interval]))`, "{{node}} → {{peer}} {{revision}}")), 24, 8)
	return b.dashboardBuilder
}
