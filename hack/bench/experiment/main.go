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

// Command bench-experiment runs NetTuningExperiments on the simulated fleet
// (real agents on the real kernel, the demo's traffic: topics, incast and
// UDP bursts into each vehicle's first host) and says how often the
// experiment's ranking agreed with the wire: each trial is one experiment
// of a variant set against the control (the shipped v2 revision), with
// cohorts drawn afresh; beside the experiment's ranking, the trial records
// each arm's retransmitted segments and RTO timeouts per 1,000 segments
// sent, read from its hosts' kernel counters over the measurement — the
// mechanism of slow messages on this testbed, measured without any
// analysis.
//
// It writes docs/bench-experiment.md. Run it with `make bench-experiment`
// (root; about 25 minutes with the defaults).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
)

type config struct {
	vehicles  int
	trials    int
	sets      []string
	duration  time.Duration
	threshold time.Duration
	out       string
	stateDir  string
	adopt     bool
}

// variantSets are the experiments a trial can run.
var variantSets = map[string]struct {
	title    string
	variants []v1alpha1.ExperimentVariant
	// wire is the set's measure of the arms on the wire, smaller is
	// better: what makes messages slow when these parameters change.
	wire      func(arm string, p armPhysics) float64
	wireTitle string
	// traffic is what runs in every vehicle during the set's trials: the
	// mechanism the set's parameters act on.
	traffic      fleet.Traffic
	trafficTitle string
	// threshold is the judge's latency threshold for the set's trials.
	threshold time.Duration
}{
	"cwnd": {"cwnd 10 / 80 against the control's 30", []v1alpha1.ExperimentVariant{
		{Name: "cwnd10", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 10}, Initcwnd: ptr(int32(10)), Ssthresh: ptr(int32(10))}},
		{Name: "cwnd80", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 80}, Initcwnd: ptr(int32(25)), Ssthresh: ptr(int32(80))}},
	}, func(_ string, p armPhysics) float64 { return p.retransPer1000() }, "retransmitted segments per 1,000 sent (the clamp decides how much the port drops)",
		fleet.Traffic{IncastBytes: 256 << 10, IncastEvery: 100 * time.Millisecond, IncastReconnect: 5 * time.Second},
		"TCP incast only: the two other hosts write 256 KB each into the first host every 100 ms on connections opened afresh every 5 s (a socket takes its route's cwnd clamp when it connects); two senders' in-flight data fits the 128 KB port at cwnd 10 and 30 and overflows it at 80; no UDP",
		20 * time.Millisecond},
	"bad": {"the demo's bad edit (cwnd 1, rto_min 1 s) against the control", []v1alpha1.ExperimentVariant{
		{Name: "cwnd1-rto1s", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 1}, Initcwnd: ptr(int32(1)), Ssthresh: ptr(int32(1)),
			RTOMin: &metav1.Duration{Duration: time.Second}}},
	}, timerWait(map[string]float64{"cwnd1-rto1s": 1000}), "ms waited for retransmission timers per 1,000 segments sent (RTO timeouts x the arm's rto_min)",
		fleet.DemoTraffic, demoTrafficTitle, 50 * time.Millisecond},
	"rto": {"rto_min 200 ms against the control's 10 ms", []v1alpha1.ExperimentVariant{
		{Name: "rto200ms", Parameters: v1alpha1.TCPParameters{RTOMin: &metav1.Duration{Duration: 200 * time.Millisecond}}},
	}, timerWait(map[string]float64{"rto200ms": 200}), "ms waited for retransmission timers per 1,000 segments sent (RTO timeouts x the arm's rto_min: rto_min decides how long a loss without fast retransmit waits)",
		fleet.DemoTraffic, demoTrafficTitle, 100 * time.Millisecond},
}

const demoTrafficTitle = "the demo's: the two other hosts write 64 KB each of TCP into the first host every 100 ms on long-lived connections, and 1 MB each of UDP every 250 ms (twice the port's rate for about 40 ms: the port drops about half of what arrives then, whatever the TCP tuning)"

// timerWait is the wire measure of a set whose arms differ in rto_min: ms
// waited for retransmission timers per 1,000 segments sent (RTO timeouts x
// the arm's rto_min in ms, from rtoMs; 10, the control's v2, for the
// others).
func timerWait(rtoMs map[string]float64) func(arm string, p armPhysics) float64 {
	return func(arm string, p armPhysics) float64 {
		rto, ok := rtoMs[arm]
		if !ok {
			rto = 10
		}
		if p.outSegs == 0 {
			return 0
		}
		return 1000 * float64(p.timeouts) * rto / float64(p.outSegs)
	}
}

func ptr[T any](v T) *T { return &v }

func main() {
	var c config
	var sets string
	flag.IntVar(&c.vehicles, "vehicles", 6, "vehicles of the simulated fleet (3 hosts each)")
	flag.IntVar(&c.trials, "trials", 2, "experiments per variant set")
	flag.StringVar(&sets, "sets", "bad,cwnd,rto", "variant sets (bad, cwnd, rto)")
	flag.DurationVar(&c.duration, "duration", 2*time.Minute, "each experiment's duration")
	flag.DurationVar(&c.threshold, "threshold", 0, "the judge's latency threshold for every set (default: each set's own; the demo's is 200ms)")
	flag.StringVar(&c.out, "out", "docs/bench-experiment.md", "report to write")
	flag.BoolVar(&c.adopt, "adopt", true, "after the trials, make the base worse (cwnd 80), run cwnd 30 against it and adopt the winner")
	flag.StringVar(&c.stateDir, "state-dir", "", "keep the fleet's state here (default: a temporary directory, removed)")
	flag.Parse()
	c.sets = strings.Split(sets, ",")
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "bench-experiment: %v\n", err)
		os.Exit(1)
	}
}

// trial is one experiment's outcome.
type trial struct {
	set     string
	ranking []string // the experiment's, best first (arm, or arm* when stopped)
	winner  string
	stopped map[string]time.Duration // arm -> when it was stopped, after measuringSince
	physics map[string]armPhysics
	order   []string // the arms by retransmissions per 1,000 segments, fewest first
	agree   bool
	// agreeSeparated: the ranking orders every pair of arms the wire
	// separates (wireSeparates) as the wire does.
	agreeSeparated bool
	// worstLast: the wire's worst arm, when the wire separates it from
	// every other arm, is ranked last (nil: the wire has no clear worst).
	worstLast *bool
	took      time.Duration
	messages  map[string]int64
	// shares are each arm's slow share (%), with the effect against the
	// control and its interval for the variants, as the experiment's
	// status gives them.
	shares map[string]string
}

type armPhysics struct {
	outSegs, retrans, timeouts int64
}

func (p armPhysics) retransPer1000() float64 {
	if p.outSegs == 0 {
		return 0
	}
	return 1000 * float64(p.retrans) / float64(p.outSegs)
}

func run(c config) error {
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the simulated vehicles are network namespaces: run as root")
	}
	for _, s := range c.sets {
		if _, ok := variantSets[s]; !ok {
			return fmt.Errorf("unknown variant set %q", s)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	base, judge, err := demoBase(filepath.Join(root, "config", "samples", "demo", "02-xavier-lan-v2.yaml"))
	if err != nil {
		return err
	}
	dir := c.stateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nettune-bench-experiment-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	f, err := fleet.Start(ctx, fleet.Options{Dir: dir, Vehicles: fleet.DefaultVehicles(c.vehicles), Topics: fleet.DemoTopics, Progress: os.Stdout})
	if err != nil {
		return err
	}
	defer f.Close()
	cl := f.CP.Client
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "xavier-lan"}, Spec: base}
	if err := cl.Create(ctx, p); err != nil {
		return err
	}
	var trials []trial
	n := 0
	for t := range c.trials {
		for _, set := range c.sets {
			n++
			j := *judge.DeepCopy()
			j.Judge.Threshold = &metav1.Duration{Duration: c.thresholdOf(set)}
			stopTraffic := f.StartTrafficWith(ctx, variantSets[set].traffic)
			tr, err := runTrial(ctx, f, c, fmt.Sprintf("%s-%d", set, t+1), set, j)
			stopTraffic()
			if err != nil {
				return fmt.Errorf("trial %s-%d: %w\n%s", set, t+1, err, f.Evidence(ctx))
			}
			trials = append(trials, tr)
			fmt.Printf("[%5s] trial %d/%d %s: ranking %v (winner %s); the wire's order %v; agree %v\n",
				time.Since(began).Round(time.Second), n, c.trials*len(c.sets), set, tr.ranking, tr.winner, tr.order, tr.agree)
			if err := writeReport(c, trials, nil, time.Since(began), began); err != nil {
				return err
			}
		}
	}
	if !c.adopt {
		return nil
	}
	a, err := runAdoption(ctx, f, c, judge)
	if err != nil {
		return fmt.Errorf("adoption trial: %w\n%s", err, f.Evidence(ctx))
	}
	fmt.Printf("[%5s] adoption: winner %s; adopt: %s %s; %d of %d vehicles on %s during the canary pause; whole fleet after %s\n",
		time.Since(began).Round(time.Second), a.winner, a.adoptOut, a.adoptErr, a.held, a.heldOf, a.newRev, a.toFleet.Round(time.Second))
	return writeReport(c, trials, &a, time.Since(began), began)
}

