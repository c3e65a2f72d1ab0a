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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/test/framework/nettest"
)

// profileSsthresh is below the initial window (10), so a connection that
// starts from it is in congestion avoidance from its first segment and,
// over a bulk transfer, grows cwnd far past twice it: unlocked, its close
// writes max(cwnd/2, ssthresh) into tcp_metrics, well above it.
const profileSsthresh = 8

// ssthreshAt opens a connection from A to B:port, reads its snd_ssthresh
// through sock_diag as it starts (tcp_init_metrics has run when connect
// returns), sends n bytes, waits until they are acknowledged, closes the
// connection cleanly and waits until the client's socket has reached
// TIME-WAIT (where tcp_update_metrics writes the tcp_metrics entry) or is
// gone.
func ssthreshAt(t *testing.T, p *pair, port int32, n int) (start uint32, final kernel.TCPSocketInfo) {
	t.Helper()
	c := nettest.DialTCP(t, p.A.h.Do, p.A.name, p.addrB, int(port))
	local := c.LocalAddr().(*net.TCPAddr)
	peer := &net.IPNet{IP: net.ParseIP(p.addrB).To4(), Mask: net.CIDRMask(32, 32)}
	find := func() (kernel.TCPSocketInfo, bool) {
		socks, err := p.A.h.TCPSockets(peer)
		if err != nil {
			t.Fatalf("sock_diag: %v", err)
		}
		i := slices.IndexFunc(socks, func(s kernel.TCPSocketInfo) bool { return s.Local.Port == local.Port })
		if i < 0 {
			return kernel.TCPSocketInfo{}, false
		}
		return socks[i], true
	}
	s, ok := find()
	if !ok || s.State != "ESTABLISHED" || !s.HasInfo {
		t.Fatalf("sock_diag: no established socket from port %d (%+v)", local.Port, s)
	}
	start = s.SndSsthresh
	if err := c.SetWriteDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for left := n; left > 0; {
		k, err := c.Write(buf[:min(len(buf), left)])
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		left -= k
	}
	nettest.WaitFor(t, 30*time.Second, func() error {
		s, ok := find()
		if !ok || s.BytesAcked < uint64(n) {
			return fmt.Errorf("%d of %d bytes acknowledged", s.BytesAcked, n)
		}
		final = s
		return nil
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	nettest.WaitFor(t, 30*time.Second, func() error {
		if s, ok := find(); ok && s.State != "TIME-WAIT" {
			return fmt.Errorf("client socket from port %d still %s", local.Port, s.State)
		}
		return nil
	})
	return start, final
}

// cachedSsthresh is the ssthresh of the tcp_metrics entry of B in A.
func cachedSsthresh(t *testing.T, p *pair) uint32 {
	t.Helper()
	es, err := p.A.h.TCPMetricsFor(&net.IPNet{IP: net.ParseIP(p.addrB).To4(), Mask: net.CIDRMask(32, 32)})
	if err != nil || len(es) != 1 {
		t.Fatalf("tcp_metrics entries of %s: %v, %v; want one", p.addrB, es, err)
	}
	return es[0].Ssthresh
}

// TestSsthreshHoldsWithLock: where the kernel uses a route's ssthresh
// (tcp_no_ssthresh_metrics_save=0 here; 4.9 has no such sysctl and behaves
// so always), a connection's close writes the ssthresh it learned into the
// tcp_metrics entry unless the route locks RTAX_SSTHRESH, and the next
// connection to the same peer starts from that. The profile's ssthresh, as
// the agent applies it, is locked: the second connection starts from it
// again. The same route without the lock shows the overwrite (the control
// that makes the first half able to fail), and the agent's read-back of it
// is a Mismatch.
func TestSsthreshHoldsWithLock(t *testing.T) {
	prm := v1alpha1.TCPParameters{Ssthresh: i32(profileSsthresh)}
	setup := func(t *testing.T) (*pair, *listener) {
		p := newPair(t)
		if _, err := p.A.h.ReadSysctl("net.ipv4.tcp_no_ssthresh_metrics_save"); errors.Is(err, fs.ErrNotExist) {
			t.Skip("no net.ipv4.tcp_no_ssthresh_metrics_save: the kernel uses the route's ssthresh always (4.9); this test sets it to 0 to get that behavior")
		}
		setSysctl(t, p.A, "net.ipv4.tcp_no_ssthresh_metrics_save", "0")
		useReno(t, p.A)
		return p, listenIn(t, p.B, p.addrB)
	}
	spec := func(p *pair, ln *listener) v1alpha1.NodeNetTuningSpec {
		s := v1alpha1.NodeNetTuningSpec{
			Revision: "r1",
			Routes:   []v1alpha1.NodeRoute{route(p.addrB+"/32", p.devA, prm)},
			Peers:    []v1alpha1.Peer{{Host: "b", Address: p.addrB, ProbePort: ln.port()}},
		}
		s.Routes[0].Peer = "b"
		return s
	}

	t.Run("locked by the agent", func(t *testing.T) {
		p, ln := setup(t)
		e := newEngine(t, p.A, t.TempDir())
		o := mustApply(t, e, spec(p, ln)) // flushes and primes tcp_metrics through the probe port
		mustContain(t, "route", routeShow(t, p.A, p.addrB+"/32"), fmt.Sprintf("ssthresh lock %d", profileSsthresh))
		if len(o.Items) != 1 || o.Items[0].State != StateVerified {
			t.Errorf("items %+v, want the route Verified (ssthresh used and locked)", o.Items)
		}
		for i := 1; i <= 3; i++ {
			start, final := ssthreshAt(t, p, ln.port(), bulkBytes)
			cached := cachedSsthresh(t, p)
			t.Logf("connection %d: snd_ssthresh at start %d, at the end %d (snd_cwnd %d, cc %s); tcp_metrics ssthresh after its close %d",
				i, start, final.SndSsthresh, final.SndCwnd, final.CongestionControl, cached)
			if start != profileSsthresh {
				t.Errorf("connection %d started from ssthresh %d, want the profile's %d", i, start, profileSsthresh)
			}
			if cached != profileSsthresh {
				t.Errorf("after connection %d the tcp_metrics entry holds ssthresh %d, want %d", i, cached, profileSsthresh)
			}
		}
	})

	t.Run("unlocked, the kernel overwrites it", func(t *testing.T) {
		p, ln := setup(t)
		m, err := routeMetrics(prm)
		if err != nil {
			t.Fatal(err)
		}
		m.SetLocked(unix.RTAX_SSTHRESH, false)
		dst, err := kernel.ParseDestination(p.addrB + "/32")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.A.h.ApplyRoute(kernel.RouteSpec{Dst: dst, Device: p.devA, Metrics: m}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.A.h.PrimeTCPMetrics(ctx, &net.TCPAddr{IP: dst.IP, Port: int(ln.port())}, nil, kernel.TCPMetricsWant{}); err != nil {
			t.Fatal(err)
		}
		out := routeShow(t, p.A, p.addrB+"/32")
		mustContain(t, "route", out, fmt.Sprintf("ssthresh %d", profileSsthresh))
		if strings.Contains(out, "ssthresh lock") {
			t.Fatalf("route %q: ssthresh locked", out)
		}
		items := newEngine(t, p.A, t.TempDir()).Observe(spec(p, ln))
		t.Logf("the agent's read-back of the unlocked route: %+v", items)
		if len(items) != 1 || items[0].State != StateMismatch || !strings.Contains(items[0].Message, "ssthresh") {
			t.Errorf("items %+v, want the route a Mismatch on ssthresh", items)
		}

		first, final := ssthreshAt(t, p, ln.port(), bulkBytes)
		cached := cachedSsthresh(t, p)
		t.Logf("connection 1: snd_ssthresh at start %d, at the end %d (snd_cwnd %d); tcp_metrics ssthresh after its close %d",
			first, final.SndSsthresh, final.SndCwnd, cached)
		if first != profileSsthresh {
			t.Fatalf("connection 1 started from ssthresh %d, want the route's %d (primed entry)", first, profileSsthresh)
		}
		second, _ := ssthreshAt(t, p, ln.port(), bulkBytes)
		t.Logf("connection 2: snd_ssthresh at start %d", second)
		if second == profileSsthresh {
			t.Fatalf("without the lock connection 2 still started from %d (tcp_metrics %d): the kernel did not write the learned ssthresh back, so this test cannot tell the lock apart", second, cached)
		}
		if second != cached {
			t.Errorf("connection 2 started from %d, not from the tcp_metrics entry's %d", second, cached)
		}
	})
}
