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
	"strconv"
	"strings"
)

// NodeCounter is a node-level TCP counter: a TcpExt field of
// /proc/net/netstat, counted over every socket of a network namespace
// (not per peer). On kernels whose tcp_info lacks a per-connection counter
// (4.9 has neither tcpi_dsack_dups nor tcpi_total_rto) it is what remains.
type NodeCounter struct {
	// Name is the TcpExt field, e.g. "TCPTimeouts".
	Name string
	// Meaning says what the counter counts on this kernel.
	Meaning string
}

// NodeCounterDef is a TcpExt counter the agent exports, and the agent
// metric it is exported as.
type NodeCounterDef struct {
	// Name is the TcpExt field.
	Name string
	// Metric is the agent's metric (one series per node).
	Metric string
	// Meaning is what it counts, on every kernel that has it.
	Meaning string
	// PerSocket is the tcp_info counter that counts the same per
	// connection, "" when none.
	PerSocket string
}

// NodeCounterDefs are the TcpExt counters the agent reports and exports, in
// that order. All five exist on 4.9 and later.
var NodeCounterDefs = []NodeCounterDef{
	{Name: "TCPTimeouts", Metric: "nettune_node_tcpext_timeouts_total", PerSocket: "tcpi_total_rto",
		Meaning: "retransmission timeouts of every TCP socket of the node, all peers together"},
	{Name: "TCPSpuriousRTOs", Metric: "nettune_node_tcpext_spurious_rtos_total",
		Meaning: "retransmission timeouts found spurious by F-RTO, all peers together"},
	{Name: "TCPLossProbes", Metric: "nettune_node_tcpext_loss_probes_total",
		Meaning: "tail loss probes sent, all peers together"},
	{Name: "TCPDSACKRecv", Metric: "nettune_node_tcpext_dsack_recv_total", PerSocket: "tcpi_dsack_dups",
		Meaning: "D-SACKs received for already acknowledged data (a segment the peer got twice: a spurious retransmission), all peers together"},
	{Name: "TCPDSACKOfoRecv", Metric: "nettune_node_tcpext_dsack_ofo_recv_total",
		Meaning: "D-SACKs received for out-of-order data, all peers together"},
}

// NodeCounters lists the counters of NodeCounterDefs that counters (as
// ReadTCPCounters' All: "TcpExt.Name") has, with their meaning on the
// kernel release.
func NodeCounters(release string, counters map[string]int64) []NodeCounter {
	var out []NodeCounter
	for _, d := range NodeCounterDefs {
		if _, ok := counters["TcpExt."+d.Name]; !ok {
			continue
		}
		m := d.Meaning
		if d.Name == "TCPTimeouts" && TimeoutsFirstRTOOnly(release) {
			m += "; on this kernel (4.9 before 4.9.207) only the first timeout of an episode and only from the Open state: it undercounts"
		}
		out = append(out, NodeCounter{Name: d.Name, Meaning: m})
	}
	return out
}

// TimeoutsFirstRTOOnly reports whether release is a 4.9 kernel before
// 4.9.207, whose TCPTimeouts counted only the first RTO from the Open state
// (tcp_retransmit_timer counted it only when icsk_retransmits was 0 and the
// socket was in neither Recovery, Loss nor Disorder and had no SACKed
// data).
func TimeoutsFirstRTOOnly(release string) bool {
	v := strings.SplitN(release, ".", 3)
	if len(v) < 3 || v[0] != "4" || v[1] != "9" {
		return false
	}
	sub := v[2]
	if i := strings.IndexFunc(sub, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		sub = sub[:i]
	}
	n, err := strconv.Atoi(sub)
	return err == nil && n < 207
}
