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

// Command bench-hub measures a nettune hub (bin/nettune-controller --hub)
// against a real kube-apiserver and etcd holding nettune's and Open Cluster
// Management's CRDs, with simulated managed clusters: for each size, N
// ManagedClusters (Available) of V vehicles each (-sizes NxV, or N and
// -vehicles), and one simulated
// OCM work agent for all of them in this process. The agent answers every
// new generation of a cluster's ManifestWork, after -apply-delay, with the
// status OCM's work agent writes once the cluster's own controller and
// agents verified the share (work conditions Applied and Available, one
// resourceStatus entry per manifest, the profile's vehicleReport as status
// feedback): every vehicle on the revision spec.hubAssignment gives it,
// verified. With -liveness report (the default) the agent also carries
// each cluster controller's heartbeat, a rewrite of the report every
// reportInterval; with -liveness addon every cluster has nettune's
// ManagedClusterAddOn, Available, the hub runs its add-on gate, and the
// agent writes a status only when a report changes (liveness AddOnLease).
//
// Per size it times a first profile to the whole fleet, a staged rollout
// (canary, 10 %, 50 %, 100 %), an edit to every vehicle at once, and an
// abort at a paused canary back to the stable revision, then an idle
// stretch; for each the hub controller's CPU and peak RSS (/proc), its
// reconciles, and the hub API server's writes split by writer: nettune's
// (its ManifestWork writes and the profile's status patches) and OCM's (the
// simulated work agent's status writes), per cluster moved.
//
// It writes docs/bench-hub.md after every size. Run it with
// `cd hack/bench && go run ./hub`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// scenarioNames are the scenarios in the order they run.
var scenarioNames = []string{"first", "staged", "all-at-once", "rollback", "idle"}

// size is one fleet: its clusters and the vehicles of each.
type size struct{ clusters, vehicles int }

func (s size) String() string { return fmt.Sprintf("%dx%d", s.clusters, s.vehicles) }

// maxVehicles is the most vehicles per cluster the simulator names
// (c0001-av-001...).
const maxVehicles = 999

// config is the benchmark's flags.
type config struct {
	sizes      []size
	vehicles   int // per cluster, for the sizes that do not say
	canary     int32
	applyDelay time.Duration
	workers    int
	// workWriters is the controller's --work-writers.
	workWriters int
	idle        time.Duration
	maxWait     time.Duration
	settle      time.Duration
	progress    time.Duration
	scenarios   []string
	stateDir    string
	out         string
	controller  string
	command     string
	quiet       bool
	pprof       bool
	// etcdMaxRequest is etcd's --max-request-bytes (0: etcd's default,
	// 1.5 MiB).
	etcdMaxRequest int
	// liveness is how the hub learns that a cluster's controller runs:
	// livenessReport or livenessAddOn.
	liveness string
}

// The -liveness modes.
const (
	// livenessReport: no add-on; each cluster's controller rewrites its
	// report every reportInterval (a heartbeat through the hub).
	livenessReport = "report"
	// livenessAddOn: nettune's add-on in every cluster (a
	// ManagedClusterAddOn, Available), the hub's add-on gate on; the
	// clusters' shares say liveness AddOnLease and their reports change
	// only with their content.
	livenessAddOn = "addon"
)

// addOnMode reports whether the run simulates the add-on (-liveness addon).
func (c config) addOnMode() bool { return c.liveness == livenessAddOn }

