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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ErrRouteNotFound is returned (wrapped) when the main table has no route
// for a destination prefix.
var ErrRouteNotFound = errors.New("route not found in the main table")

const rtaNHID = 30 // RTA_NH_ID, missing from x/sys/unix

// keptAttrs are the route attributes copied from a dumped route into a
// rewrite of it: they define the route, and the kernel accepts them on input.
// Dump-only ones (RTA_CACHEINFO, ...) are dropped, RTA_METRICS is rebuilt.
var keptAttrs = map[uint16]bool{
	unix.RTA_DST: true, unix.RTA_SRC: true, unix.RTA_OIF: true, unix.RTA_GATEWAY: true,
	unix.RTA_PRIORITY: true, unix.RTA_PREFSRC: true, unix.RTA_TABLE: true,
	unix.RTA_MULTIPATH: true, unix.RTA_FLOW: true, unix.RTA_ENCAP_TYPE: true,
	unix.RTA_ENCAP: true, unix.RTA_PREF: true, unix.RTA_VIA: true, rtaNHID: true,
}

// Route is a route of the main table as the kernel reports it.
type Route struct {
	Dst       *net.IPNet
	Table     uint32
	LinkIndex int    // outgoing interface index, 0 if none (multipath, blackhole)
	Device    string // outgoing interface name, "" if none
	Gateway   net.IP
	Source    net.IP // preferred source (RTA_PREFSRC)
	Priority  uint32 // route metric ("metric" in iproute2)
	Protocol  uint8  // RTPROT_*
	Scope     uint8  // RT_SCOPE_*
	Type      uint8  // RTN_*
	Metrics   RouteMetrics

	hdr   unix.RtMsg
	attrs []attr // kept attributes (keptAttrs), as dumped
	raw   []byte // the rtmsg as dumped, for MarshalJSON
}

// routeJSON is a Route on disk: the kernel's own rtmsg bytes (re-parsed on
// load, so a restored route is written back exactly) and, for people reading
// the file, its iproute2 text.
type routeJSON struct {
	RtMsg  []byte `json:"rtmsg"`
	Device string `json:"device,omitempty"`
	Text   string `json:"text,omitempty"`
}

// MarshalJSON encodes the route as its raw rtmsg, so that a snapshot written
// to the agent's journal restores the route exactly after a crash.
func (r *Route) MarshalJSON() ([]byte, error) {
	if len(r.raw) == 0 {
		return nil, fmt.Errorf("route %s was not read from the kernel and cannot be encoded", r.Dst)
	}
	return json.Marshal(routeJSON{RtMsg: r.raw, Device: r.Device, Text: r.String()})
}

// UnmarshalJSON decodes a route encoded by MarshalJSON.
func (r *Route) UnmarshalJSON(b []byte) error {
	var j routeJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	parsed, err := parseRoute(j.RtMsg)
	if err != nil {
		return fmt.Errorf("decoding route: %w", err)
	}
	if parsed == nil {
		return fmt.Errorf("decoding route: not an IPv4/IPv6 route")
	}
	*r = *parsed
	r.Device = j.Device
	return nil
}

// String formats r in the style of `ip route show`.
func (r *Route) String() string {
	if r == nil {
		return "<none>"
	}
	var b bytes.Buffer
	b.WriteString(r.Dst.String())
	if r.Gateway != nil {
		fmt.Fprintf(&b, " via %s", r.Gateway)
	}
	if r.Device != "" {
		fmt.Fprintf(&b, " dev %s", r.Device)
	}
	if r.Source != nil {
		fmt.Fprintf(&b, " src %s", r.Source)
	}
	if r.Priority != 0 {
		fmt.Fprintf(&b, " metric %d", r.Priority)
	}
	if m := r.Metrics.String(); m != "" {
		b.WriteString(" " + m)
	}
	return b.String()
}

// RouteSpec is a desired route: the metrics to set on the main-table route
// of Dst, created on Device when missing.
type RouteSpec struct {
	Dst *net.IPNet
	// Device is the interface to create a missing route on. When the route
	// exists and Device is set, the route must use that device.
	Device string
	// Source, when set, becomes the route's preferred source.
	Source net.IP
	// Metrics are merged into the route's metrics (MergeMetrics).
	Metrics RouteMetrics
}

