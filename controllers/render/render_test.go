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

package render

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// ---- helpers ----

func i32(v int32) *int32 { return &v }
func b(v bool) *bool     { return &v }
func s(v string) *string { return &v }
func dur(d string) *metav1.Duration {
	p, err := time.ParseDuration(d)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: p}
}
func cc(v v1alpha1.CongestionControl) *v1alpha1.CongestionControl { return &v }
func cwnd(v int32) *v1alpha1.Cwnd                                 { return &v1alpha1.Cwnd{Value: v} }
func cwndLocked(v int32, lock bool) *v1alpha1.Cwnd                { return &v1alpha1.Cwnd{Value: v, Lock: b(lock)} }

// seedDefaults is the shipped xavier-lan v2 profile's defaults.
func seedDefaults() *v1alpha1.TCPParameters {
	return &v1alpha1.TCPParameters{
		Cwnd: cwnd(30), Initcwnd: i32(25), Initrwnd: i32(25), Ssthresh: i32(30),
		RTOMin: dur("10ms"), Quickack: b(true),
	}
}

func node(vehicle, host, addr string) Node {
	return Node{
		Name: vehicle + "-" + host,
		Labels: map[string]string{
			v1alpha1.DefaultVehicleLabel:  vehicle,
			v1alpha1.DefaultHostLabel:     host,
			v1alpha1.DefaultHardwareLabel: "xavier",
		},
		Address: addr,
		Device:  "eth0",
	}
}

// fleet is two vehicles with three Xavier hosts each.
func fleet() []Node {
	return []Node{
		node("av-001", "xavier-a", "192.168.10.11"),
		node("av-001", "xavier-b", "192.168.10.12"),
		node("av-001", "xavier-c", "192.168.10.13"),
		node("av-002", "xavier-a", "192.168.20.11"),
		node("av-002", "xavier-b", "192.168.20.12"),
		node("av-002", "xavier-c", "192.168.20.13"),
	}
}

func find(t *testing.T, nodes []Node, name string) Node {
	t.Helper()
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return Node{}
}

func in(name string, spec v1alpha1.NetTuningProfileSpec) Input {
	return Input{Profile: name, Revision: name + "-" + revision.Hash(spec), Spec: &spec}
}

func routeTo(spec v1alpha1.NodeNetTuningSpec, dst string) *v1alpha1.NodeRoute {
	for i := range spec.Routes {
		if spec.Routes[i].Destination == dst {
			return &spec.Routes[i]
		}
	}
	return nil
}

func dests(spec v1alpha1.NodeNetTuningSpec) []string {
	var out []string
	for _, r := range spec.Routes {
		out = append(out, r.Destination)
	}
	return out
}

func sysctl(spec v1alpha1.NodeNetTuningSpec, name string) *v1alpha1.Sysctl {
	for i := range spec.Sysctls {
		if spec.Sysctls[i].Name == name {
			return &spec.Sysctls[i]
		}
	}
	return nil
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// diffParams compares TCP parameters field by field, naming every field that
// differs.
func diffParams(t *testing.T, what string, got, want v1alpha1.TCPParameters) {
	t.Helper()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: parameter %s = %s, want %s", what, name, jsonOf(t, g), jsonOf(t, w))
		}
	}
}

// checkValid asserts what the NodeNetTuning CRD would check, plus the
// package's own promises (sorted lists, revision = hash of the rest).
func checkValid(t *testing.T, res Result) {
	t.Helper()
	spec := res.Spec
	if spec.Revision == "" || len(spec.Revision) > 320 {
		t.Errorf("revision %q out of bounds", spec.Revision)
	}
	c := spec.DeepCopy()
	c.Revision = ""
	if h := revision.Hash(c); h != spec.Revision {
		t.Errorf("revision %s is not ContentHash of the spec (%s)", spec.Revision, h)
	}
	if len(spec.Profiles) > MaxProfiles || len(spec.Routes) > MaxRoutes || len(spec.Sysctls) > MaxSysctls ||
		len(spec.Interfaces) > MaxInterfaces || len(spec.Peers) > MaxPeers {
		t.Errorf("list over maxItems: %d profiles, %d routes, %d sysctls, %d interfaces, %d peers",
			len(spec.Profiles), len(spec.Routes), len(spec.Sysctls), len(spec.Interfaces), len(spec.Peers))
	}
	if !slices.IsSortedFunc(spec.Profiles, func(a, b v1alpha1.SourceProfile) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("profiles not sorted: %v", spec.Profiles)
	}
	seen := map[string]bool{}
	for i, r := range spec.Routes {
		p, err := netip.ParsePrefix(r.Destination)
		if err != nil || p.Masked().String() != r.Destination || len(r.Destination) > 43 {
			t.Errorf("route destination %q is not a canonical CIDR", r.Destination)
		}
		if seen[r.Destination] {
			t.Errorf("route %s twice", r.Destination)
		}
		seen[r.Destination] = true
		if i > 0 && comparePrefix(spec.Routes[i-1].Destination, r.Destination) >= 0 {
			t.Errorf("routes not sorted: %s before %s", spec.Routes[i-1].Destination, r.Destination)
		}
		if r.Source != "" {
			if a, err := netip.ParseAddr(r.Source); err != nil || a.Is4() != p.Addr().Is4() {
				t.Errorf("route %s: bad source %q", r.Destination, r.Source)
			}
		}
		if r.Device != "" && !validDevice(r.Device) {
			t.Errorf("route %s: bad device %q", r.Destination, r.Device)
		}
		if len(r.Peer) > 63 || len(r.Profile) > 253 {
			t.Errorf("route %s: peer/profile too long", r.Destination)
		}
		if err := r.Parameters.Validate(); err != nil {
			t.Errorf("route %s: %v", r.Destination, err)
		}
		if r.Parameters.Cwnd != nil && r.Parameters.Cwnd.Lock == nil {
			t.Errorf("route %s: cwnd.lock not rendered", r.Destination)
		}
	}
	for i, p := range spec.Peers {
		if a, err := netip.ParseAddr(p.Address); err != nil || a.Zone() != "" || a.Is4In6() || len(p.Address) > 39 {
			t.Errorf("peer %s: bad address %q", p.Host, p.Address)
		}
		if p.Host == "" || len(p.Host) > 63 {
			t.Errorf("peer host %q out of bounds", p.Host)
		}
		if i > 0 && spec.Peers[i-1].Host >= p.Host {
			t.Errorf("peers not sorted/unique: %s before %s", spec.Peers[i-1].Host, p.Host)
		}
	}
	for i := 1; i < len(spec.Sysctls); i++ {
		if spec.Sysctls[i-1].Name >= spec.Sysctls[i].Name {
			t.Errorf("sysctls not sorted/unique")
		}
	}
	for i := 1; i < len(spec.Interfaces); i++ {
		if spec.Interfaces[i-1].Name >= spec.Interfaces[i].Name {
			t.Errorf("interfaces not sorted/unique")
		}
	}
}

