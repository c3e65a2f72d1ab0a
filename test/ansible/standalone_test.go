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

package ansible

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nettune/nettune/test/framework/nettest"
)

// hostPair is two network namespaces joined by a veth: host a (the host the
// play tunes) at .1 and its peer b at .2 of a /24.
type hostPair struct {
	nsA, nsB   string
	devA, devB string
	addrA      string // without prefix length
	addrB      string
	prefix     string // a.b.c
}

// newHostPair makes the namespaces and removes them in t.Cleanup.
func newHostPair(t *testing.T) hostPair {
	t.Helper()
	id := nettest.RandHex(t, 3)
	p := hostPair{
		nsA: "nta-" + id + "-a", nsB: "nta-" + id + "-b",
		devA: "nta" + id + "a", devB: "nta" + id + "b",
		prefix: fmt.Sprintf("10.%d.%d", 200+nettest.RandInt(t, 50), nettest.RandInt(t, 250)),
	}
	p.addrA, p.addrB = p.prefix+".1", p.prefix+".2"
	for _, ns := range []string{p.nsA, p.nsB} {
		nettest.IP(t, "netns", "add", ns)
		t.Cleanup(func() { _, _ = nettest.IPTry("netns", "del", ns) })
	}
	nettest.IP(t, "link", "add", p.devA, "netns", p.nsA, "type", "veth", "peer", "name", p.devB, "netns", p.nsB)
	for _, side := range []struct{ ns, dev, addr string }{{p.nsA, p.devA, p.addrA}, {p.nsB, p.devB, p.addrB}} {
		nettest.IP(t, "-n", side.ns, "addr", "add", side.addr+"/24", "dev", side.dev)
		nettest.IP(t, "-n", side.ns, "link", "set", "lo", "up")
		nettest.IP(t, "-n", side.ns, "link", "set", side.dev, "up")
	}
	return p
}

// nodeState is a NodeNetTuning for host a with one route to host b.
func (p hostPair) nodeState(revision, device string, initcwnd, probePort int) string {
	probe := ""
	if probePort > 0 {
		probe = fmt.Sprintf("\n      probePort: %d", probePort)
	}
	return fmt.Sprintf(`apiVersion: nettune.io/v1alpha1
kind: NodeNetTuning
metadata:
  name: avtest-xavier-a
spec:
  revision: %[1]s
  profiles:
    - name: xavier-lan
      revision: %[1]s
  routes:
    - destination: %[2]s/32
      device: %[3]s
      peer: xavier-b
      profile: xavier-lan
      parameters:
        cwnd: {value: 30, lock: true}
        initcwnd: %[4]d
        initrwnd: %[4]d
        ssthresh: 30
        rtoMin: 10ms
        quickack: true
  peers:
    - host: xavier-b
      address: %[2]s%[5]s
`, revision, p.addrB, device, initcwnd, probe)
}

// tunedAttrs are what `ip route show` prints for the route of nodeState(…, 25, …).
var tunedAttrs = []string{"cwnd lock 30", "initcwnd 25", "initrwnd 25", "ssthresh lock 30", "rto_min lock 10ms", "quickack 1"}

func missingAttrs(route string, attrs []string) []string {
	var missing []string
	for _, a := range attrs {
		if !strings.Contains(route, a) {
			missing = append(missing, a)
		}
	}
	return missing
}

