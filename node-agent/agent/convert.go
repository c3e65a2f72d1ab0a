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
	"net"
	"slices"

	"golang.org/x/sys/unix"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
)

// The agent translates between the API (what a NodeNetTuning asks for, what
// the last-known-good snapshot records) and the kernel layer's own types
// here, and only here: the kernel package knows nothing of the API.

// routeSpec converts an API NodeRoute into the route the kernel layer
// writes.
func routeSpec(r v1alpha1.NodeRoute) (kernel.RouteSpec, error) {
	dst, err := kernel.ParseDestination(r.Destination)
	if err != nil {
		return kernel.RouteSpec{}, err
	}
	spec := kernel.RouteSpec{Dst: dst, Device: r.Device}
	if r.Source != "" {
		if spec.Source = net.ParseIP(r.Source); spec.Source == nil {
			return kernel.RouteSpec{}, fmt.Errorf("route %s: invalid source %q", r.Destination, r.Source)
		}
		if (spec.Source.To4() != nil) != (dst.IP.To4() != nil) {
			return kernel.RouteSpec{}, fmt.Errorf("route %s: source %s is of another address family", r.Destination, r.Source)
		}
	}
	if spec.Metrics, err = routeMetrics(r.Parameters); err != nil {
		return kernel.RouteSpec{}, fmt.Errorf("route %s: %w", r.Destination, err)
	}
	return spec, nil
}

// desiredRoute is one route of a spec with its conversion for the kernel
// layer (or why it does not convert). A spec's routes are converted once,
// by convertRoutes, and the result carried by everything that needs the
// kernel's form: preflight, the write, the verify, the judgment of an
// interrupted apply, the repair of drift.
type desiredRoute struct {
	route v1alpha1.NodeRoute
	spec  kernel.RouteSpec
	err   error
}

// convertRoutes converts every route, in order.
func convertRoutes(routes []v1alpha1.NodeRoute) []desiredRoute {
	out := make([]desiredRoute, len(routes))
	for i, r := range routes {
		out[i].route = r
		out[i].spec, out[i].err = routeSpec(r)
	}
	return out
}

// routeMetrics converts API route parameters into the metrics to set: cwnd
// is locked as Cwnd.IsLocked says, rto_min is always locked (the kernel
// ignores an unlocked one) and rounded up to whole milliseconds, quickack
// false becomes quickack 0.
func routeMetrics(p v1alpha1.TCPParameters) (kernel.RouteMetrics, error) {
	var m kernel.RouteMetrics
	pos := func(name string, v *int32) (*uint32, error) {
		if v == nil {
			return nil, nil
		}
		if *v <= 0 {
			return nil, fmt.Errorf("%s %d: must be positive", name, *v)
		}
		u := uint32(*v)
		return &u, nil
	}
	var err error
	if p.Cwnd != nil {
		if m.Cwnd, err = pos("cwnd", &p.Cwnd.Value); err != nil {
			return kernel.RouteMetrics{}, err
		}
		m.SetLocked(unix.RTAX_CWND, p.Cwnd.IsLocked())
	}
	for _, f := range []struct {
		name string
		in   *int32
		out  **uint32
	}{
		{"initcwnd", p.Initcwnd, &m.Initcwnd},
		{"initrwnd", p.Initrwnd, &m.Initrwnd},
		{"ssthresh", p.Ssthresh, &m.Ssthresh},
		{"advmss", p.AdvMSS, &m.AdvMSS},
		{"mtu", p.MTU, &m.MTU},
	} {
		if *f.out, err = pos(f.name, f.in); err != nil {
			return kernel.RouteMetrics{}, err
		}
	}
	if m.Ssthresh != nil {
		// Locked, or the kernel writes the ssthresh a connection learned
		// back into the tcp_metrics entry at its close (tcp_update_metrics,
		// 4.9, and later kernels with tcp_no_ssthresh_metrics_save=0), and
		// the next connection to the peer starts from that, not from the
		// profile.
		m.SetLocked(unix.RTAX_SSTHRESH, true)
	}
	if p.RTOMin != nil {
		if p.RTOMin.Duration <= 0 {
			return kernel.RouteMetrics{}, fmt.Errorf("rtoMin %s: must be positive", p.RTOMin.Duration)
		}
		d := kernel.RoundRTOMin(p.RTOMin.Duration)
		m.RTOMin = &d
		m.SetLocked(unix.RTAX_RTO_MIN, true)
	}
	if p.Quickack != nil {
		q := *p.Quickack
		m.Quickack = &q
	}
	if p.CongestionControl != nil {
		m.CongestionControl = string(*p.CongestionControl)
	}
	if err := m.Validate(); err != nil {
		return kernel.RouteMetrics{}, err
	}
	return m, nil
}

// linkSettings converts an API InterfaceTuning into what the kernel layer
// sets on the interface.
func linkSettings(t v1alpha1.InterfaceTuning) kernel.LinkSettings {
	s := kernel.LinkSettings{Name: t.Name, Offloads: kernel.Offloads{GRO: t.GRO, GSO: t.GSO, TSO: t.TSO}}
	if t.MTU != nil {
		mtu := int(*t.MTU)
		s.MTU = &mtu
	}
	return s
}

// interfaceTuning is the API InterfaceTuning that reproduces s's MTU and
// offloads (what the last-known-good snapshot records).
func interfaceTuning(s kernel.InterfaceState) v1alpha1.InterfaceTuning {
	mtu := int32(s.MTU)
	return v1alpha1.InterfaceTuning{Name: s.Name, MTU: &mtu, GRO: s.Offloads.GRO, GSO: s.Offloads.GSO, TSO: s.Offloads.TSO}
}

// Bounds of v1alpha1.KernelFeatures' lists: a longer list would make the API
// server refuse the whole status patch. (Names are shorter than the API's
// 32 characters: the kernel's are at most 15.)
const (
	maxTCPInfoCounters    = 16
	maxCongestionControls = 32
	maxNodeCounters       = 16
	maxNodeCounterMeaning = 512
)

// kernelFeatures is the API report of what the kernel layer probed, within
// the API's bounds.
func kernelFeatures(f kernel.Features) *v1alpha1.KernelFeatures {
	return &v1alpha1.KernelFeatures{
		Release:            f.Release,
		Machine:            f.Machine,
		TCPInfoCounters:    slices.Clone(f.TCPInfoCounters[:min(len(f.TCPInfoCounters), maxTCPInfoCounters)]),
		CongestionControls: slices.Clone(f.CongestionControls[:min(len(f.CongestionControls), maxCongestionControls)]),
		NodeCounters:       nodeCounters(f.NodeCounters),
		EstimatedCounters:  nodeCounters(f.EstimatedCounters),
	}
}

// nodeCounters is the API report of the node-level counters, within the
// API's bounds.
func nodeCounters(cs []kernel.NodeCounter) []v1alpha1.NodeCounter {
	if len(cs) == 0 {
		return nil
	}
	out := make([]v1alpha1.NodeCounter, 0, min(len(cs), maxNodeCounters))
	for _, c := range cs[:min(len(cs), maxNodeCounters)] {
		m := c.Meaning
		if len(m) > maxNodeCounterMeaning {
			m = m[:maxNodeCounterMeaning]
		}
		out = append(out, v1alpha1.NodeCounter{Name: c.Name, Meaning: m})
	}
	return out
}
