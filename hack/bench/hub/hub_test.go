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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
)

// logWriter writes each progress line into the test's log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// needTools skips the test when bin/ lacks the control plane, the
// controller or OCM's hub CRDs, unless NETTUNE_REQUIRE_TOOLS is set.
func needTools(t *testing.T) {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, b := range []string{"bin/nettune-controller", "bin/kube-apiserver", "bin/etcd", "bin/crds/ocm/hub"} {
		if _, err := os.Stat(filepath.Join(root, b)); err != nil {
			missing = append(missing, b)
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

// TestTinyHub runs the simulator end to end at 5 clusters of 3 vehicles
// against the real hub controller: the first profile, then a staged
// rollout, and checks that it completed and that the writes counted by
// each side agree.
func TestTinyHub(t *testing.T) {
	needTools(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "bench-hub.md")
	c, err := parseFlags([]string{"-sizes", "5", "-vehicles", "3", "-canary", "2", "-scenarios", "first,staged",
		"-apply-delay", "100ms", "-settle", "1s", "-max-wait", "40s", "-workers", "4", "-out", out, "-state-dir", filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results, err := run(ctx, c, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(results[0].scenarios) != 2 {
		t.Fatalf("results %+v", results)
	}
	r := results[0]
	for _, s := range r.scenarios {
		if !s.done {
			t.Fatalf("%s did not complete: %s", s.name, s.note)
		}
		ph := s.phase
		if ph.requests == nil || ph.workWrites == nil {
			t.Fatalf("%s: metrics unreadable: %s %s", s.name, ph.reqErr, ph.cmErr)
		}
		works, status := ph.nettuneWrites()
		apiWorks := ph.requests.Writes("manifestworks") - countVerb(ph.requests, "DELETE", "manifestworks")
		if works != apiWorks {
			t.Errorf("%s: the controller counted %.0f work writes, the API server %.0f", s.name, works, apiWorks)
		}
		if got := ph.requests.Writes("manifestworks/status"); got != float64(ph.simWrites) {
			t.Errorf("%s: the agent wrote %d statuses, the API server counted %.0f", s.name, ph.simWrites, got)
		}
		// Every cluster moves (its vehicles get the new revision); each
		// move is one new work generation, so one write of each side.
		if ph.moves < int64(r.clusters) || works < float64(ph.moves) || ph.simWrites < ph.moves || status < 1 {
			t.Errorf("%s: %d clusters moved (%d vehicles), %.0f work writes, %.0f status patches, %d agent writes",
				s.name, ph.moves, ph.vehiclesMoved, works, status, ph.simWrites)
		}
		if ph.watch == nil || ph.watch["manifestworks"].events < float64(ph.simWrites) || ph.watch["manifestworks"].bytes <= 0 {
			t.Errorf("%s: the API server's watches sent %+v of the works (%s), fewer events than the agent's %d status writes", s.name, ph.watch["manifestworks"], ph.planeErr, ph.simWrites)
		}
		if ph.vehiclesMoved != int64(r.vehicles) {
			t.Errorf("%s: %d vehicles moved, want every one of %d", s.name, ph.vehiclesMoved, r.vehicles)
		}
	}
	if s := r.scenarios[1]; s.first <= 0 || s.first > s.all {
		t.Errorf("staged: canary verified after %s, every vehicle after %s", s.first, s.all)
	}
	// A report is its header line (when written, which generation) and
	// one line per vehicle.
	if rc := r.cost; rc == nil || rc.err != "" || rc.reportLines != 1+3 || rc.works != 5 || rc.profileVehicles != 15 {
		t.Errorf("report cost %+v", rc)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## 5 clusters x 3 vehicles (15 vehicles)", "What the vehicle reports cost the hub: once every vehicle reported", "| staged |", "## Against the goals"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestTinyHubAddOn runs the simulator at 5 clusters of 3 vehicles with
// -liveness addon against the real hub controller: its add-on gate admits
// every cluster (their ManagedClusterAddOns Available at the chart's
// version), their shares say liveness AddOnLease, and through an idle
// stretch longer than the heartbeat a share of liveness Report asks for
// (a quarter of the default unreachableAfter at most) no status passes
// through the hub.
func TestTinyHubAddOn(t *testing.T) {
	needTools(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "bench-hub.md")
	c, err := parseFlags([]string{"-liveness", "addon", "-sizes", "5", "-vehicles", "3", "-canary", "2", "-scenarios", "first,idle", "-idle", "35s",
		"-apply-delay", "100ms", "-settle", "1s", "-max-wait", "40s", "-workers", "4", "-out", out, "-state-dir", filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := run(ctx, c, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || len(results[0].scenarios) != 1 || results[0].idle == nil {
		t.Fatalf("results %+v", results)
	}
	r := results[0]
	if s := r.scenarios[0]; !s.done || s.phase.moves != int64(r.clusters) {
		t.Fatalf("first: done %v (%s), %d clusters moved, want %d: the add-on gate did not admit every cluster", s.done, s.note, s.phase.moves, r.clusters)
	}
	if got := r.liveness[v1alpha1.LivenessAddOnLease]; got != r.clusters || len(r.liveness) != 1 {
		t.Errorf("shares by liveness %v, want all %d AddOnLease", r.liveness, r.clusters)
	}
	idle := r.idle
	if idle.requests == nil {
		t.Fatalf("idle: API server metrics unreadable: %s", idle.reqErr)
	}
	if idle.simWrites != 0 || idle.beats != 0 || idle.requests.Writes("manifestworks/status") != 0 {
		t.Errorf("idle: the agent wrote %d statuses (%d heartbeats), the API server counted %.0f: want none with liveness AddOnLease",
			idle.simWrites, idle.beats, idle.requests.Writes("manifestworks/status"))
	}
	if ver, err := chartVersion(); err != nil || r.addOnVersion != ver || !slices.Contains(r.args, "--addon-gate=true") || slices.Contains(r.args, "--addon-manager") {
		t.Errorf("add-on version %q (chart %q, %v), controller flags %v", r.addOnVersion, ver, err, r.args)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Liveness by OCM's add-on health", "ManagedClusterAddOn `nettune`", "--addon-gate=true --addon-name nettune --addon-min-version " + r.addOnVersion,
		"5 of liveness AddOnLease", "| idle (", "(0 heartbeats)"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(string(report), "Liveness by the report") {
		t.Error("the report of an add-on run describes liveness by the report")
	}
}

// TestReportDirChecked: an -out whose directory does not exist is refused
// before anything runs, naming the flag.
func TestReportDirChecked(t *testing.T) {
	c, err := parseFlags([]string{"-out", "no-such-directory/bench-hub.md"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prepare(c); err == nil || !strings.Contains(err.Error(), "-out no-such-directory/bench-hub.md") {
		t.Errorf("prepare: %v, want -out refused", err)
	}
}

// TestParseSizes: N takes -vehicles, NxV its own; a bad size is refused
// with the flag named.
func TestParseSizes(t *testing.T) {
	c, err := parseFlags([]string{"-sizes", "100, 3500x10,1000x100", "-vehicles", "7"})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.sizes); got != "[100x7 3500x10 1000x100]" {
		t.Errorf("sizes %s", got)
	}
	for _, bad := range [][]string{{"-sizes", "10x0"}, {"-sizes", "10x1000"}, {"-sizes", "x10"}, {"-sizes", "1x5", "-canary", "10"}, {"-vehicles", "0"}, {"-liveness", "lease"}} {
		if _, err := parseFlags(bad); err == nil || !strings.Contains(err.Error(), "-") {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if c.liveness != livenessReport || c.addOnMode() {
		t.Errorf("liveness %q by default, want %q", c.liveness, livenessReport)
	}
	if vehicleName(1, 7, 10) != "c0001-av-07" || vehicleName(12, 7, 100) != "c0012-av-007" {
		t.Errorf("vehicle names %s %s", vehicleName(1, 7, 10), vehicleName(12, 7, 100))
	}
}
