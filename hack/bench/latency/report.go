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
	"runtime"
	"strings"
	"time"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/vehiclesim"
)

func fmtMs(d time.Duration) string {
	ms := float64(d) / 1e6
	switch {
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.0f ms", ms)
	}
}

func pct(x float64) string { return fmt.Sprintf("%+.1f %%", 100*x) }

type report struct {
	c        config
	v        *vehiclesim.Vehicle
	b        *bench
	arms     []*armResult
	order    [][]string
	evidence map[string]applied
	elapsed  time.Duration
	started  time.Time
	// discarded are arm-runs repeated because other load stalled the
	// benchmark process (-max-stall).
	discarded []*runResult
	// recommendation is how the recommended arm's parameters were derived.
	recommendation []string
}

func (r *report) arm(name string) *armResult {
	for _, a := range r.arms {
		if a.Arm.Name == name {
			return a
		}
	}
	return nil
}

func (r *report) printSummary(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprint(w, r.resultsTable())
	fmt.Fprintln(w)
	fmt.Fprint(w, r.roundsTable())
	fmt.Fprintln(w)
	fmt.Fprint(w, r.verdict())
}

func (r *report) resultsTable() string {
	var s strings.Builder
	s.WriteString("| | " + r.join(func(a *armResult) string { return "**" + a.Arm.Name + "**" }) + " |\n")
	s.WriteString("|---|" + strings.Repeat("---|", len(r.arms)) + "\n")
	row := func(name string, f func(a *armResult) string) {
		s.WriteString("| " + name + " | " + r.join(f) + " |\n")
	}
	row("acknowledged messages (sent in the windows)", func(a *armResult) string {
		return fmt.Sprintf("%d (of %d ticks)", len(a.D), a.Expected)
	})
	row("p50", func(a *armResult) string { return fmtMs(a.D.q(.5)) })
	row("p99", func(a *armResult) string { return fmtMs(a.D.q(.99)) })
	row("p99.9", func(a *armResult) string { return fmtMs(a.D.q(.999)) })
	row("**p99.99**", func(a *armResult) string { return "**" + fmtMs(a.D.q(.9999)) + "**" })
	row("max", func(a *armResult) string { return fmtMs(a.D.max()) })
	row("p99.99 of single rounds (min - max)", func(a *armResult) string {
		lo, hi := time.Duration(-1), time.Duration(0)
		for _, x := range a.Runs {
			q := newDist(x.Lat).q(.9999)
			if lo < 0 || q < lo {
				lo = q
			}
			hi = max(hi, q)
		}
		return fmtMs(lo) + " - " + fmtMs(hi)
	})
	row("messages >= 200 ms (an RTO at the default rto_min)", func(a *armResult) string {
		return fmt.Sprintf("%d", a.D.atLeast(200*time.Millisecond))
	})
	row("messages >= 100 ms", func(a *armResult) string { return fmt.Sprintf("%d", a.D.atLeast(100*time.Millisecond)) })
	row("messages >= 20 ms", func(a *armResult) string { return fmt.Sprintf("%d", a.D.atLeast(20*time.Millisecond)) })
	row("messages >= 5 ms", func(a *armResult) string { return fmt.Sprintf("%d", a.D.atLeast(5*time.Millisecond)) })
	row("messages never acknowledged", func(a *armResult) string { return fmt.Sprintf("%d", a.Lost+a.Gaps) })
	row("topic throughput (acknowledged, 3 topics)", func(a *armResult) string {
		return fmt.Sprintf("%.1f Mbit/s", a.topicMbps(r.c.topicSize))
	})
	row("heavy transfer xavier-f -> xavier-a, during the scenario", func(a *armResult) string { return fmt.Sprintf("%.0f Mbit/s", a.heavyMbps()) })
	if r.c.solo > 0 && !r.c.noHeavy {
		row(fmt.Sprintf("the same transfer alone (%s before each run)", r.c.solo), func(a *armResult) string { return fmt.Sprintf("%.0f Mbit/s", a.soloMbps()) })
	}
	row("incast bursts (goodput; rounds; slowest round)", func(a *armResult) string {
		return fmt.Sprintf("%.0f Mbit/s; %d; %s", a.burstMbps(), a.BurstRounds, fmtMs(a.BurstMaxRound))
	})
	row("incast round time p50 / p99", func(a *armResult) string {
		return fmt.Sprintf("%s / %s", fmtMs(a.BurstTimes.q(.5)), fmtMs(a.BurstTimes.q(.99)))
	})
	row("foreign UDP goodput", func(a *armResult) string { return fmt.Sprintf("%.1f Mbit/s", a.udpMbps()) })
	row("everything delivered into xavier-a (goodput sum of the above)", func(a *armResult) string {
		return fmt.Sprintf("%.0f Mbit/s", a.aggregateMbps(r.c.topicSize))
	})
	row("receiver switch port: wire bytes sent (headers and retransmissions included)", func(a *armResult) string { return fmt.Sprintf("%.0f Mbit/s", a.receiverMbps()) })
	row("**receiver switch port drops** (frames; share of arriving frames)", func(a *armResult) string {
		return fmt.Sprintf("**%d** (%.2f %%)", a.PortDrops, 100*float64(a.PortDrops)/float64(max(1, a.PortDrops+a.PortSentPackets)))
	})
	row("sender hosts b,c,d: retransmitted segments", func(a *armResult) string { return fmt.Sprintf("%d", a.Senders.Retrans) })
	row("sender hosts b,c,d: **RTO timeouts** (TCPTimeouts)", func(a *armResult) string { return fmt.Sprintf("**%d**", a.Senders.Timeouts) })
	row("sender hosts b,c,d: TLP probes (TCPLossProbes)", func(a *armResult) string { return fmt.Sprintf("%d", a.Senders.LossProbes) })
	row("topic connections only: retransmitted segments / RTOs", func(a *armResult) string {
		return fmt.Sprintf("%d / %d", a.Topic.Retrans, a.Topic.RTOs)
	})
	row("topic connections: largest snd_cwnd seen", func(a *armResult) string { return fmt.Sprintf("%d", a.Topic.MaxCwnd) })
	row("topic connections: most consecutive RTOs of one segment (tcpi_backoff)", func(a *armResult) string {
		return fmt.Sprintf("%d", a.Topic.MaxBackoff)
	})
	row("other switch ports: drops (the return paths)", func(a *armResult) string { return fmt.Sprintf("%d", a.OtherDrops) })
	row("heavy-transfer host f: retransmits / RTOs", func(a *armResult) string {
		return fmt.Sprintf("%d / %d", a.HeavyH.Retrans, a.HeavyH.Timeouts)
	})
	row("foreign UDP: delivered / sent", func(a *armResult) string {
		if a.UDPSent == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(a.UDPReceived)/float64(a.UDPSent))
	})
	row("machine CPU busy / of it this benchmark process (mean over windows)", func(a *armResult) string {
		return fmt.Sprintf("%.0f %% / %.0f %%", 100*a.CPUBusy, 100*a.CPUSelf)
	})
	row("CPU pressure: share of time some task waited for a CPU (PSI, mean)", func(a *armResult) string {
		return fmt.Sprintf("%.0f %%", 100*a.CPUPressure)
	})
	row("worst lateness of a 1 ms sleep in the benchmark process", func(a *armResult) string { return fmtMs(a.TimerLate) })
	return s.String()
}

