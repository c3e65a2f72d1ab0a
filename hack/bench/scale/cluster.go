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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// namespace holds the controller's revisions and the agents' Leases.
const namespace = "nettune-system"

// hardware is every simulated node's hardware label: the profile selects it.
const hardware = "orin"

// lanDevice is every simulated Node's nettune.io/lan-device annotation (the
// Ansible role's default).
const lanDevice = "eth0"

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const clockTicks = 100

// nodeName names host h of vehicle v.
func nodeName(vehicle string, h int) string { return fmt.Sprintf("%s-h%d", vehicle, h) }

// vehicleName names the i-th vehicle.
func vehicleName(i int) string { return fmt.Sprintf("av-%05d", i) }

// vehicleOf is the vehicle a node name belongs to.
func vehicleOf(node string) string {
	if i := strings.LastIndexByte(node, '-'); i > 0 {
		return node[:i]
	}
	return node
}

// nodeAddress is host h of vehicle i's InternalIP: 10.<i/256>.<i%256>.<h+1>.
func nodeAddress(i, h int) string {
	return fmt.Sprintf("10.%d.%d.%d", (i/256)%256, i%256, h+1)
}

// newUnstructured is an empty object of the given kind (no typed Kubernetes
// API package is needed for the few core objects the simulator writes).
func newUnstructured(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createNamespace creates the controller's namespace.
func createNamespace(ctx context.Context, c client.Client) error {
	ns := newUnstructured("v1", "Namespace", "", namespace)
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return nil
}

// nodeObject is host h of vehicle i, labeled as the profile selects it,
// with an InternalIP for the host-pair routes.
func nodeObject(i, h int) *unstructured.Unstructured {
	v := vehicleName(i)
	n := newUnstructured("v1", "Node", "", nodeName(v, h))
	n.SetLabels(map[string]string{
		v1alpha1.DefaultVehicleLabel:  v,
		v1alpha1.DefaultHostLabel:     fmt.Sprintf("h%d", h),
		v1alpha1.DefaultHardwareLabel: hardware,
	})
	// As the Ansible role annotates every vehicle's Nodes (a Node without it
	// renders with a warning: routes with no device).
	n.SetAnnotations(map[string]string{v1alpha1.LANDeviceAnnotation: lanDevice})
	n.Object["status"] = addressStatus(nodeAddress(i, h))
	return n
}

// addressStatus is a Node status with one InternalIP.
func addressStatus(ip string) map[string]any {
	return map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": ip}}}
}

// createNode creates one Node and, when the create dropped its status,
// writes the status separately.
func createNode(ctx context.Context, c client.Client, i, h int) error {
	n := nodeObject(i, h)
	want := n.Object["status"]
	if err := c.Create(ctx, n); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", n.GetName(), err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: n.GetName()}, n); err != nil {
			return fmt.Errorf("reading node %s: %w", n.GetName(), err)
		}
	}
	if addrs, _, _ := unstructured.NestedSlice(n.Object, "status", "addresses"); len(addrs) > 0 {
		return nil
	}
	n.Object["status"] = want
	if err := c.Status().Update(ctx, n); err != nil {
		return fmt.Errorf("writing node %s status: %w", n.GetName(), err)
	}
	return nil
}

