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
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// peerOf is a namespace joined to a sender namespace by its own veth.
type peerOf struct {
	ns   *testNS
	addr net.IP
}

// addPeer joins a new namespace to from by a veth (devFrom in from, "ntp"
// in the peer) in 10.251.<random>.0/24.
func addPeer(t *testing.T, from *testNS, devFrom string) (peerOf, net.IP) {
	t.Helper()
	p := newTestNS(t)
	x := byte(1 + randUint32(t)%254)
	local, remote := net.IPv4(10, 251, x, 1).To4(), net.IPv4(10, 251, x, 2).To4()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: devFrom}, PeerName: "ntp", PeerNamespace: netlink.NsFd(int(p.ns))}
	if err := from.h.link.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	for _, side := range []struct {
		h    *Handle
		dev  string
		addr net.IP
	}{{from.h, devFrom, local}, {p.h, "ntp", remote}} {
		l, err := side.h.link.LinkByName(side.dev)
		if err != nil {
			t.Fatal(err)
		}
		if err := side.h.link.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: side.addr, Mask: net.CIDRMask(24, 32)}}); err != nil {
			t.Fatal(err)
		}
		if err := side.h.link.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return peerOf{ns: p, addr: remote}, local
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

// rtoCase is one workload of TestRTOEstimateAgainstTotalRTO.
type rtoCase struct {
	name string
	// route is what the sender's route to each peer sets (iproute2 words).
	route []string
	// loss is the share of the sender's TCP segments each peer drops
	// (iptables statistic), by peer index.
	loss []float64
	// msg bytes are written every every on each of conns connections per
	// peer, for dur.
	msg   int
	every time.Duration
	// echo: each message is a request the peer answers with as many bytes,
	// at once mostly, one time in five reading it only after a pause of
	// every to twice every (its ACK waits: delayed), and the next request
	// follows the answer.
	echo  bool
	conns int
	dur   time.Duration
	// band is how far the estimate of the whole namespace may be from the
	// exact count (a share of it), peerBand the same per peer.
	band, peerBand float64
	// anyRTO: the case fails when the kernel counted no timeout.
	anyRTO bool
}

// rtoPolled is one estimator polling on its own at an interval.
type rtoPolled struct {
	interval time.Duration
	est      RTOEstimator
	polls    int
	cpu      time.Duration // thread CPU time spent in polls
}

func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *rtoPolled) poll(h *Handle) error {
	runtime.LockOSThread() // thread CPU time
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	socks, err := h.TCPSockets(nil)
	if err != nil {
		return err
	}
	c, cerr := h.ReadTCPCounters()
	_, has := c.All["TcpExt.TCPTimeouts"]
	r.est.Observe(socks, c.Timeouts, cerr == nil && has)
	r.polls++
	r.cpu += threadCPU() - c0
	return nil
}

// TestRTOEstimateAgainstTotalRTO measures nettune_tcp_rto_episodes_total's
// estimator (RTOEstimator) against the kernel's exact count in the same
// run: one sender namespace, two peers each behind its own veth dropping a
// share of the sender's segments (iptables statistic; this kernel has no
// netem), several connections per peer writing messages at a fixed rate,
// and two estimators polling at 100 ms and 1 s. The exact count is
// tcpi_total_rto summed per peer over the connections (6.7+); on a kernel
// without it (the 5.10 and 6.1 VMs) the namespace's TCPTimeouts, which
// only the test's connections move. Cases: the demo's bad edit (rto_min 1 s
// with losses) and the subtle one (rto_min 2 ms without quickack, no loss:
// spurious RTOs racing the peer's delayed ACKs).
//
// Asserted: the namespace's estimate within the case's band of the exact
// count; per peer, the estimate not below the exact count by more than its
// band, and its part seen in the peer's own sockets (not Shared) not above
// it by more than its band; and above 0 whenever the exact count is. The figures are logged (docs/kernels.md).
func TestRTOEstimateAgainstTotalRTO(t *testing.T) {
	cases := []rtoCase{
		// The demo's stage 3 (config/samples/demo/03-xavier-lan-bad.yaml):
		// cwnd 1 and rto_min 1s into a host; with one segment in flight a
		// loss has no duplicate ACKs to recover by, so each is an RTO.
		{name: "rto_min-1s-with-loss", route: []string{"cwnd", "lock", "1", "initcwnd", "1", "rto_min", "1s"}, loss: []float64{0.06, 0.02},
			msg: 16 << 10, every: 20 * time.Millisecond, conns: 4, dur: 10 * time.Second, band: 0.1, peerBand: 0.5, anyRTO: true},
		// rto_min 2ms without quickack (hack/bench/detection's
		// rto2ms-noquickack), no loss: requests the peer mostly reads and
		// answers at once (the sender's RTT, so its RTO, stays at a few
		// ms) and sometimes reads only after 15-30 ms; the ACK waits (the
		// delayed ACK, or the read) and the RTO fires first: spurious,
		// undone by F-RTO at the D-SACK.
		{name: "rto_min-2ms-no-quickack", route: []string{"rto_min", "2ms"}, loss: []float64{0, 0},
			msg: 300, every: 15 * time.Millisecond, echo: true, conns: 4, dur: 5 * time.Second, band: 0.1, peerBand: 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runRTOCase(t, tc) })
	}
}

