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

// Package kernel is the node agent's low-level kernel layer: it reads and
// writes per-route TCP metrics, the tcp_metrics cache, TCP socket state,
// sysctls and interface settings of one Linux network namespace, all through
// netlink, ethtool ioctls and /proc (never by running ip, ss or ethtool).
//
// Every operation goes through a [Handle], bound to a network namespace when
// it is created: [NewHandle] for the caller's own namespace, [NewHandleAt] for
// another one. Netlink and ethtool sockets are opened inside that namespace,
// so they work from any goroutine; reads of /proc/sys and /proc/net, which the
// kernel resolves against the calling thread's namespace, run on a dedicated
// OS thread moved into the namespace ([DoInNetns]).
//
// # Route metrics
//
// [RouteMetrics] is the content of a route's RTA_METRICS attribute. The
// package encodes and decodes it itself instead of using the fields of
// github.com/vishvananda/netlink's Route: that library sends one RTAX_LOCK
// attribute per locked metric (the kernel keeps only the last one, so
// "cwnd lock 30 rto_min lock 10ms" silently loses a lock) and decodes the lock
// mask with ==. Here the whole lock mask (bit 1<<RTAX_x) travels in a single
// RTAX_LOCK attribute.
//
// The kernel replaces a route's whole metric set on RTM_NEWROUTE with
// NLM_F_REPLACE, so [Handle.ApplyRoute] reads the route, merges the desired
// metrics into the ones present ([MergeMetrics]; metrics it does not manage,
// such as features or window, are kept) and writes everything in one
// request. Routes not named are never touched.
//
// Kernel behavior worth knowing (Linux 6.x):
//
//   - A route's rto_min is honored only when its lock bit is set, and cwnd
//     is a clamp only when locked; the agent's conversion from the API
//     (node-agent/agent) sets both locks.
//   - A metric whose value is 0 is not stored: "quickack 0" reads back as no
//     quickack at all. [DiffMetrics] treats absent and 0 as equal.
//   - New connections take cwnd lock, ssthresh and reordering from the
//     tcp_metrics cache entry of the destination, not from the route. An
//     entry is created from the route when a connection to that destination
//     closes cleanly, and then keeps the route's values of that moment for an
//     hour. So after a change the entries must be flushed
//     ([Handle.FlushTCPMetrics], which ApplyRoute does when it writes), or
//     new connections keep the old values. And the first connection after a
//     flush finds no entry and runs unclamped (its clean close creates the
//     entry, and the connections after it are clamped):
//     [Handle.PrimeTCPMetrics] makes that first connection itself, to a
//     port listening on the peer, and reads the entry back: a connection
//     opened under the old route that finishes closing between the flush
//     and the prime creates the entry from the route it cached, the old
//     one, so the entry is flushed and primed again until it carries the
//     route's locked values. initcwnd, initrwnd, rto_min, quickack,
//     congctl, advmss and mtu are read from the route by every connection.
//   - A route's congctl may name an algorithm that is not in
//     net.ipv4.tcp_allowed_congestion_control (e.g. cubic), which a
//     namespace cannot make its default; an algorithm the kernel lacks is
//     refused with EINVAL. A kernel with modules (Debian's, NVIDIA's L4T)
//     first tries to load tcp_<name>, for a writer with CAP_NET_ADMIN, as
//     it does for setsockopt(TCP_CONGESTION): an algorithm missing from
//     net.ipv4.tcp_available_congestion_control may still be accepted
//     ([Handle.LoadCongestionControl] asks for it without a route).
//   - ssthresh from a route is ignored while net.ipv4.tcp_no_ssthresh_metrics_save
//     is 1 (the default); see [Handle.SsthreshEffective]. Where it is used
//     (that sysctl 0, or absent as on 4.9) it holds only when locked:
//     unlocked, each connection's close writes its learned ssthresh into the
//     tcp_metrics entry and the next connection starts from that. The
//     agent's conversion locks it.
//   - The operational state of a link follows its carrier late (see
//     [InterfaceState.Settled]): a state read right after a change of the
//     link or of its peer is read with [Handle.WaitInterface].
//
// # Features
//
// What a kernel provides is learned by trying it, not from its version
// ([Handle.ProbeFeatures]): the vehicles run NVIDIA's 4.9, 5.10 and 5.15
// kernels, which backport. Which tcp_info counters a kernel reports follows
// from the length of its struct tcp_info ([TCPInfoCounters]).
//
// # Namespaces and sysctls
//
// Some sysctls are global: the kernel keeps one value for every namespace
// and registers them in the initial namespace only. A non-initial
// namespace lacks them (net.core.netdev_*; net.core.rmem_max, wmem_max,
// rmem_default and wmem_default on 5.10 and 6.1; on 4.9 also
// net.ipv4.tcp_rmem, tcp_wmem, tcp_mem, tcp_congestion_control,
// tcp_available_congestion_control and most other tcp_*) or shows the
// initial namespace's value read-only (net.core.rmem_max & co on 6.18). A
// handle on a namespace other than the agent's own tells such a sysctl
// from a missing one ([Handle.CheckSysctlWritable], [ErrNotPerNamespace]),
// and the agent refuses a spec that names one before changing anything.
// net.core.somaxconn is per namespace, and so are the net.ipv4.tcp_* the
// tests write (tcp_rmem, tcp_wmem, tcp_no_metrics_save,
// tcp_congestion_control) on the 5.10, 6.1 and 6.18 kernels they run on.
package kernel
