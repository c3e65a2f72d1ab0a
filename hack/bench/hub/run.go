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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/scheme"
)

// result is what one size measured.
type result struct {
	// clusters of perCluster vehicles each: vehicles in all.
	clusters, perCluster, vehicles int
	workWriters                    int // the controller's --work-writers
	began                          time.Time
	took                           time.Duration
	created                        time.Duration // creating the ManagedClusters
	setup                          phase         // controller start until its workers run
	scenarios                      []*scenario   // in the order they ran
	idle                           *phase
	cost                           *reportCost // after the first scenario
	simWrites                      int64
	simConflicts                   int64
	simFailures                    int64
	simLastErr                     string
	logPath                        string
	logErrors                      map[string]int
	err                            string
	controller                     string
	// args are the flags the hub controller ran with; addOnVersion the
	// version of the simulated add-ons ("" without them).
	args         []string
	addOnVersion string
	// liveness counts the works by the liveness of their share, as the
	// simulated agent last answered them.
	liveness map[v1alpha1.Liveness]int
	// loadStart and loadEnd are the load averages when the size started
	// and ended; busyStart the busiest processes then.
	loadStart, loadEnd, busyStart string
}

// label names the size: "1000 clusters x 10 vehicles".
func (r *result) label() string {
	return fmt.Sprintf("%d clusters x %d vehicles", r.clusters, r.perCluster)
}

// environment is what every size shares.
type environment struct {
	root, controller, stateDir, ocmCRDs string
	// chartVersion is nettune's chart version (-liveness addon: the
	// add-ons' version and the gate's minimum).
	chartVersion string
	// args are the hub controller's flags.
	args []string
}

// run measures every size, rewriting the report after each.
func run(ctx context.Context, c config, w io.Writer) ([]*result, error) {
	env, err := prepare(c)
	if err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard())
	began := time.Now()
	fmt.Fprintf(w, "bench-hub: sizes %v (clusters x vehicles each); state and controller logs in %s\n", c.sizes, env.stateDir)
	var results []*result
	for _, sz := range c.sizes {
		r := runSize(ctx, c, env, sz, w)
		results = append(results, r)
		if c.out != "" {
			if err := os.WriteFile(reportPath(c, env), []byte(markdown(c, results, began)), 0o644); err != nil {
				return results, fmt.Errorf("writing report: %w", err)
			}
		}
		if r.err != "" {
			return results, errors.New(r.err)
		}
		printSummary(w, r)
	}
	if c.out != "" {
		fmt.Fprintf(w, "bench-hub: report written to %s (%s)\n", reportPath(c, env), time.Since(began).Round(time.Second))
	}
	return results, nil
}

// reportPath is where the report goes.
func reportPath(c config, env environment) string {
	if filepath.IsAbs(c.out) {
		return c.out
	}
	return filepath.Join(env.root, c.out)
}

