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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
)

// result is what one size measured under one liveness protocol.
type result struct {
	nodes, vehicles, hosts int
	mode                   string
	renew                  time.Duration // Lease renewal period (lease mode)
	began                  time.Time
	took                   time.Duration
	created                time.Duration // creating the Nodes
	allAtOnce, staged      scenario
	rollback               scenario
	// alone: every node moved by the benchmark's own two writes, the
	// controller stopped (last; -writes-alone).
	alone scenario
	// floor: every node's Lease renewed twice by the benchmark, the
	// controller stopped (lease protocol, after the writes alone).
	floor scenario
	// phases in order: setup (controller start, agents start), then one
	// per scenario that ran, then idle.
	phases     []phase
	idle       *phase
	logPath    string
	log        logSummary
	simErrors  []benchutil.KindCount
	simWrites  int64
	simFailed  int64
	err        string // what stopped the run early ("" when it ran to the end)
	controller string // the controller binary
	// loadStart and loadEnd are the load averages (1, 5, 15 min) when the
	// run started and ended: the machine may be shared.
	loadStart, loadEnd string
}

// environment is what every run shares.
type environment struct {
	root, controller, stateDir string
}

// run measures every size under every liveness protocol, rewriting the
// report after each, and returns the results.
func run(ctx context.Context, c config, w io.Writer) ([]*result, error) {
	env, err := prepare(c)
	if err != nil {
		return nil, err
	}
	// envtest and the informers log through controller-runtime; what
	// matters here is returned as errors (the controller logs to its file).
	ctrllog.SetLogger(logr.Discard())
	began := time.Now()
	fmt.Fprintf(w, "bench-scale: sizes %v, %d hosts per vehicle, liveness %v; state and controller logs in %s\n", c.sizes, c.hosts, c.modes, env.stateDir)
	var results []*result
	for i, n := range c.sizes {
		for _, mode := range c.modes {
			if mode == modeStatus && c.statusMax > 0 && n > c.statusMax {
				fmt.Fprintf(w, "bench-scale: %d nodes: the status protocol is not run above -status-max %d nodes\n", n, c.statusMax)
				continue
			}
			r, err := runOne(ctx, c, env, n, c.renews[i], mode, w)
			results = append(results, r)
			if werr := writeReport(c, env, results, began); werr != nil {
				return results, werr
			}
			if err != nil {
				return results, err
			}
			printSummary(w, r)
		}
	}
	if c.out != "" {
		fmt.Fprintf(w, "bench-scale: report written to %s (%s)\n", reportPath(c, env), time.Since(began).Round(time.Second))
	}
	return results, nil
}

// prepare finds the repository, checks the binaries and makes the state
// directory.
func prepare(c config) (environment, error) {
	var env environment
	root, err := localcp.RepoRoot()
	if err != nil {
		return env, err
	}
	env.root = root
	env.controller = filepath.Join(root, "bin", "nettune-controller")
	if c.controller != "" {
		if env.controller, err = filepath.Abs(c.controller); err != nil {
			return env, err
		}
	}
	for _, b := range []string{env.controller, filepath.Join(root, "bin", "kube-apiserver"), filepath.Join(root, "bin", "etcd")} {
		if _, err := os.Stat(b); err != nil {
			return env, fmt.Errorf("%s: run 'make tools build' first: %w", b, err)
		}
	}
	env.stateDir = c.stateDir
	if env.stateDir == "" {
		if env.stateDir, err = os.MkdirTemp("", "nettune-bench-scale-"); err != nil {
			return env, fmt.Errorf("creating state directory: %w", err)
		}
	}
	if err := os.MkdirAll(env.stateDir, 0o755); err != nil {
		return env, fmt.Errorf("creating state directory: %w", err)
	}
	return env, nil
}