// createNodes creates vehicles x hosts Nodes with workers parallel creates,
// printing progress every period.
func createNodes(ctx context.Context, c client.Client, vehicles, hosts, workers int, period time.Duration, progress func(string)) error {
	total := vehicles * hosts
	var done atomic.Int64
	stop := ticker(period, func() { progress(fmt.Sprintf("creating nodes: %d/%d", done.Load(), total)) })
	defer stop()
	return parallel(ctx, total, workers, func(k int) error {
		err := createNode(ctx, c, k/hosts, k%hosts)
		done.Add(1)
		return err
	})
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error
// (the remaining items are skipped after it).
func parallel(ctx context.Context, n, workers int, fn func(int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range items {
				if err := fn(k); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for k := range n {
		select {
		case items <- k:
		case <-ctx.Done():
			break feed
		}
	}
	close(items)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// ticker calls fn every period until the returned stop is called.
func ticker(period time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// controllerProc is a running bin/nettune-controller.
type controllerProc struct {
	cmd        *exec.Cmd
	pid        int
	metricsURL string
	pprofURL   string // base of /debug/pprof ("" when not served)
	logPath    string
	log        *os.File
	exited     chan struct{}
	exitErr    error
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("finding a free port: unexpected address %v", l.Addr())
	}
	return addr.Port, nil
}

// startController starts the real controller binary against the kubeconfig,
// its output into logPath.
func startController(bin, kubeconfig, logPath string, pprof bool, env []string) (*controllerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--namespace", namespace, "--leader-elect=false",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--health-probe-bind-address", "0"}
	pprofURL := ""
	if pprof {
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", pp))
		pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pp)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating controller log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), env...), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &controllerProc{cmd: cmd, pid: cmd.Process.Pid, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), pprofURL: pprofURL,
		logPath: logPath, log: logf, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// alive returns an error when the controller has exited.
func (p *controllerProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("the controller exited (%v); its log: %s", p.exitErr, p.logPath)
	default:
		return nil
	}
}

// controllersStarted are the controllers whose workers must be running
// (their caches synced) before a scenario starts.
var controllersStarted = []string{"nettuningprofile", "noderenderer"}

// waitStarted waits until every controller logged "Starting workers" (its
// caches synced) and the metrics endpoint answers.
func (p *controllerProc) waitStarted(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.alive(); err != nil {
			return err
		}
		started, err := startedControllers(p.logPath)
		if err != nil {
			return err
		}
		missing := 0
		for _, c := range controllersStarted {
			if !started[c] {
				missing++
			}
		}
		if missing == 0 {
			if _, err := scrape(ctx, http.DefaultClient, p.metricsURL); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not start its workers within %s (log: %s)", timeout, p.logPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// startedControllers reads which controllers logged "Starting workers".
func startedControllers(logPath string) (map[string]bool, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, fmt.Errorf("reading controller log: %w", err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		e, ok := parseLogLine(sc.Bytes())
		if ok && e.Msg == "Starting workers" {
			out[e.Controller] = true
		}
	}
	return out, sc.Err()
}

// stop ends the controller (SIGTERM, then SIGKILL after 15 s) and closes
// its log.
func (p *controllerProc) stop() {
	defer p.log.Close()
	if p.alive() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// procUsage is a process's CPU time and memory from /proc.
type procUsage struct {
	ticks int64 // utime + stime, in clock ticks
	hwm   int64 // peak RSS (VmHWM), bytes
	rss   int64 // current RSS (VmRSS), bytes
	// file is the part of rss that is mapped files (RssFile: for a Go
	// binary its own text, rodata and pclntab, which the Go runtime's soft
	// memory limit does not count), bytes.
	file int64
}

// readProc reads pid's CPU time and memory.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	// The fields after the command name (which may hold spaces) start at
	// the state, field 3; utime and stime are fields 14 and 15.
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return u, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat)[end+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.ticks = ut + st
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			u.hwm = kb << 10
		case "VmRSS":
			u.rss = kb << 10
		case "RssFile":
			u.file = kb << 10
		}
	}
	return u, nil
}

// findProcs returns the processes whose command line holds every one of
// words (e.g. the control plane's binaries by their data directories).
func findProcs(words ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(string(cmd), w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// ticksOf sums the CPU ticks of pids (the ones gone count nothing).
func ticksOf(pids []int) int64 {
	var t int64
	for _, pid := range pids {
		if u, err := readProc(pid); err == nil {
			t += u.ticks
		}
	}
	return t
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fetch GETs url with hc and returns the body.
func fetch(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	return fetchWithin(ctx, hc, url, time.Minute)
}

// fetchWithin is fetch with its own time limit.
func fetchWithin(ctx context.Context, hc *http.Client, url string, limit time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: reading body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}