func runRTOCase(t *testing.T, tc rtoCase) {
	sender := newTestNS(t)
	var peers []peerOf
	for i := range tc.loss {
		p, _ := addPeer(t, sender, fmt.Sprintf("ntq%d", i))
		peers = append(peers, p)
		args := append([]string{"-n", sender.name, "route", "replace", p.addr.String() + "/32", "dev", fmt.Sprintf("ntq%d", i)}, tc.route...)
		run(t, "ip", args...)
		if tc.loss[i] > 0 {
			run(t, "ip", "netns", "exec", p.ns.name, "iptables", "-A", "INPUT", "-p", "tcp", "-m", "statistic",
				"--mode", "random", "--probability", strconv.FormatFloat(tc.loss[i], 'f', 3, 64), "-j", "DROP")
		}
	}

	type conn struct {
		c    *net.TCPConn
		peer int
	}
	var conns []conn
	for i, p := range peers {
		var srv interface{ port() int }
		if tc.echo {
			srv = startEchoServer(t, p.ns, p.addr, tc.msg, tc.every)
		} else {
			srv = startServer(t, p.ns, p.addr)
		}
		for range tc.conns {
			c := dial(t, sender, p.addr, srv.port())
			t.Cleanup(func() { c.Close() })
			conns = append(conns, conn{c, i})
		}
	}
	// The exact counts start here: every connection is open and idle.
	exact := func() (perPeer []float64, hasRTO bool) {
		perPeer = make([]float64, len(peers))
		socks, err := sender.h.TCPSockets(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range socks {
			for i, p := range peers {
				if s.Remote.IP.Equal(p.addr) && s.State == "ESTABLISHED" {
					perPeer[i] += float64(s.TotalRTO)
					hasRTO = s.HasTotalRTO
				}
			}
		}
		return perPeer, hasRTO
	}
	timeouts := func() float64 {
		c, err := sender.h.ReadTCPCounters()
		if err != nil {
			t.Fatal(err)
		}
		return float64(c.Timeouts)
	}
	before, hasRTO := exact()
	timeoutsBefore := timeouts()

	polled := []*rtoPolled{{interval: 100 * time.Millisecond}, {interval: time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	var pollers sync.WaitGroup
	for _, r := range polled {
		if err := r.poll(sender.h); err != nil { // the first poll records
			t.Fatal(err)
		}
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			tick := time.NewTicker(r.interval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					_ = r.poll(sender.h)
				}
			}
		}()
	}

	// The workload: each connection writes a message every tc.every.
	end := time.Now().Add(tc.dur)
	var writers sync.WaitGroup
	for _, c := range conns {
		writers.Add(1)
		go func() {
			defer writers.Done()
			buf := make([]byte, tc.msg)
			tick := time.NewTicker(tc.every)
			defer tick.Stop()
			for time.Now().Before(end) {
				_ = c.c.SetDeadline(end.Add(time.Second))
				if _, err := c.c.Write(buf); err != nil {
					return
				}
				if tc.echo {
					if _, err := io.ReadFull(c.c, buf); err != nil {
						return
					}
					continue
				}
				<-tick.C
			}
		}()
	}
	writers.Wait()
	// Every segment acknowledged (the losses lifted), so that no timeout
	// is still to come: then the last poll of each estimator.
	for _, p := range peers {
		run(t, "ip", "netns", "exec", p.ns.name, "iptables", "-F", "INPUT")
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		pending := 0
		for _, c := range conns {
			pending += outq(t, c.c)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for the connections to have everything acknowledged: %d bytes unsent or unacknowledged", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	pollers.Wait()
	for _, r := range polled {
		if err := r.poll(sender.h); err != nil {
			t.Fatal(err)
		}
	}

	after, _ := exact()
	if socks, err := sender.h.TCPSockets(nil); err == nil {
		var rto []string
		for _, s := range socks {
			rto = append(rto, fmt.Sprintf("%s/%s", s.RTO, s.RTT))
		}
		t.Logf("sender's sockets at the end, rto/srtt: %v", rto)
	}
	truth := make([]float64, len(peers))
	var total float64
	for i := range peers {
		truth[i] = after[i] - before[i]
		total += truth[i]
	}
	what := "tcpi_total_rto"
	if !hasRTO {
		// 5.10, 6.1: only the namespace's count, which only these
		// connections move; per peer there is nothing exact to compare.
		what = "TcpExt TCPTimeouts (no tcpi_total_rto on this kernel)"
		total = timeouts() - timeoutsBefore
		truth = nil
	}
	t.Logf("%s: %s over %s, %d connections per peer, loss %v: exact (%s) %v per peer, %.0f in all",
		tc.name, tc.route, tc.dur, tc.conns, tc.loss, what, truth, total)
	for _, r := range polled {
		var sum float64
		per, sharedPer := make([]float64, len(peers)), make([]float64, len(peers))
		for i, p := range peers {
			per[i] = r.est.Totals[netip.AddrFrom4([4]byte(p.addr.To4()))]
			sharedPer[i] = r.est.Shared[netip.AddrFrom4([4]byte(p.addr.To4()))]
			sum += per[i]
		}
		ratio := sum / math.Max(total, 1)
		t.Logf("  poll every %s: estimate %.1f in all (ratio %.3f), per peer %.1f (shared out %.1f); seen in state %.0f, shared from TCPTimeouts %.0f, unattributed %.0f (+%.0f pending); %d polls, %s CPU in all (%.0f µs a poll, %d sockets)",
			r.interval, sum, ratio, per, sharedPer, r.est.Direct, r.est.Attributed, r.est.Unattributed, r.est.Pending(), r.polls, r.cpu.Round(time.Millisecond),
			float64(r.cpu.Microseconds())/float64(max(r.polls, 1)), len(conns)+len(peers))
		if total > 0 && sum <= 0 {
			t.Errorf("poll every %s: estimate 0 while the kernel counted %.0f timeouts", r.interval, total)
		}
		if math.Abs(sum-total) > tc.band*total+1 {
			t.Errorf("poll every %s: estimate %.1f, exact %.0f: outside ±%.0f%%", r.interval, sum, total, 100*tc.band)
		}
		// Per peer: the estimate is not below the exact count by more than
		// the band, and its part not shared out from TCPTimeouts (seen in
		// the peer's own sockets) not above it by more than the band. A
		// shared part follows what each peer retransmitted in the
		// interval, so a peer that retransmitted beside another's unseen
		// timeout takes a part of it (seen: 2.3 of 13 given at 1 s polls
		// to a peer with none).
		for i := range truth {
			shared := sharedPer[i]
			if per[i] < (1-tc.peerBand)*truth[i]-2 {
				t.Errorf("poll every %s, peer %d: estimate %.1f, exact %.0f: below -%.0f%%", r.interval, i, per[i], truth[i], 100*tc.peerBand)
			}
			if own := per[i] - shared; own > (1+tc.peerBand)*truth[i]+2 {
				t.Errorf("poll every %s, peer %d: estimate %.1f of which %.1f seen in its own sockets, exact %.0f: above +%.0f%%", r.interval, i, per[i], own, truth[i], 100*tc.peerBand)
			}
		}
	}
	if tc.anyRTO && total == 0 {
		t.Errorf("the workload caused no retransmission timeout: nothing was measured")
	}
}

// outq is what c has not had acknowledged yet (SIOCOUTQ).
func outq(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatalf("SIOCOUTQ: %v", ierr)
	}
	return n
}

// echoServer answers every msg bytes it reads with msg bytes; one time in
// five it reads the request only after a pause of pause to 2*pause.
type echoServer struct{ ln net.Listener }

func (s *echoServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func startEchoServer(t *testing.T, ns *testNS, ip net.IP, msg int, pause time.Duration) *echoServer {
	t.Helper()
	s := &echoServer{ln: listenIn(t, ns, ip)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, msg)
				for {
					// Busy one time in five: the request waits unread,
					// and unacknowledged (a read would send the ACK).
					if rand.N(5) == 0 {
						time.Sleep(pause + rand.N(pause)) // workload, not a wait
					}
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		wg.Wait()
	})
	return s
}