func (c config) thresholdOf(set string) time.Duration {
	if c.threshold > 0 {
		return c.threshold
	}
	return variantSets[set].threshold
}

// demoBase is the demo's v2 content (no rollout) and its judge.
func demoBase(path string) (v1alpha1.NetTuningProfileSpec, v1alpha1.AnalysisSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return v1alpha1.NetTuningProfileSpec{}, v1alpha1.AnalysisSpec{}, err
	}
	var p v1alpha1.NetTuningProfile
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return p.Spec, v1alpha1.AnalysisSpec{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, a := range p.Spec.Rollout.Analyses {
		if a.Name == "slow-messages" && a.Judge != nil {
			spec := *p.Spec.DeepCopy()
			spec.Rollout = nil
			return spec, *a.DeepCopy(), nil
		}
	}
	return p.Spec, v1alpha1.AnalysisSpec{}, fmt.Errorf("%s: no slow-messages judge", path)
}

func runTrial(ctx context.Context, f *fleet.Fleet, c config, name, set string, judge v1alpha1.AnalysisSpec) (trial, error) {
	cl := f.CP.Client
	began := time.Now()
	tr := trial{set: set, stopped: map[string]time.Duration{}, physics: map[string]armPhysics{}, messages: map[string]int64{}, shares: map[string]string{}}
	x := &v1alpha1.NetTuningExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NetTuningExperimentSpec{
			Profile: "xavier-lan", MaxPercent: ptr(int32(100)), Duration: metav1.Duration{Duration: c.duration},
			Variants: variantSets[set].variants, Analysis: judge,
		},
	}
	if err := cl.Create(ctx, x); err != nil {
		return tr, err
	}
	get := func() (*v1alpha1.NetTuningExperiment, error) {
		x := &v1alpha1.NetTuningExperiment{}
		return x, cl.Get(ctx, client.ObjectKey{Name: name}, x)
	}
	// The hosts' counters are read when every arm is verified and at the
	// end (or when an arm stops, for that arm).
	var before map[string]map[string]int64
	after := map[string]map[string]map[string]int64{}
	deadline := time.Now().Add(c.duration + 5*time.Minute)
	for {
		if time.Now().After(deadline) {
			return tr, errors.New("the experiment did not complete in time")
		}
		if ctx.Err() != nil {
			return tr, ctx.Err()
		}
		time.Sleep(time.Second)
		x, err := get()
		if err != nil {
			return tr, err
		}
		if before == nil && x.Status.MeasuringSince != nil {
			before = snapshot(f)
		}
		for _, a := range x.Status.Arms {
			if a.Phase == v1alpha1.ArmStopped && after[a.Name] == nil {
				after[a.Name] = snapshot(f)
				if x.Status.MeasuringSince != nil {
					tr.stopped[a.Name] = time.Since(x.Status.MeasuringSince.Time)
				}
			}
		}
		if x.Status.Phase == v1alpha1.ExperimentAborted {
			return tr, fmt.Errorf("aborted: %s", x.Status.Message)
		}
		if x.Status.Phase != v1alpha1.ExperimentCompleted {
			continue
		}
		end := snapshot(f)
		if before == nil {
			before = end
		}
		for _, res := range x.Status.Results {
			tr.winner = res.Winner
			for _, r := range res.Ranking {
				name := r.Arm
				if r.Stopped {
					name += "*"
				}
				tr.ranking = append(tr.ranking, name)
				tr.messages[r.Arm] = r.Total
				share := fmt.Sprintf("%s %s %%", r.Arm, r.Share)
				if r.Effect != "" {
					share += fmt.Sprintf(" (%s pp [%s, %s])", r.Effect, r.EffectLow, r.EffectHigh)
				}
				tr.shares[r.Arm] = share
			}
		}
		for _, a := range x.Status.Arms {
			snap := end
			if s, ok := after[a.Name]; ok {
				snap = s
			}
			var ph armPhysics
			for _, co := range a.Cohorts {
				for _, v := range co.Vehicles {
					ph.outSegs += snap[v]["Tcp.OutSegs"] - before[v]["Tcp.OutSegs"]
					ph.retrans += snap[v]["Tcp.RetransSegs"] - before[v]["Tcp.RetransSegs"]
					ph.timeouts += snap[v]["TcpExt.TCPTimeouts"] - before[v]["TcpExt.TCPTimeouts"]
				}
			}
			tr.physics[a.Name] = ph
			tr.order = append(tr.order, a.Name)
		}
		wire := variantSets[set].wire
		sort.SliceStable(tr.order, func(i, j int) bool {
			return wire(tr.order[i], tr.physics[tr.order[i]]) < wire(tr.order[j], tr.physics[tr.order[j]])
		})
		var ranked []string
		for _, r := range tr.ranking {
			ranked = append(ranked, strings.TrimSuffix(r, "*"))
		}
		tr.agree = strings.Join(ranked, ",") == strings.Join(tr.order, ",")
		pos := map[string]int{}
		for i, r := range ranked {
			pos[r] = i
		}
		measure := func(arm string) float64 { return wire(arm, tr.physics[arm]) }
		tr.agreeSeparated = true
		for i, a := range tr.order {
			for _, b := range tr.order[i+1:] {
				if wireSeparates(measure(a), measure(b)) && pos[a] > pos[b] {
					tr.agreeSeparated = false
				}
			}
		}
		if n := len(tr.order); n > 1 {
			worst := tr.order[n-1]
			separated := true
			for _, a := range tr.order[:n-1] {
				separated = separated && wireSeparates(measure(a), measure(worst))
			}
			if separated {
				last := len(ranked) > 0 && ranked[len(ranked)-1] == worst
				tr.worstLast = &last
			}
		}
		tr.took = time.Since(began)
		// The arms' profiles are deleted by the controller; wait until the
		// fleet is back on the base before the next trial.
		for time.Now().Before(deadline) {
			var list v1alpha1.NetTuningProfileList
			if err := cl.List(ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: name}); err == nil && len(list.Items) == 0 {
				break
			}
			time.Sleep(time.Second)
		}
		time.Sleep(10 * time.Second) // the agents move back; the next trial's base must be stable
		return tr, nil
	}
}

