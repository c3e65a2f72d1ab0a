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

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// mib is a mebibyte.
const mib = 1 << 20

// reportPath is where the report goes (relative paths from the repository
// root).
func reportPath(c config, env environment) string {
	if filepath.IsAbs(c.out) {
		return c.out
	}
	return filepath.Join(env.root, c.out)
}

// writeReport writes the report of the results so far (nothing when -out
// is "").
func writeReport(c config, env environment, results []*result, began time.Time) error {
	if c.out == "" {
		return nil
	}
	path := reportPath(c, env)
	if err := os.WriteFile(path, []byte(markdown(c, results, began)), 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// markdown renders the report.
func markdown(c config, results []*result, began time.Time) string {
	var b strings.Builder
	b.WriteString("# Fleet scale benchmark: the controller against simulated agents\n\n")
	fmt.Fprintf(&b, "Produced by `%s` (`make bench-scale` runs it with `BENCH_SCALE_ARGS`; in effect: `%s`) on %s UTC: %d CPUs (%s), %s, kernel %s. ",
		c.command, strings.Join(flagsOf(c), " "), began.UTC().Format("2006-01-02 15:04"), runtime.NumCPU(), benchutil.CPUModel(), runtime.Version(), benchutil.KernelRelease())
	planned := 0
	for _, n := range c.sizes {
		for _, m := range c.modes {
			if m != modeStatus || c.statusMax <= 0 || n <= c.statusMax {
				planned++
			}
		}
	}
	fmt.Fprintf(&b, "The run took **%s**", time.Since(began).Round(time.Second))
	if len(results) < planned || anyFailed(results) {
		fmt.Fprintf(&b, "; %d of %d runs (size x liveness) are reported", len(results), planned)
	}
	b.WriteString(".\n\n")
	b.WriteString("What these figures mean, what changed between runs and the investigations behind them are written by hand in [bench-scale-notes.md](bench-scale-notes.md) (this file is rewritten whole by every run).\n\n")
	writeMethod(&b, c)
	writeResults(&b, results)
	writeGoals(&b, c, results)
	for _, r := range results {
		writeDetail(&b, r)
	}
	return b.String()
}

// flagsOf are the flags that reproduce the run.
func flagsOf(c config) []string {
	sizes := make([]string, len(c.sizes))
	for i, n := range c.sizes {
		sizes[i] = fmt.Sprint(n)
	}
	renews := make([]string, len(c.renews))
	for i, d := range c.renews {
		renews[i] = d.String()
	}
	return []string{"-sizes " + strings.Join(sizes, ","), "-lease-renew " + strings.Join(renews, ","), fmt.Sprintf("-status-max %d", c.statusMax),
		fmt.Sprintf("-hosts %d", c.hosts), "-liveness " + strings.Join(c.modes, ","),
		"-idle " + c.idle.String(), "-settle " + c.settle.String(), "-max-wait " + c.maxWait.String(),
		"-agent-delay " + c.agentDelay.String(), fmt.Sprintf("-agent-workers %d", c.workers), fmt.Sprintf("-writes-alone=%t", c.alone)}
}

// anyFailed says whether a run stopped early.
func anyFailed(results []*result) bool {
	for _, r := range results {
		if r.err != "" {
			return true
		}
	}
	return false
}

// writeMethod describes what runs and what is measured.
func writeMethod(b *strings.Builder, c config) {
	fmt.Fprintf(b, "- **Cluster**: per size and liveness protocol a fresh kube-apiserver and etcd (`bin/`, started by `internal/localcp` with the CRDs), N Nodes in N/%d vehicles (labels `%s=av-NNNNN`, `%s=hN`, `%s=%s`, the annotation `%s=%s` as the Ansible role sets it, an InternalIP each), and the real controller binary (`bin/nettune-controller --leader-elect=false`, its log kept in the state directory), started once every Node exists; the scenarios start once its two controllers logged \"Starting workers\" (caches synced).\n",
		c.hosts, v1alpha1.DefaultVehicleLabel, v1alpha1.DefaultHostLabel, v1alpha1.DefaultHardwareLabel, hardware, v1alpha1.LANDeviceAnnotation, lanDevice)
	fmt.Fprintf(b, "- **Simulated agents** (in the benchmark's process: one informer on NodeNetTunings, %d workers for reports and %d more for the periodic writes): %s after a NodeNetTuning's spec changes, its status is merge-patched as the real agent reports a verified apply (observedGeneration, appliedRevision, the conditions Applied, Verified, Degraded, RolledBack, Drifted at this generation, one verified item per route, lastHeartbeatTime). Periodic writes are spread evenly: each node's first one at a random point of its period.\n",
		c.workers, c.workers, c.agentDelay)
	fmt.Fprintf(b, "  - **lease** (the new protocol): each agent creates a coordination.k8s.io Lease named after its node in `%s` (label `%s`, leaseDurationSeconds %d) and renews it as the agent's LeaseKeeper does (one Update of spec.renewTime on the Lease its last write returned; a GET first only the first time and after a conflict) every %s (the agent's default; the table's liveness column names another period where one was given with -lease-renew, and then the leaseDurationSeconds and the rollouts' unreachableAfter are three periods) less up to 10 %% jitter; its status is written when its report changes, and its lastHeartbeatTime refreshed every %s.\n",
		namespace, v1alpha1.AgentLeaseLabel, int(v1alpha1.DefaultAgentLeaseDuration/time.Second), v1alpha1.DefaultAgentLeaseRenew, v1alpha1.DefaultStatusRefresh)
	fmt.Fprintf(b, "  - **status** (the previous protocol): no Lease; the status re-patched with a new lastHeartbeatTime every %s.\n", statusHeartbeat)
	b.WriteString("- **Scenarios**, in order, each timed from the apply (create, update or the abort annotation) to the events the benchmark's informers saw; a node counts as verified on a revision when that revision of the profile is rendered into its NodeNetTuning and its report verifies the current generation (`fleetmodel.NodeReport`, the controller's rule):\n")
	fmt.Fprintf(b, "  1. **all at once**: the profile `%s` created without a rollout (cwnd 30 locked, rto_min 10ms on every host pair of the `%s` vehicles): first node verified, every node verified. Where the Lease renewal period needs an unreachableAfter above the default 2m (a 4m renewal), the profile has the smallest rollout that sets it: a canary of 2 vehicles, then every vehicle at once (maxUnavailable 100 %%); without it every vehicle would turn Unreachable between two renewals, as in the 30,000-node runs before this was changed.\n", profileName, hardware)
	b.WriteString("  2. **staged**: cwnd 31 with a rollout: canary `count: 2`, `maxUnavailable: 100%`, steps setVehicles 10 %, 50 %, 100 % (no analysis, no pause): first canary vehicle verified, every node verified.\n")
	fmt.Fprintf(b, "  3. **rollback**: cwnd 32 with a rollout: canary `count: 2`, `maxUnavailable: 100%%`, steps setVehicles 50 %%, then `pause: {}`; once at least half the nodes verified it, the profile is annotated `%s: <revision>`: time until every node is verified on the stable revision (the staged one) again and the profile is RolledBack.\n", v1alpha1.AbortAnnotation)
	fmt.Fprintf(b, "  4. **idle**: %s after a %s settle, nothing changing.\n", c.idle, c.settle)
	if c.alone {
		fmt.Fprintf(b, "  5. **writes alone, no controller** (last, also after a scenario that timed out): the controller and the simulated agents' reports are stopped, and the benchmark moves every node itself with the two writes a move needs and nothing else: a merge patch of its NodeNetTuning's spec as the controller's field manager (the spec the controller rendered, with cwnd 33 and a new revision), then right after it the verified report of that generation, %d nodes at a time, no apply delay; the Lease renewals go on. From the first write: every node's two writes answered, every node seen verified. What the API server takes for the writes of a rollout with no controller deciding, rendering or pacing them, beside the scenarios' \"every node verified\" (the controller's columns in this phase are its usage before it stopped).\n", c.workers)
	}
	if c.alone {
		fmt.Fprintf(b, "  6. **smallest writes, no controller** (lease protocol, after the writes alone): every node's Lease renewed by its simulated agent's LeaseKeeper (one Update of spec.renewTime, the smallest write an agent makes), then every node's once more, %d nodes at a time: every node's Lease renewed once (one write a node) / twice (two writes a node, as many as moving a node takes). The floor of this machine's API server for a rollout's writes: no rollout with one spec write and one report per node can be faster here than two of these per node.\n", c.workers)
	}
	fmt.Fprintf(b, "  A scenario that does not reach its end state within %s is reported as timed out and the later ones are not run.\n", c.maxWait)
	b.WriteString("- **Measurements**: the controller's CPU time (utime + stime, /proc/<pid>/stat) and peak RSS (VmHWM, /proc/<pid>/status) per phase; kube-apiserver's and etcd's CPU time the same way; API requests per phase from the kube-apiserver's own `apiserver_request_total` (every client: the controller, the simulated agents, this program and the kube-apiserver itself, e.g. its identity Lease renewed every 10 s; by verb, resource and code, 409 Conflict apart); reconciles from the controller's `controller_runtime_reconcile_total`. The simulator, the control plane and the controller share the machine's CPUs, so times include waiting for a CPU: the load average is given per run.\n\n")
}

// writeResults is the summary table.
func writeResults(b *strings.Builder, results []*result) {
	b.WriteString("## Results\n\n")
	b.WriteString("| nodes | vehicles | liveness | all at once: first / every node verified | staged: first canary vehicle / every node verified | rollback: every node back on stable | controller CPU, scenarios 1-3 | controller peak RSS | idle: controller CPU (% of a core) | idle: reconciles per minute | idle: writes per node per minute | 409s: scenarios 1-3 / idle | writes alone, no controller: every node's two writes answered / every node verified | smallest writes, no controller: every node's Lease renewed once / twice |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(b, "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.nodes, r.vehicles, modeCell(r), pairCell(r.allAtOnce), pairCell(r.staged), rollbackCell(r.rollback),
			cpuCell(r), rssCell(r), idleCPUCell(r), reconcilesCell(r), writesCell(r), conflictsCell(r), pairCell(r.alone), pairCell(r.floor))
	}
	b.WriteString("\n")
}

// pairCell shows a scenario's first and last times.
func pairCell(s scenario) string {
	switch {
	case !s.ran:
		return "not run"
	case !s.done:
		return s.note
	}
	return fmt.Sprintf("%s / **%s**", fmtDur(s.first), fmtDur(s.all))
}

// modeCell names the liveness protocol, and the Lease renewal period when
// it is not the agent's default.
func modeCell(r *result) string {
	if r.mode == modeLease && r.renew != 0 && r.renew != v1alpha1.DefaultAgentLeaseRenew {
		return fmt.Sprintf("%s (renewed every %s)", r.mode, r.renew)
	}
	return r.mode
}

// rollbackCell shows the rollback's time.
func rollbackCell(s scenario) string {
	switch {
	case !s.ran:
		return "not run"
	case !s.done:
		return s.note
	}
	return fmt.Sprintf("**%s** (%d nodes on the new revision at the abort)", fmtDur(s.all), s.moved)
}

// scenarioPhases are the phases of the timed scenarios.
func scenarioPhases(r *result) []phase {
	var out []phase
	for _, p := range r.phases {
		if p.name != "setup" && p.name != "idle" {
			out = append(out, p)
		}
	}
	return out
}

// cpuCell is the controller's CPU time over the scenarios.
func cpuCell(r *result) string {
	ps := scenarioPhases(r)
	if len(ps) == 0 {
		return "-"
	}
	var t time.Duration
	for _, p := range ps {
		t += p.cpu
	}
	return fmt.Sprintf("%.1f s", t.Seconds())
}

// peakRSS is the controller's peak RSS over the run (0 when unmeasured).
func peakRSS(r *result) int64 {
	var m int64
	for _, p := range r.phases {
		m = max(m, p.hwm)
	}
	return m
}

// rssCell is the controller's peak RSS.
func rssCell(r *result) string {
	if m := peakRSS(r); m > 0 {
		return fmt.Sprintf("%.0f MiB", float64(m)/mib)
	}
	return "-"
}

// idleCPU is the controller's idle CPU in % of one core.
func idleCPU(p *phase) float64 { return 100 * p.cpu.Seconds() / p.took.Seconds() }

// idleCPUCell shows idleCPU.
func idleCPUCell(r *result) string {
	if r.idle == nil {
		return "not run"
	}
	return fmt.Sprintf("%.2f %%", idleCPU(r.idle))
}

// reconcilesPerMinute is the controller's reconciles per minute in p (-1
// when unmeasured).
func reconcilesPerMinute(p *phase) float64 {
	if p.reconciles == nil {
		return -1
	}
	t := 0.0
	for _, v := range p.reconciles {
		t += v
	}
	return t / p.took.Minutes()
}

// reconcilesCell shows the idle reconciles per minute, by controller.
func reconcilesCell(r *result) string {
	if r.idle == nil {
		return "not run"
	}
	t := reconcilesPerMinute(r.idle)
	if t < 0 {
		return "unmeasured"
	}
	var parts []string
	for _, k := range sortedKeys(r.idle.reconciles) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, r.idle.reconciles[k]/r.idle.took.Minutes()))
	}
	return fmt.Sprintf("%.1f (%s)", t, strings.Join(parts, ", "))
}

