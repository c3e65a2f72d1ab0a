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

// Package e2e runs the product in one piece: a real kube-apiserver and etcd,
// Loki, Prometheus, the controller, and four simulated vehicles of three
// hosts, each host a network namespace with a real nettune-agent. Root only.
//
// The observability stack is secured as a user's is (fleet Options.Secure):
// Loki multi-tenant (auth_enabled) behind an nginx gateway with TLS and
// basic auth, Prometheus' API with TLS and basic auth; the controller reads
// its credentials from Secrets, the agents from a credentials directory.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/localcp"
)

const profile = "xavier-lan"

var (
	f       *fleet.Fleet
	samples string    // config/samples/demo
	fleetUp time.Time // the dashboards' time range starts here
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped (needs root for network namespaces)")
		os.Exit(0)
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	samples = filepath.Join(root, "config", "samples", "demo")
	dir, err := os.MkdirTemp("", "nettune-e2e-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	f, err = fleet.Start(ctx, fleet.Options{Dir: dir, Topics: fleet.DemoTopics, Progress: os.Stdout, Secure: true})
	if err != nil {
		fmt.Println("e2e: starting the fleet:", err)
		cancel()
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Printf("e2e: fleet up in %s\n", time.Since(began).Round(time.Millisecond))
	fleetUp = time.Now()
	// Interrupted: take the fleet down before dying.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Println("e2e: interrupted; closing the fleet")
		cancel()
		_ = f.Close()
		os.Exit(1)
	}()
	stopTraffic := f.StartTraffic(ctx)
	code := m.Run()
	stopTraffic()
	cancel()
	if err := f.Close(); err != nil {
		fmt.Println("e2e: closing the fleet:", err)
		code = 1
	}
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Println("e2e: logs kept in", dir)
	}
	os.Exit(code)
}

// evidence prints the logs, objects and routes when the test failed.
func evidence(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(f.Evidence(context.Background()))
		}
	})
}

func apply(t *testing.T, file string) {
	t.Helper()
	out, err := f.Kubectl(context.Background(), "apply", "-f", filepath.Join(samples, file))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply -f %s: %s", file, strings.TrimSpace(out))
}

