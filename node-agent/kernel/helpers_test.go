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
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/test/framework/nettest"
)

// The integration tests build their own network namespaces ("ntk-<random>")
// joined by a veth pair addressed in 10.250.<random>.0/24, and remove them
// in t.Cleanup. Nothing is done in the test process's own namespace except
// reading its sysctls to prove they did not change; no traffic leaves the
// test namespaces.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, netlink writes)")
	}
}

func randUint32(t *testing.T) uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[:])
}

// testNS is a named network namespace made by a test.
type testNS struct {
	name string
	ns   netns.NsHandle
	h    *Handle
}

// newTestNS creates a named namespace with lo up and a Handle for it.
func newTestNS(t *testing.T) *testNS {
	t.Helper()
	requireRoot(t)
	name := fmt.Sprintf("ntk-%08x", randUint32(t))
	type res struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan res, 1)
	go func() {
		// NewNamed moves the calling thread into the new namespace: do it on
		// a throwaway locked thread (never unlocked, so it is destroyed).
		runtime.LockOSThread()
		ns, err := netns.NewNamed(name)
		c <- res{ns, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatalf("create netns %s: %v", name, r.err)
	}
	tn := &testNS{name: name, ns: r.ns}
	t.Cleanup(func() {
		if tn.h != nil {
			tn.h.Close()
		}
		tn.ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	h, err := NewHandleAt(r.ns)
	if err != nil {
		t.Fatalf("handle for %s: %v", name, err)
	}
	tn.h = h
	lo, err := h.link.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.link.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return tn
}

// pair is two namespaces joined by a veth: A has devA with addrA, B has
// devB with addrB, both in subnet.
type pair struct {
	A, B         *testNS
	devA, devB   string
	addrA, addrB net.IP
	subnet       *net.IPNet
}

func (p *pair) hostB() *net.IPNet { return hostNet(p.addrB) }

func newPair(t *testing.T) *pair {
	t.Helper()
	a, b := newTestNS(t), newTestNS(t)
	x := byte(1 + randUint32(t)%254)
	p := &pair{
		A: a, B: b, devA: "nta", devB: "ntb",
		addrA:  net.IPv4(10, 250, x, 1).To4(),
		addrB:  net.IPv4(10, 250, x, 2).To4(),
		subnet: &net.IPNet{IP: net.IPv4(10, 250, x, 0).To4(), Mask: net.CIDRMask(24, 32)},
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: p.devA},
		PeerName:      p.devB,
		PeerNamespace: netlink.NsFd(int(b.ns)),
	}
	if err := a.h.link.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	for _, side := range []struct {
		h    *Handle
		dev  string
		addr net.IP
	}{{a.h, p.devA, p.addrA}, {b.h, p.devB, p.addrB}} {
		l, err := side.h.link.LinkByName(side.dev)
		if err != nil {
			t.Fatal(err)
		}
		ipn := &net.IPNet{IP: side.addr, Mask: net.CIDRMask(24, 32)}
		if err := side.h.link.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
			t.Fatalf("add address %s: %v", ipn, err)
		}
		if err := side.h.link.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// ipRouteShow runs the real iproute2 `ip -n <ns> [-6] route show <dst>`.
func ipRouteShow(t *testing.T, ns *testNS, dst string) string {
	t.Helper()
	path := "/usr/sbin/ip"
	if _, err := os.Stat(path); err != nil {
		if path, err = exec.LookPath("ip"); err != nil {
			t.Skip("iproute2 ip binary not found")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"-n", ns.name}
	if strings.Contains(dst, ":") {
		args = append(args, "-6")
	}
	args = append(args, "route", "show", dst)
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route show: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// server is a TCP sink listening in a namespace: it reads every connection
// to EOF, then closes it.
type server struct {
	ln     net.Listener
	wg     sync.WaitGroup
	closed chan struct{} // one value per connection fully drained and closed
}

// listenIn listens on ip (any port) inside ns.
func listenIn(t *testing.T, ns *testNS, ip net.IP) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(ip.String(), "0"))
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns.name, err)
	}
	return ln
}