// prepare finds the repository, checks the binaries and the CRDs and makes
// the state directory.
func prepare(c config) (environment, error) {
	var env environment
	root, err := localcp.RepoRoot()
	if err != nil {
		return env, err
	}
	env.root = root
	env.controller = repoPath(root, "bin", "nettune-controller")
	if c.controller != "" {
		if env.controller, err = filepath.Abs(c.controller); err != nil {
			return env, err
		}
	}
	if c.out != "" {
		// Before any measurement: a report that cannot be written would
		// lose the run.
		if dir := filepath.Dir(reportPath(c, env)); !isDir(dir) {
			return env, fmt.Errorf("-out %s: directory %s does not exist (a relative -out is relative to the repository root, %s)", c.out, dir, root)
		}
	}
	env.ocmCRDs = repoPath(root, "bin", "crds", "ocm", "hub")
	for _, p := range []string{env.controller, repoPath(root, "bin", "kube-apiserver"), repoPath(root, "bin", "etcd"), env.ocmCRDs} {
		if _, err := os.Stat(p); err != nil {
			return env, fmt.Errorf("%s: run 'make tools build' first: %w", p, err)
		}
	}
	if c.addOnMode() {
		if env.chartVersion, err = chartVersion(); err != nil {
			return env, err
		}
	}
	env.args = controllerArgs(c, env)
	env.stateDir = c.stateDir
	if env.stateDir == "" {
		if env.stateDir, err = os.MkdirTemp("", "nettune-bench-hub-"); err != nil {
			return env, err
		}
	}
	return env, os.MkdirAll(env.stateDir, 0o755)
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// runSize measures one size on a fresh hub; the result holds whatever was
// measured, also when it failed (err).
func runSize(ctx context.Context, c config, env environment, sz size, w io.Writer) *result {
	r := &result{clusters: sz.clusters, perCluster: sz.vehicles, vehicles: sz.clusters * sz.vehicles, workWriters: c.workWriters, began: time.Now(), controller: env.controller,
		args: env.args, addOnVersion: env.chartVersion, loadStart: benchutil.Loadavg(), busyStart: benchutil.Busiest(6)}
	if err := measure(ctx, c, env, r, w); err != nil {
		r.err = err.Error()
	}
	r.took, r.loadEnd = time.Since(r.began), benchutil.Loadavg()
	if r.logPath != "" {
		r.logErrors = logErrors(r.logPath)
	}
	return r
}

// measure starts the hub, the clusters, the work agent and the controller,
// then runs the scenarios into r.
func measure(ctx context.Context, c config, env environment, r *result, w io.Writer) error {
	label := r.label()
	say := func(format string, args ...any) {
		if !c.quiet {
			fmt.Fprintf(w, "[%5s] %s: %s\n", time.Since(r.began).Round(time.Second), label, fmt.Sprintf(format, args...))
		}
	}
	dir := filepath.Join(env.stateDir, fmt.Sprintf("%dx%d", r.clusters, r.perCluster))
	say("starting kube-apiserver and etcd")
	opts := localcp.Options{StateDir: dir, DieWithProcess: true}
	if c.etcdMaxRequest > 0 {
		opts.EtcdFlags = map[string]string{"max-request-bytes": strconv.Itoa(c.etcdMaxRequest)}
	}
	cp, err := localcp.StartWith(opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(w, "bench-hub:", err)
		}
	}()
	if _, err := envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{env.ocmCRDs}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing OCM's hub CRDs: %w", err)
	}
	sch, err := scheme.NewHub()
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	cl, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return err
	}
	if err := benchutil.CreateNamespace(ctx, cl, namespace); err != nil {
		return err
	}
	say("creating %d ManagedClusters (Available) and their namespaces, %d vehicles each", r.clusters, r.perCluster)
	t := time.Now()
	if err := createClusters(ctx, cl, r.clusters, c.workers); err != nil {
		return err
	}
	if c.addOnMode() {
		say("creating %d ManagedClusterAddOns %s (Available, %s=%s)", r.clusters, addOnName, addOnVersionLabel, env.chartVersion)
		if err := createAddOns(ctx, cl, r.clusters, c.workers, env.chartVersion); err != nil {
			return err
		}
	}
	r.created = time.Since(t)

	informers, err := cache.New(cfg, cache.Options{Scheme: sch})
	if err != nil {
		return err
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	agent := newWorkAgent(cl, informers, c.applyDelay, c.workers, r.clusters, r.perCluster)
	tr := &tracker{}
	profiles, err := informers.GetInformer(agentCtx, &v1alpha1.NetTuningProfile{})
	if err != nil {
		return err
	}
	if _, err := profiles.AddEventHandler(tr.handler()); err != nil {
		return err
	}
	if err := agent.start(agentCtx); err != nil {
		return err
	}
	defer agent.wait()
	defer stopAgent()
	go func() { _ = informers.Start(agentCtx) }()
	if !informers.WaitForCacheSync(agentCtx) {
		return errors.New("the informers did not sync")
	}
	defer func() {
		r.simWrites, r.simConflicts, r.simFailures, r.simLastErr = agent.writes.Load(), agent.conflicts.Load(), agent.failures.Load(), agent.lastError()
		r.liveness = agent.livenessCounts()
	}()

	ctrl, err := benchutil.StartController(benchutil.ControllerOptions{Name: "hub controller", Bin: env.controller, Kubeconfig: cp.Kubeconfig,
		LogPath: filepath.Join(dir, "controller.log"), Pprof: c.pprof, Args: env.args})
	if err != nil {
		return err
	}
	r.logPath = ctrl.LogPath
	defer ctrl.Stop()
	api, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		return err
	}
	etcdURL := ""
	if u := cp.Env.ControlPlane.Etcd.URL; u != nil {
		etcdURL = u.String()
	}
	m := &meter{ctrl: ctrl, api: api, host: cp.Config.Host, etcdURL: etcdURL, agent: agent,
		cpPIDs: append(benchutil.FindProcs("kube-apiserver", cp.Env.ControlPlane.APIServer.CertDir), benchutil.FindProcs("etcd", cp.Env.ControlPlane.Etcd.DataDir)...)}
	start := m.read(ctx)
	say("hub controller started (pid %d, log %s%s)", ctrl.PID, ctrl.LogPath, pprofText(ctrl.PprofURL))
	if err := ctrl.WaitStarted(ctx, c.maxWait, hubController); err != nil {
		return err
	}
	r.setup = m.phase("setup", start, m.read(ctx))
	b := &bench{c: c, cl: cl, tr: tr, ctrl: ctrl, agent: agent, m: m, vehicles: r.vehicles, say: say, dir: dir}
	return b.scenarios(ctx, r)
}