// wireSeparates says whether the wire's measures of two arms, a <= b,
// differ clearly: b above twice a plus 0.5 (the judge's own shape of a
// clear difference, on the wire's scale).
func wireSeparates(a, b float64) bool { return b > 2*a+0.5 }

// snapshot reads every vehicle's kernel counters, summed over its hosts.
func snapshot(f *fleet.Fleet) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	for name, v := range f.Vehicles {
		m := map[string]int64{}
		for _, h := range v.Hosts {
			c, err := h.TCPCounters()
			if err != nil {
				continue
			}
			for _, k := range []string{"Tcp.OutSegs", "Tcp.RetransSegs", "TcpExt.TCPTimeouts"} {
				m[k] += c.All[k]
			}
		}
		out[name] = m
	}
	return out
}

func writeReport(c config, trials []trial, adopted *adoption, took time.Duration, began time.Time) error {
	var s strings.Builder
	fmt.Fprintf(&s, "# Experiments on the simulated fleet\n\n")
	fmt.Fprintf(&s, "Produced by `make bench-experiment` (`cd hack/bench && go run ./experiment`, root) on %s; %d trials in %s. Fleet: %d vehicles of 3 hosts (real agents on the real kernel), the demo's topics (16 KB messages at 40 Hz from every host to every peer) through a 128 KB switch port at %s per host. Base: the shipped v2 content (cwnd 30, initcwnd 25, rto_min 10 ms); each trial is one NetTuningExperiment with maxPercent 100 (every arm and the control get the same number of vehicles), duration %s, judged by the demo's slow-messages analysis at each set's threshold.\n\n",
		began.UTC().Format("2006-01-02 15:04 UTC"), len(trials), took.Round(time.Second), c.vehicles, fleet.LANRate, c.duration)
	fmt.Fprintf(&s, "The wire's order is read from the arms' hosts' kernel counters (their network namespaces, over the measurement, until an arm was stopped), without any analysis, smallest first. A trial agrees when the experiment's ranking is that order; it agrees on the separated pairs when every pair of arms whose wire measures differ clearly (the larger above twice the smaller plus 0.5) is ranked in the wire's order, whatever the ranking of arms the wire cannot tell apart.\n\n")
	fmt.Fprintf(&s, "| set | traffic during its trials | judge's threshold | the wire's measure |\n|---|---|---|---|\n")
	for _, set := range c.sets {
		fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", set, variantSets[set].trafficTitle, c.thresholdOf(set), variantSets[set].wireTitle)
	}
	fmt.Fprintln(&s)
	agree := map[string][5]int{} // agree, trials, agree on separated pairs, worst last, a clear worst
	for _, t := range trials {
		a := agree[t.set]
		a[1]++
		if t.agree {
			a[0]++
		}
		if t.agreeSeparated {
			a[2]++
		}
		if t.worstLast != nil {
			a[4]++
			if *t.worstLast {
				a[3]++
			}
		}
		agree[t.set] = a
	}
	for _, set := range c.sets {
		a := agree[set]
		winners, stopped, worstStopped := 0, 0, 0
		for _, t := range trials {
			if t.set != set {
				continue
			}
			if t.winner != v1alpha1.ControlArm {
				winners++
			}
			stopped += len(t.stopped)
			if len(t.order) > 0 {
				if _, ok := t.stopped[t.order[len(t.order)-1]]; ok {
					worstStopped++
				}
			}
		}
		fmt.Fprintf(&s, "- **%s** (%s): the ranking agreed with the wire's order in **%d of %d** trials, on the pairs the wire separates in **%d of %d**; the wire had a clear worst arm in %d trial(s) and the experiment ranked it last in %d; a variant was declared better than the control in %d; %d arm(s) stopped early, the wire's worst arm in %d trial(s).\n",
			set, variantSets[set].title, a[0], a[1], a[2], a[1], a[4], a[3], winners, stopped, worstStopped)
	}
	fmt.Fprintf(&s, "\n| trial | ranking (best first; * stopped early) | slow share (effect against the control, interval at the judge's confidence) | winner | stopped after measuring began | the wire's order (the set's measure) | RTO timeouts | messages judged | agree | agree on separated pairs |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for i, t := range trials {
		var stopped, phys, rto, msgs, shares []string
		for _, r := range t.ranking {
			shares = append(shares, t.shares[strings.TrimSuffix(r, "*")])
		}
		for arm, d := range t.stopped {
			stopped = append(stopped, fmt.Sprintf("%s %s", arm, d.Round(time.Second)))
		}
		sort.Strings(stopped)
		for _, arm := range t.order {
			p := t.physics[arm]
			phys = append(phys, fmt.Sprintf("%s %.1f", arm, variantSets[t.set].wire(arm, p)))
			rto = append(rto, fmt.Sprintf("%s %d", arm, p.timeouts))
			msgs = append(msgs, fmt.Sprintf("%s %d", arm, t.messages[arm]))
		}
		fmt.Fprintf(&s, "| %d %s | %s | %s | %s | %s | %s | %s | %s | %v | %v |\n", i+1, t.set, strings.Join(t.ranking, ", "), strings.Join(shares, "; "), t.winner,
			benchutil.OrDash(strings.Join(stopped, ", ")), strings.Join(phys, ", "), strings.Join(rto, ", "), strings.Join(msgs, ", "), t.agree, t.agreeSeparated)
	}
	if adopted != nil {
		writeAdoption(&s, adopted)
	}
	return os.WriteFile(c.out, []byte(s.String()), 0o644)
}