func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-hub:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-hub:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into a config and checks it.
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench-hub", flag.ContinueOnError)
	sizes := fs.String("sizes", "100,1000", "fleet sizes, comma-separated: N clusters of -vehicles vehicles, or NxV: N clusters of V vehicles (e.g. 3500x10,1000x100)")
	fs.IntVar(&c.vehicles, "vehicles", 10, "vehicles per cluster of the sizes that do not give theirs")
	canary := fs.Int("canary", 10, "canary vehicles of the staged and rollback scenarios (spec.rollout.canary.count)")
	fs.DurationVar(&c.applyDelay, "apply-delay", time.Second, "how long a simulated cluster takes from a new ManifestWork generation to its status with every vehicle verified")
	fs.IntVar(&c.workers, "workers", 16, "simulated work agents' worker pool (and parallel creates)")
	fs.IntVar(&c.workWriters, "work-writers", 16, "the hub controller's --work-writers: ManifestWorks a reconcile writes at once")
	fs.DurationVar(&c.idle, "idle", 2*time.Minute, "length of the idle measurement")
	fs.DurationVar(&c.maxWait, "max-wait", 10*time.Minute, "longest a scenario waits for its end state")
	fs.DurationVar(&c.settle, "settle", 3*time.Second, "wait after a scenario's end state before its closing reading (the writes that follow it count to it)")
	fs.DurationVar(&c.progress, "progress", 5*time.Second, "period of the progress lines")
	scen := fs.String("scenarios", strings.Join(scenarioNames, ","), "scenarios to run, in their fixed order: "+strings.Join(scenarioNames, ", ")+" (first always runs: the others start from its fleet)")
	fs.StringVar(&c.stateDir, "state-dir", "", "kubeconfigs and controller logs (default: a new temporary directory, kept)")
	fs.StringVar(&c.out, "out", "docs/bench-hub.md", "report, relative to the repository root (\"none\" = none)")
	fs.StringVar(&c.controller, "controller", "", "the controller binary to measure (default bin/nettune-controller)")
	fs.IntVar(&c.etcdMaxRequest, "etcd-max-request-bytes", 0, "etcd's --max-request-bytes, the largest object the hub's API server can write (0: etcd's default, 1.5 MiB; a what-if: OpenShift's etcd keeps the default)")
	fs.BoolVar(&c.pprof, "pprof", false, "serve the controller's /debug/pprof on a free port of 127.0.0.1 (printed at its start) and save a CPU profile of each scenario and a heap profile at its end into the size's state directory")
	fs.StringVar(&c.liveness, "liveness", livenessReport, "how the hub learns that a cluster's controller runs: report (no add-on: the report's heartbeat every reportInterval through the hub) or addon (a ManagedClusterAddOn nettune, Available, in every cluster, the hub's --addon-gate=true: liveness AddOnLease, reports written only when they change)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.liveness != livenessReport && c.liveness != livenessAddOn {
		return c, fmt.Errorf("-liveness %q: want %s or %s", c.liveness, livenessReport, livenessAddOn)
	}
	if c.out == "none" {
		c.out = ""
	}
	if c.vehicles < 1 || c.vehicles > maxVehicles {
		return c, fmt.Errorf("-vehicles %d: 1 to %d", c.vehicles, maxVehicles)
	}
	var err error
	if c.sizes, err = parseSizes(*sizes, c.vehicles); err != nil {
		return c, err
	}
	want := map[string]bool{"first": true}
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(scenarioNames, s) {
			return c, fmt.Errorf("-scenarios: unknown scenario %q (%s)", s, strings.Join(scenarioNames, ", "))
		}
		want[s] = true
	}
	for _, s := range scenarioNames {
		if want[s] {
			c.scenarios = append(c.scenarios, s)
		}
	}
	if *canary < 1 {
		return c, errors.New("-canary must be at least 1")
	}
	c.canary = int32(*canary)
	for _, sz := range c.sizes {
		if sz.clusters*sz.vehicles <= int(c.canary) {
			return c, fmt.Errorf("-sizes %s: %d vehicles, not more than the canary's %d", sz, sz.clusters*sz.vehicles, c.canary)
		}
	}
	if c.etcdMaxRequest < 0 {
		return c, errors.New("-etcd-max-request-bytes must not be negative")
	}
	if c.workWriters < 1 {
		return c, errors.New("-work-writers must be at least 1")
	}
	if c.workers < 1 || c.idle <= 0 || c.maxWait <= 0 || c.progress <= 0 || c.applyDelay < 0 || c.settle < 0 {
		return c, errors.New("-workers, -idle, -max-wait and -progress must be positive, -apply-delay and -settle not negative")
	}
	c.command = strings.TrimSpace("cd hack/bench && go run ./hub " + benchutil.ShellJoin(args))
	return c, nil
}

func (c config) runs(scenario string) bool { return slices.Contains(c.scenarios, scenario) }

// parseSizes reads a comma-separated list of sizes: N (clusters, of
// vehicles each) or NxV (N clusters of V vehicles).
func parseSizes(s string, vehicles int) ([]size, error) {
	var out []size
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		cs, vs, hasV := strings.Cut(f, "x")
		n, err := strconv.Atoi(cs)
		if err != nil || n <= 0 || n > 9999 {
			return nil, fmt.Errorf("-sizes: %q: the cluster count must be from 1 to 9999 (N or NxV)", f)
		}
		v := vehicles
		if hasV {
			if v, err = strconv.Atoi(vs); err != nil || v < 1 || v > maxVehicles {
				return nil, fmt.Errorf("-sizes: %q: the vehicles per cluster must be from 1 to %d (NxV)", f, maxVehicles)
			}
		}
		out = append(out, size{clusters: n, vehicles: v})
	}
	return out, nil
}