// ParseDestination parses a CIDR (or a bare address, taken as a host route)
// into its canonical prefix, IPv4 in 4-byte form.
func ParseDestination(s string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("invalid destination %q: %w", s, err)
		}
		n = hostNet(ip)
	}
	return canonicalNet(n), nil
}

func hostNet(ip net.IP) *net.IPNet {
	if v4 := ip.To4(); v4 != nil {
		return &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}
	}
	return &net.IPNet{IP: ip.To16(), Mask: net.CIDRMask(128, 128)}
}

func canonicalNet(n *net.IPNet) *net.IPNet {
	ones, bits := n.Mask.Size()
	ip := n.IP.Mask(n.Mask)
	if bits == 32 {
		ip = ip.To4()
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(ones, bits)}
}

func family(n *net.IPNet) uint8 {
	if n.IP.To4() != nil && len(n.Mask) == net.IPv4len {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func addrBytes(ip net.IP, fam uint8) []byte {
	if fam == unix.AF_INET {
		return ip.To4()
	}
	return ip.To16()
}

// ReadRoute returns the main-table route whose prefix is exactly dst (not a
// longest-prefix lookup), with TOS 0. If several such routes differ only by
// priority, the one in use (lowest priority value) is returned. The error
// wraps ErrRouteNotFound when there is none.
func (h *Handle) ReadRoute(dst *net.IPNet) (*Route, error) {
	if dst == nil {
		return nil, fmt.Errorf("read route: nil destination")
	}
	dst = canonicalNet(dst)
	t, err := h.readTable(family(dst))
	if err != nil {
		return nil, err
	}
	if r := t.Lookup(dst); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("route %s: %w", dst, ErrRouteNotFound)
}

// RouteTable is one dump of the main routing table: for each destination
// prefix, the route the kernel would use (lowest priority), device names
// resolved.
type RouteTable struct {
	byDst map[string]*Route
}

// Lookup returns the route of exactly dst, or nil.
func (t *RouteTable) Lookup(dst *net.IPNet) *Route {
	return t.byDst[canonicalNet(dst).String()]
}

// Snapshot records the route of dst (or its absence) as SnapshotRoute would.
func (t *RouteTable) Snapshot(dst *net.IPNet) RouteSnapshot {
	if r := t.Lookup(dst); r != nil {
		return RouteSnapshot{Dst: r.Dst, Route: r}
	}
	return RouteSnapshot{Dst: canonicalNet(dst)}
}

// ReadRouteTable dumps the IPv4 and IPv6 main tables once.
func (h *Handle) ReadRouteTable() (*RouteTable, error) {
	t := &RouteTable{byDst: map[string]*Route{}}
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		ft, err := h.readTable(fam)
		if err != nil {
			return nil, err
		}
		maps.Copy(t.byDst, ft.byDst)
	}
	return t, nil
}

func (h *Handle) readTable(fam uint8) (*RouteTable, error) {
	msgs, err := execute(h.route, unix.NETLINK_ROUTE, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
		req.AddData(rawData(rtmsgBytes(unix.RtMsg{Family: fam})))
		return req
	}, unix.RTM_NEWROUTE)
	if err != nil {
		return nil, fmt.Errorf("dump routes: %w", err)
	}
	t := &RouteTable{byDst: map[string]*Route{}}
	names := map[int]string{}
	for _, m := range msgs {
		r, err := parseRoute(m)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Table != unix.RT_TABLE_MAIN || r.hdr.Tos != 0 || r.hdr.Src_len != 0 ||
			r.hdr.Flags&unix.RTM_F_CLONED != 0 {
			continue
		}
		key := r.Dst.String()
		if best := t.byDst[key]; best != nil && best.Priority <= r.Priority {
			continue
		}
		if r.LinkIndex > 0 {
			name, ok := names[r.LinkIndex]
			if !ok {
				if l, err := h.link.LinkByIndex(r.LinkIndex); err == nil {
					name = l.Attrs().Name
				}
				names[r.LinkIndex] = name
			}
			r.Device = name
		}
		t.byDst[key] = r
	}
	return t, nil
}

