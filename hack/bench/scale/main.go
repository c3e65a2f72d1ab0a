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

// Command bench-scale measures the real controller (bin/nettune-controller)
// at fleet scale against a real kube-apiserver and etcd: for each size, N
// Nodes in N/hosts vehicles, with simulated agents in this process that
// report every NodeNetTuning verified shortly after its spec changes, under
// one of two liveness protocols: "lease" (each agent renews a
// coordination.k8s.io Lease every 40 s and rewrites its status only when the
// report changes, plus a refresh every 5 min) and "status" (the previous
// protocol: no Lease, the status re-patched with a new heartbeat every 30 s).
//
// Per size and protocol it times four scenarios: the first revision to
// every vehicle at once; a staged rollout (canary of 2 vehicles, then 10 %,
// 50 %, 100 %); an abort at a paused canary back to the stable revision;
// and an idle stretch with nothing to do. For each it measures the
// controller's CPU and peak RSS and the API requests (by verb and resource,
// 409 Conflicts apart) from the kube-apiserver's own metrics.
//
// It writes docs/bench-scale.md after every run (size x protocol). Run it
// with `make bench-scale`; the idle phases alone take -idle (5 min) per run,
// 30 min with the defaults. The controller, the control plane and the
// simulator share the machine, so run it with nothing else running.
//
// With -write-cost it measures instead what one write of each object costs
// the kube-apiserver and etcd (a Lease, a small CustomResource,
// NodeNetTunings of 1, 4 and 12 routes, what-if variants of the
// NodeNetTuning CRD), on fresh control planes, into docs/bench-writes.md
// (`make bench-writes`, about 10 minutes).
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

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// Liveness protocols of the simulated agents.
const (
	modeLease  = "lease"
	modeStatus = "status"
)

// scenarioNames are the scenarios in the order they run, as -last names them.
var scenarioNames = []string{"all-at-once", "staged", "rollback", "idle"}

// config is the benchmark's flags.
type config struct {
	sizes      []int
	renews     []time.Duration // the simulated agents' Lease renewal period, per size
	statusMax  int             // largest size the status protocol runs at (0 = every size)
	hosts      int
	modes      []string
	idle       time.Duration
	maxWait    time.Duration
	agentDelay time.Duration
	workers    int
	settle     time.Duration
	progress   time.Duration
	stateDir   string
	out        string
	profile    time.Duration // CPU profiles of the controller and kube-apiserver per scenario (0 = none)
	heap       bool          // heap profiles of the controller at its RSS peak and at the end of each scenario
	last       string        // the last scenario to run (the later ones are not run)
	alone      bool          // the writes-alone scenario, last
	controller string        // the controller binary ("" = bin/nettune-controller)
	ctrlEnv    []string      // extra environment of the controller (KEY=VALUE)
	command    string        // the command line as run, for the report
	// The write-cost benchmark (-write-cost) instead of the fleet's.
	writeCost bool
	wcWrites  int // writes per measurement
	wcRounds  int
}