// controllerArgs are the hub controller's flags: with -liveness addon its
// add-on gate too (the add-on manager does not run: the simulated
// ManagedClusterAddOns stand for what it and OCM's agents maintain).
func controllerArgs(c config, env environment) []string {
	args := []string{"--hub", "--namespace", namespace, "--cluster-namespace", namespace, "--leader-elect=false",
		"--work-writers", strconv.Itoa(c.workWriters)}
	if c.addOnMode() {
		args = append(args, "--addon-gate=true", "--addon-name", addOnName, "--addon-min-version", env.chartVersion)
	}
	return args
}

// meter takes the readings phases are computed from.
type meter struct {
	ctrl    *benchutil.Controller
	cpPIDs  []int
	api     *http.Client
	host    string
	etcdURL string
	agent   *workAgent
}

// reading is the state at one moment.
type reading struct {
	at       time.Time
	proc     benchutil.Usage
	cpTicks  int64
	requests benchutil.RequestCounts
	reqErr   error
	cm       ctrlMetrics
	cmErr    error
	writes   int64
	confl    int64
	beats    int64
	moves    int64
	vehMoved int64
	still    [3]int64 // the agent's stillContent, stillShare, stillOther
	plane    planeReading
	planeErr error
}

func (m *meter) read(ctx context.Context) reading {
	r := reading{at: time.Now()}
	r.proc, _ = benchutil.ReadProc(m.ctrl.PID)
	r.cpTicks = benchutil.TicksOf(m.cpPIDs)
	r.requests, r.reqErr = benchutil.APIServerRequests(ctx, m.api, m.host)
	r.cm, r.cmErr = controllerMetrics(ctx, m.ctrl.MetricsURL)
	r.plane, r.planeErr = readPlane(ctx, m.api, m.host, m.etcdURL)
	r.writes, r.confl, r.beats = m.agent.writes.Load(), m.agent.conflicts.Load(), m.agent.beats.Load()
	r.moves, r.vehMoved = m.agent.moves.Load(), m.agent.vehiclesMoved.Load()
	r.still = [3]int64{m.agent.stillContent.Load(), m.agent.stillShare.Load(), m.agent.stillOther.Load()}
	return r
}

// phase is what happened between two readings.
type phase struct {
	name     string
	took     time.Duration
	cpu      time.Duration           // the hub controller's (user + system)
	hwm, rss int64                   // its peak RSS so far and RSS at the end
	cpCPU    time.Duration           // kube-apiserver's and etcd's
	requests benchutil.RequestCounts // nil when unreadable (reqErr)
	reqErr   string
	// workWrites is the controller's nettune_hub_work_writes_total
	// increase by verb; reconciles, reconcileS and reconcileErrors the hub
	// reconciler's (nil metrics: cmErr).
	workWrites      map[string]float64
	reconciles      float64
	reconcileS      float64
	reconcileErrors float64
	cmErr           string
	// simWrites and simConflicts: the simulated work agent's status
	// writes and their 409s; moves the writes that moved a cluster's
	// vehicles, vehiclesMoved those vehicles.
	simWrites, simConflicts, moves, vehiclesMoved int64
	// beats are the simulated agent's status writes of a heartbeat alone
	// (in simWrites too).
	beats int64
	// still are the agent's writes that moved no vehicle: a new profile
	// content only, a share changed in form only, the rest.
	still   [3]int64
	loadEnd string
	// watch is what the API server's watches sent, by kind (nil:
	// planeErr); etcdDB etcd's database size at the end, heapInuse the
	// controller's Go heap in use then.
	watch     map[string]watchDelta
	etcdDB    float64
	heapInuse float64
	planeErr  string
}