func rtmsgBytes(m unix.RtMsg) []byte {
	b := make([]byte, unix.SizeofRtMsg)
	b[0], b[1], b[2], b[3] = m.Family, m.Dst_len, m.Src_len, m.Tos
	b[4], b[5], b[6], b[7] = m.Table, m.Protocol, m.Scope, m.Type
	nativeEndian.PutUint32(b[8:], m.Flags)
	return b
}

// parseRoute decodes an RTM_NEWROUTE payload; nil for a family other than
// IPv4/IPv6.
func parseRoute(b []byte) (*Route, error) {
	if len(b) < unix.SizeofRtMsg {
		return nil, fmt.Errorf("short rtmsg: %d bytes", len(b))
	}
	hdr := unix.RtMsg{
		Family: b[0], Dst_len: b[1], Src_len: b[2], Tos: b[3],
		Table: b[4], Protocol: b[5], Scope: b[6], Type: b[7],
		Flags: nativeEndian.Uint32(b[8:12]),
	}
	bits := 32
	switch hdr.Family {
	case unix.AF_INET:
	case unix.AF_INET6:
		bits = 128
	default:
		return nil, nil
	}
	attrs, err := parseAttrs(b[unix.SizeofRtMsg:])
	if err != nil {
		return nil, fmt.Errorf("parse route attributes: %w", err)
	}
	r := &Route{
		Table: uint32(hdr.Table), Protocol: hdr.Protocol, Scope: hdr.Scope, Type: hdr.Type, hdr: hdr,
		raw: append([]byte(nil), b...),
		Dst: &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(int(hdr.Dst_len), bits)},
	}
	for _, a := range attrs {
		switch a.Type {
		case unix.RTA_DST:
			r.Dst.IP = net.IP(append([]byte(nil), a.Value...))
		case unix.RTA_TABLE:
			if v, ok := u32(a.Value); ok {
				r.Table = v
			}
		case unix.RTA_OIF:
			if v, ok := u32(a.Value); ok {
				r.LinkIndex = int(v)
			}
		case unix.RTA_GATEWAY:
			r.Gateway = net.IP(append([]byte(nil), a.Value...))
		case unix.RTA_PREFSRC:
			r.Source = net.IP(append([]byte(nil), a.Value...))
		case unix.RTA_PRIORITY:
			if v, ok := u32(a.Value); ok {
				r.Priority = v
			}
		case unix.RTA_METRICS:
			if r.Metrics, err = decodeMetrics(a.Value); err != nil {
				return nil, fmt.Errorf("route %s: %w", r.Dst, err)
			}
		}
		if keptAttrs[a.Type] {
			r.attrs = append(r.attrs, attr{Type: a.Type, Value: append([]byte(nil), a.Value...)})
		}
	}
	r.Dst = canonicalNet(r.Dst)
	return r, nil
}

// sanitizeMultipath clears dump-only nexthop flags (dead, linkdown,
// offload...) that the kernel refuses on input; only onlink is kept.
func sanitizeMultipath(v []byte) []byte {
	out := append([]byte(nil), v...)
	for off := 0; off+unix.SizeofRtNexthop <= len(out); {
		l := int(nativeEndian.Uint16(out[off:]))
		out[off+2] &= unix.RTNH_F_ONLINK
		if l < unix.SizeofRtNexthop {
			break
		}
		off += (l + 3) &^ 3
	}
	return out
}

// routeMessage builds an RTM_NEWROUTE / RTM_DELROUTE request for r with the
// given metrics (nil: no RTA_METRICS).
func routeMessage(msgType, flags int, r *Route, metrics *RouteMetrics) func() *nl.NetlinkRequest {
	hdr := r.hdr
	hdr.Flags &= unix.RTNH_F_ONLINK
	var body []byte
	body = append(body, rtmsgBytes(hdr)...)
	for _, a := range r.attrs {
		v := a.Value
		if a.Type == unix.RTA_MULTIPATH {
			v = sanitizeMultipath(v)
		}
		body = append(body, encodeAttr(a.Type, v)...)
	}
	if metrics != nil {
		if mx := encodeMetrics(*metrics); len(mx) > 0 {
			body = append(body, encodeAttr(unix.RTA_METRICS, mx)...)
		}
	}
	return func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(msgType, flags|unix.NLM_F_ACK)
		req.AddData(rawData(body))
		return req
	}
}