// writesPerNodeMinute are the write requests per node per minute in p (-1
// when unmeasured).
func writesPerNodeMinute(p *phase, nodes int) float64 {
	if p.requests == nil {
		return -1
	}
	return p.requests.Total(benchutil.IsWrite) / float64(nodes) / p.took.Minutes()
}

// writesCell shows the idle writes per node per minute and the two largest
// kinds.
func writesCell(r *result) string {
	if r.idle == nil {
		return "not run"
	}
	w := writesPerNodeMinute(r.idle, r.nodes)
	if w < 0 {
		return "unmeasured"
	}
	var parts []string
	for i, k := range r.idle.requests.ByKind(benchutil.IsWrite) {
		if i == 2 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", k.Kind, k.Count/float64(r.nodes)/r.idle.took.Minutes()))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%.2f", w)
	}
	return fmt.Sprintf("%.2f (%s)", w, strings.Join(parts, "; "))
}

// conflicts counts 409 answers in p (-1 when unmeasured).
func conflicts(p *phase) float64 {
	if p.requests == nil {
		return -1
	}
	return p.requests.Total(benchutil.IsConflict)
}

// conflictsCell shows the 409s of the scenarios and of the idle phase.
func conflictsCell(r *result) string {
	var s float64
	known := true
	for _, p := range scenarioPhases(r) {
		c := conflicts(&p)
		known = known && c >= 0
		s += c
	}
	left := "unmeasured"
	if known && len(scenarioPhases(r)) > 0 {
		left = fmt.Sprint(s)
	}
	right := "not run"
	if r.idle != nil {
		right = "unmeasured"
		if c := conflicts(r.idle); c >= 0 {
			right = fmt.Sprint(c)
		}
	}
	return left + " / " + right
}

