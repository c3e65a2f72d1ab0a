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
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// namespace holds the hub's revisions; it is also nettune's namespace in
// every managed cluster (--cluster-namespace).
const namespace = "nettune-system"

// benchLabel is on every simulated ManagedCluster: the profiles select it.
const benchLabel = "nettune.io/bench"

// clusterName names the i-th cluster (from 1).
func clusterName(i int) string { return fmt.Sprintf("cluster-%04d", i) }

// vehicleName names vehicle j (from 1) of cluster i: unique across clusters.
func vehicleName(i, j int) string { return fmt.Sprintf("c%04d-av-%02d", i, j) }

// hardwareOf is cluster i's hardware model: xavier for the odd clusters,
// orin for the even ones.
func hardwareOf(i int) string {
	if i%2 == 1 {
		return "xavier"
	}
	return "orin"
}

// createClusters creates n ManagedClusters, Available, and their
// namespaces, workers at a time.
func createClusters(ctx context.Context, cl client.Client, n, workers int) error {
	return parallel(ctx, n, workers, func(k int) error {
		i := k + 1
		name := clusterName(i)
		if err := createNamespace(ctx, cl, name); err != nil {
			return err
		}
		mc := &clusterv1.ManagedCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: "hub", "hardware": hardwareOf(i)}},
			Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 60},
		}
		if err := cl.Create(ctx, mc); err != nil {
			return fmt.Errorf("ManagedCluster %s: %w", name, err)
		}
		now := metav1.Now()
		mc.Status.Conditions = []metav1.Condition{
			{Type: clusterv1.ManagedClusterConditionHubAccepted, Status: metav1.ConditionTrue, Reason: "HubClusterAdminAccepted", Message: "accepted by the benchmark", LastTransitionTime: now},
			{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", Message: "simulated", LastTransitionTime: now},
			{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "ManagedClusterAvailable", Message: "simulated", LastTransitionTime: now},
		}
		if err := cl.Status().Update(ctx, mc); err != nil {
			return fmt.Errorf("ManagedCluster %s status: %w", name, err)
		}
		return nil
	})
}

// createNamespace creates a namespace (nothing when it exists).
func createNamespace(ctx context.Context, cl client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error (the remaining items are skipped after it).
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

// controllerProc is a running bin/nettune-controller --hub.
type controllerProc struct {
	cmd        *exec.Cmd
	pid        int
	metricsURL string
	logPath    string
	log        *os.File
	exited     chan struct{}
	exitErr    error
	stopped    atomic.Bool
}

// startController starts the hub controller against the kubeconfig, its
// output into logPath.
func startController(bin, kubeconfig, logPath string) (*controllerProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--hub", "--namespace", namespace, "--cluster-namespace", namespace, "--leader-elect=false",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--health-probe-bind-address", "0"}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating controller log: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &controllerProc{cmd: cmd, pid: cmd.Process.Pid, metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port),
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

// waitStarted waits until the hub reconciler logged "Starting workers" and
// the metrics endpoint answers.
func (p *controllerProc) waitStarted(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.alive(); err != nil {
			return err
		}
		if p.logged("Starting workers", hubController) {
			if _, err := fetch(ctx, http.DefaultClient, p.metricsURL); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the hub controller did not start its workers within %s (log: %s)", timeout, p.logPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// logEntry is what is read of one controller log line (JSON).
type logEntry struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Error      string `json:"error"`
	Controller string `json:"controller"`
}

// logLines reads the controller's JSON log lines.
func readLog(path string) ([]logEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e logEntry
		if b := sc.Bytes(); len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &e) == nil {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// logged says whether the controller logged msg for controller.
func (p *controllerProc) logged(msg, controller string) bool {
	es, _ := readLog(p.logPath)
	for _, e := range es {
		if e.Msg == msg && e.Controller == controller {
			return true
		}
	}
	return false
}

// logErrors counts the controller log's error lines by message and error.
func logErrors(path string) map[string]int {
	es, _ := readLog(path)
	out := map[string]int{}
	for _, e := range es {
		if e.Level == "error" || e.Level == "dpanic" || e.Level == "panic" || e.Level == "fatal" {
			k := e.Msg
			if e.Error != "" {
				k += ": " + e.Error
			}
			if len(k) > 200 {
				k = k[:197] + "..."
			}
			out[k]++
		}
	}
	return out
}

// stop ends the controller (SIGTERM, then SIGKILL after 15 s).
func (p *controllerProc) stop() {
	defer p.log.Close()
	if p.alive() != nil || !p.stopped.CompareAndSwap(false, true) {
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

// repoPath is path under the repository root.
func repoPath(root string, path ...string) string {
	return filepath.Join(append([]string{root}, path...)...)
}