func getProfile(t *testing.T) *v1alpha1.NetTuningProfile {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{}
	if err := f.CP.Client.Get(context.Background(), client.ObjectKey{Name: profile}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitProfile(t *testing.T, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p := getProfile(t)
		if cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			out, _ := f.Plugin(context.Background(), "status", profile)
			t.Fatalf("timed out after %s waiting for %s:\n%s", timeout, what, out)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// stopOn fails the test at once, with the analysis, when p's status (for its
// current spec) is in phase.
func stopOn(t *testing.T, p *v1alpha1.NetTuningProfile, phase, what string) {
	t.Helper()
	if p.Status.ObservedGeneration != p.Generation || p.Status.Phase != phase {
		return
	}
	out, _ := f.Plugin(context.Background(), "status", profile)
	t.Fatalf("%s:\n%s", what, out)
}

// nodes lists every NodeNetTuning.
func nodes(t *testing.T) []v1alpha1.NodeNetTuning {
	t.Helper()
	list := &v1alpha1.NodeNetTuningList{}
	if err := f.CP.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// assertLeases checks every agent renews its Lease (its sign of life) and
// leaves its status alone while nothing changes.
func assertLeases(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	read := func() map[string]coordinationv1.Lease {
		list := &coordinationv1.LeaseList{}
		if err := f.CP.Client.List(ctx, list, client.InNamespace(fleet.Namespace), client.HasLabels{v1alpha1.AgentLeaseLabel}); err != nil {
			t.Fatal(err)
		}
		out := map[string]coordinationv1.Lease{}
		for _, l := range list.Items {
			out[l.Name] = l
		}
		return out
	}
	status := func() map[string]string {
		out := map[string]string{}
		for _, n := range nodes(t) {
			out[n.Name] = n.ResourceVersion
		}
		return out
	}
	before, statusBefore := read(), status()
	time.Sleep(12 * time.Second) // more than two of the fleet's 5 s renewals
	after, statusAfter := read(), status()
	for _, n := range nodes(t) {
		b, a := before[n.Name], after[n.Name]
		switch {
		case a.Spec.RenewTime == nil || a.Spec.HolderIdentity == nil || *a.Spec.HolderIdentity != n.Name || a.Labels[v1alpha1.AgentLeaseLabel] != n.Name:
			t.Errorf("node %s: no agent lease held by it: %+v", n.Name, a)
		case b.Spec.RenewTime == nil || !a.Spec.RenewTime.After(b.Spec.RenewTime.Time):
			t.Errorf("node %s: lease not renewed in 12 s (%v -> %v)", n.Name, b.Spec.RenewTime, a.Spec.RenewTime)
		}
		if statusBefore[n.Name] != statusAfter[n.Name] {
			t.Errorf("node %s: NodeNetTuning rewritten in 12 s of nothing changing (resourceVersion %s -> %s): liveness belongs to the lease", n.Name, statusBefore[n.Name], statusAfter[n.Name])
		}
	}
}

// vehicleOf is the vehicle of a node name (av-001-xavier-a -> av-001).
func vehicleOf(node string) string {
	return node[:strings.LastIndex(node[:strings.LastIndex(node, "-")], "-")]
}

// allVerified: every node's NodeNetTuning carries rev and its agent verified it.
func allVerified(t *testing.T, rev string) bool {
	ns := nodes(t)
	if len(ns) != 12 {
		return false
	}
	for i := range ns {
		verified, _, _ := fleetmodel.NodeReport(&ns[i])
		if fleetmodel.AssignedRevision(&ns[i], profile) != rev || !verified {
			return false
		}
	}
	return true
}

// assertRoutes checks every host's routes to its peers carry want (e.g.
// "cwnd lock 30"), skipping hosts of the vehicles in except.
func assertRoutes(t *testing.T, want string, only func(vehicle, host, route string) bool) {
	t.Helper()
	for name, v := range f.Vehicles {
		for _, h := range v.Hosts {
			out, err := f.Routes(name, h.Name)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, line := range strings.Split(out, "\n") {
				if !strings.Contains(line, "/32") && !strings.HasPrefix(line, "10.") {
					continue
				}
				if strings.Contains(line, " dev ") && strings.Contains(line, "proto kernel") {
					continue
				}
				if only != nil && !only(name, h.Name, line) {
					continue
				}
				n++
				if !strings.Contains(line, want) {
					t.Errorf("%s/%s route %q lacks %q", name, h.Name, line, want)
				}
			}
			if n == 0 && only == nil {
				t.Errorf("%s/%s has no peer routes:\n%s", name, h.Name, out)
			}
		}
	}
}

// watchAssignments records, until stop, every vehicle seen rendered with a
// revision, and when each vehicle was first seen verified on it.
type watch struct {
	mu       sync.Mutex
	assigned map[string]map[string]bool      // revision -> vehicles
	verified map[string]map[string]time.Time // revision -> vehicle -> first all-nodes-verified time
	stop     chan struct{}
	done     chan struct{}
}

func watchFleet(t *testing.T) *watch {
	w := &watch{assigned: map[string]map[string]bool{}, verified: map[string]map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			list := &v1alpha1.NodeNetTuningList{}
			if err := f.CP.Client.List(context.Background(), list); err == nil {
				perVehicle := map[string][]bool{}
				revOf := map[string]string{}
				w.mu.Lock()
				for i := range list.Items {
					n := &list.Items[i]
					rev := fleetmodel.AssignedRevision(n, profile)
					v := vehicleOf(n.Name)
					if w.assigned[rev] == nil {
						w.assigned[rev] = map[string]bool{}
					}
					w.assigned[rev][v] = true
					ok, _, _ := fleetmodel.NodeReport(n)
					if prev, seen := revOf[v]; seen && prev != rev {
						ok = false
					}
					revOf[v] = rev
					perVehicle[v] = append(perVehicle[v], ok)
				}
				now := time.Now()
				for v, oks := range perVehicle {
					all := len(oks) == 3
					for _, ok := range oks {
						all = all && ok
					}
					rev := revOf[v]
					if all {
						if w.verified[rev] == nil {
							w.verified[rev] = map[string]time.Time{}
						}
						if _, seen := w.verified[rev][v]; !seen {
							w.verified[rev][v] = now
						}
					}
				}
				w.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(w.close)
	return w
}

func (w *watch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *watch) vehicles(rev string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for v := range w.assigned[rev] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// firstAndLast are the first and last times a vehicle verified rev.
func (w *watch) firstAndLast(rev string) (first, last time.Time, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.verified[rev] {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
		n++
	}
	return first, last, n
}

func TestE2E(t *testing.T) {
	evidence(t)
	var r1, r2 string

	t.Run("stable revision on every vehicle", func(t *testing.T) {
		apply(t, "01-xavier-lan-v1.yaml")
		p := waitProfile(t, 2*time.Minute, "v1 stable", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.StableRevision != "" && p.Status.Phase == v1alpha1.PhaseHealthy
		})
		r1 = p.Status.StableRevision
		waitFor(t, time.Minute, "every node verified "+r1, func() bool { return allVerified(t, r1) })
		assertRoutes(t, "cwnd lock 40", nil)
		// Every agent pushes to Loki through the gateway with its
		// credentials directory. Waited for before the leases are watched:
		// the first push's LogsShipped condition is a status change.
		waitFor(t, time.Minute, "every node's LogsShipped condition True", func() bool { return logsShipped(t) == "" })
		assertLeases(t)
	})

	t.Run("good profile rolls out canary, partial, whole fleet", func(t *testing.T) {
		w := watchFleet(t)
		began := time.Now()
		apply(t, "02-xavier-lan-v2.yaml")
		sawPartial := false
		p := waitProfile(t, 10*time.Minute, "v2 stable", func(p *v1alpha1.NetTuningProfile) bool {
			if p.Status.CurrentRevision != r1 && p.Status.Vehicles.Updated > 1 && p.Status.Vehicles.Updated < p.Status.Vehicles.Total {
				sawPartial = true
			}
			stopOn(t, p, v1alpha1.PhaseRolledBack, "the good profile was rolled back (a false rollback)")
			stopOn(t, p, v1alpha1.PhasePaused, "the good profile's rollout paused")
			return p.Status.StableRevision != r1 && p.Status.StableRevision != "" && p.Status.Phase == v1alpha1.PhaseHealthy
		})
		r2 = p.Status.StableRevision
		waitFor(t, time.Minute, "every node verified "+r2, func() bool { return allVerified(t, r2) })
		w.close()
		first, last, n := w.firstAndLast(r2)
		t.Logf("kubectl apply -> first canary verified: %s; -> whole fleet (%d vehicles) verified: %s",
			first.Sub(began).Round(time.Millisecond), n, last.Sub(began).Round(time.Millisecond))
		if !sawPartial {
			t.Errorf("never saw a partial step (some but not all vehicles updated)")
		}
		if len(p.Status.Analysis) == 0 && !analysisEvents(t, "AnalysisSuccessful") {
			t.Errorf("no successful analysis recorded")
		}
		assertRoutes(t, "cwnd lock 30", nil)
		assertRoutes(t, "rto_min lock 10ms", nil)
		out, _ := f.Plugin(context.Background(), "status", profile)
		t.Logf("kubectl nettune status %s:\n%s", profile, out)
	})

	t.Run("bad profile is rolled back by the controller", func(t *testing.T) {
		w := watchFleet(t)
		apply(t, "03-xavier-lan-bad.yaml")
		var canaries []string
		var r3 string
		p := waitProfile(t, 6*time.Minute, "rolled back", func(p *v1alpha1.NetTuningProfile) bool {
			if p.Status.CurrentRevision != r2 {
				r3, canaries = p.Status.CurrentRevision, p.Status.CanaryVehicles
			}
			stopOn(t, p, v1alpha1.PhasePaused, "the bad profile's rollout paused instead of rolling back")
			if p.Status.StableRevision != r2 && p.Status.StableRevision != "" {
				t.Fatalf("the bad profile became stable (%s): promoted, not rolled back", p.Status.StableRevision)
			}
			return p.Status.Phase == v1alpha1.PhaseRolledBack
		})
		rolledBack := time.Now()
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack)
		if c == nil || c.Reason != "AnalysisFailed" || !strings.Contains(c.Message, "canary") {
			t.Errorf("RolledBack condition %+v: want AnalysisFailed naming the check, value and threshold", c)
		} else {
			t.Logf("RolledBack: %s", c.Message)
		}
		if p.Status.FailedRevision != r3 || p.Status.StableRevision != r2 {
			t.Errorf("failed %s stable %s, want %s %s", p.Status.FailedRevision, p.Status.StableRevision, r3, r2)
		}
		waitFor(t, time.Minute, "every node back on "+r2, func() bool { return allVerified(t, r2) })
		back := time.Now()
		w.close()
		got := w.vehicles(r3)
		if strings.Join(got, ",") != strings.Join(canaries, ",") {
			t.Errorf("vehicles that received the bad revision: %v, want only the canaries %v", got, canaries)
		}
		first, _, _ := w.firstAndLast(r3)
		if !first.IsZero() {
			t.Logf("bad revision verified on the canary -> rollback decided: %s; -> every node verified on stable again: %s",
				rolledBack.Sub(first).Round(time.Millisecond), back.Sub(first).Round(time.Millisecond))
		}
		// The canaries' routes to xavier-a are back to the stable window.
		assertRoutes(t, "cwnd lock 30", func(vehicle, host, route string) bool {
			return contains(canaries, vehicle)
		})
	})

	t.Run("offline canary: the step waits, moves on, and the vehicle converges", func(t *testing.T) {
		const offline = "av-002"
		if err := f.StopAgents(offline); err != nil {
			t.Fatal(err)
		}
		restarted := false
		defer func() {
			if !restarted {
				_ = f.StartAgents(offline)
			}
		}()
		// v2 with ssthresh 29: a new revision; named canaries, no analysis.
		edit(t, func(p *v1alpha1.NetTuningProfile) {
			p.Spec.HostPairs = nil
			p.Spec.Defaults.Ssthresh = ptr(int32(29))
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Vehicles: []string{offline, "av-003"}}
			p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{
				{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(50))}},
				{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}},
			}
			p.Spec.Rollout.UnreachableAfter = &metav1.Duration{Duration: 15 * time.Second}
			p.Spec.Rollout.UnreachableTimeout = &metav1.Duration{Duration: 20 * time.Second}
		})
		began := time.Now()
		p := waitProfile(t, 3*time.Minute, "stable without the offline canary", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.CurrentRevision != r2
		})
		r4 := p.Status.StableRevision
		waited := time.Since(began)
		if waited < 20*time.Second {
			t.Errorf("the rollout finished in %s, without waiting for the unreachable canary", waited)
		}
		if p.Status.Vehicles.Unreachable != 1 {
			t.Errorf("unreachable vehicles %d, want 1", p.Status.Vehicles.Unreachable)
		}
		t.Logf("rollout completed without %s after %s", offline, waited.Round(time.Second))
		if err := f.StartAgents(offline); err != nil {
			t.Fatal(err)
		}
		restarted = true
		waitFor(t, 2*time.Minute, offline+" converges to "+r4, func() bool { return allVerified(t, r4) })
		assertRoutes(t, "ssthresh lock 29", func(vehicle, host, route string) bool { return vehicle == offline })
	})

	t.Run("plugin promote, abort and undo", func(t *testing.T) {
		stable := getProfile(t).Status.StableRevision
		pause := func(p *v1alpha1.NetTuningProfile) {
			p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Count: ptr(int32(1))}
			p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{Pause: &v1alpha1.PauseStep{}}}
		}
		// promote: a paused rollout goes on.
		edit(t, func(p *v1alpha1.NetTuningProfile) { pause(p); p.Spec.Defaults.Ssthresh = ptr(int32(28)) })
		waitProfile(t, time.Minute, "paused", func(p *v1alpha1.NetTuningProfile) bool { return p.Status.Phase == v1alpha1.PhasePaused })
		plugin(t, "promote", profile)
		p := waitProfile(t, 2*time.Minute, "promoted to stable", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision != stable
		})
		promoted := p.Status.StableRevision

		// abort: the rollout in progress goes back.
		edit(t, func(p *v1alpha1.NetTuningProfile) { p.Spec.Defaults.Ssthresh = ptr(int32(27)) })
		waitProfile(t, time.Minute, "paused", func(p *v1alpha1.NetTuningProfile) bool { return p.Status.Phase == v1alpha1.PhasePaused })
		plugin(t, "abort", profile)
		p = waitProfile(t, time.Minute, "aborted", func(p *v1alpha1.NetTuningProfile) bool { return p.Status.Phase == v1alpha1.PhaseRolledBack })
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Reason != "Aborted" {
			t.Errorf("RolledBack condition %+v, want Aborted", c)
		}
		waitFor(t, time.Minute, "every node back on "+promoted, func() bool { return allVerified(t, promoted) })

		// undo to the first revision: its content returns and rolls out.
		plugin(t, "undo", profile, "--to-revision", r1)
		waitProfile(t, time.Minute, "undo paused", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.CurrentRevision == r1 && p.Status.Phase == v1alpha1.PhasePaused
		})
		plugin(t, "promote", profile)
		waitProfile(t, 2*time.Minute, "r1 stable again", func(p *v1alpha1.NetTuningProfile) bool {
			return p.Status.StableRevision == r1 && p.Status.Phase == v1alpha1.PhaseHealthy
		})
		waitFor(t, time.Minute, "every node verified "+r1, func() bool { return allVerified(t, r1) })
		assertRoutes(t, "cwnd lock 40", nil)
	})

	t.Run("a wrong password in the controller's Secret pauses the analysis; fixed, the rollout goes on by itself", func(t *testing.T) {
		testBrokenSecret(t)
	})

	t.Run("a revision whose post-apply probe fails is reverted by the agents and rolled back", func(t *testing.T) {
		testRevert(t)
	})

	t.Run("drift on a host is repaired by its agent", func(t *testing.T) {
		testDrift(t)
	})

	t.Run("changes only when the vehicle says it is safe", func(t *testing.T) {
		testGates(t)
	})

	t.Run("every dashboard query returns data", func(t *testing.T) {
		testDashboards(t, r2)
	})
}

func plugin(t *testing.T, args ...string) {
	t.Helper()
	out, err := f.Plugin(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl nettune %s: %s", strings.Join(args, " "), strings.TrimSpace(out))
}

// edit changes the profile's spec as a user would, retrying when the
// controller changed the object in between.
func edit(t *testing.T, mutate func(*v1alpha1.NetTuningProfile)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := getProfile(t)
		mutate(p)
		return f.CP.Client.Update(context.Background(), p)
	}); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func analysisEvents(t *testing.T, reason string) bool {
	out, err := f.Kubectl(context.Background(), "get", "events", "-A", "--field-selector", "reason="+reason, "-o", "name")
	return err == nil && strings.TrimSpace(out) != ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }
