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

// Package render turns the NetTuningProfile revisions assigned to one node
// into that node's concrete desired state, a v1alpha1.NodeNetTuningSpec. It
// is pure: no Kubernetes client, no clock, no I/O; the same inputs in any
// order give the same output, byte for byte.
//
// # Hosts and vehicles
//
// Every profile names its own label keys (vehicleLabel, hostLabel; empty
// means the v1alpha1 default). Under a profile, a node's vehicle is the value
// of its vehicle label and its host is the value of its host label. Host pairs
// are resolved only among nodes of the same vehicle; nodes of other vehicles,
// nodes without a host label and the rendered node itself are never peers.
// Peers are not filtered by the profile's nodeSelector: the selector chooses
// which nodes are tuned (the controller decides which inputs a node gets),
// while the destinations of its routes are any host of its vehicle. Two nodes
// of one vehicle carrying the same host name are ambiguous: that host gets no
// route and a warning is reported.
//
// # Host-pair routes
//
// A host pair {from, to} matches the rendered host H and peer P when from is H
// or "*" and to is P or "*". When a profile sets defaults, it has an implicit
// "* -> *" pair carrying exactly the defaults, ranked below every listed pair
// (so a listed "* -> *" pair overrides it). This covers a profile with
// defaults and no hostPairs at all (every peer of the vehicle gets a route
// with the defaults), and follows the API contract that defaults apply to
// every host pair of the vehicle unless a host pair overrides them.
//
// For each peer the most specific matching pair decides: both hosts named
// beats one host named, which beats "* -> *"; at equal specificity the pair
// later in the list wins. The route's parameters are the defaults overlaid
// field by field by that pair's parameters (v1alpha1.TCPParameters.Overlay:
// a cwnd is replaced as a whole, value and lock together). Only the most specific pair is used: less specific
// matching pairs do not contribute fields. A pair whose merged parameters are
// empty yields no route. A route goes to "<peer address>/32" (/128 for IPv6),
// with Peer set to the peer's host name and Device set to the rendered node's
// LAN interface (v1alpha1.LANDeviceAnnotation) when known. A peer without a usable LAN
// address is skipped with a warning. Every peer that got a host-pair route
// (before merging across profiles) is listed in spec.peers with
// DefaultProbePort.
//
// Merged parameters must stay valid (initcwnd and ssthresh not above
// cwnd.value, as the NodeNetTuning CRD requires:
// v1alpha1.TCPParameters.Validate); the profile CRD cannot rule
// out every inherited combination (e.g. ssthresh from defaults above a pair's
// smaller cwnd), so such a route is skipped with a warning rather than written
// and refused by the API server.
//
// # Explicit routes, sysctls and interfaces
//
// An explicit route applies when its hosts list is empty or contains H or
// "*". It uses exactly its own parameters: it does not inherit the profile's
// defaults. Its destination is normalized (masked prefix in canonical form).
// Sysctls apply to every node the profile is rendered for. Interfaces apply
// when their hosts list is empty or contains H or "*".
//
// An unset cwnd.lock is rendered as true, the CRD default
// (v1alpha1.TCPParameters.SetDefaults), so the rendered spec equals what the
// API server stores.
//
// # Merging profiles
//
// Items are keyed: routes by normalized destination, sysctls by name,
// interfaces by name. For each key, the profiles with the highest priority
// that set it decide. If their items are equal (ignoring the profile and, for
// routes, the informational peer), the item is kept once, attributed to the
// lowest profile name. If they differ, a Conflict naming those profiles is
// reported and the item is rendered from none of them — nor from any
// lower-priority profile. A strictly higher priority simply wins and there is
// no conflict. Inside one profile, an explicit route beats a host-pair route
// to the same destination; two different items of one profile under one key
// are a Conflict of that profile alone.
//
// # Output
//
// spec.profiles lists every input (name, revision), sorted by name. Routes are
// sorted by destination (IPv4 first, then by address and prefix length),
// sysctls, interfaces and peers by name. List sizes are capped at the CRD's
// maxItems, with a warning for what is cut. spec.revision is revision.Hash of
// the spec with an empty revision.
package render

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// DefaultProbePort is the port of the peer agent that post-apply probes
// connect to (the agent's --probe-port default).
const DefaultProbePort = 9102

// Caps from the NodeNetTuning CRD (+kubebuilder:validation:MaxItems).
const (
	MaxProfiles   = 32
	MaxRoutes     = 512
	MaxSysctls    = 64
	MaxInterfaces = 32
	MaxPeers      = 64
)

// Conflict kinds.
const (
	KindRoute     = "route"
	KindSysctl    = "sysctl"
	KindInterface = "interface"
)

// Node is the part of a Kubernetes Node that rendering needs.
type Node struct {
	Name   string
	Labels map[string]string
	// Address is the resolved LAN address ("" = unknown).
	Address string
	// Device is the LAN interface from v1alpha1.LANDeviceAnnotation ("" = unknown).
	Device string
}

// NodeFromCore converts a corev1.Node: the address is v1alpha1.LANAddressAnnotation when
// set, else the first InternalIP of status.addresses. The annotation is taken
// as written (trimmed); Render validates it.
func NodeFromCore(n *corev1.Node) Node {
	if n == nil {
		return Node{}
	}
	out := Node{Name: n.Name, Labels: maps.Clone(n.Labels)}
	if a := strings.TrimSpace(n.Annotations[v1alpha1.LANAddressAnnotation]); a != "" {
		out.Address = a
	} else {
		for _, addr := range n.Status.Addresses {
			if addr.Type == corev1.NodeInternalIP && strings.TrimSpace(addr.Address) != "" {
				out.Address = strings.TrimSpace(addr.Address)
				break
			}
		}
	}
	out.Device = strings.TrimSpace(n.Annotations[v1alpha1.LANDeviceAnnotation])
	return out
}

// Input is one profile's revision assigned to the node being rendered.
type Input struct {
	Profile  string                         // profile name
	Revision string                         // revision name assigned to this node's vehicle
	Spec     *v1alpha1.NetTuningProfileSpec // the revision's content (rollout ignored)
	// Apply is the live profile's apply policy (spec.rollout.apply; nil:
	// none): when the vehicle may take the revision.
	Apply *v1alpha1.ApplyPolicy
	// Rollback: the profile is rolled back and Revision is its stable
	// revision.
	Rollback bool
}

// Conflict is an item that equal-priority profiles set differently on the
// node; it is applied from none of them.
type Conflict struct {
	Kind     string   // "route", "sysctl", "interface"
	Item     string   // destination / sysctl name / interface name
	Profiles []string // the equal-priority profiles that disagree, sorted
}

// Result is a rendered node spec with what the controller should report.
type Result struct {
	Spec      v1alpha1.NodeNetTuningSpec // Revision set to revision.Hash of the rest
	Conflicts []Conflict
	Warnings  []string
}

// candidate is one profile's rendering of one keyed item.
type candidate struct {
	profile  string
	priority int32
	kind     string
	key      string
	explicit bool // route from spec.routes (beats a host-pair route of the same profile)
	poisoned bool // the profile itself set this key twice, differently
	route    v1alpha1.NodeRoute
	sysctl   v1alpha1.Sysctl
	iface    v1alpha1.InterfaceTuning
}

// content is the item's encoding without its attribution (profile, peer),
// used to decide whether two candidates agree.
func (c *candidate) content() []byte {
	var v any
	switch c.kind {
	case KindRoute:
		r := *c.route.DeepCopy()
		r.Profile, r.Peer = "", ""
		v = r
	case KindSysctl:
		v = c.sysctl
	default:
		v = c.iface
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("render: encoding %s %s: %v", c.kind, c.key, err))
	}
	return b
}

type itemKey struct{ kind, key string }

type renderer struct {
	node     Node
	nodes    []Node
	warnings map[string]bool
	peers    map[string]v1alpha1.Peer
}

func (r *renderer) warnf(format string, args ...any) {
	r.warnings[fmt.Sprintf(format, args...)] = true
}

