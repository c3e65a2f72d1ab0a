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

package faults

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/fleet"
)

// ip runs ip(8) inside a host's namespace.
func ip(t *testing.T, vehicle, host string, args ...string) {
	t.Helper()
	ns := f.Vehicles[vehicle].Host(host).Netns
	if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
		t.Errorf("ip -n %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
}

// TestLinkFlapAndRouteFlush edits the profile while one host's LAN link is
// down and, for the next 3 s, takes it up and down again every 400 ms (the kernel
// drops every route over it) and flushes another host's static routes every
// 300 ms, as a DHCP client renewing its lease does: each host ends on the
// new revision, verified, with every route back.
func TestLinkFlapAndRouteFlush(t *testing.T) {
	const name = "fault-link"
	var outcome, conv string
	record(t, "one host's LAN link down when the edit arrives and held down until its agent reports the stopped apply, then up and down every 400 ms for 3 s; another host's static routes flushed every 300 ms (DHCP-style)",
		"hosts sampled throughout; every node verifies the new revision with all four routes carrying it once the flapping stops",
		func() (string, string) { return outcome, conv })
	start(t, name, 25)
	watchHosts(t)
	flapper := fleet.NodeName("av-002", "xavier-a")
	retriesBefore := retrying(t, flapper)
	// The link is down when the edit arrives and stays down until the
	// flapping host's agent reports the apply it stopped, so the fault lands
	// whenever the controller's render and the agent's watch deliver the edit.
	ip(t, "av-002", "xavier-a", "link", "set", "lan0", "down")
	put(t, name, spec(26, allAtOnce()))
	held := waitFor(t, time.Minute, flapper+" to report an apply stopped by its down link", func() bool {
		return retrying(t, flapper) > retriesBefore
	})
	t.Logf("link held down %s until %s reported the stopped apply", round(held), flapper)
	began := time.Now()
	flaps, flushes := 0, 0
	for time.Since(began) < 3*time.Second {
		ip(t, "av-003", "xavier-b", "route", "flush", "dev", "lan0", "proto", "static")
		time.Sleep(150 * time.Millisecond)
		ip(t, "av-003", "xavier-b", "route", "flush", "dev", "lan0", "proto", "static")
		time.Sleep(50 * time.Millisecond)
		ip(t, "av-002", "xavier-a", "link", "set", "lan0", "up")
		flaps, flushes = flaps+1, flushes+2
		time.Sleep(200 * time.Millisecond)
		ip(t, "av-002", "xavier-a", "link", "set", "lan0", "down")
	}
	ip(t, "av-002", "xavier-a", "link", "set", "lan0", "up")
	stopped := time.Now()
	rev := healthy(t, name, 2*time.Minute)
	waitFor(t, 2*time.Minute, "every node on "+rev, func() bool { return converged(t, name, rev, 26) })
	conv = round(time.Since(stopped)) + " after the last flap"
	retries := retrying(t, flapper) - retriesBefore
	outcome = fmt.Sprintf("link held down %s until the agent reported the stopped apply; then %d link flaps and %d flushes; the flapping host's apply stopped by the link %d time(s) and retried; every host on the new revision, routes repaired", round(held), flaps, flushes, retries)
}

// retrying is an agent's count of applies its environment stopped.
func retrying(t *testing.T, node string) int {
	t.Helper()
	resp, err := http.Get("http://" + f.AgentMetrics(node) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "nettune_agent_applies_total{") && strings.Contains(line, `"retrying"`) {
			fields := strings.Fields(line)
			n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int(n)
		}
	}
	return 0
}
