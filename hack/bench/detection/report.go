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
	"image/color"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/internal/fleet"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

type report struct {
	c       config
	trials  []trial
	methods []method
	took    time.Duration
	began   time.Time
	planned int
	earlier int    // trials of earlier runs (-accumulate), first in trials
	commit  string // the commit the trials measure
}

// write writes the report and the plot where the flags say.
func (r *report) write() error {
	if r.c.out != "" {
		if err := os.WriteFile(r.c.out, []byte(r.markdown()), 0o644); err != nil {
			return err
		}
	}
	if r.c.png != "" {
		if err := r.plot(r.c.png); err != nil {
			return err
		}
	}
	return nil
}

// cell is one arm x method.
type cell struct {
	n, fail, pass, inconclusive, undecided int
	times                                  []time.Duration // decided trials
	withinTwo, withEnough                  int             // judge: decided within two intervals of enough samples
}

// withinIntervals reports whether a decision gap after the measurement with
// the minimum samples is at most n measurements later. Both ends are
// measurement instants, taken every interval on a busy machine, so the gap
// is a multiple of the interval give or take the scheduler's milliseconds:
// it is counted in whole intervals, rounded, not compared to n x interval
// to the nanosecond (20.032 s is the second measurement after, 29.9 s the
// third).
func withinIntervals(gap, interval time.Duration, n int) bool {
	if interval <= 0 {
		return false
	}
	return (gap+interval/2)/interval <= time.Duration(n)
}

func (r *report) cells(trials []trial) map[string]map[string]*cell {
	out := map[string]map[string]*cell{}
	// Each method's own measuring clock; the step's is its slowest
	// analysis'.
	interval := map[string]time.Duration{}
	var slowest time.Duration
	for _, m := range r.methods {
		if m.spec != nil {
			interval[m.name] = m.spec.GetInterval()
			slowest = max(slowest, interval[m.name])
		}
	}
	for _, m := range r.methods {
		if m.spec == nil {
			interval[m.name] = slowest
		}
	}
	for _, t := range trials {
		if out[t.arm] == nil {
			out[t.arm] = map[string]*cell{}
		}
		for _, m := range r.methods {
			c := out[t.arm][m.name]
			if c == nil {
				c = &cell{}
				out[t.arm][m.name] = c
			}
			d := t.by[m.name]
			c.n++
			switch d.phase {
			case v1alpha1.AnalysisFailed:
				c.fail++
			case v1alpha1.AnalysisSuccessful:
				c.pass++
			case v1alpha1.AnalysisInconclusive:
				c.inconclusive++
			default:
				c.undecided++
			}
			if d.phase != "" {
				c.times = append(c.times, d.after)
			}
			if d.enoughAt > 0 && d.phase != "" {
				c.withEnough++
				if withinIntervals(d.after-d.enoughAt, interval[m.name], 2) {
					c.withinTwo++
				}
			}
		}
	}
	return out
}

// wilson is the 95 % Wilson score interval of k successes in n.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959964
	p := float64(k) / float64(n)
	nf := float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return math.Max(0, mid-half), math.Min(1, mid+half)
}

func pct(k, n int) string {
	lo, hi := wilson(k, n)
	return fmt.Sprintf("%d/%d (%.0f %%; 95 %% CI %.0f-%.0f %%)", k, n, 100*float64(k)/float64(max(n, 1)), 100*lo, 100*hi)
}