// ---- host pairs ----

// TestHostPairParameters checks the merge of defaults and the most specific
// matching pair, field by field, for each direction inside one vehicle.
func TestHostPairParameters(t *testing.T) {
	spec := v1alpha1.NetTuningProfileSpec{
		Defaults: seedDefaults(),
		HostPairs: []v1alpha1.HostPair{
			// Specificity 1: anyone to xavier-c gets a slower rto floor.
			{From: "*", To: "xavier-c", Parameters: &v1alpha1.TCPParameters{RTOMin: dur("20ms")}},
			// Specificity 2: the busiest flow.
			{From: "xavier-a", To: "xavier-b", Parameters: &v1alpha1.TCPParameters{
				Cwnd: cwndLocked(24, false), Initcwnd: i32(20), Ssthresh: i32(20), CongestionControl: cc("cubic"),
			}},
			// Specificity 1, later than "* -> xavier-c": wins a->c.
			{From: "xavier-a", To: "*", Parameters: &v1alpha1.TCPParameters{Initrwnd: i32(40)}},
			// Specificity 2 without parameters: exactly the defaults.
			{From: "xavier-c", To: "xavier-b"},
		},
	}
	defaults := func(mod func(p *v1alpha1.TCPParameters)) v1alpha1.TCPParameters {
		p := *seedDefaults()
		p.Cwnd = cwndLocked(30, true)
		if mod != nil {
			mod(&p)
		}
		return p
	}
	tests := []struct {
		name     string
		node     string
		dst      string
		peer     string
		want     v1alpha1.TCPParameters
		wantNone bool
	}{
		{
			name: "exact pair overrides some fields, inherits the rest", node: "av-001-xavier-a",
			dst: "192.168.10.12/32", peer: "xavier-b",
			want: v1alpha1.TCPParameters{
				Cwnd: cwndLocked(24, false), Initcwnd: i32(20), Initrwnd: i32(25), Ssthresh: i32(20),
				RTOMin: dur("10ms"), Quickack: b(true), CongestionControl: cc("cubic"),
			},
		},
		{
			name: "two one-wildcard pairs tie: the later wins, the earlier contributes nothing", node: "av-001-xavier-a",
			dst: "192.168.10.13/32", peer: "xavier-c",
			want: defaults(func(p *v1alpha1.TCPParameters) { p.Initrwnd = i32(40) }),
		},
		{
			name: "wildcard sender pair", node: "av-001-xavier-b",
			dst: "192.168.10.13/32", peer: "xavier-c",
			want: defaults(func(p *v1alpha1.TCPParameters) { p.RTOMin = dur("20ms") }),
		},
		{
			name: "no listed pair matches: the defaults", node: "av-001-xavier-b",
			dst: "192.168.10.11/32", peer: "xavier-a",
			want: defaults(nil),
		},
		{
			name: "exact pair without parameters: the defaults", node: "av-001-xavier-c",
			dst: "192.168.10.12/32", peer: "xavier-b",
			want: defaults(nil),
		},
		{
			name: "same rules in the other vehicle, its own addresses", node: "av-002-xavier-a",
			dst: "192.168.20.12/32", peer: "xavier-b",
			want: v1alpha1.TCPParameters{
				Cwnd: cwndLocked(24, false), Initcwnd: i32(20), Initrwnd: i32(25), Ssthresh: i32(20),
				RTOMin: dur("10ms"), Quickack: b(true), CongestionControl: cc("cubic"),
			},
		},
	}
	nodes := fleet()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Render(find(t, nodes, tc.node), nodes, []Input{in("xavier-lan", spec)})
			checkValid(t, res)
			if len(res.Conflicts) != 0 {
				t.Errorf("unexpected conflicts %v", res.Conflicts)
			}
			r := routeTo(res.Spec, tc.dst)
			if r == nil {
				t.Fatalf("no route to %s; routes %v", tc.dst, dests(res.Spec))
			}
			if r.Peer != tc.peer || r.Profile != "xavier-lan" || r.Device != "eth0" || r.Source != "" {
				t.Errorf("route %s: peer %q profile %q device %q source %q", tc.dst, r.Peer, r.Profile, r.Device, r.Source)
			}
			diffParams(t, tc.dst, r.Parameters, tc.want)
			if len(res.Spec.Routes) != 2 {
				t.Errorf("want one route per other host of the vehicle (2), got %v", dests(res.Spec))
			}
		})
	}
}

