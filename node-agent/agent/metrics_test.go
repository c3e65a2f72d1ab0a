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
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/state"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestRevisionInfoFollowsTheCommittedSpec: nettune_agent_revision_info
// reports the profile revisions of the last-known-good spec at each scrape,
// nothing before the first commit, and every apply result starts at 0.
func TestRevisionInfoFollowsTheCommittedSpec(t *testing.T) {
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	NewMetrics(reg, "av-001-xavier-a", &Engine{Store: st})

	if got := gatherSeries(t, reg, "nettune_agent_revision_info"); len(got) != 0 {
		t.Fatalf("before any commit: %v, want no series", got)
	}
	assertSeries(t, reg, "nettune_agent_applies_total",
		`node="av-001-xavier-a",result="committed" 0`,
		`node="av-001-xavier-a",result="error" 0`,
		`node="av-001-xavier-a",result="refused" 0`,
		`node="av-001-xavier-a",result="rolled_back" 0`)

	// No routes: the TCP info part of the collector has nothing to read.
	commit := func(rev string, profiles ...v1alpha1.SourceProfile) {
		t.Helper()
		if err := st.Commit(v1alpha1.NodeNetTuningSpec{Revision: rev, Profiles: profiles}, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	commit("716b4e375b", v1alpha1.SourceProfile{Name: "xavier-lan", Revision: "xavier-lan-982cc13e75"},
		v1alpha1.SourceProfile{Name: "log-upload-wan", Revision: "log-upload-wan-0123456789"})
	assertSeries(t, reg, "nettune_agent_revision_info",
		`node="av-001-xavier-a",node_revision="716b4e375b",profile="log-upload-wan",revision="log-upload-wan-0123456789" 1`,
		`node="av-001-xavier-a",node_revision="716b4e375b",profile="xavier-lan",revision="xavier-lan-982cc13e75" 1`)

	// A new commit replaces the series: no stale revision is left behind.
	commit("2dcfacd537", v1alpha1.SourceProfile{Name: "xavier-lan", Revision: "xavier-lan-8bf34728cc"})
	assertSeries(t, reg, "nettune_agent_revision_info",
		`node="av-001-xavier-a",node_revision="2dcfacd537",profile="xavier-lan",revision="xavier-lan-8bf34728cc" 1`)
}

// gatherSeries renders every series of name as `k="v",... value`, labels
// sorted by name (as the client library keeps them), series sorted.
func gatherSeries(t *testing.T, g prometheus.Gatherer, name string) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			out = append(out, fmt.Sprintf("%s %g", strings.Join(ls, ","), v))
		}
	}
	sort.Strings(out)
	return out
}

