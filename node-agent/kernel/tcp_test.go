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
	"net"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const transferBytes = 4 << 20

// useReno makes reno the namespaces' default congestion control: in slow
// start on a loss-free veth its cwnd grows far past 30 within a few MB, so
// an unclamped connection is told apart from a clamped one. (BBR sizes cwnd
// from the tiny veth BDP. cubic cannot be a namespace default: only
// net.ipv4.tcp_allowed_congestion_control ones can.)
func useReno(t *testing.T, nss ...*testNS) {
	t.Helper()
	for _, ns := range nss {
		got, err := ns.h.WriteSysctl("net.ipv4.tcp_congestion_control", "reno")
		if err != nil || got != "reno" {
			t.Fatalf("set reno in %s: %q, %v", ns.name, got, err)
		}
	}
}

// writeRouteNoFlush writes the route like ApplyRoute but skips the
// tcp_metrics flush, to show what the flush is for.
func writeRouteNoFlush(t *testing.T, h *Handle, spec RouteSpec) {
	t.Helper()
	r, err := h.newRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	r.Metrics = spec.Metrics
	flags := unix.NLM_F_CREATE | unix.NLM_F_REPLACE
	if _, err := execute(h.route, unix.NETLINK_ROUTE, routeMessage(unix.RTM_NEWROUTE, flags, r, &r.Metrics), 0); err != nil {
		t.Fatal(err)
	}
}

