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
	"testing"
)

func rtoSockAt(cookie uint64, peer string, retransmits, backoff, ca uint8, totalRetrans uint32) TCPSocketInfo {
	return TCPSocketInfo{Cookie: cookie, Remote: &net.TCPAddr{IP: net.ParseIP(peer), Port: 5000}, HasInfo: true,
		Retransmits: retransmits, Backoff: backoff, CAState: ca, TotalRetrans: totalRetrans}
}

// TestRTOEstimator walks the estimator through polls whose outcome is known.
func TestRTOEstimator(t *testing.T) {
	b, c := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	var e RTOEstimator
	// First poll: records only, whatever the sockets show.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 2, 2, TCPCALoss, 10), rtoSockAt(2, "10.0.0.3", 0, 0, 0, 0)}, 100, true)
	if len(e.Totals) != 0 {
		t.Fatalf("first poll counted %v", e.Totals)
	}
	// Socket 1's episode goes on (3 timeouts in a row now); TCPTimeouts +1.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 3, 3, TCPCALoss, 11), rtoSockAt(2, "10.0.0.3", 0, 0, 0, 0)}, 101, true)
	if e.Totals[b] != 1 || e.Direct != 1 {
		t.Fatalf("continuing episode: totals %v direct %v, want 1 for %s", e.Totals, e.Direct, b)
	}
	// Both recovered (state back to Open, counters reset); 3 timeouts in
	// the namespace, socket 1 retransmitted 3 segments, socket 2 none:
	// all three go to b.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 14), rtoSockAt(2, "10.0.0.3", 0, 0, 0, 0)}, 104, true)
	if e.Totals[b] != 4 || e.Totals[c] != 0 {
		t.Fatalf("recovered between polls: totals %v, want b 4, c 0", e.Totals)
	}
	// Two timeouts while both retransmitted, 1 and 3 segments: shared 1:3.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 15), rtoSockAt(2, "10.0.0.3", 0, 0, 0, 3)}, 106, true)
	if e.Totals[b] != 4.5 || e.Totals[c] != 1.5 {
		t.Fatalf("shared: totals %v, want b 4.5, c 1.5", e.Totals)
	}
	// What was shared out, per peer: b 3 (recovered between polls) + 0.5,
	// c 1.5; the rest of b's total (1) was seen in its socket's state.
	if e.Shared[b] != 3.5 || e.Shared[c] != 1.5 || e.Shared[b]+e.Shared[c] != e.Attributed {
		t.Fatalf("shared out: %v (attributed %v), want b 3.5, c 1.5", e.Shared, e.Attributed)
	}
	// Socket 2 closed with a timeout no open socket retransmitted for: it
	// waits one poll, then counts as unattributed.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 15)}, 107, true)
	if e.Pending() != 1 || e.Unattributed != 0 {
		t.Fatalf("closed socket: pending %v unattributed %v", e.Pending(), e.Unattributed)
	}
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 15)}, 107, true)
	if e.Unattributed != 1 || e.Pending() != 0 || e.Totals[b] != 4.5 {
		t.Fatalf("closed socket: unattributed %v totals %v", e.Unattributed, e.Totals)
	}
	// A timeout between the dump and the counters: its retransmission
	// shows in the next poll, which attributes it.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 15)}, 108, true)
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 16)}, 108, true)
	if e.Totals[b] != 5.5 || e.Unattributed != 1 {
		t.Fatalf("late retransmission: totals %v unattributed %v", e.Totals, e.Unattributed)
	}
	// A new socket seen for the first time in Loss after one timeout
	// (a SYN or data timeout since it opened): counted from zero.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 0, 0, 16), rtoSockAt(3, "10.0.0.3", 1, 1, TCPCALoss, 1)}, 109, true)
	if e.Totals[c] != 2.5 {
		t.Fatalf("new socket: totals %v, want c 2.5", e.Totals)
	}
	// Without TCPTimeouts only the state counts; a backoff raised by a
	// zero-window probe (nothing retransmitted) does not.
	e.Observe([]TCPSocketInfo{rtoSockAt(1, "10.0.0.2", 0, 2, 0, 16), rtoSockAt(3, "10.0.0.3", 0, 2, TCPCALoss, 2)}, 0, false)
	if e.Totals[b] != 5.5 || e.Totals[c] != 3.5 {
		t.Fatalf("state only: totals %v, want b 5.5 (probe backoff not counted), c 3.5", e.Totals)
	}
}