// runOne measures one size under one liveness protocol on a fresh control
// plane. The result holds whatever was measured, also when it fails.
func runOne(ctx context.Context, c config, env environment, nodes int, renew time.Duration, mode string, w io.Writer) (*result, error) {
	vehicles := nodes / c.hosts
	r := &result{nodes: vehicles * c.hosts, vehicles: vehicles, hosts: c.hosts, mode: mode, renew: renew, began: time.Now(), controller: env.controller, loadStart: benchutil.Loadavg()}
	err := measure(ctx, c, env, r, w)
	r.took, r.loadEnd = time.Since(r.began), benchutil.Loadavg()
	if err != nil {
		r.err = err.Error()
	}
	if r.logPath != "" {
		if s, lerr := summarizeLog(r.logPath); lerr == nil {
			r.log = s
		} else {
			err = errors.Join(err, lerr)
		}
	}
	return r, err
}

// measure runs the control plane, the Nodes, the controller and the agents,
// then the scenarios, into r.
func measure(ctx context.Context, c config, env environment, r *result, w io.Writer) error {
	label := fmt.Sprintf("%d nodes %s", r.nodes, r.mode)
	say := func(format string, args ...any) {
		fmt.Fprintf(w, "[%5s] %s: %s\n", time.Since(r.began).Round(time.Second), label, fmt.Sprintf(format, args...))
	}
	dir := filepath.Join(env.stateDir, fmt.Sprintf("%d-%s", r.nodes, r.mode))
	say("starting kube-apiserver and etcd")
	cp, err := localcp.Start(dir)
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(w, "bench-scale:", err)
		}
	}()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cl, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := benchutil.CreateNamespace(ctx, cl, namespace); err != nil {
		return err
	}
	say("creating %d nodes (%d vehicles x %d hosts)", r.nodes, r.vehicles, r.hosts)
	t := time.Now()
	if err := createNodes(ctx, cl, r.vehicles, r.hosts, c.workers, c.progress, func(s string) { say("%s", s) }); err != nil {
		return err
	}
	r.created = time.Since(t)
	say("%d nodes created in %s", r.nodes, benchutil.Round(r.created))

	ctrl, err := benchutil.StartController(benchutil.ControllerOptions{Bin: env.controller, Kubeconfig: cp.Kubeconfig, LogPath: filepath.Join(dir, "controller.log"),
		Args: []string{"--namespace", namespace, "--leader-elect=false"}, Pprof: c.profile > 0 || c.heap, Env: c.ctrlEnv})
	if err != nil {
		return err
	}
	r.logPath = ctrl.LogPath
	defer ctrl.Stop()
	api, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return fmt.Errorf("kube-apiserver HTTP client: %w", err)
	}
	m := &meter{controllerPID: ctrl.PID, api: api, host: cp.Config.Host, metricsURL: ctrl.MetricsURL,
		cpPIDs: append(benchutil.FindProcs("kube-apiserver", cp.Env.ControlPlane.APIServer.CertDir), benchutil.FindProcs("etcd", cp.Env.ControlPlane.Etcd.DataDir)...)}
	start := m.read(ctx)
	say("controller started (pid %d, log %s); waiting for its workers", ctrl.PID, ctrl.LogPath)
	if err := ctrl.WaitStarted(ctx, c.maxWait, controllersStarted...); err != nil {
		return err
	}

	agentsCtx, stopAgents := context.WithCancel(ctx)
	defer stopAgents()
	tr, ag, err := startAgents(agentsCtx, c, cfg, cp, cl, r, say)
	if err != nil {
		return err
	}
	defer ag.wait()
	defer stopAgents() // before waiting for the workers
	m.agents = ag
	r.phases = append(r.phases, m.phase("setup", start, m.read(ctx)))
	say("%d simulated agents (%s protocol) running", r.nodes, r.mode)

	b := &bench{c: c, cl: cl, ag: ag, tr: tr, ctrl: ctrl, total: r.nodes, label: label, w: w, unreachableAfter: unreachableAfter(r.renew)}
	var prof *profiler
	if c.profile > 0 || c.heap {
		prof = &profiler{dir: dir, length: c.profile, heap: c.heap, pid: ctrl.PID, api: api, apiHost: cp.Config.Host, controller: ctrl.PprofURL, say: say}
	}
	err = scenarios(ctx, b, m, r, prof)
	prof.wait()
	r.simErrors, r.simWrites, r.simFailed = ag.errorSummary(), ag.writes.Load(), ag.failures.Load()
	return err
}

