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

package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// seedParams are the seed values of the project: cwnd 30 (locked by
// default), initcwnd/initrwnd 25, ssthresh 30, rto_min 10ms, quickack.
func seedParams() v1alpha1.TCPParameters {
	return v1alpha1.TCPParameters{
		Cwnd:     &v1alpha1.Cwnd{Value: 30},
		Initcwnd: ptr.To(int32(25)),
		Initrwnd: ptr.To(int32(25)),
		Ssthresh: ptr.To(int32(30)),
		RTOMin:   &metav1.Duration{Duration: 10 * time.Millisecond},
		Quickack: ptr.To(true),
	}
}

func TestRouteMetrics(t *testing.T) {
	m, err := routeMetrics(seedParams())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if m.Locks != kernel.LockBit(unix.RTAX_CWND)|kernel.LockBit(unix.RTAX_SSTHRESH)|kernel.LockBit(unix.RTAX_RTO_MIN) {
		t.Errorf("lock mask %#x, want cwnd|ssthresh|rto_min", m.Locks)
	}

	p := seedParams()
	p.Cwnd.Lock = ptr.To(false)
	p.RTOMin.Duration = 1500 * time.Microsecond // rounded up to 2ms
	p.Quickack = ptr.To(false)
	p.CongestionControl = ptr.To(v1alpha1.CongestionControl("bbr"))
	p.AdvMSS = ptr.To(int32(1400))
	p.MTU = ptr.To(int32(1450))
	m, err = routeMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.String(), "cwnd 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 2ms quickack 0 congctl bbr advmss 1400 mtu 1450"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}

	for _, bad := range []v1alpha1.TCPParameters{
		{Cwnd: &v1alpha1.Cwnd{Value: 0}},
		{Initcwnd: ptr.To(int32(-1))},
		{RTOMin: &metav1.Duration{Duration: -time.Millisecond}},
		{CongestionControl: ptr.To(v1alpha1.CongestionControl("a-very-long-algorithm-name"))},
	} {
		if _, err := routeMetrics(bad); err == nil {
			t.Errorf("routeMetrics(%+v): no error", bad)
		}
	}

	if m, err := routeMetrics(v1alpha1.TCPParameters{}); err != nil || !m.IsEmpty() || m.String() != "" {
		t.Errorf("empty parameters: %v %q", err, m.String())
	}
}