func (r *report) join(f func(a *armResult) string) string {
	var parts []string
	for _, a := range r.arms {
		parts = append(parts, f(a))
	}
	return strings.Join(parts, " | ")
}

func (r *report) roundsTable() string {
	var s strings.Builder
	s.WriteString("| round (order) | " + r.join(func(a *armResult) string {
		return a.Arm.Name + ": msgs / p99.99 / max / >=200 ms / port drops / sender RTOs / CPU busy, pressure / timer lateness / load"
	}) + " |\n")
	s.WriteString("|---|" + strings.Repeat("---|", len(r.arms)) + "\n")
	for i, names := range r.order {
		fmt.Fprintf(&s, "| %d (%s) | ", i+1, strings.Join(names, ", "))
		var parts []string
		for _, a := range r.arms {
			x := a.Runs[i]
			d := newDist(x.Lat)
			parts = append(parts, fmt.Sprintf("%d / %s / %s / %d / %d / %d / %.0f %%, %.0f %% / %s / %s", len(d), fmtMs(d.q(.9999)), fmtMs(d.max()), d.atLeast(200*time.Millisecond), x.PortDrops, x.Senders.Timeouts, 100*x.CPUBusy, 100*x.CPUPressure, fmtMs(x.TimerLate), x.Load1))
		}
		s.WriteString(strings.Join(parts, " | ") + " |\n")
	}
	return s.String()
}

// criteria evaluates the goal for arm x against the defaults.
type criteria struct {
	cut    float64 // p99.99 reduction (positive = better)
	rto200 int
	// Throughput changes against the defaults (negative = cost).
	topicCost, aggCost, soloCost, heavyCost, burstCost float64
	cutOK, rtoOK, costOK, ok                           bool
}

func rel(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a/b - 1
}

func (r *report) criteria(name string) (criteria, bool) {
	d, x := r.arm("defaults"), r.arm(name)
	if d == nil || x == nil {
		return criteria{}, false
	}
	var c criteria
	dp, xp := d.D.q(.9999), x.D.q(.9999)
	if dp > 0 {
		c.cut = 1 - float64(xp)/float64(dp)
	}
	c.rto200 = x.D.atLeast(200 * time.Millisecond)
	size := r.c.topicSize
	c.topicCost = rel(x.topicMbps(size), d.topicMbps(size))
	c.aggCost = rel(x.aggregateMbps(size), d.aggregateMbps(size))
	c.soloCost = rel(x.soloMbps(), d.soloMbps())
	c.heavyCost = rel(x.heavyMbps(), d.heavyMbps())
	c.burstCost = rel(x.burstMbps(), d.burstMbps())
	c.cutOK = c.cut >= 1.0/3
	c.rtoOK = c.rto200 == 0
	c.costOK = c.topicCost >= -0.05 && c.aggCost >= -0.05 && (r.c.noHeavy || r.c.solo <= 0 || c.soloCost >= -0.05)
	c.ok = c.cutOK && c.rtoOK && c.costOK
	return c, true
}

func yes(b bool) string {
	if b {
		return "met"
	}
	return "NOT met"
}

func (r *report) verdict() string {
	var s strings.Builder
	d := r.arm("defaults")
	for _, name := range []string{"v2", "v1", "recommended"} {
		c, ok := r.criteria(name)
		if !ok {
			continue
		}
		x := r.arm(name)
		fmt.Fprintf(&s, "- **%s vs kernel defaults: goal %s.** p99.99 %s -> %s (%s; goal at least -33.3 %%: %s). Messages that waited >= 200 ms: %d -> %d (goal 0: %s). Throughput (goal: no more than 5 %% lower: %s): topics %.1f -> %.1f Mbit/s (%s), everything delivered into xavier-a (topics + heavy transfer + incast + UDP goodput) %.0f -> %.0f Mbit/s (%s)",
			name, yes(c.ok), fmtMs(d.D.q(.9999)), fmtMs(x.D.q(.9999)), pct(-c.cut), yes(c.cutOK),
			d.D.atLeast(200*time.Millisecond), c.rto200, yes(c.rtoOK), yes(c.costOK),
			d.topicMbps(r.c.topicSize), x.topicMbps(r.c.topicSize), pct(c.topicCost),
			d.aggregateMbps(r.c.topicSize), x.aggregateMbps(r.c.topicSize), pct(c.aggCost))
		if !r.c.noHeavy && r.c.solo > 0 {
			fmt.Fprintf(&s, ", the heavy transfer alone %.0f -> %.0f Mbit/s (%s)", d.soloMbps(), x.soloMbps(), pct(c.soloCost))
		}
		if !r.c.noHeavy {
			fmt.Fprintf(&s, "; the heavy transfer's share during the scenario %.0f -> %.0f Mbit/s (%s), the incast's %.0f -> %.0f Mbit/s (%s)",
				d.heavyMbps(), x.heavyMbps(), pct(c.heavyCost), d.burstMbps(), x.burstMbps(), pct(c.burstCost))
		}
		s.WriteString(".\n")
	}
	if rec, v2 := r.arm("recommended"), r.arm("v2"); rec != nil && v2 != nil {
		cmp := func(a, b time.Duration) string {
			switch {
			case a < b:
				return "lower"
			case a > b:
				return "higher"
			}
			return "equal"
		}
		fmt.Fprintf(&s, "- **recommended vs v2** (the same scenario, the rounds interleaved): p99.99 %s vs %s (%s), p99.9 %s vs %s (%s), max %s vs %s; messages >= 20 ms %d vs %d, >= 5 ms %d vs %d; topics %.1f vs %.1f Mbit/s.\n",
			fmtMs(rec.D.q(.9999)), fmtMs(v2.D.q(.9999)), cmp(rec.D.q(.9999), v2.D.q(.9999)),
			fmtMs(rec.D.q(.999)), fmtMs(v2.D.q(.999)), cmp(rec.D.q(.999), v2.D.q(.999)), fmtMs(rec.D.max()), fmtMs(v2.D.max()),
			rec.D.atLeast(20*time.Millisecond), v2.D.atLeast(20*time.Millisecond), rec.D.atLeast(5*time.Millisecond), v2.D.atLeast(5*time.Millisecond),
			rec.topicMbps(r.c.topicSize), v2.topicMbps(r.c.topicSize))
	}
	if len(r.recommendation) > 0 {
		fmt.Fprintf(&s, "\nHow the recommended arm was derived (`experiment.Recommend`, the same code as `kubectl nettune recommend`):\n\n")
		for _, l := range r.recommendation {
			fmt.Fprintf(&s, "- %s\n", l)
		}
	}
	return s.String()
}