// startAgents starts the informers (NodeNetTunings, the profile) feeding
// the tracker and the simulated agents, then the agents.
func startAgents(ctx context.Context, c config, cfg *rest.Config, cp *localcp.ControlPlane, cl client.Client, r *result, say func(string, ...any)) (*tracker, *agents, error) {
	informers, err := cache.New(cfg, cache.Options{Scheme: cp.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("creating informer cache: %w", err)
	}
	var names []string
	for i := range r.vehicles {
		for h := range r.hosts {
			names = append(names, nodeName(vehicleName(i), h))
		}
	}
	tr := newTracker(profileName, r.nodes, r.hosts)
	ag := newAgents(cl, informers, r.mode, c.agentDelay, r.renew, c.workers, names)
	ag.progress = every(c.progress, func(n int) { say("creating leases: %d/%d", n, r.nodes) })
	nnts, err := informers.GetInformer(ctx, &v1alpha1.NodeNetTuning{})
	if err != nil {
		return nil, nil, fmt.Errorf("NodeNetTuning informer: %w", err)
	}
	if _, err := nnts.AddEventHandler(tr.nodeHandler(ag.onNodeNetTuning)); err != nil {
		return nil, nil, fmt.Errorf("NodeNetTuning handler: %w", err)
	}
	profiles, err := informers.GetInformer(ctx, &v1alpha1.NetTuningProfile{})
	if err != nil {
		return nil, nil, fmt.Errorf("NetTuningProfile informer: %w", err)
	}
	if _, err := profiles.AddEventHandler(tr.profileHandler()); err != nil {
		return nil, nil, fmt.Errorf("NetTuningProfile handler: %w", err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		return nil, nil, errors.New("the informers did not sync")
	}
	if err := ag.start(ctx); err != nil {
		return nil, nil, fmt.Errorf("starting the simulated agents: %w", err)
	}
	return tr, ag, nil
}

// scenarios runs the timed scenarios and the idle measurement, then the
// writes alone (-writes-alone) and, under the lease protocol, the smallest
// writes, each a phase. The writes alone run also when a scenario stopped
// the others: they stop the controller first, so the fleet they move is
// still.
func scenarios(ctx context.Context, b *bench, m *meter, r *result, prof *profiler) error {
	if err := timedScenarios(ctx, b, m, r, prof); err != nil || !b.c.alone {
		return err
	}
	alone, ap, err := b.writesAlone(ctx, m)
	r.alone = alone
	if err != nil {
		return err
	}
	r.phases = append(r.phases, ap)
	if r.mode != modeLease {
		return nil
	}
	floor, fp, err := b.smallestWrites(ctx, m)
	r.floor = floor
	if err != nil {
		return err
	}
	r.phases = append(r.phases, fp)
	return nil
}

// timedScenarios runs the timed scenarios then the idle measurement, each
// a phase; a scenario that does not reach its end state stops the ones
// after it (they would start from a fleet still moving).
func timedScenarios(ctx context.Context, b *bench, m *meter, r *result, prof *profiler) error {
	steps := []struct {
		name string
		run  func(context.Context) (scenario, error)
		into *scenario
	}{
		{"all at once", b.allAtOnce, &r.allAtOnce},
		{"staged", b.staged, &r.staged},
		{"rollback", b.rollback, &r.rollback},
	}
	for _, s := range steps {
		a := m.read(ctx)
		prof.start(ctx, s.name)
		out, err := s.run(ctx)
		prof.end(ctx, s.name)
		*s.into = out
		r.phases = append(r.phases, m.phase(s.name, a, m.read(ctx)))
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if !out.done || strings.ReplaceAll(s.name, " ", "-") == b.c.last {
			return nil
		}
	}
	prof.start(ctx, "idle")
	idle, err := b.idle(ctx, m)
	prof.end(ctx, "idle")
	if err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	r.phases = append(r.phases, idle)
	r.idle = &idle
	return nil
}

// every wraps fn so that it runs at most once per period.
func every(period time.Duration, fn func(int)) func(int) {
	var mu sync.Mutex
	last := time.Now()
	return func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Sub(last) >= period {
			last = now
			fn(n)
		}
	}
}
