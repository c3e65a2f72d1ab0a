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
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/fleet"
)

// TestAnsibleLint runs ansible-lint (production profile, offline, per
// ansible/.ansible-lint) over ansible/, syntax-checks every playbook and
// checks the example inventory against the project's conventions.
func TestAnsibleLint(t *testing.T) {
	tl := requireAnsible(t)

	t.Run("ansible-lint", func(t *testing.T) {
		start := time.Now()
		out, err := tl.run(t, 5*time.Minute, tl.env(t), tl.lint,
			"--offline", "--nocolor", "-c", filepath.Join(tl.ansible, ".ansible-lint"), "--project-dir", tl.ansible)
		if err != nil {
			t.Fatalf("ansible-lint is not clean (%v):\n%s", err, out)
		}
		t.Logf("ansible-lint clean in %s:\n%s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
	})

	playbooks, err := filepath.Glob(filepath.Join(tl.ansible, "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(playbooks) < 2 {
		t.Fatalf("expected site.yml and apply-standalone.yml in ansible/, found %v", playbooks)
	}
	for _, pb := range playbooks {
		t.Run("syntax-check "+filepath.Base(pb), func(t *testing.T) {
			out, err := tl.run(t, 2*time.Minute, tl.env(t), tl.playbook, "--syntax-check",
				"-i", "inventory/fleet.example.yml", "-i", "inventory/standalone.example.yml", pb)
			if err != nil {
				t.Fatalf("ansible-playbook --syntax-check %s: %v\n%s", filepath.Base(pb), err, out)
			}
		})
	}

	t.Run("example inventory", func(t *testing.T) {
		out, err := tl.run(t, time.Minute, tl.env(t), tl.invent, "-i", "inventory/fleet.example.yml", "--list")
		if err != nil {
			t.Fatalf("ansible-inventory --list: %v\n%s", err, out)
		}
		checkFleetInventory(t, out)
	})
}

// checkFleetInventory checks ansible-inventory's JSON for the example fleet:
// one k3s server, and vehicles whose hosts carry the nettune_* variables
// with node names <vehicle>-<host> that are unique, as are LAN addresses
// within a vehicle.
func checkFleetInventory(t *testing.T, out string) {
	t.Helper()
	var inv map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &inv); err != nil {
		t.Fatalf("ansible-inventory output: %v\n%s", err, out)
	}
	type group struct {
		Hosts    []string `json:"hosts"`
		Children []string `json:"children"`
	}
	groups := map[string]group{}
	var meta struct {
		Hostvars map[string]map[string]any `json:"hostvars"`
	}
	for name, raw := range inv {
		if name == "_meta" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var g group
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatal(err)
		}
		groups[name] = g
	}
	var hostsOf func(string) []string
	hostsOf = func(name string) []string {
		g := groups[name]
		hosts := slices.Clone(g.Hosts)
		for _, c := range g.Children {
			hosts = append(hosts, hostsOf(c)...)
		}
		return hosts
	}
	if servers := hostsOf("k3s_server"); len(servers) != 1 {
		t.Errorf("group k3s_server has %d hosts %v, want one", len(servers), servers)
	}
	vehicles := hostsOf("vehicles")
	if len(vehicles) < 3 {
		t.Fatalf("group vehicles has %d hosts, want a few compute units", len(vehicles))
	}
	nodes := map[string]string{}
	addrs := map[string]string{}
	for _, h := range vehicles {
		vars := meta.Hostvars[h]
		str := func(k string) string {
			s, _ := vars[k].(string)
			if s == "" {
				t.Errorf("host %s: %s is not set", h, k)
			}
			return s
		}
		vehicle, host, hw := str("nettune_vehicle"), str("nettune_host"), str("nettune_hardware")
		addr, dev := str("nettune_lan_address"), str("nettune_lan_device")
		if hw != "xavier" && hw != "orin" {
			t.Errorf("host %s: nettune_hardware %q, want xavier or orin", h, hw)
		}
		if _, err := netip.ParseAddr(addr); err != nil {
			t.Errorf("host %s: nettune_lan_address %q: %v", h, addr, err)
		}
		if dev == "" || len(dev) > 15 {
			t.Errorf("host %s: nettune_lan_device %q is not an interface name", h, dev)
		}
		node := fleet.NodeName(vehicle, host)
		if node != h {
			t.Errorf("host %s: its Node is %s; the example names hosts after their Node", h, node)
		}
		if other, dup := nodes[node]; dup {
			t.Errorf("hosts %s and %s are both Node %s", other, h, node)
		}
		nodes[node] = h
		if other, dup := addrs[vehicle+"/"+addr]; dup {
			t.Errorf("hosts %s and %s of vehicle %s share the LAN address %s", other, h, vehicle, addr)
		}
		addrs[vehicle+"/"+addr] = h
	}
	t.Logf("example fleet: %d compute units: %v", len(vehicles), vehicles)
}