func (r *report) markdown() string {
	c := r.c
	var s strings.Builder
	host, _ := os.Hostname()
	_ = host
	kernel := benchutil.KernelRelease()
	perArm := 0
	for _, a := range r.arms {
		if perArm == 0 || len(a.D) < perArm {
			perArm = len(a.D)
		}
	}
	fmt.Fprintf(&s, "# Benchmarks\n\n")
	fmt.Fprintf(&s, "The node agent's own cost (apply time, RSS, idle CPU) is in [bench-agent.md](bench-agent.md). This page is the latency benchmark that proves the tuning: `make bench-latency`.\n\n")
	fmt.Fprintf(&s, "## Topic latency under loss: kernel defaults vs the shipped profile (v2) vs the earlier one (v1)\n\n")
	fmt.Fprintf(&s, "Produced by `make bench-latency` (`cd hack/bench && go run ./latency`, root) on %s: %d CPUs, kernel %s, %s. The whole run took **%s**.\n\n",
		r.started.Format("2006-01-02 15:04 MST"), runtime.NumCPU(), kernel, runtime.Version(), r.elapsed.Round(time.Second))

	fmt.Fprintf(&s, "### Result\n\n")
	fmt.Fprintf(&s, "%s\n", r.verdict())
	fmt.Fprintf(&s, "![CCDF of the topic message latency, three arms](bench-latency-ccdf.png)\n\n")
	fmt.Fprintf(&s, "The plot is the complementary CDF of every acknowledged message of each arm (all rounds pooled): the fraction of messages whose latency was at least x. Log scales on both axes; where a curve crosses the dashed 1e-4 line is that arm's p99.99, and its last point is its max.\n\n")
	fmt.Fprintf(&s, "%s\n", r.resultsTable())
	fmt.Fprintf(&s, "Every arm pools %d rounds x %s measured windows; the smallest arm holds **%d acknowledged messages** (p99.99 is then the %d-th largest). Percentiles are nearest-rank over the pooled messages. Counters are deltas over the measured windows, summed over the rounds: the host counters (`TcpExt.TCPTimeouts`, `TcpExt.TCPLossProbes`, `Tcp.RetransSegs`, read from each host namespace as the agent reads them) of xavier-b, -c and -d cover every TCP connection of those hosts (their topic connections and their incast connections); the topic-connection line is the topic sockets alone (`TCP_INFO`: `tcpi_total_retrans`, `tcpi_total_rto`, `tcpi_snd_cwnd` and `tcpi_backoff` polled every 10 ms). Switch drops are the receiver port's tbf drops (frames the 128 KB buffer could not hold). The heavy-transfer and incast throughputs are over each arm-run's whole run (warm-up, window and grace).\n\n",
		c.rounds, c.window, perArm, max(1, perArm/10000))

	fmt.Fprintf(&s, "### Reading it\n\n%s\n", r.reading())
	fmt.Fprintf(&s, "### Spread: every round\n\n")
	fmt.Fprintf(&s, "Each round runs every arm once; the order rotates so no arm always runs first or last (CPU temperature, background load).\n\n")
	fmt.Fprintf(&s, "%s\n", r.roundsTable())

	fmt.Fprintf(&s, "%s\n", r.discardedText())
	fmt.Fprintf(&s, "### Setup\n\n")
	fmt.Fprintf(&s, "- **Vehicle**: one simulated vehicle (`internal/vehiclesim`) `%s` with six hosts xavier-a..xavier-f (network namespaces) behind one switch namespace: a bridge whose every egress port is `tbf rate 1gbit burst 6056 limit 131072` (the SJA1105's 128 KB buffer; drops are real buffer overflow, no netem), each host's NIC shaped to 1 Gbit/s with a 1000-frame queue, TSO/GSO off, MTU 1500.\n", r.v.Name)
	fmt.Fprintf(&s, "- **Topics** (measured): the real topic emulator (`node-agent/latency.Emulator`), one per sender host, dialing from inside xavier-b, -c and -d to the latency server (`latency.Serve`) on the receiver xavier-a's probe port %d: one persistent TCP connection per topic (planning from b, perception from c, prediction from d), **%d-byte messages at %g Hz each** (%.0f Mbit/s per topic, %.0f Mbit/s together). Latency = from just before the first byte is written until the receiver's application acknowledgement is read (one clock). ", probePort, c.topicSize, c.topicRate, float64(c.topicSize)*8*c.topicRate/1e6, 3*float64(c.topicSize)*8*c.topicRate/1e6)
	fmt.Fprintf(&s, "Why these numbers: a 16 KB message is 12 full frames, a planning trajectory or an object list rather than a one-frame heartbeat, so it spans several packets and a tail loss can strand it; the vehicle's planning topic runs at 10 Hz, but a trustworthy p99.99 needs well over 10^5 messages per arm (1 in 10,000 is then tens of messages, not one), which at 10 Hz would take hours per arm, so each topic runs at %g Hz, like 40 vehicles' worth of 10 Hz topics multiplexed on one connection. The sender never waits: ticks missed while a write blocks are dropped, not made up (the table's \"of N ticks\").\n", c.topicRate)
	fmt.Fprintf(&s, "- **Scenario** (the field report's three loss conditions, all at once, the same for every arm, running through the warm-up and the window):\n")
	fmt.Fprintf(&s, "  1. *Topics bursting at once* (`vehiclesim.Burst`): %s each write %d KB into xavier-a at the same instant every %s, on their own persistent connections (other topics of the same compute units). %d x %d KB = %d KB at line rate from each NIC is %.1f ms of wire time into one 1 Gbit/s port: under 10 ms, as in the report, and more than the 128 KB the port can queue when the senders' windows let it arrive at once.\n",
		strings.Join(c.burstHosts, ", "), c.burstBytes>>10, c.burstEvery, len(c.burstHosts), c.burstBytes>>10, len(c.burstHosts)*c.burstBytes>>10, float64(len(c.burstHosts)*c.burstBytes)*8/1e9*1e3)
	if c.noHeavy {
		fmt.Fprintf(&s, "  2. *Heavy transfer*: left out in this run (`-no-heavy`).\n")
	} else {
		fmt.Fprintf(&s, "  2. *A long heavy transfer* (`vehiclesim.HeavyTransfer`): xavier-f copies to xavier-a as fast as TCP goes (someone copying logs) for the whole arm-run.\n")
	}
	fmt.Fprintf(&s, "  3. *Short foreign UDP bursts* (`vehiclesim.ForeignBursts`): xavier-e sends %d KB of full-size datagrams at line rate to xavier-a every %s (a lidar point cloud, a log uploader); UDP does not back off.\n", c.foreignBytes>>10, c.foreignEvery)
	fmt.Fprintf(&s, "- **Arms**, each applied to all six hosts **by the real agent**: the spec of every host is rendered with `render.Render` from the sample profile (nodes = the six hosts, labels `nettune.io/vehicle=%s`, `nettune.io/host=<host>`, `nettune.io/hardware=xavier` (and `nettune.io/lan-profile=v1`, v1's selector), Address = the host's LAN address, Device = lan0), written to a NodeNetTuning file and applied with `bin/nettune-agent apply -f FILE --netns <host netns> --state-dir <per-host temp dir>`, which must exit 0 (it commits only after reading every item back and probing every peer's port %d). Before every apply, `ip -n <host> tcp_metrics flush all` on every host, so no arm inherits another's cached RTT or window; the agent then primes the cache with the new route's locked cwnd.\n", r.v.Name, probePort)
	for _, a := range r.arms {
		ev := r.evidence[a.Arm.Name]
		fmt.Fprintf(&s, "  - **%s** — %s", a.Arm.Name, a.Arm.Title)
		if a.Arm.File != "" {
			fmt.Fprintf(&s, ", from `%s` (rendered as profile revision %s).", a.Arm.File, a.Arm.Revision)
		} else {
			fmt.Fprintf(&s, ": rendered with no profile, i.e. the empty spec a node with no profile gets; the agent restores every route it had tuned to its original state (the /32 routes it had created are deleted).")
		}
		fmt.Fprintf(&s, " `ip -n <xavier-b> route` after the apply, route to xavier-a:\n\n")
		if ev.Route == "" {
			fmt.Fprintf(&s, "        (no route to %s: only the connected subnet) %s\n\n", r.b.receiver.Addr, firstLine(ev.RouteTable))
		} else {
			fmt.Fprintf(&s, "        %s\n\n", ev.Route)
		}
		if ev.TCPMetrics != "" {
			fmt.Fprintf(&s, "    `ip -n <xavier-b> tcp_metrics show %s` after the apply: `%s`\n\n", r.b.receiver.Addr, oneLine(ev.TCPMetrics))
		} else {
			fmt.Fprintf(&s, "    `ip -n <xavier-b> tcp_metrics show %s` after the apply: empty (flushed, nothing primed).\n\n", r.b.receiver.Addr)
		}
	}
	fmt.Fprintf(&s, "  Every arm's routes are checked in every host after every apply (metrics present on every /32 peer route for v1/v2; no /32 route and no metric anywhere for the defaults). The v2 agent report for xavier-b (first apply):\n\n")
	if ev, ok := r.evidence["v2"]; ok {
		for _, l := range strings.Split(ev.AgentOut, "\n") {
			fmt.Fprintf(&s, "        %s\n", l)
		}
		s.WriteString("\n")
	}
	fmt.Fprintf(&s, "- **Rounds**: %d; arm order per round: %s. Each arm-run: apply, start the scenarios and new emulator connections (route metrics and the tcp_metrics clamp apply to new connections), **%s warm-up discarded**, **%s measured** (messages *sent* in the window count), then %s more for the window's last messages to be acknowledged (the load keeps running), then everything stops.\n", c.rounds, orders(r.order), c.warmup, c.window, c.grace)
	_, _, _, _, maxLoad := r.cpuRange()
	fmt.Fprintf(&s, "- **Machine**: %d CPUs shared by everything: every frame of every host is forwarded by the CPU through veth, bridge and three tbf queues. The 1-minute load average was at most %.1f during the windows (the benchmark alone keeps it at about 1-3; anything beyond is other jobs on the machine).\n", runtime.NumCPU(), maxLoad)
	if d := r.arm("defaults"); d != nil {
		fmt.Fprintf(&s, "- **How hard this is**: the three conditions at once are the field report's worst case, not a typical minute on a vehicle. Under kernel defaults the heavy transfer keeps the receiver's 128 KB port near full, and %.1f %% of the frames arriving there were dropped (%.0f per second); that is the report's scenario 2 (\"if someone copies data by hand, a high-loss environment for as long as the copy lasts\"), with the incast and the UDP bursts on top.\n", 100*float64(d.PortDrops)/float64(max(1, d.PortDrops+d.PortSentPackets)), float64(d.PortDrops)/max(1, d.Window.Seconds()))
	}
	s.WriteString("\n")

	fmt.Fprintf(&s, "### Reproduce\n\n")
	fmt.Fprintf(&s, "```\nsudo make bench-latency\n# = cd hack/bench && go run ./latency %s\n```\n\n", strings.Join(flagsUsed(c), " "))
	fmt.Fprintf(&s, "`make bench-latency` first rebuilds `bin/nettune-agent` from the tree (the program builds it itself when it is missing). It needs root (namespaces) and iproute2, took %s here, and removes everything it made (the testbed's namespaces, the agent's state directories and spec files) at the end, on errors and on Ctrl-C. `cd hack/bench && go run ./latency -h` lists the knobs (rounds, warm-up, window, topic size and rate, burst hosts, size and period, UDP burst size and period; `BENCH_LATENCY_ARGS=... make bench-latency` passes them).\n\n", r.elapsed.Round(time.Second))

	fmt.Fprintf(&s, "### Caveats\n\n")
	fmt.Fprintf(&s, "%s", r.caveats())
	return s.String()
}

