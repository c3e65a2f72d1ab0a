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
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// linux/tcp_metrics.h, not in x/sys/unix.
const (
	tcpMetricsGenlName    = "tcp_metrics"
	tcpMetricsGenlVersion = 1

	tcpMetricsCmdGet = 1
	tcpMetricsCmdDel = 2

	tcpMetricsAttrAddrIPv4  = 1
	tcpMetricsAttrAddrIPv6  = 2
	tcpMetricsAttrAge       = 3 // u64 msecs
	tcpMetricsAttrVals      = 6 // nested, type = TCP_METRIC_x + 1
	tcpMetricsAttrSaddrIPv4 = 11
	tcpMetricsAttrSaddrIPv6 = 12

	tcpMetricRTT        = 0 // ms
	tcpMetricRTTVar     = 1 // ms
	tcpMetricSsthresh   = 2
	tcpMetricCwnd       = 3
	tcpMetricReordering = 4
	tcpMetricRTTUs      = 5
	tcpMetricRTTVarUs   = 6
)

// TCPMetricsEntry is one entry of the kernel's tcp_metrics cache (what
// `ip tcp_metrics show` prints): values learned from, or copied from the
// route into, past connections between Src and Dst.
type TCPMetricsEntry struct {
	Dst, Src net.IP
	// Age is the time since the entry was last updated.
	Age        time.Duration
	RTT        time.Duration // 0 when not cached
	RTTVar     time.Duration
	Ssthresh   uint32
	Cwnd       uint32
	Reordering uint32
}

func (e TCPMetricsEntry) String() string {
	return fmt.Sprintf("%s source %s age %s rtt %s rttvar %s ssthresh %d cwnd %d reordering %d",
		e.Dst, e.Src, e.Age, e.RTT, e.RTTVar, e.Ssthresh, e.Cwnd, e.Reordering)
}

