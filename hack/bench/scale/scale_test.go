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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
	"github.com/nettune/nettune/internal/localcp"
)

// logWriter writes each progress line into the test's log.
type logWriter struct{ t *testing.T }

// Write logs p as one line.
func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// needBinaries skips the test when bin/ lacks the controller or the control
// plane.
func needBinaries(t *testing.T) {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"nettune-controller", "kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			t.Skipf("bin/%s missing (make tools build): %v", b, err)
		}
	}
}

// TestQuickSize runs the whole benchmark at 60 nodes (12 vehicles x 5
// hosts), both liveness protocols, a 5 s idle, against the real controller
// and kube-apiserver, and checks what it measured.
func TestQuickSize(t *testing.T) {
	needBinaries(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "bench-scale.md")
	c, err := parseFlags([]string{"-sizes", "60", "-hosts", "5", "-liveness", "lease,status", "-idle", "5s",
		"-max-wait", "90s", "-settle", "1s", "-out", out, "-state-dir", filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := run(ctx, c, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 {
		t.Fatalf("%d results, want 2 (lease, status)", len(results))
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		checkResult(t, r, string(report))
	}
}

// checkResult checks that a run reached every scenario's end state and
// measured the controller.
func checkResult(t *testing.T, r *result, report string) {
	t.Helper()
	if r.nodes != 60 || r.vehicles != 12 {
		t.Errorf("%s: %d nodes in %d vehicles, want 60 in 12", r.mode, r.nodes, r.vehicles)
	}
	if r.err != "" {
		t.Errorf("%s: stopped early: %s", r.mode, r.err)
	}
	// done means: every node verified on the scenario's revision (for the
	// rollback: back on the stable one, and the profile RolledBack).
	for name, s := range map[string]scenario{"all at once": r.allAtOnce, "staged": r.staged, "rollback": r.rollback} {
		if !s.ran || !s.done {
			t.Errorf("%s: %s did not reach its end state: %s", r.mode, name, s.note)
			continue
		}
		if s.verified != r.nodes || s.first <= 0 || s.all <= 0 || s.settled <= 0 {
			t.Errorf("%s: %s: %d/%d nodes verified, first %s, all %s, settled %s", r.mode, name, s.verified, r.nodes, s.first, s.all, s.settled)
		}
	}
	// The writes alone moved every node, the controller and the agents'
	// reports stopped.
	if !r.alone.done || r.alone.verified != r.nodes || r.alone.first <= 0 || r.alone.all <= 0 {
		t.Errorf("%s: writes alone: done %t, %d/%d nodes verified, two writes each answered after %s, every node seen verified after %s (%s)",
			r.mode, r.alone.done, r.alone.verified, r.nodes, r.alone.first, r.alone.all, r.alone.note)
	}
	// Under the lease protocol every node's Lease was renewed twice after
	// the writes alone; under the status protocol there are no Leases.
	if want := r.mode == modeLease; r.floor.ran != want || (want && (!r.floor.done || r.floor.verified != r.nodes || r.floor.first <= 0 || r.floor.all < r.floor.first)) {
		t.Errorf("%s: smallest writes: ran %t (want %t), done %t, %d/%d nodes renewed twice, once after %s, twice after %s (%s)",
			r.mode, r.floor.ran, want, r.floor.done, r.floor.verified, r.nodes, r.floor.first, r.floor.all, r.floor.note)
	}
	// ... and the API server counted those renewals in the phase.
	counted := -1.0
	for _, p := range r.phases {
		if p.name == "smallest writes (no controller)" && p.requests != nil {
			counted = p.requests.Total(func(k benchutil.RequestKey) bool { return k.Verb == "PUT" && k.Resource == "leases" && k.Code == "200" })
		}
	}
	if r.mode == modeLease && counted < float64(2*r.nodes) {
		t.Errorf("%s: smallest writes: the API server counted %.0f Lease updates in the phase (-1: no such phase), want at least %d", r.mode, counted, 2*r.nodes)
	}
	// The rollback aborts with at least half the fleet on the new revision.
	if r.rollback.moved < (r.nodes+1)/2 {
		t.Errorf("%s: rollback aborted with %d/%d nodes on the new revision, want at least half", r.mode, r.rollback.moved, r.nodes)
	}
	if r.idle == nil || r.idle.took < 5*time.Second {
		t.Errorf("%s: no idle measurement of 5 s: %+v", r.mode, r.idle)
	} else if r.idle.requests == nil || r.idle.reconciles == nil {
		t.Errorf("%s: idle: requests or reconciles unmeasured (%s)", r.mode, r.idle.reqErr)
	}
	var cpu time.Duration
	for _, p := range r.phases {
		cpu += p.cpu
	}
	if cpu <= 0 || peakRSS(r) <= 0 {
		t.Errorf("%s: controller CPU %s, peak RSS %d: want both > 0", r.mode, cpu, peakRSS(r))
	}
	// Three scenarios: at least two reports per node.
	if r.simWrites < int64(2*r.nodes) {
		t.Errorf("%s: the agents wrote %d times for %d nodes", r.mode, r.simWrites, r.nodes)
	}
	row := "| 60 | 12 | " + r.mode + " | "
	if !strings.Contains(report, row) {
		t.Errorf("the report has no row %q", row)
	}
}

// TestLeaseRenewFlag: one period for every size, one per size, or an error.
func TestLeaseRenewFlag(t *testing.T) {
	c, err := parseFlags([]string{"-sizes", "1000,30000", "-lease-renew", "40s,4m"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.renews) != 2 || c.renews[0] != 40*time.Second || c.renews[1] != 4*time.Minute {
		t.Fatalf("renews %v", c.renews)
	}
	if c, err = parseFlags([]string{"-sizes", "1000,5000"}); err != nil || len(c.renews) != 2 || c.renews[1] != 40*time.Second {
		t.Fatalf("default renews %v (%v)", c.renews, err)
	}
	for _, bad := range []string{"40s,1m,2m", "fast", "10ms"} {
		if _, err := parseFlags([]string{"-sizes", "1000,5000", "-lease-renew", bad}); err == nil {
			t.Errorf("-lease-renew %s accepted", bad)
		}
	}
	if got := unreachableAfter(4 * time.Minute); got != 12*time.Minute {
		t.Errorf("unreachableAfter(4m) = %s", got)
	}
	if got := unreachableAfter(40 * time.Second); got != 2*time.Minute {
		t.Errorf("unreachableAfter(40s) = %s", got)
	}
}

// TestWriteCostQuick runs the write-cost benchmark with 30 objects and one
// round, and checks that every write of every object was measured, that
// the objects' stored sizes follow their content, and that the what-if
// variants changed what they say.
func TestWriteCostQuick(t *testing.T) {
	needBinaries(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "bench-writes.md")
	c, err := parseFlags([]string{"-write-cost", "-write-cost-writes", "30", "-write-cost-rounds", "1", "-out", out, "-state-dir", filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := writeCost(ctx, c, logWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*wcResult{}
	for _, r := range results {
		byName[r.v.name] = r
		for k, op := range r.ops {
			if len(r.samples[k]) != 1 || r.samples[k][0].rate <= 0 || r.samples[k][0].cpu < 0 {
				t.Errorf("%s, %s: samples %+v, want one with a rate", r.v.name, op, r.samples[k])
			}
		}
		if r.bytes <= r.mfBytes || r.mfBytes <= 0 || r.managers < 1 {
			t.Errorf("%s: stored %d bytes, %d of managedFields in %d entries", r.v.name, r.bytes, r.mfBytes, r.managers)
		}
	}
	if len(results) != len(wcVariants()) {
		t.Fatalf("%d results for %d variants", len(results), len(wcVariants()))
	}
	// The NodeNetTuning grows with its routes; its atomic lists hold
	// smaller managedFields than the same lists map-keyed.
	one, four, twelve := byName["NodeNetTuning, vehicle of 2 hosts (1 route)"], byName["NodeNetTuning, vehicle of 5 hosts (4 routes)"], byName["NodeNetTuning, vehicle of 13 hosts (12 routes)"]
	keyed := byName["what if: NodeNetTuning, 5 hosts, lists map-keyed (the schema before 2026-11-26)"]
	if one.bytes >= four.bytes || four.bytes >= twelve.bytes {
		t.Errorf("stored sizes with 1, 4, 12 routes: %d, %d, %d bytes, want increasing", one.bytes, four.bytes, twelve.bytes)
	}
	if four.mfBytes >= keyed.mfBytes {
		t.Errorf("managedFields: %d bytes with atomic lists, %d map-keyed: want fewer atomic", four.mfBytes, keyed.mfBytes)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range wcVariants() {
		if !strings.Contains(string(report), "| "+v.name+" | ") {
			t.Errorf("the report has no row for %s", v.name)
		}
	}
	if !strings.Contains(string(report), "of control-plane CPU per node") {
		t.Error("the report does not state what moving a node costs")
	}
}

// TestThousands: the report's node counts.
func TestThousands(t *testing.T) {
	for n, want := range map[int]string{5: "5", 100: "100", 1000: "1,000", 5000: "5,000", 30000: "30,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