// cpuRange is the spread of the machine's and this process's CPU share and
// the highest load average over every run.
func (r *report) cpuRange() (minCPU, maxCPU, minSelf, maxSelf, maxLoad float64) {
	minCPU, minSelf = 1, 1
	for _, a := range r.arms {
		for _, x := range a.Runs {
			minCPU, maxCPU = min(minCPU, x.CPUBusy), max(maxCPU, x.CPUBusy)
			minSelf, maxSelf = min(minSelf, x.CPUSelf), max(maxSelf, x.CPUSelf)
			maxLoad = max(maxLoad, x.MaxLoad)
		}
	}
	return
}

func (r *report) caveats() string {
	var s strings.Builder
	minCPU, maxCPU, minSelf, maxSelf, maxLoad := r.cpuRange()
	fmt.Fprintf(&s, "- **CPU contention.** The testbed forwards every frame in software on %d CPUs, and this benchmark alone (heavy transfer near line rate, incast, UDP bursts, %d topic connections, the emulators and the latency server) used %.0f-%.0f %% of the machine in its own process plus the forwarding in softirq; the machine as a whole was %.0f-%.0f %% busy during the windows. The 1-minute load average reached %.1f (the benchmark alone keeps it at about 1-3; beyond that, other jobs compete for the 2 CPUs: see the per-round table). Part of every latency is scheduling delay, and a CPU stall looks like a network stall to the emulator: the per-round table gives, per arm-run, the CPU pressure (share of time some task waited for a CPU) and the worst lateness of a 1 ms sleep in the benchmark process, next to the tail. The arms are interleaved and rotated so that contention falls on all of them alike; the per-round table shows how much a single run moves. While this benchmark was being developed, runs made while other jobs loaded the machine (load average 6-19) showed tuned p99.99 of 40-105 ms in single rounds and once, for v1, 148 messages >= 200 ms in a round during which the benchmark process itself stalled 275 ms with one RTO on the topic connections: CPU, not TCP. That is why such arm-runs are now repeated (-max-stall, see above). The defaults' 200 ms+ waits are RTO timers and do not depend on the load.\n", runtime.NumCPU(), len(r.b.topics), 100*minSelf, 100*maxSelf, 100*minCPU, 100*maxCPU, maxLoad)
	fmt.Fprintf(&s, "- **Testbed RTT, not vehicle RTT.** An idle testbed path has an RTT of microseconds (0.25 ms on the vehicle) and there is no netem here; queueing in the 128 KB port (about 1 ms at 1 Gbit/s) and CPU scheduling dominate. Absolute latencies are testbed latencies: compare arms with each other, not with the field's 27 ms / 18 ms.\n")
	fmt.Fprintf(&s, "- **ssthresh.** The route `ssthresh` of v1/v2 is written and read back, but the kernel ignores it while `net.ipv4.tcp_no_ssthresh_metrics_save=1` (the default, left alone); the agent reports it as not effective.\n")
	fmt.Fprintf(&s, "- **Message rate.** Topics run at %g Hz instead of the vehicle's 10 Hz so that p99.99 rests on enough messages. At 10 Hz a topic connection idles 100 ms between frames, longer than the tuned RTO, so slow-start-after-idle restarts it at initcwnd (25/30) before every frame; at %g Hz it never idles. The incast senders (every %s) do idle and show that effect.\n", r.c.topicRate, r.c.topicRate, r.c.burstEvery)
	fmt.Fprintf(&s, "- **Skipped ticks flatter the loser.** When a write blocks (send buffer full during a stall) or the emulator's timer fires late (CPU), the tick is skipped, not queued: the message is never sent and so never counted. The table's \"of N ticks\" shows how many were skipped per arm; counting them as late would only make the arm that stalls more look worse.\n")
	fmt.Fprintf(&s, "- **One switch buffer per port.** The SJA1105 shares its 128 KB among the ports; one tbf per port models it exactly for incast into one receiver (this benchmark) and overstates the buffer when several ports are congested.\n")
	fmt.Fprintf(&s, "- **revert is not \"defaults\".** `nettune-agent revert` re-applies the host's last-known-good state (Engine.Revert = Boot), so after a tuned arm it would re-apply that arm, not kernel defaults. The defaults arm therefore applies the rendered empty spec, which makes the agent restore the original routes; `ip route` above shows the result.\n")
	return s.String()
}