func startServer(t *testing.T, ns *testNS, ip net.IP) *server {
	t.Helper()
	s := &server{closed: make(chan struct{}, 16), ln: listenIn(t, ns, ip)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				s.closed <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() {
		s.ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *server) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// dial connects from namespace ns to addr:port.
func dial(t *testing.T, ns *testNS, addr net.IP, port int) *net.TCPConn {
	t.Helper()
	return nettest.DialTCP(t, ns.h.Do, ns.name, addr.String(), port)
}

// send writes n bytes to c.
func send(t *testing.T, c *net.TCPConn, n int) {
	t.Helper()
	buf := make([]byte, 64*1024)
	if err := c.SetWriteDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for n > 0 {
		k := len(buf)
		if k > n {
			k = n
		}
		w, err := c.Write(buf[:k])
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		n -= w
	}
}

// sockInfo finds, through sock_diag in ns, the socket of c.
func sockInfo(t *testing.T, ns *testNS, c *net.TCPConn) TCPSocketInfo {
	t.Helper()
	local := c.LocalAddr().(*net.TCPAddr)
	remote := c.RemoteAddr().(*net.TCPAddr)
	socks, err := ns.h.TCPSockets(hostNet(remote.IP))
	if err != nil {
		t.Fatalf("sock_diag: %v", err)
	}
	for _, s := range socks {
		if s.Local.Port == local.Port && s.Remote.Port == remote.Port && s.State == "ESTABLISHED" {
			return s
		}
	}
	t.Fatalf("sock_diag: no established socket %s -> %s among %d", local, remote, len(socks))
	return TCPSocketInfo{}
}

// getsockoptTCPInfo reads tcp_info of c with getsockopt, as a cross-check
// of the sock_diag parser.
func getsockoptTCPInfo(t *testing.T, c *net.TCPConn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return info
}

// transfer opens a connection from A to B, sends n bytes, waits until they
// are all acknowledged, and returns the client's sock_diag view while the
// connection is still open. The connection is then closed cleanly (which
// makes the kernel create or update the tcp_metrics entry) and the function
// waits for the server side to finish.
func transfer(t *testing.T, p *pair, s *server, n int) TCPSocketInfo {
	t.Helper()
	c := dial(t, p.A, p.addrB, s.port())
	send(t, c, n)
	deadline := time.Now().Add(10 * time.Second)
	var info TCPSocketInfo
	for {
		info = sockInfo(t, p.A, c)
		if info.BytesAcked >= uint64(n) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if info.BytesAcked < uint64(n) {
		t.Fatalf("only %d of %d bytes acknowledged", info.BytesAcked, n)
	}
	// sock_diag and getsockopt must read the same snd_cwnd and mss. The
	// two reads are not atomic: an unclamped window may still grow between
	// them (seen under qemu: 561, then 1122), so they are compared until
	// they agree, and only a window that never agrees is an error.
	gi := getsockoptTCPInfo(t, c)
	for i := 0; i < 50 && (gi.Snd_cwnd != info.SndCwnd || gi.Snd_mss != info.SndMSS); i++ {
		time.Sleep(10 * time.Millisecond)
		info = sockInfo(t, p.A, c)
		gi = getsockoptTCPInfo(t, c)
	}
	if gi.Snd_cwnd != info.SndCwnd || gi.Snd_mss != info.SndMSS {
		t.Errorf("sock_diag snd_cwnd %d mss %d, getsockopt snd_cwnd %d mss %d", info.SndCwnd, info.SndMSS, gi.Snd_cwnd, gi.Snd_mss)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not see the connection close")
	}
	// The client reaches TIME-WAIT (and tcp_update_metrics runs) when the
	// server's FIN arrives; give it a moment.
	nettest.WaitFor(t, 2*time.Second, func() error {
		socks, err := p.A.h.TCPSockets(p.hostB())
		if err != nil {
			return err
		}
		for _, so := range socks {
			if so.Local.Port == info.Local.Port && so.State != "TIME-WAIT" {
				return fmt.Errorf("client socket still %s", so.State)
			}
		}
		return nil
	})
	return info
}