// Render computes node's spec from inputs. vehicleNodes are all nodes (any
// vehicle; Render keeps, per profile, those of node's vehicle). The result is
// the same for the same inputs in any order, and the inputs are not modified.
func Render(node Node, vehicleNodes []Node, inputs []Input) Result {
	r := &renderer{node: node, nodes: vehicleNodes, warnings: map[string]bool{}, peers: map[string]v1alpha1.Peer{}}

	ins := slices.Clone(inputs)
	slices.SortFunc(ins, func(a, b Input) int {
		return cmp.Or(cmp.Compare(a.Profile, b.Profile), cmp.Compare(a.Revision, b.Revision))
	})
	for i := 1; i < len(ins); {
		if ins[i].Profile == ins[i-1].Profile {
			r.warnf("profile %s is given twice (revisions %s and %s): rendering %s", ins[i].Profile, ins[i-1].Revision, ins[i].Revision, ins[i-1].Revision)
			ins = slices.Delete(ins, i, i+1)
			continue
		}
		i++
	}
	if len(ins) > MaxProfiles {
		for _, in := range ins[MaxProfiles:] {
			r.warnf("profile %s not rendered: a node takes at most %d profiles", in.Profile, MaxProfiles)
		}
		ins = ins[:MaxProfiles]
	}

	var spec v1alpha1.NodeNetTuningSpec
	cands := map[itemKey][]*candidate{}
	for _, in := range ins {
		spec.Profiles = append(spec.Profiles, v1alpha1.SourceProfile{Name: in.Profile, Revision: in.Revision})
		if in.Spec == nil {
			continue
		}
		for k, c := range r.profile(in.Profile, in.Spec) {
			cands[k] = append(cands[k], c)
		}
	}

	var conflicts []Conflict
	for _, k := range slices.SortedFunc(maps.Keys(cands), func(a, b itemKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.key, b.key))
	}) {
		win, conflict := resolve(cands[k])
		if conflict != nil {
			conflicts = append(conflicts, *conflict)
			continue
		}
		switch win.kind {
		case KindRoute:
			spec.Routes = append(spec.Routes, win.route)
		case KindSysctl:
			spec.Sysctls = append(spec.Sysctls, win.sysctl)
		case KindInterface:
			spec.Interfaces = append(spec.Interfaces, win.iface)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(r.peers)) {
		spec.Peers = append(spec.Peers, r.peers[h])
	}

	slices.SortFunc(spec.Routes, func(a, b v1alpha1.NodeRoute) int { return comparePrefix(a.Destination, b.Destination) })
	slices.SortFunc(spec.Sysctls, func(a, b v1alpha1.Sysctl) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(spec.Interfaces, func(a, b v1alpha1.InterfaceTuning) int { return cmp.Compare(a.Name, b.Name) })
	spec.Routes = capList(r, spec.Routes, MaxRoutes, "routes", func(x v1alpha1.NodeRoute) string { return x.Destination })
	spec.Sysctls = capList(r, spec.Sysctls, MaxSysctls, "sysctls", func(x v1alpha1.Sysctl) string { return x.Name })
	spec.Interfaces = capList(r, spec.Interfaces, MaxInterfaces, "interfaces", func(x v1alpha1.InterfaceTuning) string { return x.Name })
	spec.Peers = capList(r, spec.Peers, MaxPeers, "peers", func(x v1alpha1.Peer) string { return x.Host })

	// The apply policy says when, never what: it is left out of the
	// revision, so a policy change alone applies nothing.
	spec.Revision = revision.Hash(spec)
	spec.ApplyPolicy = applyPolicy(ins)
	return Result{Spec: spec, Conflicts: conflicts, Warnings: slices.Sorted(maps.Keys(r.warnings))}
}

func capList[T any](r *renderer, items []T, limit int, what string, name func(T) string) []T {
	if len(items) <= limit {
		return items
	}
	cut := make([]string, 0, len(items)-limit)
	for _, it := range items[limit:] {
		cut = append(cut, name(it))
	}
	r.warnf("node %s: more than %d %s, left out: %s", r.node.Name, limit, what, strings.Join(cut, ", "))
	return items[:limit]
}

// resolve picks the item of one key among the candidates of all profiles, or
// reports a conflict.
func resolve(cs []*candidate) (*candidate, *Conflict) {
	top := cs[0].priority
	for _, c := range cs {
		top = max(top, c.priority)
	}
	var group []*candidate
	for _, c := range cs {
		if c.priority == top {
			group = append(group, c)
		}
	}
	slices.SortFunc(group, func(a, b *candidate) int { return cmp.Compare(a.profile, b.profile) })
	agree := !group[0].poisoned
	first := group[0].content()
	for _, c := range group[1:] {
		if c.poisoned || !bytes.Equal(c.content(), first) {
			agree = false
			break
		}
	}
	if !agree {
		var names []string
		for _, c := range group {
			names = append(names, c.profile)
		}
		return nil, &Conflict{Kind: group[0].kind, Item: group[0].key, Profiles: names}
	}
	win := group[0]
	if win.kind == KindRoute && win.route.Peer == "" {
		for _, c := range group[1:] {
			if c.route.Peer != "" {
				win.route.Peer = c.route.Peer
				break
			}
		}
	}
	return win, nil
}

// profile renders one profile's items for the node, keyed, with duplicates
// inside the profile resolved.
func (r *renderer) profile(name string, spec *v1alpha1.NetTuningProfileSpec) map[itemKey]*candidate {
	hostLabel := cmp.Or(spec.HostLabel, v1alpha1.DefaultHostLabel)
	host := r.node.Labels[hostLabel]
	out := map[itemKey]*candidate{}
	add := func(c *candidate) {
		c.profile, c.priority = name, spec.Priority
		k := itemKey{c.kind, c.key}
		prev, ok := out[k]
		switch {
		case !ok:
			out[k] = c
		case prev.explicit != c.explicit:
			if c.explicit {
				out[k] = c
			}
		case prev.poisoned:
		case bytes.Equal(prev.content(), c.content()):
			if c.kind == KindRoute && c.route.Peer != "" && (prev.route.Peer == "" || c.route.Peer < prev.route.Peer) {
				prev.route.Peer = c.route.Peer
			}
		default:
			prev.poisoned = true
			r.warnf("profile %s sets %s %s twice, differently: not applied", name, c.kind, c.key)
		}
	}

	r.hostPairs(name, spec, add)

	for _, pr := range spec.Routes {
		if !appliesTo(pr.Hosts, host) {
			continue
		}
		dst, err := normalizePrefix(pr.Destination)
		if err != nil {
			r.warnf("route %s of profile %s: %v: skipped", pr.Name, name, err)
			continue
		}
		route := v1alpha1.NodeRoute{Destination: dst, Profile: name, Parameters: *pr.Parameters.DeepCopy()}
		route.Parameters.SetDefaults()
		if pr.Device != nil {
			if !validDevice(*pr.Device) {
				r.warnf("route %s of profile %s: invalid device %q: skipped", pr.Name, name, *pr.Device)
				continue
			}
			route.Device = *pr.Device
		}
		if pr.Source != nil && *pr.Source != "" {
			src, err := netip.ParseAddr(*pr.Source)
			if err != nil || src.Zone() != "" || src.Is4In6() || src.Is4() != netip.MustParsePrefix(dst).Addr().Is4() {
				r.warnf("route %s of profile %s: invalid source %q for %s: skipped", pr.Name, name, *pr.Source, dst)
				continue
			}
			route.Source = src.String()
		}
		if err := route.Parameters.Validate(); err != nil {
			r.warnf("route %s of profile %s: %v: skipped", pr.Name, name, err)
			continue
		}
		add(&candidate{kind: KindRoute, key: dst, explicit: true, route: route})
	}

	for _, s := range spec.Sysctls {
		add(&candidate{kind: KindSysctl, key: s.Name, sysctl: s})
	}
	for _, pi := range spec.Interfaces {
		if appliesTo(pi.Hosts, host) {
			add(&candidate{kind: KindInterface, key: pi.Name, iface: *pi.InterfaceTuning.DeepCopy()})
		}
	}
	return out
}

// hostPairs renders the host-pair routes of one profile.
func (r *renderer) hostPairs(name string, spec *v1alpha1.NetTuningProfileSpec, add func(*candidate)) {
	pairs := spec.HostPairs
	if spec.Defaults != nil {
		// The implicit "* -> *" pair of the defaults ranks first, so that any
		// listed pair of equal specificity overrides it.
		pairs = append([]v1alpha1.HostPair{{From: "*", To: "*"}}, pairs...)
	}
	if len(pairs) == 0 {
		return
	}
	vehicleLabel := cmp.Or(spec.VehicleLabel, v1alpha1.DefaultVehicleLabel)
	hostLabel := cmp.Or(spec.HostLabel, v1alpha1.DefaultHostLabel)
	vehicle, host := r.node.Labels[vehicleLabel], r.node.Labels[hostLabel]
	if vehicle == "" || host == "" {
		r.warnf("profile %s: node %s has no %s or %s label: host pairs not rendered", name, r.node.Name, vehicleLabel, hostLabel)
		return
	}

	byHost := map[string][]Node{}
	for _, n := range r.nodes {
		if n.Name == r.node.Name || n.Labels[vehicleLabel] != vehicle || n.Labels[hostLabel] == "" {
			continue
		}
		byHost[n.Labels[hostLabel]] = append(byHost[n.Labels[hostLabel]], n)
	}

	device := r.node.Device
	if device != "" && !validDevice(device) {
		r.warnf("node %s: invalid %s %q: host-pair routes have no device", r.node.Name, v1alpha1.LANDeviceAnnotation, device)
		device = ""
	}

	emitted := false
	for _, peer := range slices.Sorted(maps.Keys(byHost)) {
		ns := byHost[peer]
		if peer == host || len(ns) > 1 {
			names := make([]string, 0, len(ns)+1)
			for _, n := range ns {
				names = append(names, n.Name)
			}
			if peer == host {
				names = append(names, r.node.Name)
			}
			slices.Sort(names)
			r.warnf("vehicle %s: host %s is claimed by several nodes (%s): no host-pair route to it from profile %s", vehicle, peer, strings.Join(names, ", "), name)
			continue
		}
		pair, ok := bestPair(pairs, host, peer)
		if !ok {
			continue
		}
		params := overlay(spec.Defaults, pair.Parameters)
		if params.IsEmpty() {
			continue
		}
		where := fmt.Sprintf("host pair %s->%s of profile %s", host, peer, name)
		addr, err := lanAddress(ns[0].Address)
		if err != nil {
			r.warnf("%s: peer %s %v", where, peer, err)
			continue
		}
		if err := params.Validate(); err != nil {
			r.warnf("%s: %v: skipped", where, err)
			continue
		}
		bits := 32
		if addr.Is6() {
			bits = 128
		}
		dst := netip.PrefixFrom(addr, bits).String()
		add(&candidate{kind: KindRoute, key: dst, route: v1alpha1.NodeRoute{
			Destination: dst, Device: device, Peer: peer, Profile: name, Parameters: params,
		}})
		emitted = true
		r.addPeer(peer, addr.String())
	}
	if emitted && r.node.Device == "" {
		r.warnf("node %s has no %s annotation: host-pair routes have no device, so the agent can only tune /32 routes that already exist", r.node.Name, v1alpha1.LANDeviceAnnotation)
	}
}

// addPeer lists a peer for probes. Profiles with different host labels could
// give one host name two addresses; the lower address is kept.
func (r *renderer) addPeer(host, addr string) {
	if prev, ok := r.peers[host]; ok && prev.Address != addr {
		keep := min(prev.Address, addr)
		r.warnf("peer %s has two addresses under different profiles' labels (%s, %s): probing %s", host, min(prev.Address, addr), max(prev.Address, addr), keep)
		addr = keep
	}
	r.peers[host] = v1alpha1.Peer{Host: host, Address: addr, ProbePort: DefaultProbePort}
}

// bestPair is the most specific pair matching from -> to; at equal
// specificity the later pair wins.
func bestPair(pairs []v1alpha1.HostPair, from, to string) (v1alpha1.HostPair, bool) {
	best, bestScore := -1, -1
	for i, p := range pairs {
		if (p.From != "*" && p.From != from) || (p.To != "*" && p.To != to) {
			continue
		}
		score := 0
		if p.From != "*" {
			score++
		}
		if p.To != "*" {
			score++
		}
		if score >= bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return v1alpha1.HostPair{}, false
	}
	return pairs[best], true
}

// overlay is base with every field set in over replaced, as a deep copy,
// with the CRD's defaults filled in.
func overlay(base, over *v1alpha1.TCPParameters) v1alpha1.TCPParameters {
	out := v1alpha1.TCPParameters{}
	if base != nil {
		base.DeepCopyInto(&out)
	}
	out.Overlay(over)
	out.SetDefaults()
	return out
}

// appliesTo reports whether an item limited to hosts applies to host.
func appliesTo(hosts []string, host string) bool {
	return len(hosts) == 0 || slices.Contains(hosts, "*") || (host != "" && slices.Contains(hosts, host))
}

var devicePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func validDevice(d string) bool { return len(d) <= 15 && devicePattern.MatchString(d) }

// lanAddress parses a peer address as the CRD accepts it (isIP: no zone, no
// IPv4-mapped IPv6, which is turned into IPv4).
func lanAddress(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fmt.Errorf("has no LAN address")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("has an invalid LAN address %q", s)
	}
	return a.Unmap(), nil
}

