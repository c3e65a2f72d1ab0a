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

// End to end: two nettune-agent processes, each tuning its own network
// namespace (--netns) of a veth pair, ship the latency probe's samples and
// their apply events to a real Loki (bin/loki). Agent B only serves the
// probe port; agent A emulates a topic towards B from inside namespace A.
// No API server is configured (the agents keep retrying it), so the specs
// come from `apply -f` and boot from the last-known-good state.

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/nettest"
	"github.com/nettune/nettune/test/framework/testenv"
)

const pwProbePort = "9102"

// pwSpec tunes the route to B as a host pair rendered from profile
// xavier-lan at profileRev.
func pwSpec(p *pair, rev, profileRev string, cwnd int32) v1alpha1.NodeNetTuningSpec {
	return v1alpha1.NodeNetTuningSpec{
		Revision: rev,
		Profiles: []v1alpha1.SourceProfile{{Name: "xavier-lan", Revision: profileRev}},
		Routes: []v1alpha1.NodeRoute{{Destination: p.addrB + "/32", Device: p.devA, Peer: "host-b", Profile: "xavier-lan",
			Parameters: params(cwnd, 25, 10*time.Millisecond)}},
		Peers: []v1alpha1.Peer{{Host: "host-b", Address: p.addrB, ProbePort: 9102}},
	}
}

// pwStop sends SIGTERM and waits for a clean exit.
func pwStop(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not exit within 20s of SIGTERM")
	}
	if p.err != nil {
		t.Errorf("agent exited with %v after SIGTERM\n%s", p.err, p.out.String())
	}
}

func TestAgentShipsProbeLatencyAndEventsToLoki(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	bin := buildAgent(t)
	env := agentEnv(t)
	p := newPair(t)
	loki := testenv.StartLoki(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	vehicle := "av-" + nettest.RandHex(t, 3)

	// B: only the probe port (no spec, no topics).
	startAgent(t, env, bin, "run", "--node", "node-b", "--netns", p.B, "--state-dir", dirB,
		"--probe-port", pwProbePort, "--metrics-bind-address", "0")
	nettest.WaitFor(t, 10*time.Second, func() error {
		out, err := nettest.IPTry("netns", "exec", p.B, "ss", "-Htln", "sport", "= :"+pwProbePort)
		if err != nil || !strings.Contains(out, pwProbePort) {
			return fmt.Errorf("agent B not listening on %s: %q %v", pwProbePort, out, err)
		}
		return nil
	})

	// A commits r1 (its post-apply probe connects to B's probe port).
	if res := runCLI(t, env, bin, "apply", "-f", writeSpec(t, pwSpec(p, "r1", "xavier-lan-aaa111", 30), false), "--netns", p.A, "--state-dir", dirA); res.code != 0 {
		t.Fatalf("apply r1: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	runA := []string{bin, "run", "--node", "node-a", "--netns", p.A, "--state-dir", dirA, "--probe-port", pwProbePort,
		"--metrics-bind-address", "0", "--vehicle", vehicle, "--loki-url", loki.URL,
		"--probe-topic", "planning:1024:100", "--probe-topic", "camera:8192:20"}
	a := startAgent(t, env, runA...)

	sel := func(revision string) string {
		return fmt.Sprintf(`{job="nettune-probe", vehicle=%q, node="node-a", peer="host-b", profile="xavier-lan", revision=%q}`, vehicle, revision)
	}
	loki.WaitForCount(t, sel("xavier-lan-aaa111")+` | json | topic="planning"`, 100, time.Minute)
	loki.WaitForCount(t, sel("xavier-lan-aaa111")+` | json | topic="camera"`, 20, time.Minute)
	loki.WaitForCount(t, fmt.Sprintf(`{job="nettune-agent", vehicle=%q, node="node-a"} | json | event="applied" | revision="r1"`, vehicle), 1, time.Minute)
	// The emulator's connections live in namespace A.
	if out, err := nettest.IPTry("netns", "exec", p.A, "ss", "-Htn", "state", "established", "dst", p.addrB+":"+pwProbePort); err != nil || strings.Count(out, p.addrB) < 2 {
		t.Errorf("established probe connections in %s: %q (%v), want one per topic", p.A, out, err)
	}

	// The vehicle moves to a new profile revision: the agent stops, r2 is
	// applied, the agent boots into it and labels its samples with it.
	pwStop(t, a)
	if res := runCLI(t, env, bin, "apply", "-f", writeSpec(t, pwSpec(p, "r2", "xavier-lan-bbb222", 20), false), "--netns", p.A, "--state-dir", dirA); res.code != 0 {
		t.Fatalf("apply r2: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	startAgent(t, env, runA...)
	loki.WaitForCount(t, sel("xavier-lan-bbb222")+` | json | topic="planning"`, 100, time.Minute)
	loki.WaitForCount(t, fmt.Sprintf(`{job="nettune-agent", vehicle=%q, node="node-a"} | json | event="applied" | revision="r2"`, vehicle), 1, time.Minute)
}