func TestRouteSpec(t *testing.T) {
	spec, err := routeSpec(v1alpha1.NodeRoute{
		Destination: "192.0.2.77/24", Device: "eth0", Source: "192.0.2.1", Parameters: seedParams(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Dst.String() != "192.0.2.0/24" || len(spec.Dst.IP) != 4 || spec.Device != "eth0" || !spec.Source.Equal([]byte{192, 0, 2, 1}) {
		t.Errorf("spec = %+v", spec)
	}
	if _, err := routeSpec(v1alpha1.NodeRoute{Destination: "2001:db8::1/128", Source: "192.0.2.1"}); err == nil {
		t.Error("mixed families accepted")
	}
	if _, err := routeSpec(v1alpha1.NodeRoute{Destination: "nope"}); err == nil {
		t.Error("bad destination accepted")
	}
}

// TestConvertRoutes: each route is carried with its own conversion, in
// order; a route that does not convert carries its error and does not stop
// the others.
func TestConvertRoutes(t *testing.T) {
	unlocked := seedParams()
	unlocked.Cwnd.Lock = ptr.To(false)
	cases := []struct {
		route   v1alpha1.NodeRoute
		metrics string // "" when the conversion fails
		err     string // a fragment of the error
	}{
		{v1alpha1.NodeRoute{Destination: "192.0.2.7/32", Device: "eth0", Parameters: seedParams()},
			"cwnd lock 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1", ""},
		{v1alpha1.NodeRoute{Destination: "nope", Parameters: seedParams()}, "", "invalid destination"},
		{v1alpha1.NodeRoute{Destination: "192.0.2.8/32", Parameters: v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 0}}}, "", "route 192.0.2.8/32: cwnd 0"},
		{v1alpha1.NodeRoute{Destination: "192.0.2.9/32", Parameters: unlocked},
			"cwnd 30 initcwnd 25 initrwnd 25 ssthresh lock 30 rto_min lock 10ms quickack 1", ""},
	}
	routes := make([]v1alpha1.NodeRoute, len(cases))
	for i, c := range cases {
		routes[i] = c.route
	}
	got := convertRoutes(routes)
	if len(got) != len(cases) {
		t.Fatalf("%d conversions of %d routes", len(got), len(cases))
	}
	for i, c := range cases {
		d := got[i]
		if d.route.Destination != c.route.Destination {
			t.Errorf("conversion %d is of %s, want %s", i, d.route.Destination, c.route.Destination)
		}
		switch {
		case c.err != "" && (d.err == nil || !strings.Contains(d.err.Error(), c.err)):
			t.Errorf("route %s: error %v, want one with %q", c.route.Destination, d.err, c.err)
		case c.err == "" && d.err != nil:
			t.Errorf("route %s: %v", c.route.Destination, d.err)
		case c.err == "" && (d.spec.Metrics.String() != c.metrics || d.spec.Dst.String() != c.route.Destination || d.spec.Device != c.route.Device):
			t.Errorf("route %s: converted to %s %q %q, want %q", c.route.Destination, d.spec.Dst, d.spec.Device, d.spec.Metrics.String(), c.metrics)
		}
	}
	if len(convertRoutes(nil)) != 0 {
		t.Error("no routes: conversions")
	}
}

func TestLinkSettingsRoundTrip(t *testing.T) {
	mtu := int32(1450)
	s := linkSettings(v1alpha1.InterfaceTuning{Name: "eth0", MTU: &mtu, GRO: ptr.To(false)})
	if s.Name != "eth0" || s.MTU == nil || *s.MTU != 1450 || s.Offloads.GRO == nil || *s.Offloads.GRO || s.Offloads.GSO != nil || s.Offloads.TSO != nil {
		t.Errorf("linkSettings = %+v", s)
	}
	if s := linkSettings(v1alpha1.InterfaceTuning{Name: "eth1"}); s.MTU != nil || s.Offloads.GRO != nil {
		t.Errorf("unset fields set: %+v", s)
	}
	st := kernel.InterfaceState{Name: "eth0", MTU: 9000, Offloads: kernel.Offloads{GRO: ptr.To(true), GSO: ptr.To(false), TSO: ptr.To(true)}}
	it := interfaceTuning(st)
	if it.Name != "eth0" || *it.MTU != 9000 || !*it.GRO || *it.GSO || !*it.TSO {
		t.Errorf("interfaceTuning = %+v", it)
	}
	if back := linkSettings(it); *back.MTU != 9000 || *back.Offloads.GSO {
		t.Errorf("round trip = %+v", back)
	}
}

// TestKernelFeatures: the kernel layer names its tcp_info counters as the
// API does, and the report stays within the API's bounds (a longer list
// would make the API server refuse the whole status).
func TestKernelFeatures(t *testing.T) {
	all := kernel.TCPInfoCounters(1 << 10)
	api := []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut, v1alpha1.CounterDSACKDups, v1alpha1.CounterTotalRTO}
	if !slices.Equal(all, api) {
		t.Errorf("kernel counters %v, API counters %v", all, api)
	}

	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("cc%d", i))
	}
	k := kernelFeatures(kernel.Features{Release: "5.10.216-tegra", Machine: "aarch64", TCPInfoBytes: 232,
		TCPInfoCounters: kernel.TCPInfoCounters(232), CongestionControls: append([]string{"cubic"}, many...)})
	if k.Release != "5.10.216-tegra" || k.Machine != "aarch64" || !slices.Equal(k.TCPInfoCounters, api[:3]) {
		t.Errorf("report %+v", k)
	}
	if len(k.CongestionControls) != 32 || k.CongestionControls[0] != "cubic" {
		t.Errorf("%d congestion controls %v: want the first 32, cubic first", len(k.CongestionControls), k.CongestionControls)
	}
	if e := kernelFeatures(kernel.Features{}); e.TCPInfoCounters != nil || e.CongestionControls != nil {
		t.Errorf("nothing probed: %+v", e)
	}
	if !k.Provides(v1alpha1.CounterDSACKDups) || k.Provides(v1alpha1.CounterTotalRTO) {
		t.Errorf("a 5.10 report provides %v", k.TCPInfoCounters)
	}
}
