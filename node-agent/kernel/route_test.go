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

package kernel

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func seedSpec(t *testing.T, p *pair) RouteSpec {
	t.Helper()
	dst, err := ParseDestination(p.hostB().String())
	if err != nil {
		t.Fatal(err)
	}
	return RouteSpec{Dst: dst, Device: p.devA, Metrics: seedMetrics()}
}

// TestApplyRouteLockMask is the regression test for the lock-mask bug: cwnd,
// ssthresh and rto_min must all end up locked (one RTAX_LOCK attribute with
// the whole mask), as iproute2 itself shows.
func TestApplyRouteLockMask(t *testing.T) {
	p := newPair(t)
	spec := seedSpec(t, p)

	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Created || !ch.Changed || ch.Before.Route != nil || ch.After == nil {
		t.Fatalf("change = %+v", ch)
	}

	out := ipRouteShow(t, p.A, p.hostB().String())
	t.Logf("ip route show: %s", out)
	for _, want := range []string{"cwnd lock 30", "rto_min lock 10ms", "initcwnd 25", "initrwnd 25", "ssthresh lock 30", "quickack 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("ip route show %s = %q, missing %q", p.hostB(), out, want)
		}
	}

	r, err := p.A.h.ReadRoute(p.hostB())
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffMetrics(spec.Metrics, r.Metrics); d != nil {
		t.Errorf("read back differs: %v", d)
	}
	if !r.Metrics.Equal(spec.Metrics) {
		t.Errorf("read back %s, want exactly %s", r.Metrics, spec.Metrics)
	}
	if got, want := r.Metrics.String(), "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1"; got != want {
		t.Errorf("formatted %q, want %q", got, want)
	}
	if r.Device != p.devA || r.Scope != unix.RT_SCOPE_LINK || r.Gateway != nil {
		t.Errorf("created route %s: device %q scope %d", r, r.Device, r.Scope)
	}

	// Applying again is a no-op.
	ch, err = p.A.h.ApplyRoute(spec)
	if err != nil || ch.Changed || ch.Created {
		t.Errorf("second apply: %+v, %v", ch, err)
	}
}

// routeDefs reads every route of the main table of h, through the netlink
// library (an independent decoder), keyed by destination.
func routeDefs(t *testing.T, h *Handle) map[string]netlink.Route {
	t.Helper()
	rs, err := h.link.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netlink.Route{}
	for _, r := range rs {
		out[r.Dst.String()] = r
	}
	return out
}

// TestApplyRoutePreservesOtherMetricsAndRoutes: metrics nettune does not
// manage survive the read-modify-write, and routes not named are untouched.
func TestApplyRoutePreservesOtherMetricsAndRoutes(t *testing.T) {
	p := newPair(t)
	l, err := p.A.h.link.LinkByName(p.devA)
	if err != nil {
		t.Fatal(err)
	}
	// Existing route with metrics set by someone else, written with the
	// netlink library (a single lock, which it handles).
	pre := &netlink.Route{
		Dst: p.hostB(), LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Protocol: unix.RTPROT_BOOT, Priority: 50,
		MTU: 1400, MTULock: true, Window: 65535, Hoplimit: 33, Reordering: 5,
		Features: unix.RTAX_FEATURE_ECN, InitCwnd: 7,
	}
	if err := p.A.h.link.RouteAdd(pre); err != nil {
		t.Fatal(err)
	}
	// A route the spec does not name.
	other := &net.IPNet{IP: net.IPv4(p.addrB[0], p.addrB[1], p.addrB[2], 99).To4(), Mask: net.CIDRMask(32, 32)}
	if err := p.A.h.link.RouteAdd(&netlink.Route{Dst: other, LinkIndex: l.Attrs().Index, Scope: netlink.SCOPE_LINK, InitCwnd: 3, RtoMin: 50, RtoMinLock: true}); err != nil {
		t.Fatal(err)
	}
	before := routeDefs(t, p.A.h)
	otherBefore, err := p.A.h.ReadRoute(other)
	if err != nil {
		t.Fatal(err)
	}

	spec := seedSpec(t, p)
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Created || !ch.Changed {
		t.Errorf("change = %+v", ch)
	}
	r := ch.After
	want := "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1 mtu lock 1400 window 65535 reordering 5 hoplimit 33 features ecn"
	if got := r.Metrics.String(); got != want {
		t.Errorf("metrics after apply:\n got %s\nwant %s", got, want)
	}
	if r.Priority != 50 || r.Protocol != unix.RTPROT_BOOT {
		t.Errorf("route attributes changed: priority %d protocol %d", r.Priority, r.Protocol)
	}
	out := ipRouteShow(t, p.A, p.hostB().String())
	for _, w := range []string{"mtu lock 1400", "cwnd lock 30", "rto_min lock 10ms", "features ecn", "window 65535"} {
		if !strings.Contains(out, w) {
			t.Errorf("ip route show = %q, missing %q", out, w)
		}
	}

	after := routeDefs(t, p.A.h)
	if len(after) != len(before) {
		t.Errorf("route count %d -> %d", len(before), len(after))
	}
	for dst, b := range before {
		if dst == p.hostB().String() {
			continue
		}
		a, ok := after[dst]
		if !ok || a.String() != b.String() || a.InitCwnd != b.InitCwnd || a.RtoMin != b.RtoMin || a.RtoMinLock != b.RtoMinLock {
			t.Errorf("route %s changed:\n before %+v\n after  %+v", dst, b, a)
		}
	}
	otherAfter, err := p.A.h.ReadRoute(other)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDefinition(otherBefore, otherAfter) {
		t.Errorf("unnamed route changed: %s -> %s", otherBefore, otherAfter)
	}

	// Restoring the snapshot brings back the exact original metric set.
	if _, err := p.A.h.RestoreRoute(ch.Before); err != nil {
		t.Fatal(err)
	}
	r, err = p.A.h.ReadRoute(p.hostB())
	if err != nil {
		t.Fatal(err)
	}
	if !sameDefinition(r, ch.Before.Route) {
		t.Errorf("restored %s, want %s", r, ch.Before.Route)
	}
	if got := r.Metrics.String(); got != "initcwnd 7 mtu lock 1400 window 65535 reordering 5 hoplimit 33 features ecn" {
		t.Errorf("restored metrics %q", got)
	}
}