// TestImplicitAllPairs: defaults alone mean "* -> *": every other host of the
// node's own vehicle gets a route and is listed as a peer; nothing from the
// other vehicle.
func TestImplicitAllPairs(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()}
	tests := []struct {
		node      string
		wantDests []string
		wantPeers []v1alpha1.Peer
	}{
		{"av-001-xavier-a", []string{"192.168.10.12/32", "192.168.10.13/32"}, []v1alpha1.Peer{
			{Host: "xavier-b", Address: "192.168.10.12", ProbePort: DefaultProbePort},
			{Host: "xavier-c", Address: "192.168.10.13", ProbePort: DefaultProbePort},
		}},
		{"av-002-xavier-b", []string{"192.168.20.11/32", "192.168.20.13/32"}, []v1alpha1.Peer{
			{Host: "xavier-a", Address: "192.168.20.11", ProbePort: 9102},
			{Host: "xavier-c", Address: "192.168.20.13", ProbePort: 9102},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			res := Render(find(t, nodes, tc.node), nodes, []Input{in("xavier-lan", spec)})
			checkValid(t, res)
			if got := dests(res.Spec); !slices.Equal(got, tc.wantDests) {
				t.Errorf("routes %v, want %v", got, tc.wantDests)
			}
			if !reflect.DeepEqual(res.Spec.Peers, tc.wantPeers) {
				t.Errorf("peers %+v, want %+v", res.Spec.Peers, tc.wantPeers)
			}
			for _, r := range res.Spec.Routes {
				want := *seedDefaults()
				want.Cwnd = cwndLocked(30, true) // lock rendered as its CRD default
				diffParams(t, r.Destination, r.Parameters, want)
			}
			if len(res.Warnings) != 0 {
				t.Errorf("unexpected warnings %v", res.Warnings)
			}
		})
	}
}

// TestPairsWithoutDefaults: without defaults only listed pairs yield routes,
// and a pair without parameters yields nothing.
func TestPairsWithoutDefaults(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{HostPairs: []v1alpha1.HostPair{
		{From: "xavier-a", To: "xavier-b", Parameters: &v1alpha1.TCPParameters{RTOMin: dur("10ms")}},
		{From: "xavier-a", To: "xavier-c"},
		{From: "*", To: "xavier-a", Parameters: &v1alpha1.TCPParameters{Quickack: b(true)}},
	}}
	tests := []struct {
		node  string
		dests []string
		peers []string
	}{
		{"av-001-xavier-a", []string{"192.168.10.12/32"}, []string{"xavier-b"}},
		{"av-001-xavier-b", []string{"192.168.10.11/32"}, []string{"xavier-a"}},
		{"av-001-xavier-c", []string{"192.168.10.11/32"}, []string{"xavier-a"}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			res := Render(find(t, nodes, tc.node), nodes, []Input{in("p", spec)})
			checkValid(t, res)
			if got := dests(res.Spec); !slices.Equal(got, tc.dests) {
				t.Errorf("routes %v, want %v", got, tc.dests)
			}
			var peers []string
			for _, p := range res.Spec.Peers {
				peers = append(peers, p.Host)
			}
			if !slices.Equal(peers, tc.peers) {
				t.Errorf("peers %v, want %v", peers, tc.peers)
			}
		})
	}
}

// TestCustomLabels: a profile's own vehicle/host labels decide the grouping.
func TestCustomLabels(t *testing.T) {
	mk := func(name, car, unit, addr string) Node {
		return Node{Name: name, Address: addr, Labels: map[string]string{
			"fleet.example.com/car": car, "fleet.example.com/unit": unit,
			// The default labels say otherwise; they must be ignored.
			v1alpha1.DefaultVehicleLabel: "same", v1alpha1.DefaultHostLabel: "h-" + name,
		}}
	}
	nodes := []Node{
		mk("n1", "car-1", "front", "10.0.0.1"),
		mk("n2", "car-1", "rear", "10.0.0.2"),
		mk("n3", "car-2", "rear", "10.0.1.2"),
	}
	spec := v1alpha1.NetTuningProfileSpec{
		VehicleLabel: "fleet.example.com/car", HostLabel: "fleet.example.com/unit",
		HostPairs: []v1alpha1.HostPair{{From: "front", To: "rear", Parameters: &v1alpha1.TCPParameters{Initcwnd: i32(20)}}},
	}
	res := Render(nodes[0], nodes, []Input{in("p", spec)})
	checkValid(t, res)
	if got := dests(res.Spec); !slices.Equal(got, []string{"10.0.0.2/32"}) {
		t.Fatalf("routes %v, want only n2 (same car)", got)
	}
	if res.Spec.Routes[0].Peer != "rear" || res.Spec.Routes[0].Device != "" {
		t.Errorf("route %+v: want peer rear and no device", res.Spec.Routes[0])
	}
	wantWarn := "node n1 has no nettune.io/lan-device annotation: host-pair routes have no device, so the agent can only tune /32 routes that already exist"
	if !slices.Contains(res.Warnings, wantWarn) {
		t.Errorf("warnings %q lack %q", res.Warnings, wantWarn)
	}
}

// TestIPv6Peer: an IPv6 peer gets a /128; an IPv4-mapped address is IPv4.
func TestIPv6Peer(t *testing.T) {
	nodes := []Node{
		node("av-001", "xavier-a", "fd00::a"),
		node("av-001", "xavier-b", "fd00:0:0:0::b"),
		node("av-001", "xavier-c", "::ffff:192.168.10.13"),
	}
	res := Render(nodes[0], nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()})})
	checkValid(t, res)
	if got, want := dests(res.Spec), []string{"192.168.10.13/32", "fd00::b/128"}; !slices.Equal(got, want) {
		t.Errorf("routes %v, want %v", got, want)
	}
	if res.Spec.Peers[0].Address != "fd00::b" || res.Spec.Peers[1].Address != "192.168.10.13" {
		t.Errorf("peers %+v", res.Spec.Peers)
	}
}

// ---- explicit routes, sysctls, interfaces ----

