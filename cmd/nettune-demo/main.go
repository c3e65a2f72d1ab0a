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

// Command nettune-demo is the embedded default behind `make demo`: a local
// kube-apiserver and etcd, Loki, Prometheus, the controller and four
// simulated vehicles of three hosts (network namespaces, each host a Node
// running a real nettune-agent), then the rollout story with kubectl:
// a stable profile, a canary rollout of the shipped profile, and a bad edit
// the controller rolls back by itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "nettune-demo: %v\n", err)
		os.Exit(1)
	}
}

// walkthrough is the story told once the fleet is up; the tests replace it
// to bring a fleet up and down quickly.
var walkthrough = (*demo).walkthrough

type options struct {
	exit     bool
	stateDir string
	vehicles int
	skipBad  bool
}

const profile = "xavier-lan"

// warningsManifest is the chart's profile-warnings template rendered by make
// generate (checked by make verify), so the demo needs no helm.
const warningsManifest = "config/admission/profile-warnings.yaml"

func run(out io.Writer, args []string) error {
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	var o options
	fs := flag.NewFlagSet("nettune-demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&o.exit, "exit", false, "take everything down after the walkthrough instead of waiting for Ctrl-C")
	fs.StringVar(&o.stateDir, "state-dir", filepath.Join(root, ".nettune", "demo"), "kubeconfig, logs, Loki and Prometheus data (emptied first; only the logs are kept at exit); the lock is <state-dir>.lock")
	fs.IntVar(&o.vehicles, "vehicles", 4, "simulated vehicles (3 hosts each)")
	fs.BoolVar(&o.skipBad, "skip-bad", false, "skip the bad edit and its automatic rollback")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("the simulated vehicles are network namespaces: run as root")
	}
	o.stateDir = filepath.Clean(o.stateDir)

	// Signals first: a Ctrl-C from here on takes down what was made.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	ledger, release, err := claim(out, o.stateDir)
	if err != nil {
		return err
	}
	defer release()
	d := &demo{out: out, root: root, ctx: ctx, began: time.Now(), ledger: ledger}

	d.section("starting the fleet: control plane, Loki, Prometheus, controller, %d vehicles x 3 hosts", o.vehicles)
	f, err := fleet.Start(ctx, fleet.Options{Dir: o.stateDir, Vehicles: fleet.DefaultVehicles(o.vehicles), Topics: fleet.DemoTopics, Progress: out, Ledger: ledger})
	if err != nil {
		return err
	}
	d.f = f
	defer func() {
		d.section("taking the fleet down")
		if err := f.Close(); err != nil {
			fmt.Fprintf(out, "    %v\n", err)
		}
		fmt.Fprintln(out, "    every namespace, agent, Loki, Prometheus and the control plane stopped")
	}()
	stopTraffic := f.StartTraffic(ctx)
	defer stopTraffic()
	fmt.Fprintf(out, "    switch ports and NICs at %s with 128 KB port buffers\n", fleet.LANRate)
	fmt.Fprintln(out, "    traffic: every host sends 16 KB planning messages to every peer 40 times a second;")
	fmt.Fprintf(out, "    xavier-b and xavier-c write %d KB each over TCP into xavier-a every %s (incast),\n", fleet.IncastBytes>>10, fleet.IncastEvery)
	fmt.Fprintf(out, "    and send %d KB each of UDP into xavier-a at once every %s (the busy port drops, whatever the tuning)\n", fleet.FloodBytes>>10, fleet.FloodEvery)

	if err := walkthrough(d, o); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	d.summary()
	if err := d.verdict(); err != nil {
		return err
	}
	if o.exit {
		return nil
	}
	fmt.Fprintln(out, "\nThe fleet keeps running. Press Ctrl-C to take it down.")
	<-ctx.Done()
	return nil
}

type demo struct {
	out    io.Writer
	root   string
	ctx    context.Context
	f      *fleet.Fleet
	ledger *fleet.Ledger
	began  time.Time

	applied, firstCanary, fleetVerified, badApplied, badDecided time.Time
	// driving is the vehicle whose apply gate is closed during stage 2;
	// drivingDeferred is when the rollout first counted it Deferred,
	// gateOpened when its gate opened, drivingVerified when its nodes
	// verified v2 (zero: not seen).
	driving                                      string
	drivingDeferred, gateOpened, drivingVerified time.Time
	// goodOutcome and badOutcome are what was observed at the end of stages
	// 2 and 3 (see outcome); empty when the stage did not run.
	goodOutcome, badOutcome outcome
}

// outcome is how a rollout ended, as read from the profile's status.
type outcome string