// TestApplyRouteCreateAndRestore: a missing /32 is created on the device,
// and restoring the snapshot of its absence deletes it again.
func TestApplyRouteCreateAndRestore(t *testing.T) {
	p := newPair(t)
	spec := seedSpec(t, p)
	snap, err := p.A.h.SnapshotRoute(spec.Dst)
	if err != nil || snap.Route != nil {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Created || ch.After == nil || ch.After.Device != p.devA {
		t.Fatalf("change = %+v", ch)
	}
	// The connected /24 is still the route for other hosts.
	if _, err := p.A.h.ReadRoute(p.subnet); err != nil {
		t.Errorf("connected route: %v", err)
	}

	rc, err := p.A.h.RestoreRoute(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !rc.Deleted || rc.After != nil {
		t.Errorf("restore change = %+v", rc)
	}
	if _, err := p.A.h.ReadRoute(spec.Dst); !errors.Is(err, ErrRouteNotFound) {
		t.Errorf("route still there after restore: %v", err)
	}
	if out := ipRouteShow(t, p.A, spec.Dst.String()); out != "" {
		t.Errorf("ip route show after restore: %q", out)
	}
	if _, err := p.A.h.ReadRoute(p.subnet); err != nil {
		t.Errorf("connected route gone after restore: %v", err)
	}
	// Restoring again is a no-op.
	if rc, err := p.A.h.RestoreRoute(snap); err != nil || rc.Changed {
		t.Errorf("second restore: %+v, %v", rc, err)
	}
}

// TestApplyRouteErrors: the kernel's refusals surface as errors and leave
// the route as it was.
func TestApplyRouteErrors(t *testing.T) {
	p := newPair(t)
	dst := p.hostB()

	// No route and no device.
	_, err := p.A.h.ApplyRoute(RouteSpec{Dst: dst, Metrics: RouteMetrics{Initcwnd: ptr(uint32(20))}})
	if !errors.Is(err, ErrRouteNotFound) {
		t.Errorf("apply without route or device: %v", err)
	}
	// Unknown device.
	_, err = p.A.h.ApplyRoute(RouteSpec{Dst: dst, Device: "nope0", Metrics: RouteMetrics{Initcwnd: ptr(uint32(20))}})
	if err == nil || !strings.Contains(err.Error(), "nope0") {
		t.Errorf("apply on unknown device: %v", err)
	}
	if _, err := p.A.h.ReadRoute(dst); !errors.Is(err, ErrRouteNotFound) {
		t.Errorf("failed apply left a route: %v", err)
	}

	// Congestion control the kernel lacks, on a new and on an existing
	// route: a name no kernel has, since a kernel with modules loads a real
	// one it lacks (tcp_vegas) when a route names it.
	const missing = "nosuch"
	_, err = p.A.h.ApplyRoute(RouteSpec{Dst: dst, Device: p.devA, Metrics: RouteMetrics{CongestionControl: missing}})
	if err == nil {
		t.Fatal("unknown congestion control accepted on create")
	}
	t.Logf("kernel error: %v", err)
	if _, err := p.A.h.ReadRoute(dst); !errors.Is(err, ErrRouteNotFound) {
		t.Errorf("failed create left a route: %v", err)
	}
	ch, err := p.A.h.ApplyRoute(seedSpec(t, p))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.A.h.ApplyRoute(RouteSpec{Dst: dst, Metrics: RouteMetrics{CongestionControl: missing}})
	if err == nil {
		t.Fatal("unknown congestion control accepted on replace")
	}
	r, err := p.A.h.ReadRoute(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !sameDefinition(r, ch.After) {
		t.Errorf("failed replace changed the route: %s -> %s", ch.After, r)
	}
	// An available one works.
	if _, err := p.A.h.ApplyRoute(RouteSpec{Dst: dst, Metrics: RouteMetrics{CongestionControl: "reno"}}); err != nil {
		t.Errorf("congctl reno: %v", err)
	}
	if r, _ := p.A.h.ReadRoute(dst); r == nil || r.Metrics.CongestionControl != "reno" || !r.Metrics.Locked(unix.RTAX_CWND) {
		t.Errorf("after congctl reno: %v", r)
	}

	// Existing route on another device than the spec names.
	_, err = p.A.h.ApplyRoute(RouteSpec{Dst: dst, Device: "lo", Metrics: RouteMetrics{Initcwnd: ptr(uint32(20))}})
	if err == nil || !strings.Contains(err.Error(), "uses device") {
		t.Errorf("device mismatch: %v", err)
	}
}

// TestDeleteRouteMetrics removes the managed metrics and keeps the rest.
func TestDeleteRouteMetrics(t *testing.T) {
	p := newPair(t)
	spec := seedSpec(t, p)
	spec.Metrics.Other = map[int]uint32{unix.RTAX_FEATURES: unix.RTAX_FEATURE_ECN}
	if _, err := p.A.h.ApplyRoute(spec); err != nil {
		t.Fatal(err)
	}
	ch, err := p.A.h.DeleteRouteMetrics(spec.Dst, seedSpec(t, p).Metrics)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Changed || ch.After == nil || ch.After.Metrics.String() != "features ecn" || ch.After.Metrics.Locks != 0 {
		t.Errorf("after delete: %+v", ch.After)
	}
	if out := ipRouteShow(t, p.A, spec.Dst.String()); strings.Contains(out, "lock") || !strings.Contains(out, "features ecn") {
		t.Errorf("ip route show: %q", out)
	}
}

// TestApplyRouteSource: Source becomes the preferred source.
func TestApplyRouteSource(t *testing.T) {
	p := newPair(t)
	spec := seedSpec(t, p)
	spec.Source = p.addrA
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.After.Source.Equal(p.addrA) {
		t.Errorf("source %v", ch.After.Source)
	}
	if out := ipRouteShow(t, p.A, spec.Dst.String()); !strings.Contains(out, "src "+p.addrA.String()) {
		t.Errorf("ip route show: %q", out)
	}
}

// TestApplyRouteKeepsGateway: a gateway route keeps its gateway and scope
// through the read-modify-write.
func TestApplyRouteKeepsGateway(t *testing.T) {
	p := newPair(t)
	remote := &net.IPNet{IP: net.IPv4(10, 250, p.addrB[2]^0x80, 0).To4(), Mask: net.CIDRMask(24, 32)}
	if err := p.A.h.link.RouteAdd(&netlink.Route{Dst: remote, Gw: p.addrB}); err != nil {
		t.Fatal(err)
	}
	spec := seedSpec(t, p)
	spec.Dst, spec.Device = remote, p.devA
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := ch.After
	if ch.Created || !r.Gateway.Equal(p.addrB) || r.Device != p.devA || r.Scope != unix.RT_SCOPE_UNIVERSE || !Satisfies(r.Metrics, spec.Metrics) {
		t.Errorf("after apply: %s (scope %d, created %v)", r, r.Scope, ch.Created)
	}
	out := ipRouteShow(t, p.A, remote.String())
	if !strings.Contains(out, "via "+p.addrB.String()) || !strings.Contains(out, "cwnd lock 30") || !strings.Contains(out, "rto_min lock 10ms") {
		t.Errorf("ip route show: %q", out)
	}
	if _, err := p.A.h.RestoreRoute(ch.Before); err != nil {
		t.Fatal(err)
	}
	if r, err := p.A.h.ReadRoute(remote); err != nil || !r.Metrics.IsEmpty() || !r.Gateway.Equal(p.addrB) {
		t.Errorf("restored: %v, %v", r, err)
	}
}

// TestApplyRouteIPv6 checks the IPv6 encoding on a host route created in a
// test namespace (a route only: no address is configured, nothing is sent).
func TestApplyRouteIPv6(t *testing.T) {
	p := newPair(t)
	dst, err := ParseDestination("fd00:250::2/128")
	if err != nil {
		t.Fatal(err)
	}
	spec := RouteSpec{Dst: dst, Device: p.devA, Metrics: seedMetrics()}
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Created || !ch.After.Metrics.Equal(spec.Metrics) {
		t.Fatalf("change: %+v", ch)
	}
	out := ipRouteShow(t, p.A, "fd00:250::2")
	if !strings.Contains(out, "cwnd lock 30") || !strings.Contains(out, "rto_min lock 10ms") {
		t.Errorf("ip -6 route show: %q", out)
	}
	if again, err := p.A.h.ApplyRoute(spec); err != nil || again.Changed {
		t.Errorf("second apply: %+v, %v", again, err)
	}
	if _, err := p.A.h.RestoreRoute(ch.Before); err != nil {
		t.Fatal(err)
	}
	if _, err := p.A.h.ReadRoute(spec.Dst); !errors.Is(err, ErrRouteNotFound) {
		t.Errorf("after restore: %v", err)
	}
}