// main runs the benchmark with the command line's flags.
func main() {
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.writeCost {
		if _, err := writeCost(ctx, c, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench-scale:", err)
			os.Exit(1)
		}
		return
	}
	if _, err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line into a config and checks it.
func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench-scale", flag.ContinueOnError)
	sizes := fs.String("sizes", "1000,5000,30000", "fleet sizes in nodes, comma-separated")
	modes := fs.String("liveness", modeLease+","+modeStatus, "liveness protocols of the simulated agents, run one after the other per size: lease (the new one) and/or status (the previous one)")
	renews := fs.String("lease-renew", v1alpha1.DefaultAgentLeaseRenew.String(), "the simulated agents' Lease renewal period (the chart's agent.leaseRenew), one for every size or one per size, comma-separated; a period longer than the default makes the profiles' unreachableAfter and the leaseDurationSeconds three periods")
	fs.IntVar(&c.statusMax, "status-max", 5000, "largest fleet the status protocol runs at (0 = every size): its heartbeat every 30 s from 30,000 nodes is 1,000 writes a second, more than this machine's API server takes")
	fs.IntVar(&c.hosts, "hosts", 5, "nodes per vehicle")
	fs.DurationVar(&c.idle, "idle", 5*time.Minute, "length of the idle measurement")
	fs.DurationVar(&c.maxWait, "max-wait", 10*time.Minute, "longest a scenario waits for its end state")
	fs.DurationVar(&c.agentDelay, "agent-delay", 50*time.Millisecond, "how long a simulated agent takes to apply and verify a new spec")
	fs.IntVar(&c.workers, "agent-workers", 32, "simulated agents' worker pool (and parallel Node creates)")
	fs.DurationVar(&c.settle, "settle", 3*time.Second, "wait between the rollback and the idle measurement")
	fs.DurationVar(&c.progress, "progress", 5*time.Second, "period of the progress lines")
	fs.StringVar(&c.stateDir, "state-dir", "", "kubeconfigs and controller logs (default: a new temporary directory, kept)")
	fs.DurationVar(&c.profile, "profile", 0, "take CPU profiles this long of the controller and kube-apiserver at the start of each scenario, into the state directory (0 = none)")
	fs.BoolVar(&c.heap, "heap", false, "take heap profiles of the controller (/debug/pprof/heap) into the state directory: per scenario one at the highest RSS seen (sampled every second) and one at its end")
	fs.BoolVar(&c.alone, "writes-alone", true, "last (also after a scenario that timed out), stop the controller and move every node with the benchmark's own two writes per node: what the writes alone take on this machine, beside the scenarios' \"every node verified\"")
	fs.StringVar(&c.last, "last", "idle", "the last scenario to run: all-at-once, staged, rollback or idle (the later ones are reported as not run)")
	fs.StringVar(&c.controller, "controller", "", "the controller binary to measure (default bin/nettune-controller)")
	ctrlEnv := fs.String("controller-env", "", "extra environment of the controller, comma-separated KEY=VALUE (e.g. GOGC=50)")
	fs.StringVar(&c.out, "out", "", "report, relative to the repository root (default docs/bench-scale.md, with -write-cost docs/bench-writes.md; \"none\" = none)")
	fs.BoolVar(&c.writeCost, "write-cost", false, "instead of the fleet: measure what one write of each object (Lease, a minimal CustomResource, NodeNetTunings of 1, 4 and 12 routes, and what-if variants of its CRD) costs the kube-apiserver and etcd, on fresh control planes; -agent-workers writes at a time")
	fs.IntVar(&c.wcWrites, "write-cost-writes", 2000, "-write-cost: objects per measurement (each written once per kind of write)")
	fs.IntVar(&c.wcRounds, "write-cost-rounds", 3, "-write-cost: rounds through every object (the report gives medians)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.out == "none":
		c.out = ""
	case c.out == "" && c.writeCost:
		c.out = "docs/bench-writes.md"
	case c.out == "":
		c.out = "docs/bench-scale.md"
	}
	if c.writeCost && (c.wcWrites < 1 || c.wcRounds < 1) {
		return c, errors.New("-write-cost-writes and -write-cost-rounds must be positive")
	}
	var err error
	if *ctrlEnv != "" {
		for _, kv := range strings.Split(*ctrlEnv, ",") {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return c, fmt.Errorf("-controller-env: %q is not KEY=VALUE", kv)
			}
			c.ctrlEnv = append(c.ctrlEnv, kv)
		}
	}
	if c.sizes, err = parseSizes(*sizes); err != nil {
		return c, err
	}
	if c.renews, err = parseRenews(*renews, len(c.sizes)); err != nil {
		return c, err
	}
	if c.modes, err = parseModes(*modes); err != nil {
		return c, err
	}
	if c.hosts < 1 {
		return c, fmt.Errorf("-hosts %d: must be at least 1", c.hosts)
	}
	for _, n := range c.sizes {
		// Two canary vehicles and at least one more.
		if n/c.hosts < 3 {
			return c, fmt.Errorf("-sizes %d: needs at least 3 vehicles of %d hosts", n, c.hosts)
		}
	}
	if !slices.Contains(scenarioNames, c.last) {
		return c, fmt.Errorf("-last %q: one of %s", c.last, strings.Join(scenarioNames, ", "))
	}
	if c.workers < 1 || c.idle <= 0 || c.maxWait <= 0 || c.progress <= 0 {
		return c, errors.New("-agent-workers, -idle, -max-wait and -progress must be positive")
	}
	c.command = strings.TrimSpace("cd hack/bench && go run ./scale " + benchutil.ShellJoin(args))
	return c, nil
}

// parseSizes reads a comma-separated list of positive node counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sizes: %q is not a positive node count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseRenews reads one renewal period, or one per size.
func parseRenews(s string, sizes int) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("-lease-renew: %q is not a duration of at least 1s", f)
		}
		out = append(out, d)
	}
	switch len(out) {
	case sizes:
		return out, nil
	case 1:
		for len(out) < sizes {
			out = append(out, out[0])
		}
		return out, nil
	}
	return nil, fmt.Errorf("-lease-renew: %d periods for %d sizes (give one, or one per size)", len(out), sizes)
}

// parseModes reads a comma-separated list of liveness protocols.
func parseModes(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		switch m := strings.TrimSpace(f); m {
		case modeLease, modeStatus:
			out = append(out, m)
		default:
			return nil, fmt.Errorf("-liveness: unknown protocol %q (lease, status)", f)
		}
	}
	return out, nil
}
