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
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestParseTCPInfoSegsOut: tcpi_segs_out is the u32 at offset 136 of struct
// tcp_info, reported only when the kernel's struct reaches segs_in (144
// bytes, Linux 4.2+).
func TestParseTCPInfoSegsOut(t *testing.T) {
	b := make([]byte, 144)
	nativeEndian.PutUint64(b[128:], 0x1111111111111111) // tcpi_bytes_received
	nativeEndian.PutUint32(b[136:], 4242)               // tcpi_segs_out
	nativeEndian.PutUint32(b[140:], 0x22222222)         // tcpi_segs_in
	var s TCPSocketInfo
	parseTCPInfo(b, &s)
	if !s.HasInfo || !s.HasSegsOut || s.SegsOut != 4242 {
		t.Errorf("144-byte tcp_info: HasInfo %v HasSegsOut %v SegsOut %d, want true true 4242", s.HasInfo, s.HasSegsOut, s.SegsOut)
	}
	var short TCPSocketInfo
	parseTCPInfo(b[:136], &short)
	if !short.HasInfo || short.HasSegsOut || short.SegsOut != 0 {
		t.Errorf("136-byte tcp_info: HasInfo %v HasSegsOut %v SegsOut %d, want true false 0", short.HasInfo, short.HasSegsOut, short.SegsOut)
	}
}

// TestSockDiagSegsOutAndCookie: on a real connection, sock_diag's segs_out
// is the socket's own (getsockopt TCP_INFO) and at least the MSS-sized
// segments of the data sent, and its cookie is the socket's SO_COOKIE and
// stays the same once the application closed the socket (FIN-WAIT-2, inode
// 0; an orphan in FIN-WAIT-2 is a time-wait socket, without tcp_info).
func TestSockDiagSegsOutAndCookie(t *testing.T) {
	p := newPair(t)
	// A sink in B that reads to EOF but keeps its end open until the test
	// ends: A's socket stays in FIN-WAIT-2 after A closes it.
	ln := listenIn(t, p.B, p.addrB)
	release := make(chan struct{})
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			<-release
			c.Close()
		}()
	}()
	t.Cleanup(func() {
		close(release)
		ln.Close()
		<-accepted
	})

	c := dial(t, p.A, p.addrB, ln.Addr().(*net.TCPAddr).Port)
	const n = 1 << 20
	send(t, c, n)
	var info TCPSocketInfo
	for deadline := time.Now().Add(10 * time.Second); ; {
		info = sockInfo(t, p.A, c)
		if info.BytesAcked >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d bytes acknowledged", info.BytesAcked, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	gi := getsockoptTCPInfo(t, c)
	t.Logf("segs_out: sock_diag %d, getsockopt %d (segs_in %d); mss %d", info.SegsOut, gi.Segs_out, gi.Segs_in, info.SndMSS)
	if !info.HasSegsOut {
		t.Fatal("this kernel's tcp_info has no tcpi_segs_out")
	}
	// Idle and fully acknowledged: the sender sends nothing between the two
	// reads.
	if info.SegsOut != gi.Segs_out {
		t.Errorf("sock_diag segs_out %d, getsockopt %d", info.SegsOut, gi.Segs_out)
	}
	if least := uint32(n) / info.SndMSS; info.SegsOut < least {
		t.Errorf("segs_out %d after sending %d bytes with mss %d, want at least %d", info.SegsOut, n, info.SndMSS, least)
	}

	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var cookie uint64
	var cerr error
	if err := rc.Control(func(fd uintptr) { cookie, cerr = unix.GetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_COOKIE) }); err != nil {
		t.Fatal(err)
	}
	if cerr != nil {
		t.Fatal(cerr)
	}
	if info.Cookie == 0 || info.Cookie != cookie {
		t.Errorf("sock_diag cookie %#x, SO_COOKIE %#x", info.Cookie, cookie)
	}
	if info.Inode == 0 {
		t.Errorf("open socket with inode 0")
	}

	// Closed by the application, finished by the kernel: same cookie, no
	// inode.
	local := c.LocalAddr().(*net.TCPAddr)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var closed TCPSocketInfo
	for deadline := time.Now().Add(5 * time.Second); ; {
		socks, err := p.A.h.TCPSockets(hostNet(p.addrB))
		if err != nil {
			t.Fatal(err)
		}
		closed = TCPSocketInfo{}
		for _, s := range socks {
			if s.Local.Port == local.Port {
				closed = s
			}
		}
		if closed.State == "FIN-WAIT-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closed socket in state %q, want FIN-WAIT-2", closed.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("after close: %s, inode %d, tcp_info %v", closed.State, closed.Inode, closed.HasInfo)
	if closed.Cookie != info.Cookie || closed.Inode != 0 {
		t.Errorf("after close: cookie %#x (was %#x), inode %d (want 0)", closed.Cookie, info.Cookie, closed.Inode)
	}
}
