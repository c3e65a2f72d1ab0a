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

// Command bench-detection measures how well the rollout analyses tell a bad
// tuning change from a good one on the simulated fleet, under a fixed
// background CPU load: the statistical judge (the demo's slow-messages
// analysis) and the threshold analysis it replaced (threshold.yaml), side by
// side on the same trials.
//
// A trial gives -canaries canary vehicles (2, as the demo) a new revision of the Xavier profile
// through the real controller (a rollout that holds at a pause step), waits
// until every node of the canary verified it, then every analysis interval
// measures both analyses on the same instant with the controller's own code
// (analysis.Measure and analysis.Accumulate) against the real Loki, the
// canary cohort against the vehicles still on the stable revision, until
// both reached a decision or the trial's time ran out; then the content goes
// back to stable and the next trial starts on the next vehicle. Arms: A/A (a
// revision that changes only ssthresh, which this kernel ignores while
// tcp_no_ssthresh_metrics_save=1) and three bad edits from the field's
// failure modes. Every trial's revision differs from the last 28 (ssthresh
// cycles), so no trial sees another's samples.
//
// It writes docs/benchmarks-detection.md and docs/bench-detection.png.
// Run it with `make bench-detection` (root; about 75 minutes with the defaults).
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
)

//go:embed threshold.yaml
var thresholdYAML []byte

const profileName = "xavier-lan"

type config struct {
	trials   int
	arms     []string
	load     float64
	vehicles int
	canaries int
	maxTrial time.Duration
	stateDir string
	out, png string
	burn     float64 // internal: run as the load generator
	traffic  fleet.Traffic
	// trialsLog is the JSON-lines log every trial is appended to;
	// accumulate reports every logged trial of the same commit and fleet
	// shape with this run's.
	trialsLog  string
	accumulate bool
	commit     string // -report-only: the commit to report
}

func main() {
	var c config
	var arms string
	flag.IntVar(&c.trials, "trials", 20, "trials per arm")
	flag.StringVar(&arms, "arms", "aa,untuned,cwnd1,rto2ms-noquickack", "arms, run in rotating order")
	flag.Float64Var(&c.load, "load", 0.5, "share of each CPU the background load keeps busy (0 = none)")
	flag.IntVar(&c.vehicles, "vehicles", 4, "simulated vehicles of 3 hosts (-canaries per trial, the rest baseline)")
	flag.IntVar(&c.canaries, "canaries", 2, "canary vehicles per trial, as the demo's canary.count (the judge's rank test needs the effect in each)")
	flag.DurationVar(&c.maxTrial, "max-trial", 150*time.Second, "longest a trial waits for both decisions after the canary verified")
	flag.StringVar(&c.stateDir, "state-dir", "", "fleet state (default: a temporary directory)")
	flag.StringVar(&c.out, "out", "docs/benchmarks-detection.md", "report (\"\" = none)")
	flag.StringVar(&c.png, "png", "docs/bench-detection.png", "plot (\"\" = none)")
	flag.Float64Var(&c.burn, "burn", 0, "internal: be the background load at this share of every CPU")
	c.traffic = fleet.DemoTraffic
	flag.IntVar(&c.traffic.FloodBytes, "flood-bytes", c.traffic.FloodBytes, "foreign UDP bytes each other host sends into xavier-a per round (0: none)")
	flag.DurationVar(&c.traffic.FloodEvery, "flood-every", c.traffic.FloodEvery, "foreign UDP round period")
	flag.IntVar(&c.traffic.IncastBytes, "incast-bytes", c.traffic.IncastBytes, "TCP incast bytes each other host writes into xavier-a per round (0: none)")
	flag.DurationVar(&c.traffic.IncastEvery, "incast-every", c.traffic.IncastEvery, "TCP incast round period")
	flag.StringVar(&c.trialsLog, "trials-log", "docs/bench-detection-trials.jsonl", "append every trial to this JSON-lines log (\"\" = none)")
	flag.BoolVar(&c.accumulate, "accumulate", false, "report every trial of -trials-log at this commit and fleet shape (every load level) with this run's: a record accumulated over several runs")
	reportOnly := flag.Bool("report-only", false, "run no trial: rewrite -out and -png from the trials of -trials-log at this commit and fleet shape (-commit to name another commit)")
	flag.StringVar(&c.commit, "commit", "", "with -report-only: the commit whose logged trials to report (default: the tree's)")
	flag.Parse()
	if *reportOnly {
		c.arms = strings.Split(arms, ",")
		if err := rewriteReport(c); err != nil {
			fmt.Fprintln(os.Stderr, "bench-detection:", err)
			os.Exit(1)
		}
		return
	}
	if c.burn > 0 {
		burn(c.burn)
		return
	}
	if c.canaries < 1 || c.canaries >= c.vehicles {
		fmt.Fprintf(os.Stderr, "bench-detection: -canaries %d must be at least 1 and fewer than -vehicles %d\n", c.canaries, c.vehicles)
		os.Exit(2)
	}
	c.arms = strings.Split(arms, ",")
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-detection:", err)
		os.Exit(1)
	}
}