const (
	outcomePromoted   outcome = "promoted"    // the revision became stable on every vehicle
	outcomeRolledBack outcome = "rolled back" // the revision was rolled back (status.failedRevision)
	outcomePaused     outcome = "paused"      // the rollout holds (an inconclusive analysis)
)

// decided says how the rollout of the revision that replaced before's
// stable one ended, from the status alone, and whether it has: rolled back
// (a new failedRevision), promoted (stable on every vehicle, all verified)
// or paused.
func decided(before, p *v1alpha1.NetTuningProfile) (outcome, bool) {
	st := p.Status
	switch {
	case st.Phase == v1alpha1.PhaseRolledBack && st.FailedRevision != "" &&
		st.FailedRevision != before.Status.FailedRevision && st.FailedRevision != before.Status.StableRevision:
		return outcomeRolledBack, true
	case st.CurrentRevision == before.Status.StableRevision:
		return "", false // the controller has not taken the edit yet
	case st.StableRevision == st.CurrentRevision && st.Vehicles.Verified == st.Vehicles.Total:
		return outcomePromoted, true
	case st.Phase == v1alpha1.PhasePaused:
		return outcomePaused, true
	}
	return "", false
}

func (d *demo) section(format string, args ...any) {
	fmt.Fprintf(d.out, "\n==> "+format+"\n", args...)
}

// sh runs and echoes a command with its output.
func (d *demo) sh(name string, args ...string) error {
	fmt.Fprintf(d.out, "\n$ %s %s\n", name, strings.Join(args, " "))
	cmd := d.command(name, args...)
	cmd.Stdout, cmd.Stderr = d.out, d.out
	return fleet.DieWithProcess(cmd, cmd.Run)
}

// command is name (kubectl and kubectl nettune from bin/) run in the
// repository against the fleet's control plane.
func (d *demo) command(name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	switch name {
	case "kubectl":
		cmd = exec.CommandContext(d.ctx, filepath.Join(d.root, "bin", name), args...)
	case "kubectl nettune":
		cmd = exec.CommandContext(d.ctx, filepath.Join(d.root, "bin", "kubectl-nettune"), args...)
	default:
		cmd = exec.CommandContext(d.ctx, name, args...)
	}
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.f.CP.Kubeconfig)
	return cmd
}

// installWarnings installs the chart's admission warnings for risky but
// legal profiles (a ValidatingAdmissionPolicy with the Warn action), the
// chart's template as make generate renders it into config/admission, and
// waits until the API server applies them: kubectl then prints
// "Warning: ..." when a profile below is risky.
func (d *demo) installWarnings() error {
	d.section("admission warnings: the chart's policy for risky but legal profiles")
	if err := d.sh("kubectl", "apply", "-f", warningsManifest); err != nil {
		return fmt.Errorf("installing the profile warnings: %w", err)
	}
	// The API server compiles a new policy in the background: a server-side
	// dry run of a profile without a rollout warns once it is in force.
	probe := filepath.Join(d.root, "config", "samples", "demo", "01-xavier-lan-v1.yaml")
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := d.f.Kubectl(d.ctx, "apply", "--dry-run=server", "-f", probe)
		if err == nil && strings.Contains(out, "Warning:") {
			fmt.Fprintln(d.out, "    the policy is in force")
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the profile warnings were not in force after 30 s: %s", out)
		}
		time.Sleep(time.Second)
	}
}

func (d *demo) profile() (*v1alpha1.NetTuningProfile, error) {
	p := &v1alpha1.NetTuningProfile{}
	err := d.f.CP.Client.Get(d.ctx, client.ObjectKey{Name: profile}, p)
	return p, err
}