// reading explains the result with its own figures.
func (r *report) reading() string {
	var s strings.Builder
	d := r.arm("defaults")
	if d == nil {
		return ""
	}
	tick := time.Duration(float64(time.Second) / r.c.topicRate)
	fmt.Fprintf(&s, "- **Kernel defaults.** The receiver's port dropped %d frames in %s of windows (%.0f per second); the topic sender hosts saw %d RTO timeouts (%d of them on the topic connections themselves) and %d tail loss probes. Every RTO waits at least the 200 ms rto_min, and a topic connection delivers in order: at %g Hz a new message is queued every %s, so one stall delays the lost message and the ~%d queued behind it (head-of-line blocking). That is why %d messages (%.3f %%) waited >= 200 ms and why p99.99 (%s) lies beyond the RTO floor. When the retransmission is dropped too, the timer doubles (400, 800, 1600 ms ...); the most consecutive expiries of one segment seen on a topic connection was %d (`tcpi_backoff`), and a connection also goes through several separate RTOs in a row while it recovers a window of losses from cwnd 1: the slowest message waited %s. Under defaults %.1f %% of the frames arriving at the receiver's port were dropped (the heavy transfer keeps the 128 KB queue near full), and a retransmission arrives at that queue like any other frame.\n",
		d.PortDrops, d.Window, float64(d.PortDrops)/d.Window.Seconds(), d.Senders.Timeouts, d.Topic.RTOs, d.Senders.LossProbes,
		r.c.topicRate, tick, int(200*time.Millisecond/tick), d.D.atLeast(200*time.Millisecond), 100*float64(d.D.atLeast(200*time.Millisecond))/float64(max(1, len(d.D))), fmtMs(d.D.q(.9999)),
		d.Topic.MaxBackoff, fmtMs(d.D.max()), 100*float64(d.PortDrops)/float64(max(1, d.PortDrops+d.PortSentPackets)))
	for _, name := range []string{"v2", "v1"} {
		x := r.arm(name)
		if x == nil {
			continue
		}
		fmt.Fprintf(&s, "- **%s.** Port drops %d (%s against the defaults), sender-host RTOs %d, and no topic connection's window went above %d (`tcpi_snd_cwnd`: the locked clamp was in force on the live sockets). ",
			name, x.PortDrops, pct(rel(float64(x.PortDrops), float64(d.PortDrops))), x.Senders.Timeouts, x.Topic.MaxCwnd)
		if x.Topic.RTOs == 0 {
			fmt.Fprintf(&s, "The topic connections themselves never timed out: their losses (%d retransmitted segments) were repaired by fast retransmit and tail loss probes; the RTOs above are the incast connections, whose 128 KB writes end in a tail and then idle, and with rto_min 10 ms each cost about 10 ms instead of 200. ", x.Topic.Retrans)
		} else {
			fmt.Fprintf(&s, "The topic connections had %d RTO(s), at the 10 ms rto_min instead of 200 ms. ", x.Topic.RTOs)
		}
		fmt.Fprintf(&s, "%d messages waited >= 20 ms and %d >= 100 ms.", x.D.atLeast(20*time.Millisecond), x.D.atLeast(100*time.Millisecond))
		if w := slowestRun(x); w != nil {
			fmt.Fprintf(&s, " The slowest (%s) came in round %d, with %d RTOs on the topic connections; in that window the machine was %.0f %% busy, some task waited for a CPU %.0f %% of the time (PSI), a 1 ms sleep in the benchmark process woke up to %s late, and the load average went %s.", fmtMs(newDist(w.Lat).max()), w.Round, w.Topic.RTOs, 100*w.CPUBusy, 100*w.CPUPressure, fmtMs(w.TimerLate), w.Load1)
			if w.Topic.RTOs == 0 {
				s.WriteString(" No retransmission timer expired on a topic connection there; the tail is recovery by fast retransmit and probes plus CPU scheduling delay (see the caveats).")
			}
		}
		s.WriteString("\n")
	}
	if v2, v1 := r.arm("v2"), r.arm("v1"); v2 != nil && v1 != nil && len(v2.Runs) == len(v1.Runs) {
		drops, rtos, tails := 0, 0, 0
		for i := range v2.Runs {
			a, b := v2.Runs[i], v1.Runs[i]
			if a.PortDrops < b.PortDrops {
				drops++
			}
			if a.Senders.Timeouts < b.Senders.Timeouts {
				rtos++
			}
			if newDist(a.Lat).q(.9999) < newDist(b.Lat).q(.9999) {
				tails++
			}
		}
		fmt.Fprintf(&s, "- **v2 against v1.** The smaller clamp (30 vs 40 packets) overflows the port less: fewer receiver-port drops in %d of %d rounds (%d vs %d in total) and fewer sender-host RTOs in %d of %d (%d vs %d). On p99.99 the two are within each other's round-to-round spread (v2 lower in %d of %d rounds; pooled %s vs %s), so this run does not separate them on the tail; both remove the 200 ms waits.\n",
			drops, len(v2.Runs), v2.PortDrops, v1.PortDrops, rtos, len(v2.Runs), v2.Senders.Timeouts, v1.Senders.Timeouts, tails, len(v2.Runs), fmtMs(v2.D.q(.9999)), fmtMs(v1.D.q(.9999)))
	}
	fmt.Fprintf(&s, "- **Against the field.** The field's -33 %% (27 ms -> 18 ms) is for 10 Hz planning messages, where one RTO delays one or two messages and p99.99 stayed below the RTO floor even untuned. Here each topic sends %g messages per second, so every RTO under defaults delays dozens of messages and pulls p99.99 up to the RTO itself; the relative cut is therefore much larger than in the field and says more about the 200 ms floor than about the size of the effect on a vehicle. The absolute tuned figures are testbed latencies (microsecond base RTT, CPU-forwarded frames, see the caveats).\n", r.c.topicRate)
	return s.String()
}