// burn keeps every CPU busy share of the time: per CPU a goroutine spins for
// share x 10 ms, then sleeps the rest of each 10 ms, until killed.
func burn(share float64) {
	for range runtime.NumCPU() {
		go func() {
			for {
				start := time.Now()
				busy := time.Duration(share * float64(10*time.Millisecond))
				for time.Since(start) < busy {
				}
				time.Sleep(10*time.Millisecond - time.Since(start))
			}
		}()
	}
	select {}
}

// arm is one kind of change made to the canary.
type arm struct {
	name, title string
	bad         bool
	edit        func(*v1alpha1.NetTuningProfileSpec)
}

var allArms = map[string]arm{
	"aa": {name: "aa", title: "A/A: v2 again (only ssthresh differs, ignored by this kernel)", edit: func(*v1alpha1.NetTuningProfileSpec) {}},
	"untuned": {name: "untuned", title: "the untuned state: no clamp, kernel initcwnd, rto_min back at 200 ms", bad: true, edit: func(s *v1alpha1.NetTuningProfileSpec) {
		s.Defaults = &v1alpha1.TCPParameters{RTOMin: &metav1.Duration{Duration: 200 * time.Millisecond}}
	}},
	"rto200": {name: "rto200", title: "rto_min back at 200 ms, the clamp kept", bad: true, edit: func(s *v1alpha1.NetTuningProfileSpec) {
		s.Defaults.RTOMin = &metav1.Duration{Duration: 200 * time.Millisecond}
	}},
	"cwnd1": {name: "cwnd1", title: "cwnd 1 and rto_min 1s into xavier-a (the demo's stage 3)", bad: true, edit: func(s *v1alpha1.NetTuningProfileSpec) {
		one, yes := int32(1), true
		s.HostPairs = []v1alpha1.HostPair{{From: "*", To: "xavier-a", Parameters: &v1alpha1.TCPParameters{
			Cwnd: &v1alpha1.Cwnd{Value: 1, Lock: &yes}, Initcwnd: &one, Ssthresh: &one,
			RTOMin: &metav1.Duration{Duration: time.Second}}}}
	}},
	"rto2ms-noquickack": {name: "rto2ms-noquickack", title: "rto_min 2 ms without quickack (below the 40 ms delayed ACK)", bad: true, edit: func(s *v1alpha1.NetTuningProfileSpec) {
		f := false
		s.Defaults.RTOMin = &metav1.Duration{Duration: 2 * time.Millisecond}
		s.Defaults.Quickack = &f
	}},
}

// method is one analysis under test.
type method struct {
	name string
	spec *v1alpha1.AnalysisSpec
	q    analysis.Querier
}

// stepMethod is the column of the demo's analysis step: the judge with the
// guard beside it (analysis: {name: slow-messages, with: [spurious-retransmissions]}),
// derived from their two decisions as the planner combines them.
const stepMethod = "judge+guard"

