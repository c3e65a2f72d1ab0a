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
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// linux/inet_diag.h, not in x/sys/unix.
const (
	inetDiagInfo = 2 // INET_DIAG_INFO: struct tcp_info
	inetDiagCong = 4 // INET_DIAG_CONG: congestion control name

	sizeofInetDiagReqV2 = 56
	sizeofInetDiagMsg   = 72
)

// TCP states (include/net/tcp_states.h).
var tcpStateNames = map[uint8]string{
	1: "ESTABLISHED", 2: "SYN-SENT", 3: "SYN-RECV", 4: "FIN-WAIT-1", 5: "FIN-WAIT-2",
	6: "TIME-WAIT", 7: "CLOSE", 8: "CLOSE-WAIT", 9: "LAST-ACK", 10: "LISTEN", 11: "CLOSING",
}

// TCPSocketInfo is the state of one TCP socket as sock_diag reports it: the
// socket addresses and fields of its struct tcp_info.
type TCPSocketInfo struct {
	Local, Remote *net.TCPAddr
	State         string // "ESTABLISHED", ...
	// Inode is the socket's inode: 0 for time-wait sockets and for sockets
	// the application has closed while the kernel still finishes them
	// (FIN-WAIT-1, LAST-ACK, ...).
	Inode uint32
	// Cookie is the kernel's socket cookie (idiag_cookie, as SO_COOKIE
	// reports it): unique to the socket in the namespace for its whole life,
	// closed states included, so it tells sockets apart across dumps even
	// when the inode drops to 0 or a 4-tuple is reused.
	Cookie uint64
	// CongestionControl is the socket's algorithm, "" if not reported.
	CongestionControl string

	// From struct tcp_info. Windows are in packets.
	SndCwnd     uint32
	SndSsthresh uint32
	RTT         time.Duration
	RTTVar      time.Duration
	RTO         time.Duration
	Retransmits uint8 // current consecutive retransmissions (tcpi_retransmits)
	// CAState is the congestion-avoidance state (tcpi_ca_state): 0 Open,
	// 1 Disorder, 2 CWR, 3 Recovery, 4 Loss (entered at a retransmission
	// timeout). Every kernel.
	CAState uint8
	// Backoff is the exponential backoff of the retransmission timer
	// (tcpi_backoff): raised at each timeout, reset by an RTT sample.
	Backoff      uint8
	Retrans      uint32 // segments retransmitted and not yet acknowledged
	TotalRetrans uint32
	Lost         uint32
	SndMSS       uint32
	AdvMSS       uint32
	PMTU         uint32
	RcvSsthresh  uint32
	BytesAcked   uint64 // 0 when the kernel's tcp_info is too short
	// DSACKDups counts segments the peer reported received twice (D-SACK):
	// retransmissions that were not needed (tcpi_dsack_dups, Linux 4.19+;
	// not on the Xavier's 4.9).
	DSACKDups uint32
	// TotalRTO counts retransmission timeouts of the socket's life
	// (tcpi_total_rto, Linux 6.7+).
	TotalRTO uint32
	// SegsOut counts the segments the socket sent in its life, in MSS units
	// (a TSO/GSO packet counts as the segments it is cut into),
	// retransmissions and pure ACKs included (tcpi_segs_out, Linux 4.2+). It
	// wraps at 2^32.
	SegsOut uint32
	// HasDSACK, HasTotalRTO and HasSegsOut say whether the kernel's
	// tcp_info carried those fields.
	HasDSACK, HasTotalRTO, HasSegsOut bool
	// HasInfo is false when the kernel sent no tcp_info (time-wait sockets).
	HasInfo bool
}

