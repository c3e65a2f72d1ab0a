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

package main

import (
	"math"
	"slices"
	"time"

	"github.com/nettune/nettune/internal/vehiclesim"
)

// dist is a sorted latency sample.
type dist []time.Duration

func newDist(parts ...[]time.Duration) dist {
	var d dist
	for _, p := range parts {
		d = append(d, p...)
	}
	slices.Sort(d)
	return d
}

// q is the nearest-rank quantile: the smallest sample with at least
// q x n samples at or below it.
func (d dist) q(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func (d dist) max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[len(d)-1]
}

// atLeast counts samples >= t.
func (d dist) atLeast(t time.Duration) int {
	i, _ := slices.BinarySearch(d, t)
	return len(d) - i
}

// armResult aggregates every run of one arm.
type armResult struct {
	Arm  *arm
	Runs []*runResult
	D    dist

	Lost, Gaps, Expected int
	Window               time.Duration

	Topic                connStats
	Senders, All, HeavyH tcpDelta
	PortDrops            uint64
	OtherDrops           uint64
	PortSentBytes        uint64
	PortSentPackets      uint64

	SoloBytes     int64
	SoloDuration  time.Duration
	HeavyBytes    int64
	HeavyDuration time.Duration
	BurstRounds   int
	BurstBytes    int64
	BurstDuration time.Duration
	BurstMaxRound time.Duration
	BurstTimes    dist
	UDPSent       int64
	UDPReceived   int64
	CPUBusy       float64
	CPUSelf       float64
	CPUPressure   float64
	TimerLate     time.Duration
}

func aggregate(a *arm, runs []*runResult) *armResult {
	r := &armResult{Arm: a, Runs: runs}
	var lats [][]time.Duration
	var burstTimes [][]time.Duration
	for _, x := range runs {
		lats = append(lats, x.Lat)
		r.Lost += x.Lost
		r.Gaps += x.Gaps
		r.Expected += x.Expected
		r.Window += x.Window
		r.Topic.Retrans += x.Topic.Retrans
		r.Topic.RTOs += x.Topic.RTOs
		r.Topic.MaxCwnd = max(r.Topic.MaxCwnd, x.Topic.MaxCwnd)
		r.Topic.MaxBackoff = max(r.Topic.MaxBackoff, x.Topic.MaxBackoff)
		r.Topic.Conns += x.Topic.Conns
		r.Topic.Reconns += x.Topic.Reconns
		for _, p := range []struct{ dst, src *tcpDelta }{{&r.Senders, &x.Senders}, {&r.All, &x.AllHosts}, {&r.HeavyH, &x.Heavy}} {
			p.dst.Retrans += p.src.Retrans
			p.dst.Timeouts += p.src.Timeouts
			p.dst.LossProbes += p.src.LossProbes
			p.dst.OutSegs += p.src.OutSegs
		}
		r.PortDrops += x.PortDrops
		r.OtherDrops += x.OtherDrops
		r.PortSentBytes += x.PortSentBytes
		r.PortSentPackets += x.PortSentPackets
		r.SoloBytes += x.Solo.BytesReceived
		r.SoloDuration += x.Solo.Duration
		r.HeavyBytes += x.HeavyStats.BytesReceived
		r.HeavyDuration += x.HeavyStats.Duration
		r.BurstRounds += x.BurstStats.Rounds
		r.BurstBytes += x.BurstStats.BytesReceived
		r.BurstDuration += x.BurstStats.Duration
		r.BurstMaxRound = max(r.BurstMaxRound, x.BurstStats.MaxRoundTime())
		burstTimes = append(burstTimes, x.BurstStats.RoundTimes)
		r.UDPSent += x.ForeignStats.BytesSent
		r.UDPReceived += x.ForeignStats.BytesReceived
		r.CPUBusy += x.CPUBusy / float64(len(runs))
		r.CPUSelf += x.CPUSelf / float64(len(runs))
		r.CPUPressure += x.CPUPressure / float64(len(runs))
		r.TimerLate = max(r.TimerLate, x.TimerLate)
	}
	r.D = newDist(lats...)
	r.BurstTimes = newDist(burstTimes...)
	return r
}

// topicMbps is the acknowledged topic goodput over the measured windows.
func (r *armResult) topicMbps(size int) float64 {
	if r.Window <= 0 {
		return 0
	}
	return float64(len(r.D)) * float64(size) * 8 / r.Window.Seconds() / 1e6
}

func (r *armResult) heavyMbps() float64 {
	return mbps(r.HeavyBytes, r.HeavyDuration)
}

func (r *armResult) soloMbps() float64 {
	return mbps(r.SoloBytes, r.SoloDuration)
}

func (r *armResult) burstMbps() float64 {
	return mbps(r.BurstBytes, r.BurstDuration)
}

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds() / 1e6
}

// udpMbps is the foreign UDP goodput that reached the receiver.
func (r *armResult) udpMbps() float64 {
	var d time.Duration
	for _, x := range r.Runs {
		d += x.ForeignStats.Duration
	}
	return mbps(r.UDPReceived, d)
}

// aggregateMbps is the goodput of every flow into the receiver: topics,
// heavy transfer, incast and foreign UDP.
func (r *armResult) aggregateMbps(topicSize int) float64 {
	return r.topicMbps(topicSize) + r.heavyMbps() + r.burstMbps() + r.udpMbps()
}

// receiverMbps is what the receiver's switch port delivered over the windows.
func (r *armResult) receiverMbps() float64 {
	return mbps(int64(r.PortSentBytes), r.Window)
}

var _ = vehiclesim.UDPPayload