// withSource returns a copy of r's attributes with RTA_PREFSRC set to src.
func (r *Route) withSource(src net.IP) *Route {
	c := *r
	c.attrs = nil
	fam := r.hdr.Family
	for _, a := range r.attrs {
		if a.Type != unix.RTA_PREFSRC {
			c.attrs = append(c.attrs, a)
		}
	}
	c.attrs = append(c.attrs, attr{Type: unix.RTA_PREFSRC, Value: addrBytes(src, fam)})
	c.Source = src
	return &c
}

// sameDefinition reports whether a and b would be written as the same route
// (header, kept attributes and metrics).
func sameDefinition(a, b *Route) bool {
	ha, hb := a.hdr, b.hdr
	ha.Flags &= unix.RTNH_F_ONLINK
	hb.Flags &= unix.RTNH_F_ONLINK
	if ha != hb || len(a.attrs) != len(b.attrs) || !a.Metrics.Equal(b.Metrics) {
		return false
	}
	for i := range a.attrs {
		if a.attrs[i].Type != b.attrs[i].Type || !bytes.Equal(a.attrs[i].Value, b.attrs[i].Value) {
			return false
		}
	}
	return true
}

// newRoute builds the definition of a route to create for spec.
func (h *Handle) newRoute(spec RouteSpec) (*Route, error) {
	if spec.Device == "" {
		return nil, fmt.Errorf("route %s: no route in the main table and no device to create it on: %w", spec.Dst, ErrRouteNotFound)
	}
	link, err := h.link.LinkByName(spec.Device)
	if err != nil {
		return nil, fmt.Errorf("route %s: device %q: %w", spec.Dst, spec.Device, err)
	}
	fam := family(spec.Dst)
	ones, _ := spec.Dst.Mask.Size()
	r := &Route{
		Dst: spec.Dst, Table: unix.RT_TABLE_MAIN, LinkIndex: link.Attrs().Index, Device: spec.Device,
		Protocol: unix.RTPROT_STATIC, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
		hdr: unix.RtMsg{
			Family: fam, Dst_len: uint8(ones), Table: unix.RT_TABLE_MAIN,
			Protocol: unix.RTPROT_STATIC, Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST,
		},
	}
	if ones > 0 {
		r.attrs = append(r.attrs, attr{Type: unix.RTA_DST, Value: addrBytes(spec.Dst.IP, fam)})
	}
	r.attrs = append(r.attrs,
		attr{Type: unix.RTA_TABLE, Value: u32bytes(unix.RT_TABLE_MAIN)},
		attr{Type: unix.RTA_OIF, Value: u32bytes(uint32(link.Attrs().Index))})
	if spec.Source != nil {
		r = r.withSource(spec.Source)
	}
	return r, nil
}

// RouteSnapshot records a destination's main-table route, or its absence
// (Route nil), so that RestoreRoute can put it back exactly.
type RouteSnapshot struct {
	Dst   *net.IPNet
	Route *Route
}

// RouteChange reports what ApplyRoute, RestoreRoute or DeleteRouteMetrics
// did.
type RouteChange struct {
	// Before is the state before the call; pass it to RestoreRoute to undo.
	Before RouteSnapshot
	// After is the route read back after the call, nil if there is none.
	After *Route
	// Created is true when the route did not exist and was created.
	Created bool
	// Deleted is true when the route was deleted.
	Deleted bool
	// Changed is true when anything was written to the kernel.
	Changed bool
	// FlushedTCPMetrics is the number of tcp_metrics cache entries removed.
	FlushedTCPMetrics int
}