func assertSeries(t *testing.T, g prometheus.Gatherer, name string, want ...string) {
	t.Helper()
	got := gatherSeries(t, g, name)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTCPMetricLabels: every nettune_tcp_* series carries, besides node and
// destination, the route's peer and profile, the revision of that profile in
// force, and the agent's vehicle and host (left out when not set), the labels
// of the probe's nettune_probe_latency_seconds; a new revision starts new
// series, and the old ones are gone.
func TestTCPMetricLabels(t *testing.T) {
	ns := newNS(t)
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Host: ns.h, Store: st}
	reg := prometheus.NewPedanticRegistry()
	NewMetricsFor(reg, MetricLabels{Node: "av-001-xavier-a", Vehicle: "av-001", Host: "xavier-a"}, e)
	bare := prometheus.NewPedanticRegistry()
	NewMetricsFor(bare, MetricLabels{Node: "av-001-xavier-a"}, e)

	commit := func(rev, xavierLAN string) {
		t.Helper()
		spec := v1alpha1.NodeNetTuningSpec{Revision: rev,
			Profiles: []v1alpha1.SourceProfile{{Name: "xavier-lan", Revision: xavierLAN}},
			Routes: []v1alpha1.NodeRoute{
				{Destination: "10.253.0.2/32", Peer: "xavier-b", Profile: "xavier-lan", Parameters: seed()},
				// Not rendered from a host pair, and its profile is not among
				// the spec's: no peer, no revision.
				{Destination: "10.253.1.0/24", Profile: "log-upload-wan", Parameters: seed()},
			}}
		if err := st.Commit(spec, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	commit("716b4e375b", "xavier-lan-982cc13e75")
	for _, name := range []string{"nettune_tcp_sockets", "nettune_tcp_retrans_segments_total"} {
		assertSeries(t, reg, name,
			`destination="10.253.0.2/32",host="xavier-a",node="av-001-xavier-a",peer="xavier-b",profile="xavier-lan",revision="xavier-lan-982cc13e75",vehicle="av-001" 0`,
			`destination="10.253.1.0/24",host="xavier-a",node="av-001-xavier-a",peer="",profile="log-upload-wan",revision="",vehicle="av-001" 0`)
		assertSeries(t, bare, name,
			`destination="10.253.0.2/32",node="av-001-xavier-a",peer="xavier-b",profile="xavier-lan",revision="xavier-lan-982cc13e75" 0`,
			`destination="10.253.1.0/24",node="av-001-xavier-a",peer="",profile="log-upload-wan",revision="" 0`)
	}
	// The vehicle is on the agent's other metrics too (the host is not).
	assertSeries(t, reg, "nettune_agent_revision_info",
		`node="av-001-xavier-a",node_revision="716b4e375b",profile="xavier-lan",revision="xavier-lan-982cc13e75",vehicle="av-001" 1`)
	if got := gatherSeries(t, reg, "nettune_agent_reverts_total"); len(got) != 1 || !strings.HasPrefix(got[0], `node="av-001-xavier-a",vehicle="av-001" `) {
		t.Errorf("nettune_agent_reverts_total: %v", got)
	}

	commit("2dcfacd537", "xavier-lan-8bf34728cc")
	assertSeries(t, reg, "nettune_tcp_retrans_segments_total",
		`destination="10.253.0.2/32",host="xavier-a",node="av-001-xavier-a",peer="xavier-b",profile="xavier-lan",revision="xavier-lan-8bf34728cc",vehicle="av-001" 0`,
		`destination="10.253.1.0/24",host="xavier-a",node="av-001-xavier-a",peer="",profile="log-upload-wan",revision="",vehicle="av-001" 0`)
}

// TestTCPCountersSurviveClosedSockets: the nettune_tcp_*_total counters
// add up what the sockets to the destination counted between scrapes, so
// they do not drop when a socket closes (a sum over the live sockets does),
// count a socket once however long it lives, and carry the route's labels.
func TestTCPCountersSurviveClosedSockets(t *testing.T) {
	p := newPair(t)
	sink := listenIn(t, p.B, p.addrB)
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var labels string // of the one series of each counter
	commit := func(rev, xavierLAN string) {
		t.Helper()
		if err := st.Commit(v1alpha1.NodeNetTuningSpec{Revision: rev,
			Profiles: []v1alpha1.SourceProfile{{Name: "xavier-lan", Revision: xavierLAN}},
			Routes:   []v1alpha1.NodeRoute{{Destination: p.dst(2), Peer: "xavier-b", Profile: "xavier-lan", Parameters: seed()}},
		}, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		labels = fmt.Sprintf(`destination=%q,host="xavier-a",node="av-001-xavier-a",peer="xavier-b",profile="xavier-lan",revision=%q,vehicle="av-001"`, p.dst(2), xavierLAN)
	}
	commit("716b4e375b", "xavier-lan-982cc13e75")
	reg := prometheus.NewPedanticRegistry()
	NewMetricsFor(reg, MetricLabels{Node: "av-001-xavier-a", Vehicle: "av-001", Host: "xavier-a"}, &Engine{Host: p.A.h, Store: st})

	type counters struct{ retrans, rtos, dsack, segsOut float64 }
	var hasRTO, hasDSACK bool // the kernel's tcp_info has tcpi_total_rto, tcpi_dsack_dups
	scrape := func() counters {
		t.Helper()
		value := func(name string, want bool) float64 {
			t.Helper()
			got := gatherSeries(t, reg, name)
			if !want {
				if len(got) != 0 {
					t.Errorf("%s: %v, want none (the kernel does not report it)", name, got)
				}
				return 0
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], labels+" ") {
				t.Fatalf("%s: %v, want one series {%s}", name, got, labels)
			}
			v, err := strconv.ParseFloat(strings.TrimPrefix(got[0], labels+" "), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		return counters{value("nettune_tcp_retrans_segments_total", true), value("nettune_tcp_rto_timeouts_total", hasRTO),
			value("nettune_tcp_dsack_dups_total", hasDSACK), value("nettune_tcp_segments_out_total", true)}
	}
	// What the sockets counted, from getsockopt(TCP_INFO).
	sum := func(cs ...*net.TCPConn) counters {
		t.Helper()
		var s counters
		for _, c := range cs {
			i := tcpInfoOf(t, c)
			s.retrans += float64(i.Total_retrans)
			s.rtos += float64(i.Total_rto)
			s.dsack += float64(i.Dsack_dups)
			s.segsOut += float64(i.Segs_out)
		}
		return s
	}

	// The first scrape finds no socket: it only starts the count.
	if got := gatherSeries(t, reg, "nettune_tcp_retrans_segments_total"); strings.Join(got, "") != labels+" 0" {
		t.Fatalf("before any connection: %v", got)
	}
	c1, c2 := dialFrom(t, p.A, p.addrB, sink.port()), dialFrom(t, p.A, p.addrB, sink.port())
	socks, err := p.A.h.TCPSockets(nil)
	if err != nil || len(socks) != 2 || !socks[0].HasSegsOut {
		t.Fatalf("sockets of A: %+v, %v; want 2 with tcpi_segs_out", socks, err)
	}
	hasRTO, hasDSACK = socks[0].HasTotalRTO, socks[0].HasDSACK
	sendAcked(t, c1, 256<<10)
	sendAcked(t, c2, 256<<10)
	// B drops what A sends for a moment: c1 retransmits (and times out).
	drop := []string{"INPUT", "-p", "tcp", "-s", p.addrA, "-j", "DROP"}
	nettest.IP(t, append([]string{"netns", "exec", p.B.name, "iptables", "-A"}, drop...)...)
	if _, err := c1.Write(make([]byte, 32<<10)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	nettest.IP(t, append([]string{"netns", "exec", p.B.name, "iptables", "-D"}, drop...)...)
	waitAcked(t, c1)

	before := sum(c1, c2)
	first := scrape()
	after := sum(c1, c2)
	t.Logf("sockets counted %+v; first scrape %+v", before, first)
	if before.retrans == 0 || (hasRTO && before.rtos == 0) {
		t.Fatalf("the outage caused no retransmission or timeout: %+v", before)
	}
	// Both sockets opened after the previous scrape: all they counted.
	for _, c := range []struct {
		name        string
		lo, got, hi float64
	}{
		{"retrans", before.retrans, first.retrans, after.retrans},
		{"rto timeouts", before.rtos, first.rtos, after.rtos},
		{"dsack", before.dsack, first.dsack, after.dsack},
		{"segments out", before.segsOut, first.segsOut, after.segsOut},
	} {
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("first scrape: %s %g, the sockets counted %g..%g", c.name, c.got, c.lo, c.hi)
		}
	}

	// c2 sends more; c1 closes and is gone from sock_diag's counters (time
	// wait) by the next scrape.
	const more = 128 << 10
	c2Before := sum(c2)
	sendAcked(t, c2, more)
	local := c1.LocalAddr().(*net.TCPAddr)
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	nettest.WaitFor(t, 5*time.Second, func() error {
		socks, err := p.A.h.TCPSockets(nil)
		if err != nil {
			return err
		}
		for _, s := range socks {
			if s.Local.Port == local.Port && s.HasInfo {
				return fmt.Errorf("closed socket still %s with tcp_info", s.State)
			}
		}
		return nil
	})
	second := scrape()
	c2After := sum(c2)
	t.Logf("second scrape %+v", second)
	if second.retrans < first.retrans || second.rtos < first.rtos || second.dsack < first.dsack || second.segsOut < first.segsOut {
		t.Errorf("a counter dropped when c1 closed: %+v, then %+v", first, second)
	}
	mss := float64(tcpInfoOf(t, c2).Snd_mss)
	if grew := second.segsOut - first.segsOut; grew < more/mss || grew > c2After.segsOut-c2Before.segsOut {
		t.Errorf("segments out grew by %g after c2 sent %d bytes (mss %g), want %g..%g (what c2 sent since the first scrape)",
			grew, more, mss, float64(more)/mss, c2After.segsOut-c2Before.segsOut)
	}
	if second.retrans != first.retrans+c2After.retrans-c2Before.retrans {
		t.Errorf("retransmissions %g, then %g: c2 retransmitted %g", first.retrans, second.retrans, c2After.retrans-c2Before.retrans)
	}

	// A new revision of the route's profile starts new series (the old ones
	// are gone) at 0: c2, counted already, adds what it sends from now on.
	commit("2dcfacd537", "xavier-lan-8bf34728cc")
	if third := scrape(); third != (counters{}) {
		t.Errorf("new revision, nothing sent since: %+v, want 0", third)
	}
	c2Before = sum(c2)
	sendAcked(t, c2, more)
	fourth := scrape()
	c2After = sum(c2)
	if fourth.segsOut < more/mss || fourth.segsOut > c2After.segsOut-c2Before.segsOut {
		t.Errorf("new revision: segments out %g after c2 sent %d bytes, want %g..%g", fourth.segsOut, more, float64(more)/mss, c2After.segsOut-c2Before.segsOut)
	}
}

// dialFrom connects from ns to addr:port; the connection is closed in
// cleanup.
func dialFrom(t *testing.T, ns *testNS, addr string, port int32) *net.TCPConn {
	t.Helper()
	return nettest.DialTCP(t, ns.h.Do, ns.name, addr, int(port))
}

// sendAcked writes n bytes to c and waits until the peer acknowledged all.
func sendAcked(t *testing.T, c *net.TCPConn, n int) {
	t.Helper()
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatalf("write: %v", err)
	}
	waitAcked(t, c)
}

// waitAcked waits until everything written to c is sent and acknowledged.
func waitAcked(t *testing.T, c *net.TCPConn) {
	t.Helper()
	nettest.WaitFor(t, 10*time.Second, func() error {
		if i := tcpInfoOf(t, c); i.Notsent_bytes != 0 || i.Unacked != 0 {
			return fmt.Errorf("%d bytes not sent, %d segments not acknowledged", i.Notsent_bytes, i.Unacked)
		}
		return nil
	})
}

// tcpInfoOf is getsockopt(TCP_INFO) of c.
func tcpInfoOf(t *testing.T, c *net.TCPConn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) { info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return info
}