// discardedText lists the arm-runs that were repeated.
func (r *report) discardedText() string {
	var s strings.Builder
	if r.c.maxStall <= 0 {
		s.WriteString("Arm-runs were never repeated (`-max-stall 0`).\n")
		return s.String()
	}
	fmt.Fprintf(&s, "**Repeated arm-runs.** The machine is shared: an arm-run during which a 1 ms sleep in the benchmark process woke up more than %s late (other jobs kept it off the CPUs; on a quiet machine the benchmark alone causes about 15-25 ms) is repeated, up to %d times, with a fresh apply; the decision looks only at that independent measure, never at the messages' latencies, and applies to every arm alike. ", r.c.maxStall, r.c.retries)
	if len(r.discarded) == 0 {
		s.WriteString("None had to be repeated in this run.\n")
		return s.String()
	}
	fmt.Fprintf(&s, "%d were repeated; their discarded results, for the record:\n\n", len(r.discarded))
	s.WriteString("| round | arm | attempt | timer lateness | CPU pressure | load | msgs | p99.99 | max | >= 200 ms | topic-connection RTOs |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range r.discarded {
		d := newDist(x.Lat)
		fmt.Fprintf(&s, "| %d | %s | %d | %s | %.0f %% | %s | %d | %s | %s | %d | %d |\n", x.Round, x.Arm, x.Attempt, fmtMs(x.TimerLate), 100*x.CPUPressure, x.Load1, len(d), fmtMs(d.q(.9999)), fmtMs(d.max()), d.atLeast(200*time.Millisecond), x.Topic.RTOs)
	}
	var kept []string
	for _, a := range r.arms {
		for _, x := range a.Runs {
			if x.TimerLate > r.c.maxStall {
				kept = append(kept, fmt.Sprintf("round %d %s (%s)", x.Round, x.Arm, fmtMs(x.TimerLate)))
			}
		}
	}
	if len(kept) > 0 {
		fmt.Fprintf(&s, "\nStill above the limit after %d repeats, and kept: %s.\n", r.c.retries, strings.Join(kept, ", "))
	}
	return s.String()
}