// normalizePrefix returns the masked, canonical form of a CIDR.
func normalizePrefix(s string) (string, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p.Addr().Zone() != "" {
		return "", fmt.Errorf("invalid destination %q", s)
	}
	return p.Masked().String(), nil
}

// comparePrefix orders canonical prefixes: IPv4 before IPv6, then by
// address, then by prefix length.
func comparePrefix(a, b string) int {
	pa, ea := netip.ParsePrefix(a)
	pb, eb := netip.ParsePrefix(b)
	if ea != nil || eb != nil {
		return cmp.Compare(a, b)
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(pa.Bits(), pb.Bits())
}

// applyPolicy merges the profiles' apply policies onto a node: the
// strictest gate (Required over IfConfigured over Ignored; a profile
// without a policy is IfConfigured), every profile's windows (each must be
// open), and immediate when a profile is rolled back and its policy lets a
// rollback skip the gate (the default). Nil when nothing is asked.
func applyPolicy(ins []Input) *v1alpha1.NodeApplyPolicy {
	p := v1alpha1.NodeApplyPolicy{Gate: v1alpha1.ApplyGateIgnored}
	var rolledBack []string
	for _, in := range ins {
		a := in.Apply
		if a == nil {
			a = &v1alpha1.ApplyPolicy{}
		}
		switch gate := cmp.Or(a.Gate, v1alpha1.ApplyGateIfConfigured); {
		case gate == v1alpha1.ApplyGateRequired:
			p.Gate = gate
		case gate == v1alpha1.ApplyGateIfConfigured && p.Gate == v1alpha1.ApplyGateIgnored:
			p.Gate = gate
		}
		if len(a.MaintenanceWindows) > 0 {
			p.Windows = append(p.Windows, v1alpha1.ProfileWindows{Profile: in.Profile, Windows: a.MaintenanceWindows})
		}
		if in.Rollback && a.Rollback != v1alpha1.RollbackWhenAllowed {
			rolledBack = append(rolledBack, in.Profile+" to "+in.Revision)
		}
	}
	if len(rolledBack) > 0 {
		p.Immediate = "rollback of profile " + strings.Join(rolledBack, ", ")
		if len(p.Immediate) > 256 {
			p.Immediate = p.Immediate[:253] + "..."
		}
	}
	if len(ins) == 0 || (p.Gate == v1alpha1.ApplyGateIfConfigured && len(p.Windows) == 0 && p.Immediate == "") {
		return nil
	}
	return &p
}
