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

package experiment

import (
	"fmt"
	"math"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Topology is what the starting parameters are derived from: the switch,
// the links, and per receiving host what was measured under load.
type Topology struct {
	// BufferBytes is the packet buffer of a switch port (e.g. 131072 for a
	// Xavier's SJA1105): every sender into one host shares its port's buffer.
	BufferBytes int64
	// LinkBitsPerSecond is the hosts' link rate (0: unknown).
	LinkBitsPerSecond int64
	// MSS is the segment payload (default 1448: a 1500-byte MTU with TCP
	// timestamps).
	MSS int64
	// Receivers are the hosts traffic goes into.
	Receivers []Receiver
}

// Receiver is one host seen from its senders.
type Receiver struct {
	Host string
	// Senders is the most hosts seen sending into it at once (established
	// connections with data in flight, from sock_diag).
	Senders int
	// RTTs are round-trip times of the connections into it sampled under
	// load (tcpi_rtt, from sock_diag).
	RTTs []time.Duration
}

// Recommendation is the starting parameters for the pairs into one host,
// each with the reasoning behind it.
type Recommendation struct {
	Host       string
	Parameters v1alpha1.TCPParameters
	Reasons    []string
}

// frameOverhead is what a segment adds to its payload on the wire and in a
// switch buffer: IPv4 20 + TCP 20 + timestamps 12 + Ethernet 14 bytes.
const frameOverhead = 66

// rtoMargin multiplies the loaded p99.9 RTT into rto_min.
const rtoMargin = 1.5

// Recommend derives starting parameters per receiving host:
//   - cwnd clamp: the most segments each of the host's concurrent senders
//     may have in flight so that all of them together fit in the switch
//     port's buffer: floor(buffer / (senders x frame));
//   - initcwnd a little below it (5/6, as the field's 25 under 30), so that
//     a new connection's first flight never fills the share alone;
//   - ssthresh equal to the clamp: slow start ends where the clamp is;
//   - rto_min 1.5 x the loaded p99.9 RTT (at least 1 ms, the kernel's
//     floor for the route metric, rounded up to a millisecond): a timer
//     below the RTT tail retransmits what was only late;
//   - quickack on: without it the receiver may delay an ACK by up to 40 ms,
//     which a tight rto_min would take for a loss.
//
// Each number comes with the arithmetic that produced it; what limits it
// (throughput below the link rate when the clamp is under the bandwidth-
// delay product) is said too.
func Recommend(t Topology) ([]Recommendation, error) {
	if t.BufferBytes <= 0 {
		return nil, fmt.Errorf("the switch buffer is unknown: give it (the profile's switchBufferBytes or --switch-buffer)")
	}
	mss := t.MSS
	if mss <= 0 {
		mss = 1448
	}
	frame := mss + frameOverhead
	var out []Recommendation
	rs := append([]Receiver{}, t.Receivers...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Host < rs[j].Host })
	for _, r := range rs {
		rec := Recommendation{Host: r.Host}
		senders := max(r.Senders, 1)
		cwnd := t.BufferBytes / (int64(senders) * frame)
		if cwnd < 2 {
			rec.Reasons = append(rec.Reasons, fmt.Sprintf("cwnd: %d senders into %s share a %d-byte buffer: less than 2 frames of %d bytes each; clamped to 2 (fewer concurrent senders, or a larger buffer, is the real fix)",
				senders, r.Host, t.BufferBytes, frame))
			cwnd = 2
		} else {
			rec.Reasons = append(rec.Reasons, fmt.Sprintf("cwnd %d: %d concurrent sender(s) into %s share the port's %d-byte buffer; %d / (%d x %d-byte frames) = %d segments each in flight at most",
				cwnd, senders, r.Host, t.BufferBytes, t.BufferBytes, senders, frame, cwnd))
		}
		cwnd = min(cwnd, 65535)
		initcwnd := max(cwnd*5/6, 1)
		rec.Reasons = append(rec.Reasons, fmt.Sprintf("initcwnd %d: 5/6 of the clamp, so a new connection's first flight stays inside its share", initcwnd))
		rec.Reasons = append(rec.Reasons, fmt.Sprintf("ssthresh %d: equal to the clamp, slow start ends where the clamp holds anyway", cwnd))
		p := v1alpha1.TCPParameters{
			Cwnd: &v1alpha1.Cwnd{Value: int32(cwnd), Lock: ptr(true)}, Initcwnd: ptr(int32(initcwnd)),
			Ssthresh: ptr(int32(cwnd)), Quickack: ptr(true),
		}
		if q, ok := quantile(r.RTTs, 0.999); ok {
			rto := time.Duration(math.Ceil(float64(q)*rtoMargin/float64(time.Millisecond))) * time.Millisecond
			rto = max(rto, time.Millisecond)
			p.RTOMin = &metav1.Duration{Duration: rto}
			med, _ := quantile(r.RTTs, 0.5)
			rec.Reasons = append(rec.Reasons, fmt.Sprintf("rtoMin %s: the p99.9 RTT into %s under load is %s (median %s, %d samples); x %.1f, rounded up to a millisecond",
				rto, r.Host, q.Round(10*time.Microsecond), med.Round(10*time.Microsecond), len(r.RTTs), rtoMargin))
			if lowest, _ := quantile(r.RTTs, 0); t.LinkBitsPerSecond > 0 {
				bdp := float64(t.LinkBitsPerSecond) / 8 * lowest.Seconds() / float64(frame)
				if float64(cwnd) < bdp {
					rec.Reasons = append(rec.Reasons, fmt.Sprintf("note: the clamp is below the bandwidth-delay product (%.0f segments at %d Mbit/s and the lowest RTT seen, %s): one connection alone cannot fill the link",
						bdp, t.LinkBitsPerSecond/1e6, lowest.Round(10*time.Microsecond)))
				}
			}
		} else {
			rec.Reasons = append(rec.Reasons, fmt.Sprintf("rtoMin: no RTT sample into %s; left to the base profile", r.Host))
		}
		rec.Reasons = append(rec.Reasons, "quickack on: a delayed ACK (up to 40 ms) would look like a loss to a tight rto_min")
		rec.Parameters = p
		out = append(out, rec)
	}
	return out, nil
}

// quantile is the q-quantile of ds (nearest rank); false when empty.
func quantile(ds []time.Duration, q float64) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)], true
}

func ptr[T any](v T) *T { return &v }