// decision is one method's outcome on one trial.
type decision struct {
	phase string        // Successful, Failed, Inconclusive, or "" (no decision in time)
	after time.Duration // from the canary verified to the measurement that decided
	msg   string
	// enoughAt is, for the judge, when every canary pair first had the
	// minimum samples (0 when never).
	enoughAt time.Duration
}

type trial struct {
	arm      string
	n        int
	canary   string
	verified time.Duration // from the edit to the canary verified
	by       map[string]decision
	load     string
	ev       *evidence // what the cohorts did on the wire meanwhile
	level    float64   // the background load's share of each CPU (-load)
	run      string    // the run's start (RFC 3339) of a logged trial
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
	for _, a := range c.arms {
		if _, ok := allArms[a]; !ok {
			return fmt.Errorf("unknown arm %q", a)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	commit := commitOf(root)
	var earlier []trial
	if c.accumulate {
		if c.trialsLog == "" {
			return errors.New("-accumulate needs -trials-log")
		}
		if strings.HasSuffix(commit, "+dirty") {
			return fmt.Errorf("-accumulate: the tree differs from commit %s outside docs/: trials of uncommitted code are not accumulated", strings.TrimSuffix(commit, "+dirty"))
		}
		shape := record{Commit: commit, Vehicles: c.vehicles, Canaries: c.canaries, MaxTrial: c.maxTrial.String()}.shape()
		recs, err := readRecords(c.trialsLog, shape)
		if err != nil {
			return err
		}
		for _, r := range recs {
			earlier = append(earlier, r.trial())
		}
		fmt.Printf("accumulating: %d earlier trials of commit %s in %s\n", len(earlier), commit, c.trialsLog)
	}

	judge, guard, threshold, stable, err := analyses(root)
	if err != nil {
		return err
	}

	if c.load > 0 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		b := exec.Command(self, "-burn", strconv.FormatFloat(c.load, 'f', -1, 64))
		b.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := b.Start(); err != nil {
			return fmt.Errorf("background load: %w", err)
		}
		defer func() { _ = b.Process.Kill(); _ = b.Wait() }()
		fmt.Printf("background load: %.0f %% of each of %d CPUs (pid %d)\n", 100*c.load, runtime.NumCPU(), b.Process.Pid)
	}

	dir := c.stateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nettune-bench-detection-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	f, err := fleet.Start(ctx, fleet.Options{Dir: dir, Vehicles: fleet.DefaultVehicles(c.vehicles), Topics: fleet.DemoTopics, Progress: os.Stdout})
	if err != nil {
		return err
	}
	defer f.Close()
	stopTraffic := f.StartTrafficWith(ctx, c.traffic)
	defer stopTraffic()

	loki, prom := analysis.NewLoki(f.Loki.URL, nil), analysis.NewPrometheus(f.Prometheus.URL, nil)
	methods := []method{{"judge", judge, loki}, {"guard", guard, prom}, {"threshold", threshold, loki}}
	b := &bench{c: c, f: f, ctx: ctx, stable: stable, methods: methods, q: loki}
	// The report shows the step's combined outcome first.
	reported := append([]method{{name: stepMethod}}, methods...)
	if err := b.setStable(); err != nil {
		return err
	}
	trials := append([]trial(nil), earlier...)
	newReport := func() *report {
		return &report{c: c, trials: trials, methods: reported, took: time.Since(began), began: began, planned: c.trials * len(c.arms), earlier: len(earlier), commit: commit}
	}
	for i := 0; i < c.trials*len(c.arms); i++ {
		a := allArms[c.arms[i%len(c.arms)]]
		// The canaries rotate over the fleet, shifted by one more vehicle
		// every round of the arms: with as many arms as vehicles, a plain
		// i%vehicles would give each arm the same canaries every time.
		var canary []string
		first := i + i/len(c.arms)
		for k := 0; k < c.canaries; k++ {
			canary = append(canary, fmt.Sprintf("av-%03d", 1+(first+k)%c.vehicles))
		}
		sort.Strings(canary)
		t, err := b.trial(i, a, canary)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "trial %d (%s on %s): %v\n%s\n", i+1, a.name, strings.Join(canary, ","), err, f.Evidence(ctx))
			return err
		}
		t.level, t.run = c.load, began.UTC().Format(time.RFC3339)
		trials = append(trials, t)
		if c.trialsLog != "" {
			if err := appendRecord(c.trialsLog, toRecord(c, commit, began, t)); err != nil {
				return fmt.Errorf("trials log: %w", err)
			}
		}
		// The report is rewritten after every trial: an interrupted run
		// leaves the trials it completed, and says how many.
		if err := newReport().write(); err != nil {
			return err
		}
		fmt.Printf("[%5s] trial %d/%d %-18s canary %s verified after %s:", time.Since(began).Round(time.Second), i+1, c.trials*len(c.arms), a.name, t.canary, t.verified.Round(100*time.Millisecond))
		for _, m := range reported {
			d := t.by[m.name]
			fmt.Printf("  %s %s after %s", m.name, orNone(d.phase), d.after.Round(time.Second))
		}
		fmt.Println()
	}
	r := newReport()
	if err := r.write(); err != nil {
		return err
	}
	fmt.Print(r.table())
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "undecided"
	}
	return s
}