// SnapshotRoute records the main-table route of dst, or its absence.
func (h *Handle) SnapshotRoute(dst *net.IPNet) (RouteSnapshot, error) {
	r, err := h.ReadRoute(dst)
	if errors.Is(err, ErrRouteNotFound) {
		return RouteSnapshot{Dst: canonicalNet(dst)}, nil
	}
	if err != nil {
		return RouteSnapshot{}, err
	}
	return RouteSnapshot{Dst: r.Dst, Route: r}, nil
}

// ApplyRoute makes the main-table route of spec.Dst carry spec.Metrics:
// it reads the route, merges spec.Metrics into its metrics (MergeMetrics,
// keeping every metric spec does not set) and, if that changes anything,
// replaces the route in one RTM_NEWROUTE carrying all metrics and a single
// RTAX_LOCK mask; every other attribute of the route (gateway, protocol,
// priority, ...) is written back unchanged. A missing route is created on
// spec.Device (scope link, protocol static); without a device that is an
// error. After a write, the tcp_metrics cache entries of spec.Dst are
// flushed so that new connections see the new values.
//
// The returned change is filled as far as the call got, also on error;
// RestoreRoute(change.Before) undoes it. The read-modify-write is not atomic
// against other writers of the same route: callers serialize their own.
func (h *Handle) ApplyRoute(spec RouteSpec) (RouteChange, error) {
	if spec.Dst == nil {
		return RouteChange{}, fmt.Errorf("apply route: nil destination")
	}
	before, err := h.SnapshotRoute(spec.Dst)
	if err != nil {
		return RouteChange{}, err
	}
	ch, err := h.applyFrom(spec, before)
	if err != nil || !ch.Changed {
		return ch, err
	}
	return h.finishChange(ch, canonicalNet(spec.Dst))
}

// ApplyRoutes applies many routes with one dump of the routing table and one
// tcp_metrics flush at the end, instead of a dump, read-back and flush per
// route: for a vehicle with a hundred peers this is what keeps an apply in
// milliseconds. It does not read routes back; callers verify with
// ReadRouteTable. Changes made before an error are returned for undo.
func (h *Handle) ApplyRoutes(specs []RouteSpec) ([]RouteChange, error) {
	table, err := h.ReadRouteTable()
	if err != nil {
		return nil, err
	}
	changes := make([]RouteChange, 0, len(specs))
	var changed []*net.IPNet
	for _, spec := range specs {
		if spec.Dst == nil {
			return changes, fmt.Errorf("apply route: nil destination")
		}
		ch, err := h.applyFrom(spec, table.Snapshot(spec.Dst))
		changes = append(changes, ch)
		if ch.Changed {
			changed = append(changed, canonicalNet(spec.Dst))
		}
		if err != nil {
			return changes, err
		}
	}
	if _, err := h.FlushTCPMetrics(changed...); err != nil {
		return changes, fmt.Errorf("routes changed, but: %w", err)
	}
	return changes, nil
}

// applyFrom writes spec over the route recorded in before (no read-back, no
// flush).
func (h *Handle) applyFrom(spec RouteSpec, before RouteSnapshot) (RouteChange, error) {
	spec.Dst = canonicalNet(spec.Dst)
	if err := spec.Metrics.Validate(); err != nil {
		return RouteChange{}, fmt.Errorf("route %s: %w", spec.Dst, err)
	}
	if spec.Source != nil && family(hostNet(spec.Source)) != family(spec.Dst) {
		return RouteChange{}, fmt.Errorf("route %s: source %s is of another address family", spec.Dst, spec.Source)
	}
	ch := RouteChange{Before: before}
	var write *Route
	var err error
	flags := unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	if cur := before.Route; cur == nil {
		if write, err = h.newRoute(spec); err != nil {
			return ch, err
		}
		write.Metrics = MergeMetrics(RouteMetrics{}, spec.Metrics)
		flags = unix.NLM_F_CREATE | unix.NLM_F_EXCL
		ch.Created = true
	} else {
		if spec.Device != "" && cur.Device != spec.Device {
			return ch, fmt.Errorf("route %s uses device %q, not %q", spec.Dst, cur.Device, spec.Device)
		}
		write = cur
		if spec.Source != nil && !spec.Source.Equal(cur.Source) {
			write = cur.withSource(spec.Source)
		}
		c := *write
		c.Metrics = MergeMetrics(cur.Metrics, spec.Metrics)
		write = &c
		if sameDefinition(write, cur) {
			ch.After = cur
			return ch, nil
		}
	}
	if _, err := execute(h.route, unix.NETLINK_ROUTE, routeMessage(unix.RTM_NEWROUTE, flags, write, &write.Metrics), 0); err != nil {
		ch.Created = false
		return ch, fmt.Errorf("write route %s %s: %w", spec.Dst, write.Metrics, err)
	}
	ch.Changed = true
	return ch, nil
}