func TestExplicitRoutesHostsFilter(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{RTOMin: dur("10ms"), Quickack: b(true)},
		Routes: []v1alpha1.ProfileRoute{
			{Name: "depot", Destination: "10.200.7.1/16", Device: s("eth0"),
				Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20), Initrwnd: i32(40), CongestionControl: cc("bbr")}},
			{Name: "only-b", Destination: "10.201.0.0/24", Source: s("192.168.10.12"), Hosts: []string{"xavier-b"},
				Parameters: v1alpha1.TCPParameters{Initcwnd: i32(15)}},
			{Name: "a-and-c", Destination: "10.202.0.0/24", Hosts: []string{"xavier-a", "xavier-c"},
				Parameters: v1alpha1.TCPParameters{Initcwnd: i32(16)}},
			{Name: "star", Destination: "2001:DB8::1/64", Hosts: []string{"*"},
				Parameters: v1alpha1.TCPParameters{Cwnd: cwnd(50)}},
		},
	}
	tests := []struct {
		node     string
		explicit []string
	}{
		{"av-001-xavier-a", []string{"10.200.0.0/16", "10.202.0.0/24", "2001:db8::/64"}},
		{"av-001-xavier-b", []string{"10.200.0.0/16", "10.201.0.0/24", "2001:db8::/64"}},
		{"av-002-xavier-c", []string{"10.200.0.0/16", "10.202.0.0/24", "2001:db8::/64"}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			res := Render(find(t, nodes, tc.node), nodes, []Input{in("wan", spec)})
			checkValid(t, res)
			var explicit []string
			for _, r := range res.Spec.Routes {
				if r.Peer == "" {
					explicit = append(explicit, r.Destination)
				}
			}
			if !slices.Equal(explicit, tc.explicit) {
				t.Errorf("explicit routes %v, want %v", explicit, tc.explicit)
			}
			if len(res.Spec.Routes) != len(tc.explicit)+2 {
				t.Errorf("want %d explicit + 2 host-pair routes, got %v", len(tc.explicit), dests(res.Spec))
			}
			depot := routeTo(res.Spec, "10.200.0.0/16")
			want := v1alpha1.NodeRoute{Destination: "10.200.0.0/16", Device: "eth0", Profile: "wan",
				Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20), Initrwnd: i32(40), CongestionControl: cc("bbr")}}
			if !reflect.DeepEqual(*depot, want) {
				t.Errorf("depot route %s, want %s (explicit routes do not inherit defaults)", jsonOf(t, depot), jsonOf(t, want))
			}
			if r := routeTo(res.Spec, "10.201.0.0/24"); r != nil && r.Source != "192.168.10.12" {
				t.Errorf("only-b source %q", r.Source)
			}
			if r := routeTo(res.Spec, "2001:db8::/64"); r == nil || !reflect.DeepEqual(r.Parameters.Cwnd, cwndLocked(50, true)) {
				t.Errorf("star route %v: want cwnd 50 locked", r)
			}
		})
	}
}

func TestSysctlsAndInterfaces(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{
		Sysctls: []v1alpha1.Sysctl{
			{Name: "net.ipv4.tcp_rmem", Value: "4096 131072 33554432"},
			{Name: "net.core.rmem_max", Value: "33554432"},
		},
		Interfaces: []v1alpha1.ProfileInterface{
			{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth0", MTU: i32(1500), GRO: b(false)}},
			{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth1", TSO: b(false)}, Hosts: []string{"xavier-c"}},
			{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "can0", MTU: i32(9000)}, Hosts: []string{"xavier-a", "xavier-b"}},
		},
	}
	tests := []struct {
		node  string
		ifs   []string
		other map[string]v1alpha1.InterfaceTuning
	}{
		{"av-001-xavier-a", []string{"can0", "eth0"}, nil},
		{"av-001-xavier-b", []string{"can0", "eth0"}, nil},
		{"av-002-xavier-c", []string{"eth0", "eth1"}, map[string]v1alpha1.InterfaceTuning{"eth1": {Name: "eth1", TSO: b(false)}}},
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			res := Render(find(t, nodes, tc.node), nodes, []Input{in("p", spec)})
			checkValid(t, res)
			var ifs []string
			for _, i := range res.Spec.Interfaces {
				ifs = append(ifs, i.Name)
			}
			if !slices.Equal(ifs, tc.ifs) {
				t.Errorf("interfaces %v, want %v", ifs, tc.ifs)
			}
			eth0 := res.Spec.Interfaces[slices.Index(ifs, "eth0")]
			if !reflect.DeepEqual(eth0, v1alpha1.InterfaceTuning{Name: "eth0", MTU: i32(1500), GRO: b(false)}) {
				t.Errorf("eth0 %s", jsonOf(t, eth0))
			}
			for name, want := range tc.other {
				if got := res.Spec.Interfaces[slices.Index(ifs, name)]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %s, want %s", name, jsonOf(t, got), jsonOf(t, want))
				}
			}
			want := []v1alpha1.Sysctl{{Name: "net.core.rmem_max", Value: "33554432"}, {Name: "net.ipv4.tcp_rmem", Value: "4096 131072 33554432"}}
			if !reflect.DeepEqual(res.Spec.Sysctls, want) {
				t.Errorf("sysctls %v, want %v (every node, sorted)", res.Spec.Sysctls, want)
			}
			if len(res.Spec.Routes) != 0 || len(res.Spec.Peers) != 0 {
				t.Errorf("no routes or peers expected, got %v %v", res.Spec.Routes, res.Spec.Peers)
			}
		})
	}
}

// ---- merging profiles ----