// tcpMetricsFamily resolves (once) the generic netlink id of tcp_metrics.
func (h *Handle) tcpMetricsFamily() (uint16, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tmFam != 0 {
		return h.tmFam, nil
	}
	msgs, err := execute(h.genl, unix.NETLINK_GENERIC, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.GENL_ID_CTRL, 0)
		req.AddData(&nl.Genlmsg{Command: unix.CTRL_CMD_GETFAMILY, Version: 1})
		req.AddData(nl.NewRtAttr(unix.CTRL_ATTR_FAMILY_NAME, nl.ZeroTerminated(tcpMetricsGenlName)))
		return req
	}, 0)
	if err != nil {
		return 0, fmt.Errorf("resolve generic netlink family %q: %w", tcpMetricsGenlName, err)
	}
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		attrs, err := parseAttrs(m[nl.SizeofGenlmsg:])
		if err != nil {
			return 0, fmt.Errorf("resolve generic netlink family %q: %w", tcpMetricsGenlName, err)
		}
		for _, a := range attrs {
			if a.Type == unix.CTRL_ATTR_FAMILY_ID {
				if id, ok := u16(a.Value); ok {
					h.tmFam = id
					return id, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("resolve generic netlink family %q: no id in reply", tcpMetricsGenlName)
}

// ListTCPMetrics returns every tcp_metrics cache entry of the namespace.
func (h *Handle) ListTCPMetrics() ([]TCPMetricsEntry, error) {
	fam, err := h.tcpMetricsFamily()
	if err != nil {
		return nil, err
	}
	msgs, err := execute(h.genl, unix.NETLINK_GENERIC, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(int(fam), unix.NLM_F_DUMP)
		req.AddData(&nl.Genlmsg{Command: tcpMetricsCmdGet, Version: tcpMetricsGenlVersion})
		return req
	}, fam)
	if err != nil {
		return nil, fmt.Errorf("dump tcp_metrics: %w", err)
	}
	out := make([]TCPMetricsEntry, 0, len(msgs))
	for _, m := range msgs {
		if len(m) < nl.SizeofGenlmsg {
			continue
		}
		e, err := parseTCPMetrics(m[nl.SizeofGenlmsg:])
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func parseTCPMetrics(b []byte) (TCPMetricsEntry, error) {
	var e TCPMetricsEntry
	attrs, err := parseAttrs(b)
	if err != nil {
		return e, fmt.Errorf("parse tcp_metrics entry: %w", err)
	}
	for _, a := range attrs {
		switch a.Type {
		case tcpMetricsAttrAddrIPv4, tcpMetricsAttrAddrIPv6:
			e.Dst = net.IP(append([]byte(nil), a.Value...))
		case tcpMetricsAttrSaddrIPv4, tcpMetricsAttrSaddrIPv6:
			e.Src = net.IP(append([]byte(nil), a.Value...))
		case tcpMetricsAttrAge:
			if v, ok := u64(a.Value); ok {
				e.Age = time.Duration(v) * time.Millisecond
			}
		case tcpMetricsAttrVals:
			vals, err := parseAttrs(a.Value)
			if err != nil {
				return e, fmt.Errorf("parse tcp_metrics values: %w", err)
			}
			for _, v := range vals {
				x, ok := u32(v.Value)
				if !ok {
					continue
				}
				switch int(v.Type) - 1 {
				case tcpMetricRTTUs:
					e.RTT = time.Duration(x) * time.Microsecond
				case tcpMetricRTTVarUs:
					e.RTTVar = time.Duration(x) * time.Microsecond
				case tcpMetricRTT:
					if e.RTT == 0 {
						e.RTT = time.Duration(x) * time.Millisecond
					}
				case tcpMetricRTTVar:
					if e.RTTVar == 0 {
						e.RTTVar = time.Duration(x) * time.Millisecond
					}
				case tcpMetricSsthresh:
					e.Ssthresh = x
				case tcpMetricCwnd:
					e.Cwnd = x
				case tcpMetricReordering:
					e.Reordering = x
				}
			}
		}
	}
	return e, nil
}

// TCPMetricsFor returns the tcp_metrics cache entries whose destination
// address is within dst (one per source address).
func (h *Handle) TCPMetricsFor(dst *net.IPNet) ([]TCPMetricsEntry, error) {
	all, err := h.ListTCPMetrics()
	if err != nil {
		return nil, err
	}
	var out []TCPMetricsEntry
	for _, e := range all {
		if dst.Contains(e.Dst) && (e.Dst.To4() != nil) == (family(dst) == unix.AF_INET) {
			out = append(out, e)
		}
	}
	return out, nil
}

// FlushTCPMetrics removes the tcp_metrics cache entries of every address in
// the given prefixes (all source addresses) and returns how many it removed.
// Without the flush, new connections keep using the values an entry copied
// from the route when it was created (for up to an hour).
func (h *Handle) FlushTCPMetrics(dsts ...*net.IPNet) (int, error) {
	if len(dsts) == 0 {
		return 0, nil
	}
	entries, err := h.ListTCPMetrics()
	if err != nil {
		return 0, err
	}
	fam, err := h.tcpMetricsFamily()
	if err != nil {
		return 0, err
	}
	// One DEL per destination address removes it for all sources.
	seen := map[string]bool{}
	n := 0
	for _, e := range entries {
		var match bool
		for _, d := range dsts {
			if d != nil && d.Contains(e.Dst) && (e.Dst.To4() != nil) == (family(d) == unix.AF_INET) {
				match = true
				break
			}
		}
		if !match {
			continue
		}
		if !seen[e.Dst.String()] {
			seen[e.Dst.String()] = true
			if err := h.deleteTCPMetrics(fam, e.Dst); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

func (h *Handle) deleteTCPMetrics(fam uint16, dst net.IP) error {
	_, err := execute(h.genl, unix.NETLINK_GENERIC, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(int(fam), unix.NLM_F_ACK)
		req.AddData(&nl.Genlmsg{Command: tcpMetricsCmdDel, Version: tcpMetricsGenlVersion})
		if v4 := dst.To4(); v4 != nil {
			req.AddData(nl.NewRtAttr(tcpMetricsAttrAddrIPv4, v4))
		} else {
			req.AddData(nl.NewRtAttr(tcpMetricsAttrAddrIPv6, dst.To16()))
		}
		return req
	}, 0)
	if errors.Is(err, unix.ESRCH) { // already gone
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete tcp_metrics entry %s: %w", dst, err)
	}
	return nil
}

// TCPMetricsWant is what a tcp_metrics entry created from a route carries
// for as long as it lives: the route's locked cwnd and ssthresh. The kernel
// copies them, with their locks, into a new entry (tcpm_suck_dst), and no
// closing connection changes a locked value afterwards. Zero means the
// route does not lock that metric, and it is not checked.
type TCPMetricsWant struct {
	Cwnd, Ssthresh uint32
}

// WantTCPMetrics returns what an entry created from a route with metrics m
// carries.
func WantTCPMetrics(m RouteMetrics) TCPMetricsWant {
	var w TCPMetricsWant
	if m.Cwnd != nil && m.Locked(unix.RTAX_CWND) {
		w.Cwnd = *m.Cwnd
	}
	if m.Ssthresh != nil && m.Locked(unix.RTAX_SSTHRESH) {
		w.Ssthresh = *m.Ssthresh
	}
	return w
}

// HeldBy reports whether entry e carries the wanted values.
func (w TCPMetricsWant) HeldBy(e TCPMetricsEntry) bool {
	return (w.Cwnd == 0 || e.Cwnd == w.Cwnd) && (w.Ssthresh == 0 || e.Ssthresh == w.Ssthresh)
}

func (w TCPMetricsWant) String() string {
	var parts []string
	if w.Cwnd != 0 {
		parts = append(parts, fmt.Sprintf("locked cwnd %d", w.Cwnd))
	}
	if w.Ssthresh != 0 {
		parts = append(parts, fmt.Sprintf("locked ssthresh %d", w.Ssthresh))
	}
	if len(parts) == 0 {
		return "no locked values"
	}
	return strings.Join(parts, ", ")
}

// ErrTCPMetricsUnclamped: a destination's tcp_metrics entry kept values
// other than its route's locked ones through every flush and prime.
var ErrTCPMetricsUnclamped = errors.New("tcp_metrics entry does not carry the route's locked values")

// PrimeAttempts bounds the flush-and-prime rounds of [Handle.PrimeTCPMetrics].
const PrimeAttempts = 4

// PrimeTCPMetrics makes the kernel create the tcp_metrics entry for addr's
// host from the current route, so that the route's locked cwnd (and
// ssthresh, reordering) applies to the very next connection: the kernel takes
// those from the cache entry only, and creates the entry when a connection
// to the destination closes cleanly. After a flush the first connection
// therefore runs without the clamp; priming closes that gap.
//
// It connects from the handle's namespace to addr (a listening port on the
// peer, e.g. its agent's probe port), from src if not nil, closes the
// connection at once and waits, until ctx is done, for the entry to appear.
// The peer only has to acknowledge the FIN; it need not close its side.
// Entries are per source address: prime once per source used.
//
// Then it reads the destination's entries back. Between the flush that
// preceded the call and the priming connection, a connection that was
// opened under the old route and finishes its close then (its last ACK
// late, e.g. on a loaded link) creates the entry from the route it
// cached, the old one: without its lock, so connections to the peer would
// run unclamped until the entry expires, an hour later; an existing entry
// is not made again. So while an entry of the destination does not carry
// want, PrimeTCPMetrics flushes the destination and primes again, up to
// PrimeAttempts rounds in all, and otherwise returns an error wrapping
// [ErrTCPMetricsUnclamped] that names the entry. It returns how many times
// it found an entry without want and made it again. The entry does not show
// its locks: an unlocked entry whose learned values happen to equal want
// passes.
func (h *Handle) PrimeTCPMetrics(ctx context.Context, addr *net.TCPAddr, src net.IP, want TCPMetricsWant) (repairs int, err error) {
	if addr == nil || addr.IP == nil {
		return 0, fmt.Errorf("prime tcp_metrics: no address")
	}
	dst := hostNet(addr.IP)
	for round := 1; ; round++ {
		if err := h.primeOnce(ctx, addr, src); err != nil {
			return round - 1, err
		}
		entries, err := h.TCPMetricsFor(dst)
		if err != nil {
			return round - 1, fmt.Errorf("prime tcp_metrics for %s: %w", addr, err)
		}
		var stale []string
		for _, e := range entries {
			if !want.HeldBy(e) {
				stale = append(stale, e.String())
			}
		}
		if len(stale) == 0 {
			return round - 1, nil
		}
		if round == PrimeAttempts {
			return round, fmt.Errorf("prime tcp_metrics for %s: %w (%s) after %d flush-and-prime rounds: %s",
				addr, ErrTCPMetricsUnclamped, want, round, strings.Join(stale, "; "))
		}
		fam, err := h.tcpMetricsFamily()
		if err != nil {
			return round, err
		}
		if err := h.deleteTCPMetrics(fam, addr.IP); err != nil {
			return round, fmt.Errorf("prime tcp_metrics for %s: %w", addr, err)
		}
	}
}

// primeOnce connects to addr, closes, and waits for the entry of the
// connection's source and addr's host to exist.
func (h *Handle) primeOnce(ctx context.Context, addr *net.TCPAddr, src net.IP) error {
	var c net.Conn
	err := h.Do(func() error {
		d := net.Dialer{}
		if src != nil {
			d.LocalAddr = &net.TCPAddr{IP: src}
		}
		var err error
		c, err = d.DialContext(ctx, "tcp", addr.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("prime tcp_metrics for %s: %w", addr, err)
	}
	local := c.LocalAddr().(*net.TCPAddr).IP
	if err := c.Close(); err != nil {
		return fmt.Errorf("prime tcp_metrics for %s: close: %w", addr, err)
	}
	dst := hostNet(addr.IP)
	for {
		entries, err := h.TCPMetricsFor(dst)
		if err != nil {
			return fmt.Errorf("prime tcp_metrics for %s: %w", addr, err)
		}
		for _, e := range entries {
			if e.Src.Equal(local) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prime tcp_metrics for %s: no entry appeared: %w", addr, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
