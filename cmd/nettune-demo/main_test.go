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

// These tests run the demo as it runs for a user — run(), its lock, its
// ledger, its signal handling, fleet.Start and Close — in child processes
// (this test binary again, NETTUNE_DEMO_HELPER set) with one vehicle and
// the walkthrough left out, so that a run is up in seconds; then they stop
// them as a user would (Ctrl-C, kill, kill -9) and look at the machine.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/procfs"
	"github.com/nettune/nettune/test/framework/nettest"
)

const (
	helperEnv       = "NETTUNE_DEMO_HELPER"        // the demo's arguments, space separated
	helperExtrasEnv = "NETTUNE_DEMO_HELPER_EXTRAS" // "stray", "cut": see helperWalkthrough
	readyLine       = "The fleet keeps running."
)

func TestMain(m *testing.M) {
	if args := os.Getenv(helperEnv); args != "" {
		walkthrough = helperWalkthrough
		if err := run(os.Stdout, strings.Fields(args)); err != nil {
			fmt.Fprintf(os.Stderr, "nettune-demo: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperWalkthrough replaces the story. With "stray" in helperExtrasEnv it
// starts a process that does not die with the demo (no parent-death signal,
// as if the kernel's signal were missed) and records it in the ledger, as
// the fleet records its own; with "cut" it cuts the API server off with the
// fleet's iptables rule (fleet.CutAPIServer) and leaves the rule in place.
func helperWalkthrough(d *demo, _ options) error {
	extras := os.Getenv(helperExtrasEnv)
	if strings.Contains(extras, "stray") {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		if err := d.ledger.Process(cmd.Process.Pid, "stray"); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "stray pid %d\n", cmd.Process.Pid)
	}
	if strings.Contains(extras, "cut") {
		if _, err := d.f.CutAPIServer(); err != nil {
			return err
		}
		fmt.Fprintln(d.out, "API server cut")
	}
	return nil
}

// requireFleet skips unless the machine can run a fleet (root, the tools in
// bin/, Prometheus); NETTUNE_REQUIRE_TOOLS makes missing tools a failure.
func requireFleet(t *testing.T) {
	t.Helper()
	nettest.RequireRoot(t)
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl", "loki", "nettune-agent", "nettune-controller"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			missing = append(missing, "bin/"+b)
		}
	}
	if _, err := exec.LookPath("prometheus"); err != nil {
		if _, err := os.Stat("/usr/bin/prometheus"); err != nil {
			missing = append(missing, "prometheus")
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
		t.Fatalf("missing %s (NETTUNE_REQUIRE_TOOLS is set): run 'make tools build'", strings.Join(missing, ", "))
	}
	t.Skipf("missing %s: run 'make tools build' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(missing, ", "))
}

// instance is a demo run in a child process.
type instance struct {
	cmd  *exec.Cmd
	out  *nettest.SyncBuffer // stdout and stderr
	done chan struct{}       // closed once it has exited and been reaped
}

// startDemo runs the demo with one vehicle and state in stateDir. It dies
// with the test (Pdeathsig from a thread locked for its life) and is killed
// at the end of the test if still running.
func startDemo(t *testing.T, stateDir, extras string) *instance {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=--vehicles 1 --state-dir "+stateDir, helperExtrasEnv+"="+extras)
	in := &instance{cmd: cmd, out: &nettest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = in.out, in.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends after the child
		defer close(in.done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-in.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-in.done:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-in.done
			}
		}
		if t.Failed() {
			t.Logf("demo pid %d output:\n%s", cmd.Process.Pid, in.out)
		}
	})
	return in
}

func (in *instance) pid() int { return in.cmd.Process.Pid }

// waitReady waits until the fleet is up and the demo waits for Ctrl-C.
func (in *instance) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.After(4 * time.Minute)
	for !strings.Contains(in.out.String(), readyLine) {
		select {
		case <-in.done:
			t.Fatalf("demo pid %d exited (%v) before its fleet was up:\n%s", in.pid(), in.cmd.ProcessState, in.out)
		case <-deadline:
			t.Fatalf("demo pid %d: fleet not up after 4 minutes:\n%s", in.pid(), in.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// wait waits for the demo to exit and returns its exit code.
func (in *instance) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-in.done:
		return in.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("demo pid %d still running after %s:\n%s", in.pid(), d, in.out)
		return -1
	}
}

// childrenOf lists the live children of pid, once they hold the fleet's
// services (or after 30 s, as they are then): an agent re-executes itself
// at start and is named "exe" until it takes back its name, which on a
// loaded machine may come after the demo says the agents started.
func childrenOf(t *testing.T, pid int) []procfs.Proc {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		kids, err := procfs.Children(pid)
		if err != nil {
			t.Fatal(err)
		}
		if services(kids) || time.Now().After(deadline) {
			return kids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// namespacesOf lists the network namespaces a run made: the testbed names
// them ntb-<owner pid>-<id>-<role>.
func namespacesOf(t *testing.T, pid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("ntb-%d-", pid)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// services says kids hold etcd, kube-apiserver, Loki, Prometheus and an
// agent. (The controller may have exited: with the API server cut off it
// cannot start.)
func services(kids []procfs.Proc) bool {
	seen := map[string]bool{}
	for _, k := range kids {
		seen[k.Comm] = true
	}
	return seen["etcd"] && seen["kube-apiserver"] && seen["loki"] && seen["prometheus"] && seen["nettune-agent"]
}

// rulesOf lists the root namespace's iptables rules a run's fleet made
// (their comment names its pid).
func rulesOf(t *testing.T, pid int) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var rules []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if strings.Contains(sc.Text(), fmt.Sprintf(`"nettune-fleet pid %d"`, pid)) {
			rules = append(rules, sc.Text())
		}
	}
	return rules
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// left is what of a run is still on the machine.
func left(t *testing.T, pid int, kids []procfs.Proc) []string {
	t.Helper()
	var out []string
	for _, k := range kids {
		if k.Running() {
			out = append(out, "process "+k.String())
		}
	}
	for _, n := range namespacesOf(t, pid) {
		out = append(out, "netns "+n)
	}
	for _, r := range rulesOf(t, pid) {
		out = append(out, "rule "+r)
	}
	return out
}

// TestSecondRunRefuses: while a demo runs, a second one on the same state
// directory refuses at once, exits non-zero and names the first's pid and
// how to stop it, and the first's state, namespaces and processes are
// untouched.
func TestSecondRunRefuses(t *testing.T) {
	requireFleet(t)
	state := filepath.Join(t.TempDir(), "demo")
	first := startDemo(t, state, "")
	first.waitReady(t)
	ledger, err := os.ReadFile(filepath.Join(state, ledgerFile))
	if err != nil {
		t.Fatal(err)
	}
	kids := childrenOf(t, first.pid())
	nss := namespacesOf(t, first.pid())
	if len(kids) < 8 || len(nss) != 4 {
		t.Fatalf("first run: %d child processes %v and namespaces %v; want etcd, kube-apiserver, Loki, Prometheus, 3 agents, the controller and 4 namespaces", len(kids), kids, nss)
	}

	began := time.Now()
	second := startDemo(t, state, "")
	if code := second.wait(t, time.Minute); code == 0 {
		t.Fatalf("the second run exited 0:\n%s", second.out)
	}
	took := time.Since(began)
	msg := second.out.String()
	t.Logf("second run refused in %s: %s", took.Round(time.Millisecond), strings.TrimSpace(msg))
	for _, want := range []string{fmt.Sprintf("pid %d", first.pid()), fmt.Sprintf("kill %d", first.pid()), "Ctrl-C"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q", want)
		}
	}
	if strings.Contains(msg, "==> starting the fleet") {
		t.Errorf("the second run started a fleet")
	}
	if took > 30*time.Second {
		t.Errorf("the second run took %s to refuse", took)
	}

	if now, err := os.ReadFile(filepath.Join(state, ledgerFile)); err != nil || string(now) != string(ledger) {
		t.Errorf("the first run's ledger changed (%v)", err)
	}
	for _, f := range []string{"controlplane/kubeconfig", "logs/controller.log", "loki/loki.yaml"} {
		if _, err := os.Stat(filepath.Join(state, f)); err != nil {
			t.Errorf("the first run's state: %v", err)
		}
	}
	for _, k := range kids {
		if !k.Running() {
			t.Errorf("the first run's %s is gone", k)
		}
	}
	for _, n := range nss {
		if !netnsExists(n) {
			t.Errorf("the first run's namespace %s is gone", n)
		}
	}
	select {
	case <-first.done:
		t.Fatalf("the first run exited:\n%s", first.out)
	default:
	}

	// The first still stops cleanly afterwards.
	_ = first.cmd.Process.Signal(syscall.SIGTERM)
	if code := first.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("the first run exited %d after SIGTERM", code)
	}
}

// TestKilledRunIsClearedByTheNext: after kill -9, the run's children die
// with it (parent-death signal) but its namespaces, an iptables rule and a
// process that missed the signal are left; the next run clears exactly
// those, says so in one line, and leaves a namespace, a process and a rule
// of someone else alone.
func TestKilledRunIsClearedByTheNext(t *testing.T) {
	requireFleet(t)
	decoyNetns := nettest.NewNetns(t, "ntdecoy")
	decoy := exec.Command("sleep", "600")
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	decoyProc, err := procfs.Stat(decoy.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	decoyRule := []string{"OUTPUT", "-d", "127.0.0.254/32", "-p", "tcp", "--dport", "9",
		"-m", "comment", "--comment", "nettune-demo-test decoy " + nettest.RandHex(t, 4), "-j", "ACCEPT"}
	if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, decoyRule...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("iptables", append([]string{"-w", "-D"}, decoyRule...)...).Run() })
	decoyRuleThere := func() bool {
		return exec.Command("iptables", append([]string{"-w", "-C"}, decoyRule...)...).Run() == nil
	}

	state := filepath.Join(t.TempDir(), "demo")
	killed := startDemo(t, state, "stray,cut")
	killed.waitReady(t)
	m := regexp.MustCompile(`stray pid (\d+)`).FindStringSubmatch(killed.out.String())
	if m == nil {
		t.Fatalf("no stray pid in the output:\n%s", killed.out)
	}
	strayPID, _ := strconv.Atoi(m[1])
	var stray procfs.Proc
	var kids []procfs.Proc
	for _, k := range childrenOf(t, killed.pid()) {
		if k.Pid == strayPID {
			stray = k
		} else {
			kids = append(kids, k)
		}
	}
	t.Cleanup(func() {
		if stray.Running() {
			_ = syscall.Kill(stray.Pid, syscall.SIGKILL)
		}
	})
	nss := namespacesOf(t, killed.pid())
	rules := rulesOf(t, killed.pid())
	if stray.Pid == 0 || !services(kids) || len(nss) != 4 || len(rules) != 1 {
		t.Fatalf("the run to kill: stray %v, children %v, namespaces %v, rules %v", stray, kids, nss, rules)
	}

	// Should this test fail before the next run clears them, what the
	// killed run left is cleared at the end all the same.
	t.Cleanup(func() {
		if c, err := fleet.ClearLedger(filepath.Join(state, ledgerFile)); err != nil || !c.Empty() {
			t.Logf("cleared after the test what the killed run left: %s (%v)", c, err)
		}
	})
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.wait(t, 30*time.Second)
	// Its children (etcd and kube-apiserver included) die with it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var alive []string
		for _, k := range kids {
			if k.Running() {
				alive = append(alive, k.String())
			}
		}
		if len(alive) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after kill -9 these children still run: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := left(t, killed.pid(), []procfs.Proc{stray}); len(got) != 6 {
		t.Fatalf("after kill -9, left %v; want the stray process, 4 namespaces and the rule", got)
	}

	next := startDemo(t, state, "")
	next.waitReady(t)
	want := fmt.Sprintf("cleared what the last run (pid %d, stopped before it could clean up) left: 1 process, 4 network namespaces, 1 iptables rule", killed.pid())
	if !strings.Contains(next.out.String(), want) {
		t.Errorf("the next run does not say %q:\n%s", want, next.out)
	}
	if got := left(t, killed.pid(), []procfs.Proc{stray}); len(got) > 0 {
		t.Errorf("the next run left %v", got)
	}
	if !decoyProc.Running() {
		t.Errorf("the next run killed an unrelated process (pid %d)", decoyProc.Pid)
	}
	if !netnsExists(decoyNetns) {
		t.Errorf("the next run deleted an unrelated namespace %s", decoyNetns)
	}
	if !decoyRuleThere() {
		t.Errorf("the next run deleted an unrelated iptables rule")
	}

	_ = next.cmd.Process.Signal(syscall.SIGTERM)
	if code := next.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("the next run exited %d after SIGTERM", code)
	}
}