func TestMerge(t *testing.T) {
	nodes := fleet()
	self := find(t, nodes, "av-001-xavier-a")
	lan := func(prio int32, rto string) v1alpha1.NetTuningProfileSpec {
		return v1alpha1.NetTuningProfileSpec{Priority: prio, Defaults: &v1alpha1.TCPParameters{RTOMin: dur(rto)}}
	}
	withSysctl := func(sp v1alpha1.NetTuningProfileSpec, v string) v1alpha1.NetTuningProfileSpec {
		sp.Sysctls = []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_reordering", Value: v}}
		return sp
	}
	withIface := func(sp v1alpha1.NetTuningProfileSpec, mtu int32) v1alpha1.NetTuningProfileSpec {
		sp.Interfaces = []v1alpha1.ProfileInterface{{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth0", MTU: i32(mtu)}}}
		return sp
	}
	const toB, toC = "192.168.10.12/32", "192.168.10.13/32"

	tests := []struct {
		name      string
		inputs    []Input
		routeFrom map[string]string // destination -> profile; "" = no route
		rto       map[string]string // destination -> rtoMin
		sysctl    string            // value of net.ipv4.tcp_reordering, "" = unset
		mtu       int32             // eth0 MTU, 0 = no eth0
		conflicts []Conflict
	}{
		{
			name:      "higher priority wins every item",
			inputs:    []Input{in("fleet", withIface(withSysctl(lan(0, "20ms"), "3"), 9000)), in("xavier", withIface(withSysctl(lan(10, "10ms"), "5"), 1500))},
			routeFrom: map[string]string{toB: "xavier", toC: "xavier"},
			rto:       map[string]string{toB: "10ms", toC: "10ms"},
			sysctl:    "5", mtu: 1500,
		},
		{
			name:      "equal priority, different content: dropped and reported",
			inputs:    []Input{in("beta", withIface(withSysctl(lan(0, "20ms"), "3"), 9000)), in("alpha", withIface(withSysctl(lan(0, "10ms"), "5"), 1500))},
			routeFrom: map[string]string{toB: "", toC: ""},
			conflicts: []Conflict{
				{Kind: "interface", Item: "eth0", Profiles: []string{"alpha", "beta"}},
				{Kind: "route", Item: toB, Profiles: []string{"alpha", "beta"}},
				{Kind: "route", Item: toC, Profiles: []string{"alpha", "beta"}},
				{Kind: "sysctl", Item: "net.ipv4.tcp_reordering", Profiles: []string{"alpha", "beta"}},
			},
		},
		{
			name: "equal-priority clash settled by a strictly higher profile",
			inputs: []Input{
				in("alpha", withSysctl(lan(1, "10ms"), "5")), in("beta", withSysctl(lan(1, "20ms"), "3")),
				in("zeta", withSysctl(lan(2, "30ms"), "4")),
			},
			routeFrom: map[string]string{toB: "zeta", toC: "zeta"},
			rto:       map[string]string{toB: "30ms", toC: "30ms"},
			sysctl:    "4",
		},
		{
			name: "a clash at the top is not settled by a lower profile",
			inputs: []Input{
				in("alpha", withSysctl(lan(5, "10ms"), "5")), in("beta", withSysctl(lan(5, "20ms"), "3")),
				in("low", withSysctl(lan(0, "30ms"), "4")),
			},
			routeFrom: map[string]string{toB: "", toC: ""},
			conflicts: []Conflict{
				{Kind: "route", Item: toB, Profiles: []string{"alpha", "beta"}},
				{Kind: "route", Item: toC, Profiles: []string{"alpha", "beta"}},
				{Kind: "sysctl", Item: "net.ipv4.tcp_reordering", Profiles: []string{"alpha", "beta"}},
			},
		},
		{
			name:      "equal priority, identical content: kept once from the lowest name",
			inputs:    []Input{in("zulu", withIface(withSysctl(lan(3, "10ms"), "3"), 1500)), in("mike", withIface(withSysctl(lan(3, "10ms"), "3"), 1500))},
			routeFrom: map[string]string{toB: "mike", toC: "mike"},
			rto:       map[string]string{toB: "10ms", toC: "10ms"},
			sysctl:    "3", mtu: 1500,
		},
		{
			name: "only the disputed items are dropped",
			inputs: []Input{
				in("alpha", withSysctl(lan(0, "10ms"), "3")),
				in("beta", withSysctl(v1alpha1.NetTuningProfileSpec{HostPairs: []v1alpha1.HostPair{
					{From: "xavier-a", To: "xavier-c", Parameters: &v1alpha1.TCPParameters{RTOMin: dur("20ms")}},
				}}, "3")),
			},
			routeFrom: map[string]string{toB: "alpha", toC: ""},
			rto:       map[string]string{toB: "10ms"},
			sysctl:    "3",
			conflicts: []Conflict{{Kind: "route", Item: toC, Profiles: []string{"alpha", "beta"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Render(self, nodes, tc.inputs)
			checkValid(t, res)
			for dst, prof := range tc.routeFrom {
				r := routeTo(res.Spec, dst)
				switch {
				case prof == "" && r != nil:
					t.Errorf("route %s from %s should have been dropped", dst, r.Profile)
				case prof != "" && r == nil:
					t.Errorf("route %s missing, want from %s", dst, prof)
				case prof != "" && r.Profile != prof:
					t.Errorf("route %s from %s, want %s", dst, r.Profile, prof)
				}
				if r != nil && tc.rto[dst] != "" && r.Parameters.RTOMin.Duration != dur(tc.rto[dst]).Duration {
					t.Errorf("route %s rtoMin %v, want %s", dst, r.Parameters.RTOMin, tc.rto[dst])
				}
				if r != nil && r.Peer == "" {
					t.Errorf("route %s lost its peer", dst)
				}
			}
			sc := sysctl(res.Spec, "net.ipv4.tcp_reordering")
			if (sc == nil) != (tc.sysctl == "") || (sc != nil && sc.Value != tc.sysctl) {
				t.Errorf("sysctl %v, want %q", sc, tc.sysctl)
			}
			var mtu int32
			for _, i := range res.Spec.Interfaces {
				if i.Name == "eth0" {
					mtu = *i.MTU
				}
			}
			if mtu != tc.mtu {
				t.Errorf("eth0 mtu %d, want %d", mtu, tc.mtu)
			}
			if !reflect.DeepEqual(res.Conflicts, tc.conflicts) {
				t.Errorf("conflicts %+v, want %+v", res.Conflicts, tc.conflicts)
			}
			// Peers are probed even when their route is disputed.
			if len(res.Spec.Peers) != 2 {
				t.Errorf("peers %+v, want xavier-b and xavier-c", res.Spec.Peers)
			}
			var names []string
			for _, p := range res.Spec.Profiles {
				names = append(names, p.Name)
			}
			if len(names) != len(tc.inputs) {
				t.Errorf("spec.profiles %v, want one per input", names)
			}
		})
	}
}

// TestExplicitRouteVersusHostPair: inside one profile an explicit route beats
// the host-pair route to the same destination; across equal-priority
// profiles identical content does not clash and keeps the peer.
func TestExplicitRouteVersusHostPair(t *testing.T) {
	nodes := fleet()
	self := find(t, nodes, "av-001-xavier-a")
	same := v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{Initcwnd: i32(25)},
		Routes: []v1alpha1.ProfileRoute{{Name: "to-b", Destination: "192.168.10.12/32", Device: s("eth0"),
			Parameters: v1alpha1.TCPParameters{Initcwnd: i32(10)}}},
	}
	res := Render(self, nodes, []Input{in("p", same)})
	checkValid(t, res)
	r := routeTo(res.Spec, "192.168.10.12/32")
	if r == nil || *r.Parameters.Initcwnd != 10 || r.Peer != "" || len(res.Conflicts) != 0 {
		t.Errorf("explicit route should win inside its profile: %s conflicts %v", jsonOf(t, r), res.Conflicts)
	}
	if r := routeTo(res.Spec, "192.168.10.13/32"); r == nil || *r.Parameters.Initcwnd != 25 {
		t.Errorf("host-pair route to c: %s", jsonOf(t, r))
	}

	// Across profiles: an explicit route identical to another profile's
	// host-pair route is no conflict, and the peer stays for agent priming.
	pairs := v1alpha1.NetTuningProfileSpec{Defaults: &v1alpha1.TCPParameters{Initcwnd: i32(10)}}
	explicit := v1alpha1.NetTuningProfileSpec{Routes: []v1alpha1.ProfileRoute{{Name: "to-b", Destination: "192.168.10.12/32", Device: s("eth0"),
		Parameters: v1alpha1.TCPParameters{Initcwnd: i32(10)}}}}
	res = Render(self, nodes, []Input{in("b-pairs", pairs), in("a-explicit", explicit)})
	checkValid(t, res)
	r = routeTo(res.Spec, "192.168.10.12/32")
	if len(res.Conflicts) != 0 || r == nil || r.Profile != "a-explicit" || r.Peer != "xavier-b" {
		t.Errorf("route %s conflicts %v: want a-explicit with peer xavier-b, no conflict", jsonOf(t, r), res.Conflicts)
	}
}

// TestSelfConflict: one profile naming one destination twice, differently,
// is a conflict of that profile alone.
func TestSelfConflict(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{Routes: []v1alpha1.ProfileRoute{
		{Name: "one", Destination: "10.9.0.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(10)}},
		{Name: "two", Destination: "10.9.1.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20)}},
		{Name: "three", Destination: "10.8.0.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20)}},
		{Name: "four", Destination: "10.8.0.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20)}},
	}}
	res := Render(find(t, nodes, "av-001-xavier-a"), nodes, []Input{in("p", spec)})
	checkValid(t, res)
	if got := dests(res.Spec); !slices.Equal(got, []string{"10.8.0.0/16"}) {
		t.Errorf("routes %v, want only 10.8.0.0/16", got)
	}
	want := []Conflict{{Kind: "route", Item: "10.9.0.0/16", Profiles: []string{"p"}}}
	if !reflect.DeepEqual(res.Conflicts, want) {
		t.Errorf("conflicts %+v, want %+v", res.Conflicts, want)
	}
	// A higher-priority profile settles it without a conflict.
	hi := v1alpha1.NetTuningProfileSpec{Priority: 1, Routes: []v1alpha1.ProfileRoute{
		{Name: "x", Destination: "10.9.0.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(30)}}}}
	res = Render(find(t, nodes, "av-001-xavier-a"), nodes, []Input{in("p", spec), in("hi", hi)})
	if r := routeTo(res.Spec, "10.9.0.0/16"); r == nil || r.Profile != "hi" || len(res.Conflicts) != 0 {
		t.Errorf("route %s conflicts %v: want hi's route", jsonOf(t, r), res.Conflicts)
	}
}

// ---- determinism ----

func TestOrderIndependence(t *testing.T) {
	nodes := fleet()
	nodes = append(nodes, node("av-001", "orin-a", "192.168.10.21"), Node{Name: "av-001-nolabel", Address: "192.168.10.99"})
	inputs := []Input{
		in("xavier-lan", v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults(), HostPairs: []v1alpha1.HostPair{
			{From: "*", To: "xavier-c", Parameters: &v1alpha1.TCPParameters{RTOMin: dur("20ms")}},
			{From: "xavier-a", To: "*", Parameters: &v1alpha1.TCPParameters{Initrwnd: i32(40)}},
		}}),
		in("wan", v1alpha1.NetTuningProfileSpec{
			Routes: []v1alpha1.ProfileRoute{
				{Name: "depot", Destination: "10.200.0.0/16", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20)}},
				{Name: "v6", Destination: "fd00:1::/64", Parameters: v1alpha1.TCPParameters{Initcwnd: i32(20)}},
			},
			Sysctls: []v1alpha1.Sysctl{{Name: "net.core.wmem_max", Value: "1"}, {Name: "net.core.rmem_max", Value: "2"}},
		}),
		in("clash", v1alpha1.NetTuningProfileSpec{Sysctls: []v1alpha1.Sysctl{{Name: "net.core.wmem_max", Value: "9"}}}),
		in("mtu", v1alpha1.NetTuningProfileSpec{Interfaces: []v1alpha1.ProfileInterface{
			{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth1", MTU: i32(1500)}},
			{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth0", MTU: i32(1500)}},
		}}),
	}
	self := find(t, nodes, "av-001-xavier-a")
	want := Render(self, nodes, inputs)
	checkValid(t, want)
	if len(want.Spec.Routes) != 5 || len(want.Conflicts) != 1 || len(want.Spec.Peers) != 3 {
		t.Fatalf("fixture: routes %v conflicts %v peers %v", dests(want.Spec), want.Conflicts, want.Spec.Peers)
	}
	rng := rand.New(rand.NewSource(1))
	for i := range 50 {
		ins, ns := slices.Clone(inputs), slices.Clone(nodes)
		rng.Shuffle(len(ins), func(a, b int) { ins[a], ins[b] = ins[b], ins[a] })
		rng.Shuffle(len(ns), func(a, b int) { ns[a], ns[b] = ns[b], ns[a] })
		got := Render(self, ns, ins)
		if got.Spec.Revision != want.Spec.Revision {
			t.Fatalf("shuffle %d: revision %s, want %s", i, got.Spec.Revision, want.Spec.Revision)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffle %d: result differs:\n%s\n%s", i, jsonOf(t, got), jsonOf(t, want))
		}
	}
}

func TestRevisionTracksContent(t *testing.T) {
	nodes := fleet()
	self := find(t, nodes, "av-001-xavier-a")
	base := Render(self, nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()})})
	changed := seedDefaults()
	changed.Cwnd = cwnd(29)
	other := Render(self, nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{Defaults: changed})})
	if base.Spec.Revision == other.Spec.Revision {
		t.Errorf("revision %s did not change with cwnd", base.Spec.Revision)
	}
	moved := slices.Clone(nodes)
	moved[1].Address = "192.168.10.112"
	if r := Render(self, moved, []Input{in("p", v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()})}); r.Spec.Revision == base.Spec.Revision {
		t.Errorf("revision %s did not change with a peer address", r.Spec.Revision)
	}
	// The profile revision name is part of the spec too.
	renamed := Render(self, nodes, []Input{{Profile: "p", Revision: "p-other", Spec: &v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()}}})
	if renamed.Spec.Revision == base.Spec.Revision {
		t.Errorf("revision did not change with the profile revision")
	}
}

// ---- problems ----

func TestMissingAddress(t *testing.T) {
	nodes := fleet()
	nodes[2].Address = "" // av-001-xavier-c
	nodes[1].Address = "not-an-ip"
	res := Render(nodes[0], nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{
		Defaults:  seedDefaults(),
		HostPairs: []v1alpha1.HostPair{{From: "xavier-a", To: "xavier-c", Parameters: &v1alpha1.TCPParameters{Initcwnd: i32(5)}}},
	})})
	checkValid(t, res)
	if len(res.Spec.Routes) != 0 || len(res.Spec.Peers) != 0 {
		t.Errorf("routes %v peers %v: want none", dests(res.Spec), res.Spec.Peers)
	}
	want := []string{
		`host pair xavier-a->xavier-b of profile p: peer xavier-b has an invalid LAN address "not-an-ip"`,
		"host pair xavier-a->xavier-c of profile p: peer xavier-c has no LAN address",
	}
	if !reflect.DeepEqual(res.Warnings, want) {
		t.Errorf("warnings %q, want %q", res.Warnings, want)
	}
}

