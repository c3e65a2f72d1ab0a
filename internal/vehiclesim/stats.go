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
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nettune/nettune/node-agent/kernel"
)

// PortStats are the counters and settings of one tbf queue: a switch egress
// port (SwitchStats) or a host's NIC (NICStats).
type PortStats struct {
	Host string // host behind the port (or owning the NIC)
	Dev  string // the device the tbf sits on
	Kind string // "tbf"

	RateBits   uint64 // configured rate, bit/s
	BurstBytes uint64 // token bucket as the kernel rounded it
	LimitBytes uint64 // queue limit (netlink TCA_TBF_PARMS)

	SentBytes      uint64 // dequeued towards the host (wire bytes less FCS/preamble)
	SentPackets    uint64
	Drops          uint64 // frames dropped: queue full (the buffer overflowed)
	Overlimits     uint64 // times the queue had to wait for tokens
	Requeues       uint64
	BacklogBytes   uint64 // queued now
	BacklogPackets uint64
}

// Sub returns the counters of s minus those of before (settings and the
// instantaneous backlog are s's).
func (s PortStats) Sub(before PortStats) PortStats {
	s.SentBytes -= before.SentBytes
	s.SentPackets -= before.SentPackets
	s.Drops -= before.Drops
	s.Overlimits -= before.Overlimits
	s.Requeues -= before.Requeues
	return s
}

type tcQdisc struct {
	Kind    string `json:"kind"`
	Dev     string `json:"dev"`
	Root    bool   `json:"root"`
	Options struct {
		Rate  uint64          `json:"rate"` // bytes/s
		Burst json.RawMessage `json:"burst"`
	} `json:"options"`
	Bytes      uint64 `json:"bytes"`
	Packets    uint64 `json:"packets"`
	Drops      uint64 `json:"drops"`
	Overlimits uint64 `json:"overlimits"`
	Requeues   uint64 `json:"requeues"`
	Backlog    uint64 `json:"backlog"`
	Qlen       uint64 `json:"qlen"`
}

// qdiscStats parses `tc -s -j qdisc show` in ns into root tbf stats by device
// and fills LimitBytes from netlink.
func qdiscStats(ns string) (map[string]PortStats, error) {
	out, err := command(context.Background(), "", "tc", "-n", ns, "-s", "-j", "qdisc", "show")
	if err != nil {
		return nil, err
	}
	var qs []tcQdisc
	if err := json.Unmarshal([]byte(out), &qs); err != nil {
		return nil, fmt.Errorf("parsing tc -s -j qdisc show in %s: %w", ns, err)
	}
	res := map[string]PortStats{}
	for _, q := range qs {
		if q.Kind != "tbf" || !q.Root {
			continue
		}
		burst := strings.Trim(string(q.Options.Burst), `"`)
		burst, _, _ = strings.Cut(strings.TrimSuffix(burst, "b"), "b/") // 65500 or "3000b/1"
		bb, _ := strconv.ParseUint(burst, 10, 64)
		res[q.Dev] = PortStats{
			Dev: q.Dev, Kind: q.Kind,
			RateBits: q.Options.Rate * 8, BurstBytes: bb,
			SentBytes: q.Bytes, SentPackets: q.Packets, Drops: q.Drops,
			Overlimits: q.Overlimits, Requeues: q.Requeues,
			BacklogBytes: q.Backlog, BacklogPackets: q.Qlen,
		}
	}
	h, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	defer nh.Close()
	for dev, s := range res {
		l, err := nh.LinkByName(dev)
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", dev, ns, err)
		}
		qds, err := nh.QdiscList(l)
		if err != nil {
			return nil, fmt.Errorf("qdiscs of %s in %s: %w", dev, ns, err)
		}
		for _, qd := range qds {
			if t, ok := qd.(*netlink.Tbf); ok && t.Parent == netlink.HANDLE_ROOT {
				s.LimitBytes = uint64(t.Limit)
			}
		}
		res[dev] = s
	}
	return res, nil
}

// SwitchStats returns the tbf of every switch egress port, by port name
// (Host.SwitchPort). Drops there are frames the switch buffer could not hold.
func (v *Vehicle) SwitchStats() (map[string]PortStats, error) {
	all, err := qdiscStats(v.Switch)
	if err != nil {
		return nil, err
	}
	res := map[string]PortStats{}
	for _, h := range v.Hosts {
		s, ok := all[h.SwitchPort]
		if !ok {
			return nil, fmt.Errorf("switch port %s (host %s) has no tbf", h.SwitchPort, h.Name)
		}
		s.Host = h.Name
		res[h.SwitchPort] = s
	}
	return res, nil
}

// NICStats returns the tbf shaping the host's NIC egress (lan0); an error
// when the vehicle was built with HostRate "none".
func (h *Host) NICStats() (PortStats, error) {
	all, err := qdiscStats(h.Netns)
	if err != nil {
		return PortStats{}, err
	}
	s, ok := all[h.Dev]
	if !ok {
		return PortStats{}, fmt.Errorf("host %s: %s has no tbf", h.Name, h.Dev)
	}
	s.Host = h.Name
	return s, nil
}

// TCPCounters returns the host namespace's TCP counters (retransmitted
// segments, RTO timeouts, loss probes, and every /proc/net/snmp and netstat
// counter), read the way the node agent reads them.
func (h *Host) TCPCounters() (kernel.TCPCounters, error) {
	kh, err := h.handle()
	if err != nil {
		return kernel.TCPCounters{}, err
	}
	defer kh.Close()
	return kh.ReadTCPCounters()
}
