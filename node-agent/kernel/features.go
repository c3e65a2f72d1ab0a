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
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Features is what the kernel behind a handle provides, learned by trying it
// rather than from its version number: the vehicles run vendor kernels
// (NVIDIA L4T) that backport, and the struct tcp_info a kernel sends tells by
// its length which counters it has.
type Features struct {
	// Release and Machine are uname -r and uname -m.
	Release, Machine string
	// TCPInfoBytes is the length of the struct tcp_info sock_diag sent for a
	// live TCP connection in the handle's namespace.
	TCPInfoBytes int
	// TCPInfoCounters are the counters of that tcp_info
	// (TCPInfoCounters(TCPInfoBytes)).
	TCPInfoCounters []string
	// CongestionControls are the algorithms loaded when probed
	// (tcp_available_congestion_control); a kernel with modules loads
	// others on demand (LoadCongestionControl).
	CongestionControls []string
	// NodeCounters are the node-level TcpExt counters of NodeCounterDefs
	// the handle's namespace has (/proc/net/netstat), with their meaning
	// on this kernel.
	NodeCounters []NodeCounter
	// EstimatedCounters are counters the agent estimates where the kernel
	// has no exact one (rto_episodes: RTOs per peer before tcpi_total_rto),
	// with their method; set by the agent, not probed.
	EstimatedCounters []NodeCounter
}

// ProbeFeatures learns what the kernel provides: uname, the congestion
// controls loaded, the node-level TcpExt counters, and the length of the
// tcp_info sock_diag reports for a loopback TCP connection it opens (and
// closes) in the handle's namespace, which needs lo up there. On error the
// features it could learn are set.
func (h *Handle) ProbeFeatures() (Features, error) {
	var f Features
	var errs []error
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		errs = append(errs, fmt.Errorf("uname: %w", err))
	} else {
		f.Release, f.Machine = unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Machine[:])
	}
	if cc, err := h.AvailableCongestionControls(); err != nil {
		errs = append(errs, err)
	} else {
		f.CongestionControls = cc
	}
	if c, err := h.ReadTCPCounters(); err != nil {
		errs = append(errs, err)
	} else {
		f.NodeCounters = NodeCounters(f.Release, c.All)
	}
	if n, err := h.loopbackTCPInfoLen(); err != nil {
		errs = append(errs, fmt.Errorf("tcp_info of a loopback connection: %w", err))
	} else {
		f.TCPInfoBytes, f.TCPInfoCounters = n, TCPInfoCounters(n)
	}
	return f, errors.Join(errs...)
}

// loopbackTCPInfoLen connects to a listener on 127.0.0.1 in the handle's
// namespace and returns the length of the tcp_info sock_diag sends for the
// client's socket. The connection is established when connect returns (the
// server's side waits in the accept queue, never accepted) and is reset when
// the listener closes.
func (h *Handle) loopbackTCPInfoLen() (int, error) {
	var ln net.Listener
	var c net.Conn
	err := h.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", "127.0.0.1:0"); err != nil {
			return err
		}
		// A loopback connect is immediate; it only hangs when lo is down.
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 2*time.Second)
		return err
	})
	if ln != nil {
		defer ln.Close()
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return h.tcpInfoLen(c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr))
}

// tcpInfoLen asks sock_diag for the one IPv4 TCP socket local -> remote (an
// exact lookup, not a dump of every socket) and returns the length of its
// INET_DIAG_INFO attribute: the kernel sends sizeof(struct tcp_info) as
// it was built with.
func (h *Handle) tcpInfoLen(local, remote *net.TCPAddr) (int, error) {
	msgs, err := execute(h.diag, unix.NETLINK_SOCK_DIAG, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.SOCK_DIAG_BY_FAMILY, 0)
		b := make([]byte, sizeofInetDiagReqV2)
		b[0] = unix.AF_INET
		b[1] = unix.IPPROTO_TCP
		b[2] = 1 << (inetDiagInfo - 1)
		nativeEndian.PutUint32(b[4:8], 0xffffffff) // all states
		// struct inet_diag_sockid: ports in network order, addresses,
		// interface, cookie (INET_DIAG_NOCOOKIE: match by address).
		binary.BigEndian.PutUint16(b[8:10], uint16(local.Port))
		binary.BigEndian.PutUint16(b[10:12], uint16(remote.Port))
		copy(b[12:16], local.IP.To4())
		copy(b[28:32], remote.IP.To4())
		nativeEndian.PutUint32(b[48:52], 0xffffffff)
		nativeEndian.PutUint32(b[52:56], 0xffffffff)
		req.AddData(rawData(b))
		return req
	}, unix.SOCK_DIAG_BY_FAMILY)
	if err != nil {
		return 0, fmt.Errorf("sock_diag lookup of %s -> %s: %w", local, remote, err)
	}
	for _, m := range msgs {
		if len(m) < sizeofInetDiagMsg {
			return 0, fmt.Errorf("short inet_diag_msg: %d bytes", len(m))
		}
		attrs, err := parseAttrs(m[sizeofInetDiagMsg:])
		if err != nil {
			return 0, fmt.Errorf("parse inet_diag attributes: %w", err)
		}
		for _, a := range attrs {
			if a.Type == inetDiagInfo {
				return len(a.Value), nil
			}
		}
	}
	return 0, fmt.Errorf("sock_diag sent no tcp_info for %s -> %s", local, remote)
}