func TestProblemsAreWarnings(t *testing.T) {
	t.Run("inherited ssthresh above a pair's cwnd", func(t *testing.T) {
		nodes := fleet()
		res := Render(nodes[0], nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{
			Defaults:  seedDefaults(), // ssthresh 30
			HostPairs: []v1alpha1.HostPair{{From: "*", To: "xavier-b", Parameters: &v1alpha1.TCPParameters{Cwnd: cwnd(24), Initcwnd: i32(20)}}},
		})})
		checkValid(t, res)
		if got := dests(res.Spec); !slices.Equal(got, []string{"192.168.10.13/32"}) {
			t.Errorf("routes %v: want the invalid a->b route skipped", got)
		}
		want := "host pair xavier-a->xavier-b of profile p: ssthresh 30 exceeds cwnd 24: skipped"
		if !slices.Contains(res.Warnings, want) {
			t.Errorf("warnings %q lack %q", res.Warnings, want)
		}
	})
	t.Run("two nodes claim one host", func(t *testing.T) {
		nodes := append(fleet(), Node{Name: "av-001-spare", Address: "192.168.10.99",
			Labels: map[string]string{v1alpha1.DefaultVehicleLabel: "av-001", v1alpha1.DefaultHostLabel: "xavier-b"}})
		res := Render(nodes[0], nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{Defaults: seedDefaults()})})
		checkValid(t, res)
		if got := dests(res.Spec); !slices.Equal(got, []string{"192.168.10.13/32"}) {
			t.Errorf("routes %v: want no route to the ambiguous xavier-b", got)
		}
		want := "vehicle av-001: host xavier-b is claimed by several nodes (av-001-spare, av-001-xavier-b): no host-pair route to it from profile p"
		if !slices.Contains(res.Warnings, want) {
			t.Errorf("warnings %q lack %q", res.Warnings, want)
		}
	})
	t.Run("node without vehicle label", func(t *testing.T) {
		nodes := fleet()
		self := Node{Name: "lonely", Labels: map[string]string{v1alpha1.DefaultHostLabel: "xavier-a"}, Address: "10.1.1.1"}
		res := Render(self, nodes, []Input{in("p", v1alpha1.NetTuningProfileSpec{
			Defaults: seedDefaults(), Sysctls: []v1alpha1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}},
		})})
		checkValid(t, res)
		if len(res.Spec.Routes) != 0 || len(res.Spec.Sysctls) != 1 {
			t.Errorf("routes %v sysctls %v: want no routes, the sysctl", dests(res.Spec), res.Spec.Sysctls)
		}
		want := "profile p: node lonely has no nettune.io/vehicle or nettune.io/host label: host pairs not rendered"
		if !slices.Contains(res.Warnings, want) {
			t.Errorf("warnings %q lack %q", res.Warnings, want)
		}
	})
	t.Run("too many routes are capped", func(t *testing.T) {
		var routes []v1alpha1.ProfileRoute
		for i := range 64 {
			routes = append(routes, v1alpha1.ProfileRoute{Name: fmt.Sprintf("r%d", i), Destination: fmt.Sprintf("10.%d.0.0/16", i),
				Parameters: v1alpha1.TCPParameters{Initcwnd: i32(10)}})
		}
		var inputs []Input
		for p := range 9 {
			rs := slices.Clone(routes)
			for i := range rs {
				rs[i].Destination = fmt.Sprintf("10.%d.%d.0/24", p, i)
			}
			inputs = append(inputs, in(fmt.Sprintf("p%d", p), v1alpha1.NetTuningProfileSpec{Routes: rs}))
		}
		nodes := fleet()
		res := Render(nodes[0], nodes, inputs)
		checkValid(t, res)
		if len(res.Spec.Routes) != MaxRoutes || res.Spec.Routes[MaxRoutes-1].Destination != "10.7.63.0/24" {
			t.Errorf("%d routes, last %s: want the first %d by destination", len(res.Spec.Routes), res.Spec.Routes[len(res.Spec.Routes)-1].Destination, MaxRoutes)
		}
		if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "node av-001-xavier-a: more than 512 routes, left out: 10.8.0.0/24, ") {
			t.Errorf("warnings %q", res.Warnings)
		}
	})
}

