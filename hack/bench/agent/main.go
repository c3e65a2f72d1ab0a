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

// Command bench-agent measures the node agent: apply+verify time for 1, 10
// and 100 routes in a real network namespace, and the RSS and idle CPU of a
// running nettune-agent connected to a real kube-apiserver. It writes
// docs/bench-agent.md. Run it with `make bench-agent` (root).
//
// With -footprint it measures only the agent's RSS and CPU, idle and
// during applies of 100 routes, with the binaries of the agent's image
// index, on this machine and, with -vm, in hack/kernels' VMs (amd64 and
// arm64 under qemu TCG; footprint.go, vm.go), into the footprint section
// of the same document:
//
//	cd hack/bench && go run ./agent -footprint -vm bullseye-5.10-amd64,bullseye-5.10-arm64
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/node-agent/agent"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
)

const nsName = "ntbench"

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "bench-agent: %v\n", err)
		os.Exit(1)
	}
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func setupNetns() (func(), error) {
	_ = exec.Command("ip", "netns", "del", nsName).Run()
	cleanup := func() { _ = exec.Command("ip", "netns", "del", nsName).Run() }
	for _, c := range [][]string{
		{"ip", "netns", "add", nsName},
		{"ip", "-n", nsName, "link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"ip", "-n", nsName, "link", "set", "v0", "up"},
		{"ip", "-n", nsName, "link", "set", "v1", "up"},
		{"ip", "-n", nsName, "addr", "add", "10.254.0.1/16", "dev", "v0"},
	} {
		if err := sh(c...); err != nil {
			cleanup()
			return nil, err
		}
	}
	return cleanup, nil
}

// spec renders n routes with one of two metric sets (so every apply writes).
func spec(n int, rev string, cwnd int32) v1alpha1.NodeNetTuningSpec {
	s := v1alpha1.NodeNetTuningSpec{Revision: rev}
	for i := range n {
		s.Routes = append(s.Routes, v1alpha1.NodeRoute{
			Destination: fmt.Sprintf("10.254.%d.%d/32", 1+i/250, 1+i%250),
			Device:      "v0",
			Parameters: v1alpha1.TCPParameters{
				Cwnd: &v1alpha1.Cwnd{Value: cwnd, Lock: ptr.To(true)}, Initcwnd: ptr.To(cwnd - 5), Initrwnd: ptr.To(cwnd - 5),
				RTOMin: &metav1.Duration{Duration: 10 * time.Millisecond}, Quickack: ptr.To(true),
			},
		})
	}
	return s
}

type result struct {
	routes       int
	median, p95  time.Duration
	verifyMedian time.Duration
	runs         int
	allCommitted bool
}

func measureApply(n, runs int) (result, error) {
	ns, err := netns.GetFromName(nsName)
	if err != nil {
		return result{}, err
	}
	defer ns.Close()
	h, err := kernel.NewHandleAt(ns)
	if err != nil {
		return result{}, err
	}
	defer h.Close()
	dir, err := os.MkdirTemp("", "bench-agent-state-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	st, err := state.Open(dir)
	if err != nil {
		return result{}, err
	}
	// Probes are not part of "apply and verify": their window is a fixed wait.
	e := &agent.Engine{Host: h, Store: st, Log: logr.Discard()}
	var durs, verifies []time.Duration
	res := result{routes: n, runs: runs, allCommitted: true}
	for i := range runs + 2 {
		cwnd := int32(30)
		if i%2 == 1 {
			cwnd = 40
		}
		s := spec(n, fmt.Sprintf("r%d", i), cwnd)
		o, err := e.Apply(context.Background(), s)
		if err != nil {
			return res, err
		}
		if !o.Committed {
			res.allCommitted = false
			return res, fmt.Errorf("apply of %d routes not committed: %s", n, o.Reason)
		}
		vStart := time.Now()
		items := e.Observe(s)
		vd := time.Since(vStart)
		for _, it := range items {
			if it.State != agent.StateVerified {
				return res, fmt.Errorf("route %s not verified: %s", it.Name, it.Message)
			}
		}
		if i >= 2 { // two warm-up runs
			durs = append(durs, o.Duration)
			verifies = append(verifies, vd)
		}
	}
	// Leave the namespace clean for the next size.
	if _, err := e.Apply(context.Background(), v1alpha1.NodeNetTuningSpec{Revision: "empty"}); err != nil {
		return res, err
	}
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	sort.Slice(verifies, func(i, j int) bool { return verifies[i] < verifies[j] })
	res.median = durs[len(durs)/2]
	res.p95 = durs[(len(durs)*95)/100]
	res.verifyMedian = verifies[len(verifies)/2]
	return res, nil
}

type idle struct {
	rss        int64
	cpuPercent float64
	window     time.Duration
	applied    string
}

func measureIdle(root string, window time.Duration) (idle, error) {
	cp, err := localcp.Start("")
	if err != nil {
		return idle{}, err
	}
	defer func() { _ = cp.Stop() }()
	nnt := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "bench-node"}, Spec: spec(100, "idle-r1", 30)}
	ctx := context.Background()
	if err := cp.Client.Create(ctx, nnt); err != nil {
		return idle{}, err
	}
	stateDir, err := os.MkdirTemp("", "bench-agent-run-")
	if err != nil {
		return idle{}, err
	}
	defer os.RemoveAll(stateDir)
	cmd := exec.Command(filepath.Join(root, "bin", "nettune-agent"), "run", "--node", "bench-node", "--netns", nsName,
		"--state-dir", stateDir, "--metrics-bind-address", "127.0.0.1:0", "--probe-port", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
	if err := cmd.Start(); err != nil {
		return idle{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// Wait for the agent to report the revision applied.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := &v1alpha1.NodeNetTuning{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: "bench-node"}, got); err == nil && got.Status.AppliedRevision == "idle-r1" {
			break
		}
		if time.Now().After(deadline) {
			return idle{}, fmt.Errorf("agent did not apply idle-r1 within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // settle
	u0, err := benchutil.ReadProc(cmd.Process.Pid)
	if err != nil {
		return idle{}, err
	}
	start := time.Now()
	time.Sleep(window)
	u1, err := benchutil.ReadProc(cmd.Process.Pid)
	if err != nil {
		return idle{}, err
	}
	elapsed := time.Since(start)
	cpu := benchutil.TicksDuration(u1.Ticks-u0.Ticks).Seconds() / elapsed.Seconds() * 100
	return idle{rss: u1.RSS, cpuPercent: cpu, window: elapsed, applied: "idle-r1"}, nil
}

func run() error {
	footprintOnly := flag.Bool("footprint", false, "measure only the agent's footprint (RSS and CPU, idle and during applies of 100 routes) on this machine and in the -vm kernels, into docs/bench-agent.md's footprint section")
	vms := flag.String("vm", "", "with -footprint: hack/kernels kernel lines to measure in too, comma-separated (e.g. bullseye-5.10-amd64,bullseye-5.10-arm64; run make test-kernels first)")
	image := flag.String("agent-image", "", "with -footprint: the agent image archive to take the binaries from (default: built from this tree)")
	jsonOut := flag.String("json", "", "with -footprint: also write the results to this JSON file")
	before := flag.String("before", "", "with -footprint: a JSON file of an earlier run, shown beside the results")
	inVM := flag.Bool("in-vm", false, "inside a footprint VM (its /init runs this)")
	var fo footprintOptions
	flag.StringVar(&fo.agent, "agent", "", "with -in-vm: the nettune-agent binary")
	flag.StringVar(&fo.kubeconfig, "agent-kubeconfig", "", "with -in-vm: the agent's kubeconfig")
	flag.DurationVar(&fo.window, "window", 60*time.Second, "with -footprint: the idle window")
	flag.IntVar(&fo.applies, "applies", 5, "with -footprint: applies of 100 routes measured")
	flag.DurationVar(&fo.converge, "converge", 5*time.Minute, "with -footprint: how long the agent may take to report an apply")
	flag.Parse()
	if *inVM {
		runInVM(fo)
		return nil
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	if *footprintOnly {
		var vmList []string
		if *vms != "" {
			vmList = strings.Split(*vms, ",")
		}
		return runFootprint(root, fo, *image, vmList, *jsonOut, *before)
	}
	cleanup, err := setupNetns()
	if err != nil {
		return err
	}
	defer cleanup()
	var results []result
	for _, n := range []int{1, 10, 100} {
		fmt.Printf("==> apply+verify %d route(s), 30 runs\n", n)
		r, err := measureApply(n, 30)
		if err != nil {
			return err
		}
		fmt.Printf("    median %s  p95 %s  (read-back verify alone: %s)\n", r.median, r.p95, r.verifyMedian)
		results = append(results, r)
	}
	window := 60 * time.Second
	if v := os.Getenv("BENCH_IDLE_WINDOW"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			window = d
		}
	}
	fmt.Printf("==> idle agent with 100 tuned routes, real kube-apiserver, %s window\n", window)
	id, err := measureIdle(root, window)
	if err != nil {
		return err
	}
	fmt.Printf("    RSS %.1f MiB  CPU %.3f %% of one core\n", float64(id.rss)/(1<<20), id.cpuPercent)
	return writeDoc(root, results, id)
}

func writeDoc(root string, rs []result, id idle) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Node agent benchmark\n\nProduced by `make bench-agent` on %s (%d CPUs, kernel %s). ", time.Now().UTC().Format("2006-01-02"), numCPU(), benchutil.KernelRelease())
	b.WriteString("Apply = the whole transaction of `Engine.Apply` (preflight, snapshot, journal fsync, netlink writes with one RTAX_LOCK mask each, tcp_metrics flush, read-back verification, last-known-good fsync); post-apply probes are excluded (their window is a fixed wait, 500 ms by default). Every run alternates between two metric sets so every route is rewritten. 30 measured runs after 2 warm-ups, in a network namespace created by the benchmark.\n\n")
	b.WriteString("| routes | apply+verify median | p95 | read-back verify alone (median) | target |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		target := ""
		if r.routes == 100 {
			target = "< 50 ms"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", r.routes, r.median.Round(10*time.Microsecond), r.p95.Round(10*time.Microsecond), r.verifyMedian.Round(10*time.Microsecond), target)
	}
	fmt.Fprintf(&b, "\nIdle agent (`nettune-agent run`, 100 tuned routes applied, connected to a real kube-apiserver, drift watcher and 30 s resync running), measured over %s after convergence:\n\n", id.window.Round(time.Second))
	b.WriteString("| RSS | CPU (% of one core) | targets |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| %.1f MiB | %.3f %% | < 30 MB, < 0.5 %% |\n", float64(id.rss)/(1<<20), id.cpuPercent)
	// The sections after this table (the footprint's) are kept.
	doc := filepath.Join(root, "docs", "bench-agent.md")
	if old, err := os.ReadFile(doc); err == nil {
		if i := strings.Index(string(old), "\n<!-- footprint"); i >= 0 {
			b.WriteString(string(old[i:]))
		}
	}
	return os.WriteFile(doc, []byte(b.String()), 0o644)
}

func numCPU() int {
	out, _ := exec.Command("nproc").Output()
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