// analyses are the demo's judge and guard and the threshold analysis,
// and the demo's stable content.
func analyses(root string) (judge, guard, threshold *v1alpha1.AnalysisSpec, stable v1alpha1.NetTuningProfileSpec, err error) {
	judge, guard, stable, err = demoProfile(filepath.Join(root, "config", "samples", "demo", "02-xavier-lan-v2.yaml"))
	if err != nil {
		return nil, nil, nil, stable, err
	}
	threshold = &v1alpha1.AnalysisSpec{}
	if err := yaml.UnmarshalStrict(thresholdYAML, threshold); err != nil {
		return nil, nil, nil, stable, fmt.Errorf("threshold.yaml: %w", err)
	}
	return judge, guard, threshold, stable, nil
}

// rewriteReport writes the report of the logged trials of one commit and
// fleet shape, running none.
func rewriteReport(c config) error {
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	judge, guard, threshold, _, err := analyses(root)
	if err != nil {
		return err
	}
	commit := c.commit
	if commit == "" {
		commit = commitOf(root)
	}
	recs, err := readRecords(c.trialsLog, record{Commit: commit, Vehicles: c.vehicles, Canaries: c.canaries, MaxTrial: c.maxTrial.String()}.shape())
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("%s has no trial of commit %s with %d vehicles, %d canaries and -max-trial %s", c.trialsLog, commit, c.vehicles, c.canaries, c.maxTrial)
	}
	var trials []trial
	for _, r := range recs {
		trials = append(trials, r.trial())
	}
	methods := []method{{name: stepMethod}, {"judge", judge, nil}, {"guard", guard, nil}, {"threshold", threshold, nil}}
	r := &report{c: c, trials: trials, methods: methods, began: time.Now(), earlier: len(trials), commit: commit}
	if err := r.write(); err != nil {
		return err
	}
	fmt.Print(r.table())
	return nil
}

// demoProfile reads the demo's v2 profile: its judge analysis (the step's
// name), the guard beside it (the step's with), and its spec without
// rollout (the stable content).
func demoProfile(path string) (judge, guard *v1alpha1.AnalysisSpec, spec v1alpha1.NetTuningProfileSpec, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, spec, err
	}
	var p v1alpha1.NetTuningProfile
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, nil, spec, fmt.Errorf("%s: %w", path, err)
	}
	var step *v1alpha1.AnalysisStep
	for _, s := range p.Spec.Rollout.Steps {
		if s.Analysis != nil {
			step = s.Analysis
			break
		}
	}
	if step == nil || len(step.With) != 1 {
		return nil, nil, spec, fmt.Errorf("%s: want an analysis step with one analysis beside it (with)", path)
	}
	for i := range p.Spec.Rollout.Analyses {
		a := &p.Spec.Rollout.Analyses[i]
		switch a.Name {
		case step.Name:
			judge = a.DeepCopy()
		case step.With[0]:
			guard = a.DeepCopy()
		}
	}
	if judge == nil || judge.Judge == nil || guard == nil || guard.Judge == nil {
		return nil, nil, spec, fmt.Errorf("%s: the step's analyses %v must be judge analyses", path, step.Names())
	}
	spec = *p.Spec.DeepCopy()
	spec.Rollout = nil
	return judge, guard, spec, nil
}

type bench struct {
	c       config
	f       *fleet.Fleet
	ctx     context.Context
	stable  v1alpha1.NetTuningProfileSpec
	methods []method
	q       analysis.Querier
}

func (b *bench) get() (*v1alpha1.NetTuningProfile, error) {
	p := &v1alpha1.NetTuningProfile{}
	return p, b.f.CP.Client.Get(b.ctx, client.ObjectKey{Name: profileName}, p)
}

// setStable creates the profile with the stable content and waits until it
// is stable on every vehicle.
func (b *bench) setStable() error {
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName}, Spec: *b.stable.DeepCopy()}
	if err := b.f.CP.Client.Create(b.ctx, p); err != nil {
		return fmt.Errorf("creating the profile: %w", err)
	}
	_, err := b.waitProfile(3*time.Minute, "stable on every vehicle", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision != "" &&
			p.Status.Vehicles.Verified == p.Status.Vehicles.Total && p.Status.Vehicles.Total == int32(b.c.vehicles)
	})
	return err
}

func (b *bench) waitProfile(timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) (*v1alpha1.NetTuningProfile, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := b.get()
		if err == nil && p.Status.ObservedGeneration == p.Generation && cond(p) {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("timed out after %s waiting for %s (phase %s)", timeout, what, p.Status.Phase)
		}
		select {
		case <-b.ctx.Done():
			return p, b.ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (b *bench) edit(mutate func(*v1alpha1.NetTuningProfile)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := b.get()
		if err != nil {
			return err
		}
		mutate(p)
		return b.f.CP.Client.Update(b.ctx, p)
	})
}

// vehicleVerified reports whether every node of vehicle carries rev and
// verified it.
func (b *bench) vehicleVerified(vehicle, rev string) (bool, error) {
	return b.f.VehicleVerified(b.ctx, vehicle, profileName, rev)
}

func (b *bench) trial(i int, a arm, canary []string) (trial, error) {
	t := trial{arm: a.name, n: i, canary: strings.Join(canary, ","), by: map[string]decision{}}
	before, err := b.get()
	if err != nil {
		return t, err
	}
	stableRev := before.Status.StableRevision
	edited := time.Now()
	if err := b.edit(func(p *v1alpha1.NetTuningProfile) {
		p.Spec = *b.stable.DeepCopy()
		// A new revision every trial: ssthresh (at most cwnd, 30; never
		// v2's own 30) cycles with a period prime to the arms'.
		ss := int32(1 + i%29)
		p.Spec.Defaults.Ssthresh = &ss
		a.edit(&p.Spec)
		p.Spec.Defaults.Ssthresh = &ss
		p.Spec.Rollout = &v1alpha1.RolloutSpec{
			Canary: v1alpha1.CanarySpec{Vehicles: canary},
			Steps:  []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}},
		}
	}); err != nil {
		return t, err
	}
	p, err := b.waitProfile(time.Minute, "the canary revision", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision != stableRev && p.Status.CurrentRevision != ""
	})
	if err != nil {
		return t, err
	}
	rev := p.Status.CurrentRevision
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok := true
		for _, v := range canary {
			verified, err := b.vehicleVerified(v, rev)
			if err != nil {
				return t, err
			}
			ok = ok && verified
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return t, fmt.Errorf("canary %s did not verify %s in 2m", t.canary, rev)
		}
		time.Sleep(200 * time.Millisecond)
	}
	verifiedAt := time.Now()
	t.verified = verifiedAt.Sub(edited)
	var baseline []string
	for v := range b.f.Vehicles {
		if !slices.Contains(canary, v) {
			baseline = append(baseline, v)
		}
	}
	sort.Strings(baseline)
	if t.load = benchutil.Loadavg(); t.load == "" {
		t.load = "?"
	}

	results := map[string]v1alpha1.AnalysisResult{}
	counters := b.snapshot()
	interval := 10 * time.Second
	for at := verifiedAt; ; at = at.Add(interval) {
		select {
		case <-b.ctx.Done():
			return t, b.ctx.Err()
		case <-time.After(time.Until(at)):
		}
		now := time.Now()
		done := true
		for _, m := range b.methods {
			r := results[m.name]
			if v1alpha1.AnalysisTerminal(r.Phase) {
				continue
			}
			since := analysis.StartedAt(r, now)
			qctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
			meas := analysis.Measure(qctx, m.q, profileName, m.spec,
				analysis.Cohort{Vehicles: canary, Revision: rev, Since: since},
				analysis.Cohort{Vehicles: baseline, Revision: stableRev, Since: since}, now)
			cancel()
			r = analysis.Accumulate(r, meas, m.spec)
			results[m.name] = r
			d := t.by[m.name]
			if meas.Judge != nil && d.enoughAt == 0 && enough(meas.Judge) {
				d.enoughAt = now.Sub(verifiedAt)
			}
			if v1alpha1.AnalysisTerminal(r.Phase) {
				d.phase, d.after, d.msg = r.Phase, now.Sub(verifiedAt), r.Message
			} else {
				done = false
				d.msg = r.Message
			}
			t.by[m.name] = d
		}
		// The trial ends when the step (judge+guard, as the planner combines
		// them) and the threshold analysis decided: a rollout acts then, and
		// the other of judge and guard may be left undecided.
		if step := combine(t.by["judge"], t.by["guard"]); step.phase != "" && v1alpha1.AnalysisTerminal(results["threshold"].Phase) {
			done = true
		}
		if done || now.Sub(verifiedAt) >= b.c.maxTrial {
			break
		}
	}
	t.by[stepMethod] = combine(t.by["judge"], t.by["guard"])
	end := time.Now()
	ev := b.collect(counters, b.snapshot(), canary, baseline, rev, stableRev, end.Sub(verifiedAt).Round(time.Second), end)
	t.ev = &ev
	// Back to stable: editing the content back is an instant undo.
	if err := b.edit(func(p *v1alpha1.NetTuningProfile) { p.Spec = *b.stable.DeepCopy() }); err != nil {
		return t, err
	}
	_, err = b.waitProfile(2*time.Minute, "stable again", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision == stableRev && p.Status.Vehicles.Verified == p.Status.Vehicles.Total
	})
	return t, err
}

// combine is the analysis step's outcome from its two analyses' as the
// planner decides it: the first failure rolls back; an inconclusive one
// pauses; a pass needs both.
func combine(a, b decision) decision {
	// The earliest failure or inconclusive result decides (the step rolls
	// back or pauses there); a failure wins a tie.
	var d decision
	found := false
	for _, x := range []decision{a, b} {
		if x.phase != v1alpha1.AnalysisFailed && x.phase != v1alpha1.AnalysisInconclusive {
			continue
		}
		if !found || x.after < d.after || (x.after == d.after && x.phase == v1alpha1.AnalysisFailed) {
			d, found = x, true
		}
	}
	if found {
		return d
	}
	if a.phase == v1alpha1.AnalysisSuccessful && b.phase == v1alpha1.AnalysisSuccessful {
		d := a
		if b.after > a.after {
			d = b
		}
		d.enoughAt = max(a.enoughAt, b.enoughAt)
		return d
	}
	return decision{msg: a.msg + " / " + b.msg}
}

// enough reports whether the judge had the minimum samples on every pair
// (no pair inconclusive for lack of them).
func enough(r *analysis.JudgeResult) bool {
	if len(r.Pairs) == 0 {
		return false
	}
	for _, p := range r.Pairs {
		if p.CanaryTotal < r.MinSamples || p.BaselineTotal < r.MinSamples {
			return false
		}
	}
	return true
}
