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

package vehiclesim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestEvidence measures the simulated vehicle under configuration variants (NIC
// shaping, offloads, bucket size) and logs a table; it asserts nothing about
// the numbers. Run with NETTUNE_TESTBED_EVIDENCE=1 -v.
func TestEvidence(t *testing.T) {
	if os.Getenv("NETTUNE_TESTBED_EVIDENCE") == "" {
		t.Skip("set NETTUNE_TESTBED_EVIDENCE=1")
	}
	type variant struct {
		name string
		o    Options
	}
	variants := []variant{
		{"default (TSO/GSO off, NIC shaped, burst 6056)", Options{}},
		{"offloads kept", Options{KeepOffloads: true}},
		{"NIC unshaped", Options{HostRate: NoShaping}},
		{"NIC unshaped + offloads kept", Options{HostRate: NoShaping, KeepOffloads: true}},
		{"burst 3028", Options{BurstBytes: 3028}},
		{"burst 16k", Options{BurstBytes: 16384}},
		{"burst 64k", Options{BurstBytes: 65536}},
		{"burst 64k + offloads kept", Options{BurstBytes: 65536, KeepOffloads: true}},
		{"burst 64k + NIC unshaped + offloads kept", Options{BurstBytes: 65536, HostRate: NoShaping, KeepOffloads: true}},
	}
	if f := os.Getenv("NETTUNE_TESTBED_VARIANT"); f != "" {
		var keep []variant
		for _, v := range variants {
			if strings.Contains(v.name, f) {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	var rows []string
	for _, vr := range variants {
		v := newT(t, vr.o)
		a, b, c := v.Hosts[0], v.Hosts[1], v.Hosts[2]
		// 1. bulk a -> b for 2 s.
		before, _ := v.SwitchStats()
		rxb0, rxp0 := rxStats(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ts, err := HeavyTransfer(ctx, a, b)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		rxb1, rxp1 := rxStats(t, b)
		after, _ := v.SwitchStats()
		pb := after[b.SwitchPort].Sub(before[b.SwitchPort])
		// 2. single sender 1 MB burst c -> a, 10 rounds.
		before = after
		bs1, err := Burst(context.Background(), []*Host{c}, a, 1<<20, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 9 {
			s, err := Burst(context.Background(), []*Host{c}, a, 1<<20, 0)
			if err != nil {
				t.Fatal(err)
			}
			bs1.RoundTimes = append(bs1.RoundTimes, s.RoundTimes...)
		}
		after, _ = v.SwitchStats()
		p1 := after[a.SwitchPort].Sub(before[a.SwitchPort])
		// 3. incast 5 x 256 KB into a, 20 rounds every 100 ms.
		before = after
		r0, to0 := retrans(t, v.Hosts[1:])
		ctx, cancel = context.WithTimeout(context.Background(), 4*time.Second)
		bs, err := Burst(ctx, v.Hosts[1:], a, 256<<10, 100*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		r1, to1 := retrans(t, v.Hosts[1:])
		after, _ = v.SwitchStats()
		pi := after[a.SwitchPort].Sub(before[a.SwitchPort])
		rows = append(rows, fmt.Sprintf("| %s | %.0f Mbit/s | %d B | %d B | %d | %d | %s | %d | %d | %d | %d | %s | %s |",
			vr.name, ts.Throughput()/1e6, pb.SentBytes/max(pb.SentPackets, 1), (rxb1-rxb0)/max(rxp1-rxp0, 1), pb.Drops,
			p1.Drops, bs1.MaxRoundTime().Round(100*time.Microsecond),
			bs.Rounds, pi.Drops, r1-r0, to1-to0, median(bs.RoundTimes).Round(100*time.Microsecond), bs.MaxRoundTime().Round(100*time.Microsecond)))
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n| variant | bulk goodput | avg frame at switch port (tc) | avg skb into receiver lan0 | bulk drops | 1x1MB burst drops (10 rounds) | 1x1MB max round | incast rounds | incast drops (skbs) | incast retransmitted segments | incast RTOs | incast median round | incast max round |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// retrans sums retransmitted segments and RTO timeouts over hosts.
func retrans(t *testing.T, hs []*Host) (segs, rtos uint64) {
	for _, h := range hs {
		c, err := h.TCPCounters()
		if err != nil {
			t.Fatal(err)
		}
		segs += c.RetransSegs
		rtos += c.Timeouts
	}
	return segs, rtos
}

// rxStats returns rx bytes and packets (skbs) of h's lan0.
func rxStats(t *testing.T, h *Host) (uint64, uint64) {
	out, err := command(context.Background(), "", "ip", "-n", h.Netns, "-s", "-j", "link", "show", h.Dev)
	if err != nil {
		t.Fatal(err)
	}
	var ls []struct {
		Stats struct {
			RX struct {
				Bytes   uint64 `json:"bytes"`
				Packets uint64 `json:"packets"`
			} `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -s -j link: %v: %s", err, out)
	}
	return ls[0].Stats.RX.Bytes, ls[0].Stats.RX.Packets
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