// TCPSockets returns the TCP sockets of the namespace, in any state but
// LISTEN, whose remote address is in dst (nil: all), with their tcp_info.
// Both address families are dumped, so an IPv6 socket talking to an
// IPv4-mapped address matches an IPv4 dst.
func (h *Handle) TCPSockets(dst *net.IPNet) ([]TCPSocketInfo, error) {
	var out []TCPSocketInfo
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		socks, err := h.dumpTCP(fam)
		if err != nil {
			return nil, err
		}
		for _, s := range socks {
			if s.State == "LISTEN" {
				continue
			}
			if dst == nil || dst.Contains(s.Remote.IP) {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func (h *Handle) dumpTCP(fam uint8) ([]TCPSocketInfo, error) {
	msgs, err := execute(h.diag, unix.NETLINK_SOCK_DIAG, func() *nl.NetlinkRequest {
		req := nl.NewNetlinkRequest(unix.SOCK_DIAG_BY_FAMILY, unix.NLM_F_DUMP)
		b := make([]byte, sizeofInetDiagReqV2)
		b[0] = fam
		b[1] = unix.IPPROTO_TCP
		b[2] = 1<<(inetDiagInfo-1) | 1<<(inetDiagCong-1)
		nativeEndian.PutUint32(b[4:8], 0xffffffff) // all states
		req.AddData(rawData(b))
		return req
	}, unix.SOCK_DIAG_BY_FAMILY)
	if err != nil {
		return nil, fmt.Errorf("sock_diag dump (family %d): %w", fam, err)
	}
	out := make([]TCPSocketInfo, 0, len(msgs))
	for _, m := range msgs {
		s, err := parseInetDiag(m)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func parseInetDiag(b []byte) (TCPSocketInfo, error) {
	var s TCPSocketInfo
	if len(b) < sizeofInetDiagMsg {
		return s, fmt.Errorf("short inet_diag_msg: %d bytes", len(b))
	}
	fam := b[0]
	s.State = tcpStateNames[b[1]]
	if s.State == "" {
		s.State = fmt.Sprintf("STATE-%d", b[1])
	}
	sport := binary.BigEndian.Uint16(b[4:6])
	dport := binary.BigEndian.Uint16(b[6:8])
	addr := func(off int) net.IP {
		if fam == unix.AF_INET {
			return net.IP(append([]byte(nil), b[off:off+4]...))
		}
		return net.IP(append([]byte(nil), b[off:off+16]...))
	}
	s.Local = &net.TCPAddr{IP: addr(8), Port: int(sport)}
	s.Remote = &net.TCPAddr{IP: addr(24), Port: int(dport)}
	// idiag_cookie[2]: the low then the high half of the cookie.
	s.Cookie = uint64(nativeEndian.Uint32(b[44:48])) | uint64(nativeEndian.Uint32(b[48:52]))<<32
	s.Inode = nativeEndian.Uint32(b[68:72])
	attrs, err := parseAttrs(b[sizeofInetDiagMsg:])
	if err != nil {
		return s, fmt.Errorf("parse inet_diag attributes: %w", err)
	}
	for _, a := range attrs {
		switch a.Type {
		case inetDiagCong:
			s.CongestionControl = strings.TrimRight(string(a.Value), "\x00")
		case inetDiagInfo:
			parseTCPInfo(a.Value, &s)
		}
	}
	return s, nil
}

// Offsets in struct tcp_info (include/uapi/linux/tcp.h) of the fields read
// here, and the end of each counter the agent reports: a kernel provides a
// counter when the tcp_info it sends is at least that long. The struct only
// ever grows at its end, so its length says which fields a kernel has,
// whatever its version number says (vendor kernels backport): 104 bytes up
// to tcpi_total_retrans (every kernel the agent runs on), 168 on 4.9, 224
// on 4.19, 232 on 5.4 to 6.1, 248 on 6.7, 280 on 6.18.
const (
	tcpiBytesAcked      = 120 // __u64, Linux 4.1
	tcpiSegsOut         = 136 // __u32, Linux 4.2
	tcpiDSACKDups       = 216 // __u32, Linux 4.19
	tcpiTotalRTO        = 240 // __u16, Linux 6.7
	tcpiTotalRetransEnd = 104
	tcpiSegsOutEnd      = tcpiSegsOut + 4
	tcpiDSACKDupsEnd    = tcpiDSACKDups + 4
	tcpiTotalRTOEnd     = tcpiTotalRTO + 2
)

// tcpInfoCounters are the tcp_info counters the agent reads, in struct
// order, each with the tcp_info length that carries it.
var tcpInfoCounters = [...]struct {
	name string
	end  int
}{
	{"tcpi_total_retrans", tcpiTotalRetransEnd},
	{"tcpi_segs_out", tcpiSegsOutEnd},
	{"tcpi_dsack_dups", tcpiDSACKDupsEnd},
	{"tcpi_total_rto", tcpiTotalRTOEnd},
}

// TCPInfoCounters names the counters (tcpi_total_retrans, tcpi_segs_out,
// tcpi_dsack_dups, tcpi_total_rto, in that order) that a struct tcp_info of
// n bytes carries.
func TCPInfoCounters(n int) []string {
	var out []string
	for _, c := range tcpInfoCounters {
		if n >= c.end {
			out = append(out, c.name)
		}
	}
	return out
}

// parseTCPInfo reads struct tcp_info (linux/tcp.h) by offset, tolerating a
// kernel that sends a shorter or longer struct.
func parseTCPInfo(b []byte, s *TCPSocketInfo) {
	if len(b) < tcpiTotalRetransEnd {
		return
	}
	s.HasInfo = true
	at := func(off int) uint32 { return nativeEndian.Uint32(b[off:]) }
	us := func(off int) time.Duration { return time.Duration(at(off)) * time.Microsecond }
	s.CAState = b[1]
	s.Retransmits = b[2]
	s.Backoff = b[4]
	s.RTO = us(8)
	s.SndMSS = at(16)
	s.Lost = at(32)
	s.Retrans = at(36)
	s.PMTU = at(60)
	s.RcvSsthresh = at(64)
	s.RTT = us(68)
	s.RTTVar = us(72)
	s.SndSsthresh = at(76)
	s.SndCwnd = at(80)
	s.AdvMSS = at(84)
	s.TotalRetrans = at(100)
	if len(b) >= tcpiBytesAcked+8 {
		s.BytesAcked = nativeEndian.Uint64(b[tcpiBytesAcked:])
	}
	if len(b) >= tcpiSegsOutEnd {
		s.SegsOut, s.HasSegsOut = at(tcpiSegsOut), true
	}
	if len(b) >= tcpiDSACKDupsEnd {
		s.DSACKDups, s.HasDSACK = at(tcpiDSACKDups), true
	}
	if len(b) >= tcpiTotalRTOEnd {
		s.TotalRTO, s.HasTotalRTO = uint32(nativeEndian.Uint16(b[tcpiTotalRTO:])), true
	}
}