// TestStandalonePlayIdempotent runs apply-standalone.yml with the real
// nettune-agent against a network namespace: the first run tunes the route,
// the second changes nothing, --check reports a route changed by hand without
// touching it, a third run repairs it, a state the agent refuses fails the
// play and leaves the routes as they were, and so does an apply that the
// agent rolls back after its probes failed.
func TestStandalonePlayIdempotent(t *testing.T) {
	nettest.RequireRoot(t)
	tl := requireAnsible(t)
	agent := agentBinary(t)
	p := newHostPair(t)
	dir := t.TempDir()
	const host = "bench-xavier-a"

	inventory := filepath.Join(dir, "inventory.yml")
	writeFile(t, inventory, fmt.Sprintf(`standalone:
  hosts:
    %s:
      ansible_connection: local
      ansible_become: false
      ansible_python_interpreter: %s
`, host, tl.python))
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, p.nodeState("avtest-1", p.devA, 25, 0))
	vars := map[string]any{
		"nettune_node_state":      good,
		"nettune_node_state_dest": filepath.Join(dir, "host", "etc", "nettune", "node-state.yaml"),
		"nettune_agent_bin":       agent,
		"nettune_state_dir":       filepath.Join(dir, "host", "var", "lib", "nettune"),
		"nettune_netns":           p.nsA,
	}
	route := func() string { return nettest.IP(t, "-n", p.nsA, "route", "show", p.addrB) }
	routes := func() string { return nettest.IP(t, "-n", p.nsA, "route", "show") }
	play := func(t *testing.T, vars map[string]any, args ...string) (*playResult, hostStats) {
		r := tl.runPlaybook(t, inventory, vars, append([]string{"apply-standalone.yml"}, args...)...)
		s, ok := r.Stats[host]
		if !ok {
			t.Fatalf("no recap for %s", host)
		}
		return r, s
	}
	var counts []string

	if before := route(); len(missingAttrs(before, tunedAttrs)) != len(tunedAttrs) {
		t.Fatalf("route to %s is tuned before the play: %q", p.addrB, before)
	}

	t.Run("check mode on a fresh host previews the state given and changes nothing", func(t *testing.T) {
		before := route()
		r, s := play(t, vars, "--check")
		if r.exitErr != nil || s.Failures != 0 || s.Changed < 1 {
			t.Fatalf("--check: want changed >= 1 (would apply), failed 0; got changed=%d failed=%d exit %v", s.Changed, s.Failures, r.exitErr)
		}
		if got := route(); got != before {
			t.Fatalf("--check changed the route: %q -> %q", before, got)
		}
		if _, err := os.Stat(vars["nettune_node_state_dest"].(string)); !os.IsNotExist(err) {
			t.Fatalf("--check put a node state in force: %v", err)
		}
	})

	if !t.Run("first run tunes the route", func(t *testing.T) {
		r, s := play(t, vars)
		counts = append(counts, fmt.Sprintf("run 1: changed=%d failed=%d (%s)", s.Changed, s.Failures, r.duration.Round(1e6)))
		if r.exitErr != nil || s.Failures != 0 || s.Changed < 1 {
			t.Fatalf("want changed >= 1, failed 0 and exit 0; got changed=%d failed=%d exit %v", s.Changed, s.Failures, r.exitErr)
		}
		if res, _ := r.task(host, "Apply the node state"); !res.Changed {
			t.Errorf("the apply task did not run: %+v", res)
		}
		got := route()
		if m := missingAttrs(got, tunedAttrs); len(m) > 0 {
			t.Fatalf("after the play, route %q lacks %v", got, m)
		}
		t.Logf("tuned: %s", got)
	}) {
		t.FailNow()
	}

	if !t.Run("second run changes nothing", func(t *testing.T) {
		r, s := play(t, vars)
		counts = append(counts, fmt.Sprintf("run 2: changed=%d failed=%d (%s)", s.Changed, s.Failures, r.duration.Round(1e6)))
		if r.exitErr != nil || s.Failures != 0 || s.Changed != 0 {
			t.Fatalf("want changed 0, failed 0; got changed=%d failed=%d exit %v", s.Changed, s.Failures, r.exitErr)
		}
		if res, _ := r.task(host, "Apply the node state"); !res.Skipped {
			t.Errorf("the apply task ran although nothing differed: %+v", res)
		}
	}) {
		t.FailNow()
	}

	t.Run("check mode reports drift without repairing it", func(t *testing.T) {
		nettest.IP(t, "-n", p.nsA, "route", "replace", p.addrB+"/32", "dev", p.devA)
		drifted := route()
		if m := missingAttrs(drifted, tunedAttrs); len(m) != len(tunedAttrs) {
			t.Fatalf("hand-made route still has tuned attributes: %q", drifted)
		}
		r, s := play(t, vars, "--check")
		if r.exitErr != nil || s.Failures != 0 || s.Changed < 1 {
			t.Fatalf("--check: want changed >= 1 (would apply), failed 0; got changed=%d failed=%d exit %v", s.Changed, s.Failures, r.exitErr)
		}
		if got := route(); got != drifted {
			t.Fatalf("--check changed the route: %q -> %q", drifted, got)
		}
	})

	if !t.Run("third run repairs a route changed by hand", func(t *testing.T) {
		nettest.IP(t, "-n", p.nsA, "route", "replace", p.addrB+"/32", "dev", p.devA)
		t.Logf("drifted by hand: %s", route())
		r, s := play(t, vars)
		counts = append(counts, fmt.Sprintf("run 3 (drift): changed=%d failed=%d (%s)", s.Changed, s.Failures, r.duration.Round(1e6)))
		if r.exitErr != nil || s.Failures != 0 || s.Changed < 1 {
			t.Fatalf("want changed >= 1, failed 0; got changed=%d failed=%d exit %v", s.Changed, s.Failures, r.exitErr)
		}
		got := route()
		if m := missingAttrs(got, tunedAttrs); len(m) > 0 {
			t.Fatalf("after the repair, route %q lacks %v", got, m)
		}
	}) {
		t.FailNow()
	}

	// failingPlay runs the play with a state the agent must not keep: the
	// play fails with the agent's messages, and neither the routes nor the
	// node state in force change.
	failingPlay := func(t *testing.T, label, file string, wantMsgs ...string) {
		t.Helper()
		before := routes()
		failVars := map[string]any{}
		for k, v := range vars {
			failVars[k] = v
		}
		failVars["nettune_node_state"] = file
		r, s := play(t, failVars)
		counts = append(counts, fmt.Sprintf("%s: changed=%d failed=%d", label, s.Changed, s.Failures))
		if r.exitErr == nil || s.Failures == 0 {
			t.Fatalf("want the play to fail; got failed=%d exit %v", s.Failures, r.exitErr)
		}
		msgs := strings.Join(r.failureMessages(), "\n")
		for _, want := range wantMsgs {
			if !strings.Contains(msgs, want) {
				t.Errorf("failure does not carry the agent's message %q: %s", want, msgs)
			}
		}
		if after := routes(); after != before {
			t.Errorf("routes changed (%s):\nbefore:\n%s\nafter:\n%s", label, before, after)
		}
		kept, err := os.ReadFile(vars["nettune_node_state_dest"].(string))
		if err != nil || !strings.Contains(string(kept), "avtest-1") {
			t.Errorf("the %s state replaced the one in force: %q, %v", label, kept, err)
		}
	}

	t.Run("a state the agent refuses fails the play", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.yaml")
		writeFile(t, bad, p.nodeState("avtest-bad", "nosuchdev0", 20, 0))
		failingPlay(t, "bad device", bad, "device nosuchdev0 does not exist")
	})

	t.Run("an apply the agent rolls back fails the play", func(t *testing.T) {
		// initcwnd 20 differs, so diff says 2 and apply runs; the probe
		// connects to port 9 on the peer, where nothing listens, so the
		// agent reverts to the last-known-good state (initcwnd 25).
		rb := filepath.Join(dir, "rollback.yaml")
		writeFile(t, rb, p.nodeState("avtest-2", p.devA, 20, 9))
		failingPlay(t, "rolled back", rb, "rolled back", "unreachable")
	})

	t.Logf("recap counts:\n  %s", strings.Join(counts, "\n  "))
}