// goal is a target printed beside the measurements, evaluated per run of
// its size (every size when nodes is 0).
type goal struct {
	text  string
	nodes int
	// eval returns the measured value and whether it meets the goal; ok is
	// false when the run did not measure it.
	eval func(r *result) (measured string, pass, ok bool)
	// timed: a time for nodes to move, shown beside the writes alone.
	timed bool
}

// goals are the scale targets.
var goals = []goal{
	{"staged rollout of 5,000 nodes: every node verified in < 20 s", 5000, scenarioUnder(func(r *result) scenario { return r.staged }, 20*time.Second), true},
	{"staged rollout of 30,000 nodes: every node verified in < 90 s", 30000, scenarioUnder(func(r *result) scenario { return r.staged }, 90*time.Second), true},
	{"rollback of 5,000 nodes: every node back on stable in < 10 s", 5000, scenarioUnder(func(r *result) scenario { return r.rollback }, 10*time.Second), true},
	{"idle controller at 5,000 nodes: < 2 % of a core", 5000, func(r *result) (string, bool, bool) {
		if r.idle == nil {
			return "", false, false
		}
		c := idleCPU(r.idle)
		return fmt.Sprintf("%.2f %%", c), c < 2, true
	}, false},
	{"controller RSS at 30,000 nodes: < 300 MiB", 30000, func(r *result) (string, bool, bool) {
		m := peakRSS(r)
		if m == 0 {
			return "", false, false
		}
		return fmt.Sprintf("%.0f MiB", float64(m)/mib), m < 300*mib, true
	}, false},
	{"steady state (idle): zero 409 Conflicts", 0, func(r *result) (string, bool, bool) {
		if r.idle == nil || r.idle.requests == nil {
			return "", false, false
		}
		c := conflicts(r.idle)
		return fmt.Sprint(c), c == 0, true
	}, false},
}

// scenarioUnder is a goal on a scenario's "every node" time.
func scenarioUnder(pick func(*result) scenario, limit time.Duration) func(*result) (string, bool, bool) {
	return func(r *result) (string, bool, bool) {
		s := pick(r)
		switch {
		case !s.ran:
			return "", false, false
		case !s.done:
			return s.note, false, true
		}
		return fmtDur(s.all), s.all < limit, true
	}
}

// writeGoals evaluates every goal on every run of its size.
func writeGoals(b *strings.Builder, c config, results []*result) {
	b.WriteString("## Goals\n\nEvaluated from the figures above; a goal whose size was not run is listed as not measured.\n\n")
	b.WriteString("| goal | run | measured | verdict | the same run's writes alone (no controller, every node) | the same run's smallest writes (every node's Lease renewed once / twice) |\n|---|---|---|---|---|---|\n")
	for _, g := range goals {
		n := 0
		for _, r := range results {
			if g.nodes != 0 && r.nodes != g.nodes {
				continue
			}
			n++
			measured, pass, ok := g.eval(r)
			verdict := "not measured"
			switch {
			case ok && pass:
				verdict = "**pass**"
			case ok:
				verdict = "**FAIL**"
			}
			alone, floor := "-", "-"
			if g.timed && r.alone.ran {
				alone = pairCell(r.alone)
			}
			if g.timed && r.floor.ran {
				floor = pairCell(r.floor)
			}
			fmt.Fprintf(b, "| %s | %d nodes, %s | %s | %s | %s | %s |\n", g.text, r.nodes, modeCell(r), benchutil.OrDash(measured), verdict, alone, floor)
		}
		if n == 0 {
			why := "not measured: no run of that size"
			if g.nodes != 0 && !containsSize(c.sizes, g.nodes, c.hosts) {
				why = "not measured: size not in -sizes"
			}
			fmt.Fprintf(b, "| %s | - | - | %s | - | - |\n", g.text, why)
		}
	}
	b.WriteString("\n")
}