// finishChange reads the route back and flushes tcp_metrics for dst.
func (h *Handle) finishChange(ch RouteChange, dst *net.IPNet) (RouteChange, error) {
	after, err := h.ReadRoute(dst)
	switch {
	case errors.Is(err, ErrRouteNotFound):
	case err != nil:
		return ch, fmt.Errorf("read back route %s: %w", dst, err)
	default:
		ch.After = after
	}
	n, err := h.FlushTCPMetrics(dst)
	ch.FlushedTCPMetrics = n
	if err != nil {
		return ch, fmt.Errorf("route %s changed, but: %w", dst, err)
	}
	return ch, nil
}

// RestoreRoute puts back the route recorded in s: it rewrites the recorded
// route exactly (attributes and metrics) if the current one differs, or
// deletes the route of s.Dst if s recorded its absence (undoing a creation).
// tcp_metrics entries of s.Dst are flushed after a change.
func (h *Handle) RestoreRoute(s RouteSnapshot) (RouteChange, error) {
	if s.Dst == nil {
		return RouteChange{}, fmt.Errorf("restore route: nil destination")
	}
	dst := canonicalNet(s.Dst)
	before, err := h.SnapshotRoute(dst)
	if err != nil {
		return RouteChange{}, err
	}
	ch := RouteChange{Before: before}
	cur := before.Route
	switch {
	case s.Route == nil && cur == nil:
		return ch, nil
	case s.Route == nil:
		if _, err := execute(h.route, unix.NETLINK_ROUTE, routeMessage(unix.RTM_DELROUTE, 0, cur, nil), 0); err != nil {
			return ch, fmt.Errorf("delete route %s: %w", dst, err)
		}
		ch.Deleted = true
	case cur != nil && sameDefinition(cur, s.Route):
		ch.After = cur
		return ch, nil
	default:
		flags := unix.NLM_F_CREATE | unix.NLM_F_REPLACE
		if _, err := execute(h.route, unix.NETLINK_ROUTE, routeMessage(unix.RTM_NEWROUTE, flags, s.Route, &s.Route.Metrics), 0); err != nil {
			return ch, fmt.Errorf("restore route %s: %w", dst, err)
		}
		ch.Created = cur == nil
	}
	ch.Changed = true
	return h.finishChange(ch, dst)
}

// DeleteRouteMetrics removes from the main-table route of dst the metrics
// that which sets (values are not looked at) and their lock bits, keeping
// everything else; see RemoveMetrics. tcp_metrics entries of dst are flushed
// after a change.
func (h *Handle) DeleteRouteMetrics(dst *net.IPNet, which RouteMetrics) (RouteChange, error) {
	if dst == nil {
		return RouteChange{}, fmt.Errorf("delete route metrics: nil destination")
	}
	cur, err := h.ReadRoute(dst)
	if err != nil {
		return RouteChange{}, err
	}
	ch := RouteChange{Before: RouteSnapshot{Dst: cur.Dst, Route: cur}}
	c := *cur
	c.Metrics = RemoveMetrics(cur.Metrics, which)
	if sameDefinition(&c, cur) {
		ch.After = cur
		return ch, nil
	}
	flags := unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	if _, err := execute(h.route, unix.NETLINK_ROUTE, routeMessage(unix.RTM_NEWROUTE, flags, &c, &c.Metrics), 0); err != nil {
		return ch, fmt.Errorf("write route %s: %w", cur.Dst, err)
	}
	ch.Changed = true
	return h.finishChange(ch, cur.Dst)
}
