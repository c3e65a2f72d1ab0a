package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/localcp"
)

// logWriter writes each progress line into the test's log.
type logWriter struct{ t *testing.T }

// Write logs p as one line.
func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestQuickSize runs the whole benchmark at 60 nodes (12 vehicles x 5
// hosts), both liveness protocols, a 5 s idle, against the real controller
// and kube-apiserver, and checks what it measured.
func TestQuickSize(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"nettune-controller", "kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			t.Skipf("bin/%s missing (make tools build): %v", b, err)
		}
	}
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