// follow shows the rollout until done says so: the plugin's live view on a
// terminal, one line per change otherwise.
func (d *demo) follow(done func(*v1alpha1.NetTuningProfile) bool, timeout time.Duration) (*v1alpha1.NetTuningProfile, error) {
	var watch *exec.Cmd
	if f, ok := d.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		watch = exec.CommandContext(d.ctx, filepath.Join(d.root, "bin", "kubectl-nettune"), "status", profile, "--watch", "--min-interval", "2s")
		watch.Env = append(os.Environ(), "KUBECONFIG="+d.f.CP.Kubeconfig)
		watch.Stdout, watch.Stderr = d.out, d.out
		started, done := make(chan error, 1), make(chan struct{})
		go func() {
			defer close(done)
			_ = fleet.DieWithProcess(watch, func() error {
				err := watch.Start()
				started <- err
				if err != nil {
					return err
				}
				return watch.Wait()
			})
		}()
		if err := <-started; err != nil {
			return nil, err
		}
		defer func() { _ = watch.Process.Signal(os.Interrupt); <-done }()
	}
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		p, err := d.profile()
		if err != nil {
			return nil, err
		}
		if line := progressLine(p); watch == nil && line != last {
			fmt.Fprintf(d.out, "  %6s  %s\n", time.Since(d.began).Round(time.Second), line)
			last = line
		}
		d.note(p)
		// Judge only a status the controller wrote for the current spec.
		if p.Status.ObservedGeneration == p.Generation && done(p) {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("rollout not done after %s (phase %s)", timeout, p.Status.Phase)
		}
		select {
		case <-d.ctx.Done():
			return p, d.ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// note records the milestones for the summary.
func (d *demo) note(p *v1alpha1.NetTuningProfile) {
	if d.firstCanary.IsZero() && !d.applied.IsZero() && p.Status.Vehicles.Verified > 0 && p.Status.CurrentRevision != p.Status.StableRevision {
		d.firstCanary = time.Now()
	}
}

func progressLine(p *v1alpha1.NetTuningProfile) string {
	st := p.Status
	step := "-"
	if st.CurrentStep != nil {
		step = fmt.Sprint(*st.CurrentStep)
	}
	line := fmt.Sprintf("phase=%-11s step=%s updated=%d/%d verified=%d deferred=%d canary=%s", st.Phase, step,
		st.Vehicles.Updated, st.Vehicles.Total, st.Vehicles.Verified, st.Vehicles.Deferred, strings.Join(st.CanaryVehicles, ","))
	for _, a := range st.Analysis {
		line += fmt.Sprintf("  %s: %s canary=%s baseline=%s", a.Name, a.Phase, or(a.CanaryValue, "-"), or(a.BaselineValue, "-"))
	}
	return line
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (d *demo) walkthrough(o options) error {
	samples := filepath.Join("config", "samples", "demo")

	if err := d.installWarnings(); err != nil {
		return err
	}

	d.section("stage 1: the earlier 40/30 profile as the stable revision, every vehicle at once")
	if err := d.sh("kubectl", "apply", "-f", filepath.Join(samples, "01-xavier-lan-v1.yaml")); err != nil {
		return err
	}
	if _, err := d.follow(func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision != "" && p.Status.Vehicles.Verified == p.Status.Vehicles.Total
	}, 3*time.Minute); err != nil {
		return err
	}
	if err := d.sh("kubectl", "get", "ntp,nnt"); err != nil {
		return err
	}
	a := d.f.Vehicles["av-001"].Host("xavier-a")
	if err := d.sh("ip", "-n", a.Netns, "route", "show"); err != nil {
		return err
	}

	d.section("stage 2: the shipped v2 profile, canary first, judged per host pair against the rest of the fleet")
	before, err := d.profile()
	if err != nil {
		return err
	}
	// The last vehicle is driving: its autonomy stack closed the apply
	// gate, so it keeps v1 until it parks.
	d.driving = fmt.Sprintf("av-%03d", o.vehicles)
	fmt.Fprintf(d.out, "\n    %s is driving: its autonomy stack wrote \"closed driving autonomously\" to its apply gate (%s)\n", d.driving, d.f.GatePath(d.driving))
	if err := d.f.SetGate(d.driving, "closed driving autonomously"); err != nil {
		return err
	}
	d.applied = time.Now()
	if err := d.sh("kubectl", "apply", "-f", filepath.Join(samples, "02-xavier-lan-v2.yaml")); err != nil {
		return err
	}
	p, err := d.follow(func(p *v1alpha1.NetTuningProfile) bool {
		if d.gateOpened.IsZero() && p.Status.Vehicles.Deferred > 0 {
			d.drivingDeferred = time.Now()
			fmt.Fprintf(d.out, "\n    %s is Deferred: v2 is assigned to it and its agents hold it back while its gate is closed\n", d.driving)
			_ = d.sh("kubectl nettune", "status", profile)
			fmt.Fprintf(d.out, "\n    %s parks: its gate opens\n", d.driving)
			if err := d.f.SetGate(d.driving, "open parked"); err == nil {
				d.gateOpened = time.Now()
			}
		}
		if !d.gateOpened.IsZero() && d.drivingVerified.IsZero() && d.vehicleVerified(p) {
			d.drivingVerified = time.Now()
		}
		_, done := decided(before, p)
		return done
	}, 10*time.Minute)
	if d.gateOpened.IsZero() {
		// The rollout ended before it reached the driving vehicle.
		_ = d.f.SetGate(d.driving, "open parked")
	}
	if err != nil {
		return err
	}
	d.goodOutcome, _ = decided(before, p)
	if d.goodOutcome == outcomePromoted {
		d.fleetVerified = time.Now()
	}
	if err := d.sh("kubectl nettune", "status", profile); err != nil {
		return err
	}
	if d.goodOutcome != outcomePromoted {
		fmt.Fprintf(d.out, "\n    the v2 rollout was %s on this machine (see the analysis above); stage 3 needs v2 stable, skipped\n", d.goodOutcome)
		return nil
	}
	if err := d.sh("ip", "-n", a.Netns, "route", "show"); err != nil {
		return err
	}
	if o.skipBad {
		return nil
	}

	d.section("stage 3: a bad edit (the pairs into xavier-a clamped to 1 packet, rto_min 1s), canary first")
	before = p
	d.badApplied = time.Now()
	if err := d.sh("kubectl", "apply", "-f", filepath.Join(samples, "03-xavier-lan-bad.yaml")); err != nil {
		return err
	}
	p, err = d.follow(func(p *v1alpha1.NetTuningProfile) bool { _, done := decided(before, p); return done }, 10*time.Minute)
	if err != nil {
		return err
	}
	d.badDecided = time.Now()
	d.badOutcome, _ = decided(before, p)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c != nil && c.Status == "True" {
		fmt.Fprintf(d.out, "\n    RolledBack (%s): %s\n", c.Reason, c.Message)
	}
	return d.sh("kubectl nettune", "status", profile)
}

// verdict fails the demo when the product broke its promise on this run: the
// bad edit promoted to the fleet, or the good one rolled back.
func (d *demo) verdict() error {
	switch {
	case d.badOutcome == outcomePromoted:
		return errors.New("the bad edit was promoted to every vehicle: its regression was not detected")
	case d.goodOutcome == outcomeRolledBack:
		return errors.New("the good v2 profile was rolled back: a false rollback")
	}
	return nil
}

func (d *demo) summary() {
	d.section("summary")
	since := func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "-"
		}
		return to.Sub(from).Round(time.Second).String()
	}
	seen := func(o outcome) string {
		if o == "" {
			return "not run"
		}
		return string(o)
	}
	fmt.Fprintf(d.out, "    v2 (good):  %s\n", seen(d.goodOutcome))
	fmt.Fprintf(d.out, "    kubectl apply (v2) -> first canary verified:  %s\n", since(d.applied, d.firstCanary))
	fmt.Fprintf(d.out, "    kubectl apply (v2) -> whole fleet verified:   %s\n", since(d.applied, d.fleetVerified))
	switch {
	case d.driving == "":
	case d.drivingDeferred.IsZero():
		fmt.Fprintf(d.out, "    driving vehicle %s: never counted Deferred (the v2 rollout ended before it was assigned v2)\n", d.driving)
	default:
		fmt.Fprintf(d.out, "    driving vehicle %s: Deferred while its gate was closed; gate opened -> its hosts verified v2: %s\n", d.driving, since(d.gateOpened, d.drivingVerified))
	}
	fmt.Fprintf(d.out, "    bad edit:   %s\n", seen(d.badOutcome))
	if d.badOutcome != "" {
		fmt.Fprintf(d.out, "    kubectl apply (bad) -> %s: %s\n", d.badOutcome, since(d.badApplied, d.badDecided))
	}
	fmt.Fprintf(d.out, "    kubeconfig:  %s\n", d.f.CP.Kubeconfig)
	fmt.Fprintf(d.out, "    Loki:        %s   (probe samples {job=\"nettune-probe\"}, agent events {job=\"nettune-agent\"}, rollout events {job=\"nettune-controller\"})\n", d.f.Loki.URL)
	fmt.Fprintf(d.out, "    Prometheus:  %s   (nettune_probe_latency_seconds, nettune_rollout_*, nettune_analysis_*)\n", d.f.Prometheus.URL)
	fmt.Fprintf(d.out, "    logs:        %s\n", filepath.Join(d.f.Dir, "logs"))
	fmt.Fprintln(d.out, "    dashboards:  import charts/nettune/dashboards/*.json into a Grafana with Loki and Prometheus above as datasources (docs/dashboards.md)")
}

// vehicleVerified says whether every host of the driving vehicle verified
// the revision p is rolling out.
func (d *demo) vehicleVerified(p *v1alpha1.NetTuningProfile) bool {
	ok, err := d.f.VehicleVerified(d.ctx, d.driving, p.Name, p.Status.CurrentRevision)
	return err == nil && ok
}