func TestInputsNotMutated(t *testing.T) {
	nodes := fleet()
	spec := v1alpha1.NetTuningProfileSpec{
		Defaults:   seedDefaults(),
		HostPairs:  []v1alpha1.HostPair{{From: "xavier-a", To: "xavier-b", Parameters: &v1alpha1.TCPParameters{Cwnd: cwnd(24), Initcwnd: i32(20), Ssthresh: i32(20)}}},
		Routes:     []v1alpha1.ProfileRoute{{Name: "r", Destination: "10.1.2.3/8", Parameters: v1alpha1.TCPParameters{Cwnd: cwnd(5)}}},
		Interfaces: []v1alpha1.ProfileInterface{{InterfaceTuning: v1alpha1.InterfaceTuning{Name: "eth0", MTU: i32(1500)}}},
	}
	inputs := []Input{in("p", spec)}
	before := jsonOf(t, inputs)
	nodesBefore := jsonOf(t, nodes)
	res := Render(nodes[0], nodes, inputs)
	checkValid(t, res)
	if after := jsonOf(t, inputs); after != before {
		t.Fatalf("inputs changed by Render:\n%s\n%s", before, after)
	}
	// The result shares no memory with the inputs.
	for i := range res.Spec.Routes {
		p := &res.Spec.Routes[i].Parameters
		if p.Cwnd != nil {
			p.Cwnd.Value = 1
			*p.Cwnd.Lock = false
		}
		if p.Initcwnd != nil {
			*p.Initcwnd = 1
		}
		if p.RTOMin != nil {
			p.RTOMin.Duration = time.Hour
		}
	}
	*res.Spec.Interfaces[0].MTU = 9000
	if after := jsonOf(t, inputs); after != before {
		t.Fatalf("result aliases inputs:\n%s\n%s", before, after)
	}
	if jsonOf(t, nodes) != nodesBefore {
		t.Fatalf("nodes changed")
	}
}