// TestCtrlCLeavesNothing: after Ctrl-C (SIGINT) the run exits 0 and leaves
// none of its processes, namespaces or iptables rules (one is in place when
// it is stopped), and of its state directory only the logs; the lock is
// gone.
func TestCtrlCLeavesNothing(t *testing.T) {
	requireFleet(t)
	state := filepath.Join(t.TempDir(), "demo")
	in := startDemo(t, state, "cut")
	in.waitReady(t)
	// Before the interrupt: the run's services, its 4 namespaces and its
	// rule. (Its controller may exit on its own: the API server is cut.)
	kids := childrenOf(t, in.pid())
	if got := left(t, in.pid(), kids); !services(kids) || len(namespacesOf(t, in.pid())) < 4 || len(rulesOf(t, in.pid())) < 1 {
		t.Fatalf("the run made only %v", got)
	}
	if _, err := os.Stat(state + ".lock"); err != nil {
		t.Fatalf("no lock while running: %v", err)
	}

	began := time.Now()
	if err := in.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := in.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit code %d after Ctrl-C", code)
	}
	t.Logf("down %s after Ctrl-C", time.Since(began).Round(time.Millisecond))
	if got := left(t, in.pid(), kids); len(got) > 0 {
		t.Errorf("left after Ctrl-C: %v", got)
	}
	ents, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != logsDir {
		t.Errorf("the state directory holds %v, want only %s", names, logsDir)
	}
	if _, err := os.Stat(state + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file is still there: %v", err)
	}
}