// containsSize says whether sizes hold a size of exactly nodes nodes.
func containsSize(sizes []int, nodes, hosts int) bool {
	for _, s := range sizes {
		if s/hosts*hosts == nodes {
			return true
		}
	}
	return false
}

// writeDetail is one run's phases, requests, controller log and simulator
// errors.
func writeDetail(b *strings.Builder, r *result) {
	fmt.Fprintf(b, "## %d nodes, %s protocol\n\n", r.nodes, modeCell(r))
	fmt.Fprintf(b, "%d vehicles x %d hosts; Nodes created in %s; the run took %s; load average %s at its start, %s at its end.\n\n",
		r.vehicles, r.hosts, fmtDur(r.created), r.took.Round(time.Second), benchutil.OrDash(r.loadStart), benchutil.OrDash(r.loadEnd))
	if r.err != "" {
		fmt.Fprintf(b, "**The run stopped early**: %s\n\n", r.err)
	}
	writeScenarioTimes(b, r)
	if len(r.phases) > 0 {
		b.WriteString("| phase | took | controller CPU | controller RSS (peak so far) | kube-apiserver + etcd CPU | requests (writes) | 409s | reconciles | most frequent requests |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, p := range r.phases {
			fmt.Fprintf(b, "| %s | %s | %.2f s | %.0f MiB (%.0f MiB) | %.1f s | %s | %s | %s | %s |\n",
				p.name, fmtDur(p.took), p.cpu.Seconds(), float64(p.rss)/mib, float64(p.hwm)/mib, p.cpCPU.Seconds(),
				requestsCell(&p), conflictsOf(&p), reconcileList(p.reconciles), topRequests(&p, 6))
		}
		b.WriteString("\nRequests are every client's (the controller's, the simulated agents', the benchmark's and the kube-apiserver's own). ")
		var sim []string
		for _, p := range r.phases {
			sim = append(sim, fmt.Sprintf("%s %d (%d answered 409)", p.name, p.simWrites, p.simConflicts))
		}
		fmt.Fprintf(b, "Of them, the simulated agents wrote: %s.\n\n", strings.Join(sim, ", "))
	}
	writeLogSummary(b, r)
}