// ---- NodeFromCore, ContentHash ----

func TestNodeFromCore(t *testing.T) {
	labels := map[string]string{v1alpha1.DefaultHostLabel: "xavier-a"}
	addrs := []corev1.NodeAddress{
		{Type: corev1.NodeExternalIP, Address: "203.0.113.5"},
		{Type: corev1.NodeHostName, Address: "xavier-a"},
		{Type: corev1.NodeInternalIP, Address: "10.42.0.7"},
		{Type: corev1.NodeInternalIP, Address: "10.42.0.8"},
	}
	tests := []struct {
		name        string
		annotations map[string]string
		addresses   []corev1.NodeAddress
		want        Node
	}{
		{"annotation beats InternalIP", map[string]string{v1alpha1.LANAddressAnnotation: " 192.168.10.11 ", v1alpha1.LANDeviceAnnotation: "eth0"}, addrs,
			Node{Name: "n", Labels: labels, Address: "192.168.10.11", Device: "eth0"}},
		{"first InternalIP without annotation", nil, addrs,
			Node{Name: "n", Labels: labels, Address: "10.42.0.7"}},
		{"empty annotation falls back", map[string]string{v1alpha1.LANAddressAnnotation: ""}, addrs,
			Node{Name: "n", Labels: labels, Address: "10.42.0.7"}},
		{"no InternalIP: unknown", nil, addrs[:2],
			Node{Name: "n", Labels: labels}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: tc.annotations},
				Status:     corev1.NodeStatus{Addresses: tc.addresses},
			}
			got := NodeFromCore(n)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NodeFromCore = %+v, want %+v", got, tc.want)
			}
			got.Labels["x"] = "y"
			if _, ok := n.Labels["x"]; ok {
				t.Errorf("NodeFromCore shares the label map")
			}
			delete(labels, "x")
		})
	}
	if got := NodeFromCore(nil); !reflect.DeepEqual(got, Node{}) {
		t.Errorf("NodeFromCore(nil) = %+v", got)
	}
}