func metricsCount(t *testing.T, ns *testNS, dst *net.IPNet) int {
	t.Helper()
	e, err := ns.h.TCPMetricsFor(dst)
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

// TestCwndClampLimitsNewConnections proves on real connections (client in
// namespace A, sink in B, a few MB each) that the route's cwnd lock clamps
// snd_cwnd once tcp_metrics is flushed, that it does not without the clamp,
// and why both the flush and a first (priming) connection are needed.
func TestCwndClampLimitsNewConnections(t *testing.T) {
	p := newPair(t)
	useReno(t, p.A, p.B)
	srv := startServer(t, p.B, p.addrB)
	dst := p.hostB()

	base := transfer(t, p, srv, transferBytes)
	t.Logf("no clamp: snd_cwnd %d (cc %s, rtt %s)", base.SndCwnd, base.CongestionControl, base.RTT)
	if base.SndCwnd <= 30 {
		t.Fatalf("without a clamp snd_cwnd stayed at %d <= 30: the test cannot tell a clamp apart", base.SndCwnd)
	}
	if base.CongestionControl != "reno" {
		t.Errorf("cc %q, want reno", base.CongestionControl)
	}
	if n := metricsCount(t, p.A, dst); n != 1 {
		t.Fatalf("%d tcp_metrics entries for %s after a closed connection, want 1", n, dst)
	}

	// ApplyRoute creates the /32 with the clamp and flushes the entry. The
	// first connection after a flush finds no entry and is not clamped; its
	// clean close creates the entry from the route, and later connections
	// are clamped.
	spec := seedSpec(t, p)
	ch, err := p.A.h.ApplyRoute(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Created || ch.FlushedTCPMetrics != 1 || metricsCount(t, p.A, dst) != 0 {
		t.Fatalf("apply: created %v, flushed %d entries, %d left", ch.Created, ch.FlushedTCPMetrics, metricsCount(t, p.A, dst))
	}
	first := transfer(t, p, srv, transferBytes)
	t.Logf("first connection after flush: snd_cwnd %d", first.SndCwnd)
	if first.SndCwnd <= 30 {
		t.Errorf("first connection after a flush was clamped (snd_cwnd %d): the kernel no longer needs priming, update the package doc", first.SndCwnd)
	}
	for i := 2; i <= 3; i++ {
		c := transfer(t, p, srv, transferBytes)
		t.Logf("connection %d after flush: snd_cwnd %d", i, c.SndCwnd)
		if c.SndCwnd > 30 || c.SndCwnd == 0 {
			t.Errorf("connection %d after flush: snd_cwnd %d, want <= 30", i, c.SndCwnd)
		}
	}

	// Without a flush, an entry made before the clamp wins over the route.
	if rc, err := p.A.h.RestoreRoute(ch.Before); err != nil || !rc.Deleted {
		t.Fatalf("restore: %+v, %v", rc, err)
	}
	transfer(t, p, srv, transferBytes) // entry without lock
	writeRouteNoFlush(t, p.A.h, spec)
	stale := transfer(t, p, srv, transferBytes)
	t.Logf("clamp written, cache not flushed: snd_cwnd %d", stale.SndCwnd)
	if stale.SndCwnd <= 30 {
		t.Errorf("stale tcp_metrics entry: snd_cwnd %d, expected the kernel to ignore the unflushed clamp", stale.SndCwnd)
	}

	// Flush + prime: the very next connection is clamped.
	if n, err := p.A.h.FlushTCPMetrics(dst); err != nil || n != 1 {
		t.Fatalf("flush: %d, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.A.h.PrimeTCPMetrics(ctx, &net.TCPAddr{IP: p.addrB, Port: srv.port()}, nil, WantTCPMetrics(spec.Metrics)); err != nil {
		t.Fatal(err)
	}
	<-srv.closed // the priming connection
	primed := transfer(t, p, srv, transferBytes)
	t.Logf("first connection after flush+prime: snd_cwnd %d", primed.SndCwnd)
	if primed.SndCwnd > 30 || primed.SndCwnd == 0 {
		t.Errorf("after flush and prime: snd_cwnd %d, want <= 30", primed.SndCwnd)
	}

	// Restoring the snapshot of the route's absence removes the clamp (and
	// flushes): connections grow past 30 again from the second one.
	if _, err := p.A.h.RestoreRoute(RouteSnapshot{Dst: dst}); err != nil {
		t.Fatal(err)
	}
	transfer(t, p, srv, transferBytes)
	if again := transfer(t, p, srv, transferBytes); again.SndCwnd <= 30 {
		t.Errorf("after restore: snd_cwnd %d, want > 30", again.SndCwnd)
	}
}

// TestPerConnectionRouteMetrics: initcwnd, rto_min and congctl are taken
// from the route by every connection (no cache involved).
func TestPerConnectionRouteMetrics(t *testing.T) {
	p := newPair(t)
	useReno(t, p.A, p.B)
	srv := startServer(t, p.B, p.addrB)

	c := dial(t, p.A, p.addrB, srv.port())
	base := sockInfo(t, p.A, c)
	c.Close()
	t.Logf("default: snd_cwnd %d rto %s cc %s", base.SndCwnd, base.RTO, base.CongestionControl)
	if base.RTO < 200*time.Millisecond {
		t.Fatalf("default rto %s < 200ms", base.RTO)
	}

	spec := seedSpec(t, p)
	spec.Metrics.CongestionControl = "cubic" // allowed on a route although not as the netns default
	if _, err := p.A.h.ApplyRoute(spec); err != nil {
		t.Fatal(err)
	}
	c = dial(t, p.A, p.addrB, srv.port())
	got := sockInfo(t, p.A, c)
	t.Logf("route: snd_cwnd %d rto %s cc %s", got.SndCwnd, got.RTO, got.CongestionControl)
	if got.SndCwnd != 25 {
		t.Errorf("initial snd_cwnd %d, want initcwnd 25", got.SndCwnd)
	}
	if got.RTO >= 100*time.Millisecond {
		t.Errorf("rto %s with rto_min lock 10ms, want well under 200ms", got.RTO)
	}
	if got.CongestionControl != "cubic" {
		t.Errorf("cc %q, want route's cubic", got.CongestionControl)
	}
	if got.RTT <= 0 || got.State != "ESTABLISHED" || !got.HasInfo || got.SndMSS == 0 {
		t.Errorf("tcp_info: %+v", got)
	}
	gi := getsockoptTCPInfo(t, c)
	if time.Duration(gi.Rto)*time.Microsecond != got.RTO || gi.Snd_cwnd != got.SndCwnd {
		t.Errorf("getsockopt rto %dus cwnd %d, sock_diag %s %d", gi.Rto, gi.Snd_cwnd, got.RTO, got.SndCwnd)
	}
}

// TestTCPMetricsFlush: a closed connection leaves a cache entry; a prefix
// flush removes it, only in its own namespace.
func TestTCPMetricsFlush(t *testing.T) {
	p := newPair(t)
	srv := startServer(t, p.B, p.addrB)
	transfer(t, p, srv, 64<<10)

	entries, err := p.A.h.TCPMetricsFor(p.hostB())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !entries[0].Dst.Equal(p.addrB) || !entries[0].Src.Equal(p.addrA) || entries[0].RTT <= 0 {
		t.Fatalf("entries = %v", entries)
	}
	t.Logf("entry: %s", entries[0])
	// The server side has its own entry, in namespace B.
	if n := metricsCount(t, p.B, hostNet(p.addrA)); n != 1 {
		t.Fatalf("namespace B has %d entries for A", n)
	}

	n, err := p.A.h.FlushTCPMetrics(p.subnet)
	if err != nil || n != 1 {
		t.Fatalf("flush %s: %d, %v", p.subnet, n, err)
	}
	if n := metricsCount(t, p.A, p.subnet); n != 0 {
		t.Errorf("%d entries left after flush", n)
	}
	if n := metricsCount(t, p.B, hostNet(p.addrA)); n != 1 {
		t.Errorf("flush in A removed B's entry (%d left)", n)
	}
	// Flushing nothing is fine.
	if n, err := p.A.h.FlushTCPMetrics(p.hostB()); err != nil || n != 0 {
		t.Errorf("empty flush: %d, %v", n, err)
	}
}

// TestPrimeTCPMetricsPeerKeepsOpen: priming needs only the peer's ACK of
// the FIN, not its close.
func TestPrimeTCPMetricsPeerKeepsOpen(t *testing.T) {
	p := newPair(t)
	ln := listenIn(t, p.B, p.addrB)
	held := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			held <- c // never read, never closed until cleanup
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case c := <-held:
			c.Close()
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.A.h.PrimeTCPMetrics(ctx, ln.Addr().(*net.TCPAddr), p.addrA, TCPMetricsWant{}); err != nil {
		t.Fatal(err)
	}
	if n := metricsCount(t, p.A, p.hostB()); n != 1 {
		t.Errorf("%d entries after priming", n)
	}
	// Nothing listens on port 1: an error, not a hang.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if _, err := p.A.h.PrimeTCPMetrics(ctx2, &net.TCPAddr{IP: p.addrB, Port: 1}, nil, TCPMetricsWant{}); err == nil {
		t.Error("priming a closed port succeeded")
	}
}

// TestTCPCountersPerNamespace: counters are read from the namespace's own
// /proc/net tables.
func TestTCPCountersPerNamespace(t *testing.T) {
	p := newPair(t)
	idle := newTestNS(t)
	srv := startServer(t, p.B, p.addrB)
	before, err := p.A.h.ReadTCPCounters()
	if err != nil {
		t.Fatal(err)
	}
	transfer(t, p, srv, 1<<20)
	after, err := p.A.h.ReadTCPCounters()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Tcp.RetransSegs", "TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "Tcp.ActiveOpens", "Tcp.OutSegs"} {
		if _, ok := after.All[k]; !ok {
			t.Errorf("counter %s missing", k)
		}
	}
	if d := after.All["Tcp.ActiveOpens"] - before.All["Tcp.ActiveOpens"]; d != 1 {
		t.Errorf("ActiveOpens grew by %d in A, want 1", d)
	}
	if after.All["Tcp.OutSegs"] <= before.All["Tcp.OutSegs"] {
		t.Error("OutSegs did not grow")
	}
	if after.RetransSegs != uint64(after.All["Tcp.RetransSegs"]) {
		t.Error("RetransSegs field")
	}
	ic, err := idle.h.ReadTCPCounters()
	if err != nil {
		t.Fatal(err)
	}
	if ic.All["Tcp.ActiveOpens"] != 0 || ic.All["Tcp.OutSegs"] != 0 {
		t.Errorf("idle namespace counters: ActiveOpens %d OutSegs %d", ic.All["Tcp.ActiveOpens"], ic.All["Tcp.OutSegs"])
	}
}

// TestGuardCounters: the retransmission timeouts and D-SACK counters read
// through sock_diag are the socket's own (getsockopt TCP_INFO), and an
// outage of the path shows up in the timeouts.
func TestGuardCounters(t *testing.T) {
	p := newPair(t)
	srv := startServer(t, p.B, p.addrB)
	c := dial(t, p.A, p.addrB, srv.port())
	send(t, c, 16<<10)
	before := sockInfo(t, p.A, c)
	if !before.HasTotalRTO || !before.HasDSACK {
		t.Skipf("this kernel's tcp_info has no tcpi_total_rto/tcpi_dsack_dups (len < 242)")
	}
	// Drop everything B receives from A for a while: A's segments time out.
	rule := []string{"-p", "tcp", "-s", p.addrA.String(), "-j", "DROP"}
	ipt := func(op string) {
		t.Helper()
		out, err := exec.Command("ip", append([]string{"netns", "exec", p.B.name, "iptables", op, "INPUT"}, rule...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("iptables %s: %v: %s", op, err, out)
		}
	}
	ipt("-A")
	done := make(chan struct{})
	go func() { defer close(done); send(t, c, 64<<10) }()
	// The default rto_min 200ms: two or three timeouts in 1.5 s. On a
	// starved machine the writer may not even run in that time (seen at
	// load average 16: no segment sent during the outage), so the outage
	// lasts until sock_diag shows a timeout, at least 1.5 s and at most 15 s.
	start := time.Now()
	for time.Since(start) < 15*time.Second {
		time.Sleep(100 * time.Millisecond)
		if time.Since(start) >= 1500*time.Millisecond && sockInfo(t, p.A, c).TotalRTO > before.TotalRTO {
			break
		}
	}
	outage := time.Since(start).Round(100 * time.Millisecond)
	t.Logf("outage of %s", outage)
	ipt("-D")
	<-done
	var after TCPSocketInfo
	for deadline := time.Now().Add(10 * time.Second); ; {
		after = sockInfo(t, p.A, c)
		gi := getsockoptTCPInfo(t, c)
		if uint32(gi.Total_rto) == after.TotalRTO && gi.Dsack_dups == after.DSACKDups && gi.Total_retrans == after.TotalRetrans && after.Retrans == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sock_diag total_rto %d dsack %d retrans %d, getsockopt %d %d %d", after.TotalRTO, after.DSACKDups, after.TotalRetrans, gi.Total_rto, gi.Dsack_dups, gi.Total_retrans)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("before the outage: %d RTOs, %d retransmitted, %d D-SACKs; after: %d, %d, %d",
		before.TotalRTO, before.TotalRetrans, before.DSACKDups, after.TotalRTO, after.TotalRetrans, after.DSACKDups)
	if after.TotalRTO <= before.TotalRTO {
		t.Errorf("an outage of %s left total_rto at %d (was %d)", outage, after.TotalRTO, before.TotalRTO)
	}
}