// writeScenarioTimes lists every time a scenario recorded.
func writeScenarioTimes(b *strings.Builder, r *result) {
	line := func(name string, s scenario, first, all, settled string) {
		if !s.ran {
			fmt.Fprintf(b, "- %s: not run.\n", name)
			return
		}
		fmt.Fprintf(b, "- %s (revision `%s`): %s %s, %s %s, %s %s", name, benchutil.OrDash(s.revision), first, fmtDur(s.first), all, fmtDur(s.all), settled, fmtDur(s.settled))
		if !s.done {
			fmt.Fprintf(b, "; **%s**", s.note)
		}
		b.WriteString(".\n")
	}
	line("all at once", r.allAtOnce, "first node verified after", "every node after", "the profile Healthy after")
	line("staged", r.staged, "first canary vehicle verified after", "every node after", "the profile Healthy after")
	line("rollback", r.rollback, "half the nodes verified after", "from the abort: every node back on stable after", "the profile RolledBack after")
	if r.alone.ran {
		fmt.Fprintf(b, "- writes alone, no controller (revision `%s`): every node's two writes answered after %s, every node seen verified after %s", r.alone.revision, fmtDur(r.alone.first), fmtDur(r.alone.all))
		if !r.alone.done {
			fmt.Fprintf(b, "; **%s**", r.alone.note)
		}
		b.WriteString(".\n")
	} else {
		b.WriteString("- writes alone, no controller: not run.\n")
	}
	if r.floor.ran {
		fmt.Fprintf(b, "- smallest writes, no controller: every node's Lease renewed once after %s, twice after %s", fmtDur(r.floor.first), fmtDur(r.floor.all))
		if !r.floor.done {
			fmt.Fprintf(b, "; **%s**", r.floor.note)
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
}

// requestsCell is a phase's request and write totals.
func requestsCell(p *phase) string {
	if p.requests == nil {
		return "unmeasured (" + p.reqErr + ")"
	}
	return fmt.Sprintf("%.0f (%.0f)", p.requests.Total(nil), p.requests.Total(benchutil.IsWrite))
}

// conflictsOf is a phase's 409s by verb and resource.
func conflictsOf(p *phase) string {
	if p.requests == nil {
		return "-"
	}
	ks := p.requests.ByKind(benchutil.IsConflict)
	if len(ks) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s %.0f", k.Kind, k.Count))
	}
	return fmt.Sprintf("%.0f: %s", p.requests.Total(benchutil.IsConflict), strings.Join(parts, ", "))
}

// topRequests are a phase's n most frequent kinds of request.
func topRequests(p *phase, n int) string {
	if p.requests == nil {
		return "-"
	}
	var parts []string
	for i, k := range p.requests.ByKind(nil) {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", k.Kind, k.Count))
	}
	return strings.Join(parts, ", ")
}

// reconcileList shows reconciles by controller.
func reconcileList(m map[string]float64) string {
	if m == nil {
		return "-"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// writeLogSummary summarizes the controller's log and the simulator's
// failed requests.
func writeLogSummary(b *strings.Builder, r *result) {
	if r.logPath != "" {
		var levels []string
		for _, k := range sortedKeys(r.log.levels) {
			levels = append(levels, fmt.Sprintf("%s %d", k, r.log.levels[k]))
		}
		fmt.Fprintf(b, "Controller log (`%s`): %d lines (%s).", r.logPath, r.log.lines, strings.Join(levels, ", "))
		if len(r.log.errors) == 0 {
			b.WriteString(" No error lines.\n")
		} else {
			b.WriteString(" Error lines by message and error (digits blurred):\n\n")
			for i, e := range r.log.errors {
				if i == 10 {
					fmt.Fprintf(b, "- ... and %d more kinds\n", len(r.log.errors)-10)
					break
				}
				fmt.Fprintf(b, "- %.0f x `%s`\n", e.Count, strings.ReplaceAll(e.Kind, "`", "'"))
			}
		}
	}
	fmt.Fprintf(b, "\nSimulated agents: %d writes, %d failed requests.", r.simWrites, r.simFailed)
	for i, e := range r.simErrors {
		if i == 5 {
			break
		}
		fmt.Fprintf(b, "\n- %.0f x `%s`", e.Count, strings.ReplaceAll(e.Kind, "`", "'"))
	}
	b.WriteString("\n\n")
}

// printSummary prints a run's summary row and errors.
func printSummary(w io.Writer, r *result) {
	fmt.Fprintf(w, "== %d nodes %s: all at once %s | staged %s | rollback %s | controller CPU %s, peak RSS %s | idle CPU %s, reconciles/min %s, writes/node/min %s | 409s %s | writes alone %s | smallest writes %s\n",
		r.nodes, r.mode, pairCell(r.allAtOnce), pairCell(r.staged), rollbackCell(r.rollback), cpuCell(r), rssCell(r),
		idleCPUCell(r), reconcilesCell(r), writesCell(r), conflictsCell(r), pairCell(r.alone), pairCell(r.floor))
	fmt.Fprintf(w, "   controller log %s: %d lines, %d error lines\n", r.logPath, r.log.lines, errorLines(r.log))
	for i, e := range r.log.errors {
		if i == 5 {
			break
		}
		fmt.Fprintf(w, "     %.0f x %s\n", e.Count, e.Kind)
	}
}

// errorLines counts a log's error lines.
func errorLines(s logSummary) int {
	n := 0
	for _, e := range s.errors {
		n += int(e.Count)
	}
	return n
}

// fmtDur shows a duration ("-" for zero).
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return benchutil.Round(d).String()
}

// sortedKeys are a map's keys, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
