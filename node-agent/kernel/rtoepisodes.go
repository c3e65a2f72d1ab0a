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
	"net/netip"
)

// TCPCALoss is tcpi_ca_state TCP_CA_Loss: the socket is recovering from a
// retransmission timeout.
const TCPCALoss = 4

// RTOEstimator estimates retransmission timeouts per peer on kernels whose
// tcp_info has no tcpi_total_rto (before 6.7), from what every kernel gives:
// polled again and again, each poll a sock_diag dump of the namespace's
// sockets and the namespace's TcpExt TCPTimeouts.
//
// Per poll, a socket shows an RTO directly when tcpi_retransmits (the
// timeouts of the current episode) or tcpi_backoff rose since the previous
// poll, or when it entered TCP_CA_Loss: those RTOs go to its peer. The rest
// of the namespace's TCPTimeouts increase (every timeout of every socket)
// is shared among the sockets whose tcpi_total_retrans rose in the interval
// (a timeout always retransmits), in proportion to what each retransmitted;
// with one peer retransmitting it all goes to that peer. An increase no
// socket can take waits one poll (a timeout between the dump and the
// counters' read shows its retransmission in the next dump); then it is
// counted in Unattributed (the sockets that timed out closed before a poll
// saw them retransmit).
//
// Each poll must dump the sockets first and read TCPTimeouts after.
//
// The state fields are transient on 5.10 and 6.1: tcp_ack resets
// icsk_retransmits as soon as snd_una advances, tcp_ack_update_rtt resets
// icsk_backoff at the next RTT sample (timestamps give one on the ACK of
// the retransmission) and the socket leaves Loss when the data outstanding
// at the timeout is acknowledged, so at a poll interval far above the RTT
// most timeouts are found through TCPTimeouts, not through the state.
//
// The zero value is ready; it is not safe for concurrent use.
type RTOEstimator struct {
	started  bool
	timeouts uint64
	socks    map[uint64]rtoSock
	// Totals are the estimated timeouts per peer address since the first
	// poll (the first poll only records).
	Totals map[netip.Addr]float64
	// Unattributed are TCPTimeouts increases that no socket of the poll or
	// the next had retransmitted for.
	Unattributed float64
	// carry is the last poll's increase no socket retransmitted for.
	carry float64
	// Direct and Attributed split the estimate by how it was found: seen in
	// a socket's state, or shared out from TCPTimeouts.
	Direct, Attributed float64
	// Shared is, per peer, the part of Totals shared out from TCPTimeouts
	// (Attributed by peer): a peer that retransmitted in an interval in
	// which another peer's socket timed out unseen gets a part of that
	// timeout, so this part may belong to another peer.
	Shared map[netip.Addr]float64
}

type rtoSock struct {
	retransmits, backoff uint8
	loss                 bool
	totalRetrans         uint32
}

// Observe takes one poll: socks as TCPSockets returned them and timeouts
// the namespace's TcpExt TCPTimeouts at the same moment (hasTimeouts false
// when it could not be read: then only the sockets' state counts).
func (e *RTOEstimator) Observe(socks []TCPSocketInfo, timeouts uint64, hasTimeouts bool) {
	if e.Totals == nil {
		e.Totals = map[netip.Addr]float64{}
	}
	first := !e.started
	e.started = true
	var deltaT float64
	if hasTimeouts {
		if !first && timeouts >= e.timeouts {
			deltaT = float64(timeouts - e.timeouts)
		}
		e.timeouts = timeouts
	}

	type cand struct {
		peer    netip.Addr
		direct  float64
		retrans float64
	}
	var cands []cand
	var direct, retrans float64
	seen := make(map[uint64]rtoSock, len(socks))
	for _, s := range socks {
		if !s.HasInfo {
			continue
		}
		cur := rtoSock{retransmits: s.Retransmits, backoff: s.Backoff, loss: s.CAState == TCPCALoss, totalRetrans: s.TotalRetrans}
		seen[s.Cookie] = cur
		if first {
			continue
		}
		prev, known := e.socks[s.Cookie]
		if !known {
			prev = rtoSock{} // opened since the last poll: all it did counts
		}
		r := float64(cur.totalRetrans - prev.totalRetrans) // u32, wraps
		d := rtoSeen(prev, cur, r > 0)
		if d == 0 && r == 0 {
			continue
		}
		cands = append(cands, cand{peer: peerAddr(s.Remote), direct: d, retrans: r})
		direct += d
		retrans += r
	}
	e.socks = seen
	if first {
		return
	}
	rest := max(deltaT-direct, 0)
	if retrans == 0 {
		e.Unattributed += e.carry
		e.carry = rest
		e.Direct += direct
		for _, c := range cands {
			e.Totals[c.peer] += c.direct
		}
		return
	}
	rest += e.carry
	e.carry = 0
	for _, c := range cands {
		est := c.direct
		if rest > 0 && retrans > 0 {
			share := rest * c.retrans / retrans
			est += share
			if share > 0 {
				if e.Shared == nil {
					e.Shared = map[netip.Addr]float64{}
				}
				e.Shared[c.peer] += share
			}
		}
		if est > 0 {
			e.Totals[c.peer] += est
		}
	}
	e.Direct += direct
	e.Attributed += rest
}

// Pending is the TCPTimeouts increase of the last poll that no socket had
// retransmitted for: the next poll attributes it, or counts it
// unattributed.
func (e *RTOEstimator) Pending() float64 { return e.carry }

// rtoSeen is how many timeouts a socket's state shows between two polls:
// the rise of tcpi_retransmits (or all of it when it fell to a new,
// shorter episode), else the rise of tcpi_backoff, else 1 for entering
// Loss; the last two only when the socket retransmitted in between (a
// zero-window probe raises the backoff too, and SACK reneging enters Loss,
// without a timeout).
func rtoSeen(prev, cur rtoSock, retransmitted bool) float64 {
	switch {
	case cur.retransmits > prev.retransmits:
		return float64(cur.retransmits - prev.retransmits)
	case cur.retransmits > 0 && cur.retransmits < prev.retransmits:
		return float64(cur.retransmits)
	case !retransmitted:
		return 0
	case cur.backoff > prev.backoff:
		return float64(cur.backoff - prev.backoff)
	case cur.loss && !prev.loss:
		return 1
	}
	return 0
}

func peerAddr(a *net.TCPAddr) netip.Addr {
	if a == nil {
		return netip.Addr{}
	}
	ip, _ := netip.AddrFromSlice(a.IP)
	return ip.Unmap()
}