func (m *meter) phase(name string, a, b reading) phase {
	p := phase{name: name, took: b.at.Sub(a.at), cpu: benchutil.TicksDuration(b.proc.Ticks - a.proc.Ticks), hwm: b.proc.HWM, rss: b.proc.RSS,
		cpCPU: benchutil.TicksDuration(b.cpTicks - a.cpTicks), simWrites: b.writes - a.writes, simConflicts: b.confl - a.confl, beats: b.beats - a.beats,
		moves: b.moves - a.moves, vehiclesMoved: b.vehMoved - a.vehMoved, loadEnd: benchutil.Loadavg()}
	for i := range p.still {
		p.still[i] = b.still[i] - a.still[i]
	}
	p.heapInuse = b.cm.heapInuse
	switch {
	case a.planeErr != nil:
		p.planeErr = a.planeErr.Error()
	case b.planeErr != nil:
		p.planeErr = b.planeErr.Error()
	default:
		p.etcdDB = b.plane.etcdDB
		p.watch = map[string]watchDelta{}
		for k, v := range b.plane.watchBytes {
			p.watch[k] = watchDelta{events: b.plane.watchEvents[k] - a.plane.watchEvents[k], bytes: v - a.plane.watchBytes[k]}
		}
	}
	switch {
	case a.reqErr != nil:
		p.reqErr = a.reqErr.Error()
	case b.reqErr != nil:
		p.reqErr = b.reqErr.Error()
	default:
		p.requests = b.requests.Minus(a.requests)
	}
	switch {
	case a.cmErr != nil:
		p.cmErr = a.cmErr.Error()
	case b.cmErr != nil:
		p.cmErr = b.cmErr.Error()
	default:
		p.workWrites = map[string]float64{}
		for k, v := range b.cm.workWrites {
			p.workWrites[k] = v - a.cm.workWrites[k]
		}
		p.reconciles, p.reconcileS, p.reconcileErrors = b.cm.reconciles-a.cm.reconciles, b.cm.reconcileS-a.cm.reconcileS, b.cm.errors-a.cm.errors
	}
	return p
}

// nettuneWrites are the hub controller's writes that move clusters: its
// ManifestWork creates and updates (its own counter) and the profile's
// status patches (the API server's count; nothing else writes it).
func (p phase) nettuneWrites() (works, status float64) {
	for _, v := range p.workWrites {
		works += v
	}
	return works, p.requests.Writes("nettuningprofiles/status")
}

// printSummary prints one size's outcome.
func printSummary(w io.Writer, r *result) {
	for _, s := range r.scenarios {
		works, status := s.phase.nettuneWrites()
		fmt.Fprintf(w, "bench-hub: %s %s: %s; first %s, all %s; controller CPU %.1fs, peak RSS %d MiB; nettune %0.f work + %0.f status writes, OCM %d, clusters moved %d\n",
			r.label(), s.name, s.outcome(), benchutil.Round(s.first), benchutil.Round(s.all), s.phase.cpu.Seconds(), s.phase.hwm>>20, works, status, s.phase.simWrites, s.phase.moves)
	}
	if r.idle != nil {
		fmt.Fprintf(w, "bench-hub: %s idle: %.2f %% of a core over %s\n", r.label(), pct(r.idle.cpu, r.idle.took), benchutil.Round(r.idle.took))
	}
}

// pct is cpu as a percentage of one core over took.
func pct(cpu, took time.Duration) float64 {
	if took <= 0 {
		return 0
	}
	return 100 * cpu.Seconds() / took.Seconds()
}

func pprofText(url string) string {
	if url == "" {
		return ""
	}
	return ", profiles " + url
}
