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
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/nettune/nettune/controllers/analysis"
)

// The physical evidence of a trial: what the canary and the baseline did on
// the wire over the trial's measurement, independent of any analysis. It
// shows whether an arm's edit hurt at all on this testbed, and how.

// slowBounds are the latencies (ms) messages are counted above.
var slowBounds = []int{50, 100, 200}

// tcpCounters are the hosts' kernel counters (per network namespace)
// counted over a trial: "Section.Name" of /proc/net/{snmp,netstat}.
var tcpCounters = []string{"Tcp.OutSegs", "Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "TcpExt.TCPSpuriousRTOs", "TcpExt.TCPDSACKRecvSegs"}

// cohortEvidence is one cohort's messages and counters over a trial.
type cohortEvidence struct {
	vehicles int
	msgs     float64
	over     map[int]float64  // messages slower than slowBounds[i] ms
	tcp      map[string]int64 // counter deltas summed over the cohort's hosts
}

type evidence struct {
	window           time.Duration
	canary, baseline cohortEvidence
}

// snapshot reads every host's counters, per vehicle (summed over its hosts).
func (b *bench) snapshot() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for name, v := range b.f.Vehicles {
		m := map[string]int64{}
		for _, h := range v.Hosts {
			c, err := h.TCPCounters()
			if err != nil {
				continue
			}
			for _, k := range tcpCounters {
				m[k] += c.All[k]
			}
		}
		out[name] = m
	}
	return out
}

// collect fills e from two snapshots and Loki's counts of the window
// ending at end.
func (b *bench) collect(before, after map[string]map[string]int64, canary, baseline []string, rev, stableRev string, window time.Duration, end time.Time) evidence {
	e := evidence{window: window}
	cohort := func(vehicles []string, revision string) cohortEvidence {
		c := cohortEvidence{vehicles: len(vehicles), over: map[int]float64{}, tcp: map[string]int64{}}
		for _, v := range vehicles {
			for _, k := range tcpCounters {
				c.tcp[k] += after[v][k] - before[v][k]
			}
		}
		sel := fmt.Sprintf(`{job="nettune-probe", vehicle=~"%s", revision="%s"}`, strings.Join(vehicles, "|"), revision)
		w, _ := analysis.FormatDuration(window)
		c.msgs = b.count(fmt.Sprintf(`sum(count_over_time(%s [%s]))`, sel, w), end)
		for _, ms := range slowBounds {
			c.over[ms] = b.count(fmt.Sprintf(`sum(count_over_time(%s | json | latency_ms > %d [%s]))`, sel, ms, w), end)
		}
		return c
	}
	e.canary = cohort(canary, rev)
	e.baseline = cohort(baseline, stableRev)
	return e
}

// count runs an instant LogQL query of one number (0 when empty; NaN on
// error).
func (b *bench) count(q string, at time.Time) float64 {
	vq, ok := b.q.(analysis.VectorQuerier)
	if !ok {
		return math.NaN()
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := vq.QueryVector(ctx, q, at)
	if err != nil {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range s {
		sum += x.Value
	}
	return sum
}

// per1000 is n per 1000 of d, "-" when d is 0.
func per1000(n, d float64) string {
	if d <= 0 || math.IsNaN(n) || math.IsNaN(d) {
		return "-"
	}
	return fmt.Sprintf("%.2f", 1000*n/d)
}

// physicsTable sums every trial's evidence per arm: messages slower than
// each bound per 1000 messages, and TCP events per 1000 messages, the
// canary vehicle against one baseline vehicle (each cohort's sums divided
// by its vehicles).
func (r *report) physicsTable() string {
	var b strings.Builder
	b.WriteString("| load | arm | trials | cohort | messages per vehicle")
	for _, ms := range slowBounds {
		fmt.Fprintf(&b, " | > %d ms per 1000", ms)
	}
	for _, k := range tcpCounters {
		fmt.Fprintf(&b, " | %s per 1000 messages", strings.TrimPrefix(strings.TrimPrefix(k, "TcpExt."), "Tcp."))
	}
	b.WriteString(" |\n|---|---|---|---|---|")
	for range len(slowBounds) + len(tcpCounters) {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, level := range levels(r.trials) {
		r.physicsRows(&b, level)
	}
	return b.String()
}

func (r *report) physicsRows(b *strings.Builder, level float64) {
	type sums struct {
		trials           int
		canary, baseline cohortEvidence
	}
	add := func(into *cohortEvidence, c cohortEvidence) {
		if into.over == nil {
			into.over, into.tcp = map[int]float64{}, map[string]int64{}
		}
		into.vehicles += c.vehicles
		into.msgs += c.msgs
		for k, v := range c.over {
			into.over[k] += v
		}
		for k, v := range c.tcp {
			into.tcp[k] += v
		}
	}
	per := map[string]*sums{}
	for _, t := range atLevel(r.trials, level) {
		if t.ev == nil {
			continue
		}
		s := per[t.arm]
		if s == nil {
			s = &sums{}
			per[t.arm] = s
		}
		s.trials++
		add(&s.canary, t.ev.canary)
		add(&s.baseline, t.ev.baseline)
	}
	for _, a := range r.arms() {
		s := per[a]
		if s == nil {
			continue
		}
		for _, row := range []struct {
			name string
			c    cohortEvidence
		}{{"canary", s.canary}, {"baseline", s.baseline}} {
			c := row.c
			fmt.Fprintf(b, "| %s | %s | %d | %s | %.0f", levelName(level), a, s.trials, row.name, c.msgs/float64(max(c.vehicles, 1)))
			for _, ms := range slowBounds {
				fmt.Fprintf(b, " | %s", per1000(c.over[ms], c.msgs))
			}
			for _, k := range tcpCounters {
				fmt.Fprintf(b, " | %s", per1000(float64(c.tcp[k]), c.msgs))
			}
			b.WriteString(" |\n")
		}
	}
}