// slowestRun is the run holding the arm's slowest message.
func slowestRun(a *armResult) *runResult {
	var w *runResult
	var m time.Duration
	for _, x := range a.Runs {
		if d := newDist(x.Lat).max(); w == nil || d > m {
			w, m = x, d
		}
	}
	return w
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func orders(o [][]string) string {
	var parts []string
	for _, n := range o {
		parts = append(parts, "("+strings.Join(n, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

func flagsUsed(c config) []string {
	return []string{
		fmt.Sprintf("-rounds %d", c.rounds), fmt.Sprintf("-warmup %s", c.warmup), fmt.Sprintf("-window %s", c.window),
		fmt.Sprintf("-topic-size %d", c.topicSize), fmt.Sprintf("-topic-rate %g", c.topicRate),
		fmt.Sprintf("-burst-hosts %s", strings.Join(c.burstHosts, ",")), fmt.Sprintf("-burst-bytes %d", c.burstBytes), fmt.Sprintf("-burst-every %s", c.burstEvery),
		fmt.Sprintf("-foreign-bytes %d", c.foreignBytes), fmt.Sprintf("-foreign-every %s", c.foreignEvery),
		fmt.Sprintf("-solo %s", c.solo), fmt.Sprintf("-max-stall %s", c.maxStall), fmt.Sprintf("-retries %d", c.retries),
	}
}