func quantileDur(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (r *report) armTitle(a string) string { return allArms[a].title }

// table is the result table (also printed at the end of a run).
func (r *report) table() string {
	var b strings.Builder
	fmt.Fprintln(&b, "| load | arm | analysis | trials | rolled back (Fail) | promoted (Pass) | inconclusive | undecided in time | decision after canary verified: median / p90 / max | decided within 2 intervals of the minimum samples |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|---|---|")
	for _, level := range levels(r.trials) {
		r.levelRows(&b, level)
	}
	return b.String()
}

// arms are the arms of the trials, in the order of -arms first.
func (r *report) arms() []string {
	out := append([]string(nil), r.c.arms...)
	for _, t := range r.trials {
		if !slices.Contains(out, t.arm) {
			out = append(out, t.arm)
		}
	}
	return out
}

func (r *report) levelRows(b *strings.Builder, level float64) {
	cells := r.cells(atLevel(r.trials, level))
	for _, a := range r.arms() {
		for _, m := range r.methods {
			c := cells[a][m.name]
			if c == nil {
				continue
			}
			label := "detection"
			if !allArms[a].bad {
				label = "false rollback"
			}
			within := "-"
			if c.withEnough > 0 {
				within = fmt.Sprintf("%d/%d", c.withinTwo, c.withEnough)
			}
			times := "-"
			if len(c.times) > 0 {
				times = fmt.Sprintf("%s / %s / %s", quantileDur(c.times, 0.5).Round(time.Second), quantileDur(c.times, 0.9).Round(time.Second), quantileDur(c.times, 1).Round(time.Second))
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s: %s | %d | %d | %d | %s | %s |\n", levelName(level), a, m.name, c.n, label, pct(c.fail, c.n), c.pass, c.inconclusive, c.undecided, times, within)
		}
	}
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Detection benchmark: the judge and the TCP guard against the threshold analysis\n\n")
	fmt.Fprintf(&b, "Produced by `make bench-detection` (`cd hack/bench && go run ./detection %s`, root) on %s: %d CPUs, %s. ",
		strings.Join(os.Args[1:], " "), r.began.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.Version())
	ran := len(r.trials) - r.earlier
	switch {
	case r.planned == 0:
		fmt.Fprintf(&b, "No trial was run for this report (`-report-only`): it is written from the trials log.\n\n")
	case ran < r.planned:
		fmt.Fprintf(&b, "**%d of the %d planned trials** of this run completed in %s (the run was stopped or is still going; the report is rewritten after every trial).\n\n", ran, r.planned, r.took.Round(time.Second))
	default:
		fmt.Fprintf(&b, "The whole run (%d trials) took **%s**.\n\n", ran, r.took.Round(time.Second))
	}
	fmt.Fprintf(&b, "Every trial measures commit `%s`.", r.commit)
	if r.earlier > 0 {
		runs := map[string]bool{}
		for _, t := range r.trials[:r.earlier] {
			runs[t.run] = true
		}
		fmt.Fprintf(&b, " **Accumulated**: besides this run's %d trials, %d trials of %d runs at the same commit and fleet shape, read from the trials log (`%s`).", ran, r.earlier, len(runs), r.c.trialsLog)
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "- **Fleet**: `internal/fleet` with %d vehicles x 3 hosts (network namespaces, a real `nettune-agent` per host, switch ports and NICs at %s with 128 KB buffers), the real controller, kube-apiserver, etcd, Loki and Prometheus; the topics are the demo's (%s from every host to every peer: name:bytes:rate) with the demo's traffic: TCP incast and synchronized foreign UDP bursts into xavier-a (`fleet.StartTraffic`).\n", r.c.vehicles, fleet.LANRate, strings.Join(fleet.DemoTopics, ", "))
	for _, level := range levels(r.trials) {
		if level <= 0 {
			fmt.Fprintf(&b, "- **Load level %q**: no background load process; the fleet itself (%d vehicles x 3 hosts, their agents and traffic, the control plane, Loki and Prometheus) on the %d CPUs.\n", levelName(level), r.c.vehicles, runtime.NumCPU())
			continue
		}
		fmt.Fprintf(&b, "- **Load level %q**: a separate process keeping each of the %d CPUs busy %.0f %% of every 10 ms, for the whole run, on top of the fleet itself.\n", levelName(level), runtime.NumCPU(), 100*level)
	}
	planned := fmt.Sprintf("%d per arm planned", r.c.trials)
	if r.planned == 0 {
		planned = "as counted below"
	}
	fmt.Fprintf(&b, "- **Trials**: %s, arms interleaved (%s), the canary vehicles rotating over the fleet; each trial a new revision given to %d canary vehicles through the controller, the other %d vehicles on the stable revision (the shipped v2) as the baseline. The three analyses are measured every 10 s from the moment every node of the canary verified the revision, on the same instant and the same cohorts, with the controller's own code (`analysis.Measure`, `analysis.Accumulate`), until the step (judge+guard) and the threshold analysis decided or %s passed (the judge or the guard alone may then be undecided: the step had already acted).\n", planned, strings.Join(r.c.arms, ", "), r.c.canaries, r.c.vehicles-r.c.canaries, r.c.maxTrial)
	spec := func(name string) *v1alpha1.AnalysisSpec {
		for _, m := range r.methods {
			if m.name == name {
				return m.spec
			}
		}
		return nil
	}
	judgeLine := func(j *v1alpha1.AnalysisSpec, what string) string {
		cfg, _ := analysis.JudgeConfigFor(j)
		// The per-cohort per-pair minimum as the judge applies it (a
		// judgement of no pairs still reports it).
		minimum := analysis.Judge(cfg, nil).MinSamples
		ratio := cfg.MaxRatio
		if ratio == 0 {
			ratio = 1
		}
		return fmt.Sprintf("`%s` (%s): per host pair, %s; Fail when the canary's share is larger than %g x the baseline's + %.2g percentage points at %.3g %% confidence (Bonferroni over the pairs) and the rank test of each vehicle's per-%s values (`intervalQuery`) confirms for every canary vehicle on its own, Pass at that confidence that it is not, at least %d per cohort and pair (quantile %g); every %s over at most %s, from one step after the first measurement",
			j.Name, j.Provider, what, ratio, 100*cfg.MaxIncrease, 100*cfg.Confidence, j.Judge.GetStep(), minimum, cfg.Quantile, analysis.Interval(j), j.GetWindow())
	}
	if j := spec("judge"); j != nil && j.Judge != nil && j.Judge.Threshold != nil {
		fmt.Fprintf(&b, "- **judge**: %s.\n", judgeLine(j, fmt.Sprintf("the share of messages slower than %s", j.Judge.Threshold.Duration)))
	}
	if g := spec("guard"); g != nil && g.Judge != nil {
		fmt.Fprintf(&b, "- **guard**: %s.\n", judgeLine(g, "the share of segments sent that the peer received twice (D-SACK, the agents' `nettune_tcp_dsack_dups_total` over `nettune_tcp_segments_out_total`)"))
	}
	fmt.Fprintf(&b, "- **%s**: the demo's analysis step, `analysis: {name: judge, with: [guard]}`, derived from the two as the planner combines them: the first failure (or inconclusive result) decides; a pass needs both.\n", stepMethod)
	if t := spec("threshold"); t != nil {
		fmt.Fprintf(&b, "- **threshold** (`%s`, the demo's analysis before the judge, `hack/bench/detection/threshold.yaml`): the canary's worst destination host p99.9 against the baseline's x %s + %s ms, %d measurements, at least %d samples; every %s over %s.\n\n",
			t.Name, *t.MaxBaselineFactor, *t.MaxBaselineOffset, *t.Measurements, *t.MinSamples, analysis.Interval(t), t.GetWindow())
	}
	fmt.Fprintf(&b, "Goal: every bad edit rolled back, no false rollback, a decision within two analysis intervals of the minimum samples.\n\n")
	b.WriteString("## Result\n\n")
	b.WriteString(r.table())
	b.WriteString("\nRates are counted over trials; the interval is the 95 % Wilson score interval. \"Inconclusive\" is an analysis that gave up (too many inconclusive measurements: the rollout would pause); \"undecided in time\" had not decided when the trial's time ran out.\n\n")
	b.WriteString("![decision time per trial](bench-detection.png)\n\n")
	b.WriteString("## What the edits did on the wire\n\n")
	b.WriteString("Summed over every trial of an arm, from the canary verified to the trial's end, independent of any analysis: probe messages slower than each bound (Loki), and the hosts' kernel TCP counters (each host's /proc/net/snmp and netstat; all of the host's traffic, the probes, the incast and the rest), per 1000 probe messages. The baseline is the vehicles on the stable revision over the same time, per vehicle.\n\n")
	b.WriteString(r.physicsTable())
	b.WriteString("\n")
	b.WriteString("## Arms\n\n")
	for _, a := range r.arms() {
		fmt.Fprintf(&b, "- `%s`: %s\n", a, r.armTitle(a))
	}
	b.WriteString("\n## Every trial\n\n| run | # | load | arm | canary | edit -> canary verified | load average | ")
	for _, m := range r.methods {
		fmt.Fprintf(&b, "%s | ", m.name)
	}
	b.WriteString("\n|---|---|---|---|---|---|---|")
	for range r.methods {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, t := range r.trials {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | ", t.run, t.n+1, levelName(t.level), t.arm, t.canary, t.verified.Round(100*time.Millisecond), t.load)
		for _, m := range r.methods {
			d := t.by[m.name]
			msg := strings.ReplaceAll(strings.Join(strings.Fields(d.msg), " "), "|", "/")
			if len(msg) > 240 {
				msg = msg[:240] + "..."
			}
			fmt.Fprintf(&b, "**%s** after %s: %s | ", orNone(d.phase), d.after.Round(time.Second), msg)
		}
		b.WriteString("\n")
	}
	return b.String()
}

var methodColors = []color.RGBA{{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}

// plot draws every trial's decision time by arm and analysis: a filled dot
// is a rollback (Fail), a ring a promotion (Pass), a cross no decision.
func (r *report) plot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Decision after the canary verified (%d trials)", len(r.trials))
	p.Y.Label.Text = "seconds"
	p.X.Label.Text = "arm (left: judge, right: threshold)"
	var names []string
	seen := map[string]bool{}
	type column struct {
		arm   string
		level float64
	}
	var cols []column
	lv := levels(r.trials)
	for _, l := range lv {
		for _, a := range r.arms() {
			cols = append(cols, column{a, l})
		}
	}
	for i, col := range cols {
		a := col.arm
		if len(lv) > 1 {
			names = append(names, fmt.Sprintf("%s @%.0f%%", a, 100*col.level))
		} else {
			names = append(names, a)
		}
		for mi, m := range r.methods {
			var fail, pass, none plotter.XYs
			k := 0
			for _, t := range r.trials {
				if t.arm != a || t.level != col.level {
					continue
				}
				d := t.by[m.name]
				x := float64(i) + float64(mi)*0.35 - 0.175 + (float64(k%7)-3)*0.02
				k++
				y := d.after.Seconds()
				switch d.phase {
				case v1alpha1.AnalysisFailed:
					fail = append(fail, plotter.XY{X: x, Y: y})
				case v1alpha1.AnalysisSuccessful:
					pass = append(pass, plotter.XY{X: x, Y: y})
				default:
					none = append(none, plotter.XY{X: x, Y: math.Max(y, r.c.maxTrial.Seconds())})
				}
			}
			for _, set := range []struct {
				pts   plotter.XYs
				shape draw.GlyphDrawer
				label string
			}{{fail, draw.CircleGlyph{}, "rolled back"}, {pass, draw.RingGlyph{}, "promoted"}, {none, draw.CrossGlyph{}, "no decision"}} {
				if len(set.pts) == 0 {
					continue
				}
				s, err := plotter.NewScatter(set.pts)
				if err != nil {
					return err
				}
				s.Shape = set.shape
				s.Color = methodColors[mi%len(methodColors)]
				s.Radius = vg.Points(3)
				p.Add(s)
				if label := m.name + ": " + set.label; !seen[label] {
					seen[label] = true
					p.Legend.Add(label, s)
				}
			}
		}
	}
	p.NominalX(names...)
	p.Legend.Top = true
	return p.Save(9*vg.Inch, 5*vg.Inch, path)
}
