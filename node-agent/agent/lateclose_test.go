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
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestApplyRepairsEntryOfLateClose: the agent's apply with a connection to
// the peer closing across it. netem delays B's packets (400 ms) from the
// connection's start; every byte is acknowledged; A closes (B keeps its
// side open) and the agent applies the seed profile at once: its flush
// comes before B's ACK of A's FIN, whose arrival makes A's socket create
// the peer's tcp_metrics entry from the route it cached, the unclamped one
// (node-agent/kernel's TestPrimeRepairsEntryOfLateClose shows that entry
// left by a single prime). The agent's prime reads the entry back and
// makes it again, and says so: the entry carries the route's locked cwnd
// (30) and the next connection is clamped. An apply slower than the delay (a
// loaded machine) misses the race; the stage is then set again with a
// longer delay. Needs sch_netem (the kernel VMs); skips without.
func TestApplyRepairsEntryOfLateClose(t *testing.T) {
	delays := []time.Duration{400 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second}
	for _, d := range delays {
		if lateCloseAcrossAgentApply(t, d) {
			return
		}
	}
	t.Fatalf(`the agent never logged "tcp_metrics entry made again" (delays %v): the late close did not race the apply's prime`, delays)
}

// lateCloseAcrossAgentApply is one staging; it reports whether the agent
// had to make the entry again (the race happened), after checking the
// entry and the next connection either way.
func lateCloseAcrossAgentApply(t *testing.T, delay time.Duration) bool {
	t.Helper()
	p := newPair(t)
	useReno(t, p.A)
	sink := listenIn(t, p.B, p.addrB)
	hold := holdIn(t, p.B, p.addrB)
	unhold := netemDelay(t, p.B, p.devB, delay)

	var old net.Conn
	if err := kernel.DoInNetns(p.A.h.Namespace(), func() error {
		var err error
		d := net.Dialer{Timeout: 10 * time.Second}
		old, err = d.Dial("tcp4", hold.ln.Addr().String())
		return err
	}); err != nil {
		t.Fatalf("dial: %v", err)
	}
	if _, err := old.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	host := &net.IPNet{IP: net.ParseIP(p.addrB).To4(), Mask: net.CIDRMask(32, 32)}
	local := old.LocalAddr().(*net.TCPAddr)
	nettest.WaitFor(t, 20*time.Second, func() error {
		socks, err := p.A.h.TCPSockets(host)
		if err != nil {
			return err
		}
		for _, s := range socks {
			if s.Local.Port == local.Port && s.BytesAcked >= 1000 {
				return nil
			}
		}
		return errors.New("the old connection's 1000 bytes not acknowledged yet")
	})
	select { // B has read them: its side stays open, its close would not be a reset
	case <-hold.read:
	case <-time.After(20 * time.Second):
		t.Fatal("B did not read the old connection's 1000 bytes in 20 s")
	}

	e := newEngine(t, p.A, t.TempDir())
	var remade atomic.Bool
	e.Log = testLogger(t, func(line string) {
		if strings.Contains(line, "tcp_metrics entry made again") {
			remade.Store(true)
		}
	})
	e.Probes = nil // the probe is not what this test is about (and waits out the delay on every packet)
	e.PrimeTimeout = 60 * time.Second
	spec := v1alpha1.NodeNetTuningSpec{
		Revision: "r1",
		Routes:   []v1alpha1.NodeRoute{route(p.addrB+"/32", p.devA, seed())},
		Peers:    []v1alpha1.Peer{{Host: "b", Address: p.addrB, ProbePort: sink.port()}},
	}
	spec.Routes[0].Peer = "b"
	closed := time.Now()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, e, spec)
	t.Logf("delay %s: applied and primed %s after the close; entry made again: %v", delay, time.Since(closed).Round(time.Millisecond), remade.Load())
	entries, err := p.A.h.TCPMetricsFor(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("entries: %v", entries)
	if len(entries) == 0 {
		t.Fatal("no tcp_metrics entry after the apply")
	}
	rs, err := routeSpec(spec.Routes[0])
	if err != nil {
		t.Fatal(err)
	}
	want := kernel.WantTCPMetrics(rs.Metrics)
	if want.Cwnd != 30 {
		t.Fatalf("the seed route locks %s, want cwnd 30", want)
	}
	for _, en := range entries {
		if !want.HeldBy(en) {
			t.Errorf("entry %v after the apply, want the route's %s", en, want)
		}
	}
	unhold()
	running, final := bulk(t, p, sink.port(), bulkBytes)
	t.Logf("the next connection: snd_cwnd final %d, running samples %v", final.SndCwnd, compact(running))
	for _, c := range append(running, final.SndCwnd) {
		if c == 0 || c > 30 {
			t.Errorf("the next connection: snd_cwnd %d, want 1..30", c)
			break
		}
	}
	return remade.Load()
}

// holder accepts one connection in a namespace, reads 1000 bytes from it
// and keeps it open until the test ends.
type holder struct {
	ln   net.Listener
	read chan struct{}
}

func holdIn(t *testing.T, ns *testNS, addr string) *holder {
	t.Helper()
	h := &holder{read: make(chan struct{})}
	if err := kernel.DoInNetns(ns.h.Namespace(), func() error {
		var err error
		h.ln, err = net.Listen("tcp4", net.JoinHostPort(addr, "0"))
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns.name, err)
	}
	conns := make(chan net.Conn, 1)
	go func() {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		conns <- c
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1000)); err == nil {
			close(h.read)
		}
	}()
	t.Cleanup(func() {
		h.ln.Close()
		select {
		case c := <-conns:
			c.Close()
		default:
		}
	})
	return h
}

// netemDelay delays every packet leaving dev in ns by d and returns the
// function that removes the delay; it skips the test on a kernel without
// sch_netem.
func netemDelay(t *testing.T, ns *testNS, dev string, d time.Duration) func() {
	t.Helper()
	nsh, err := netns.GetFromName(ns.name)
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	nl, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	l, err := nl.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Latency: uint32(d / time.Microsecond)})
	if err := nl.QdiscAdd(q); err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			var u unix.Utsname
			_ = unix.Uname(&u)
			t.Skipf("kernel %s has no sch_netem (qdisc netem: %v): the late close cannot be staged", unix.ByteSliceToString(u.Release[:]), err)
		}
		t.Fatalf("add netem delay on %s: %v", dev, err)
	}
	removed := false
	remove := func() {
		if !removed {
			removed = true
			if err := nl.QdiscDel(q); err != nil {
				t.Errorf("remove netem from %s: %v", dev, err)
			}
		}
	}
	t.Cleanup(remove)
	return remove
}
