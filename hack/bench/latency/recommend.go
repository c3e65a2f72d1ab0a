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
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/experiment"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/vehiclesim"
	"github.com/nettune/nettune/node-agent/kernel"
)

// sampler watches, through sock_diag in every other host's namespace, the
// TCP connections into one receiving host: how many hosts have data moving
// into it at once, and the RTTs of those connections.
type sampler struct {
	receiver *vehiclesim.Host
	handles  map[string]*kernel.Handle

	mu      sync.Mutex
	senders int             // most hosts seen sending at once
	rtts    []time.Duration // tcpi_rtt of the moving connections
	polls   int
}

func newSampler(v *vehiclesim.Vehicle, receiver *vehiclesim.Host) (*sampler, error) {
	s := &sampler{receiver: receiver, handles: map[string]*kernel.Handle{}}
	for _, h := range v.Hosts {
		if h == receiver {
			continue
		}
		ns, err := netns.GetFromName(h.Netns)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		kh, err := kernel.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		s.handles[h.Name] = kh
	}
	return s, nil
}

// run polls every 20 ms until ctx ends. A connection is moving when its
// bytes acked grew since the previous poll.
func (s *sampler) run(ctx context.Context) {
	dst := &net.IPNet{IP: net.IP(s.receiver.Addr.AsSlice()), Mask: net.CIDRMask(32, 32)}
	acked := map[uint64]uint64{}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		moving := 0
		var rtts []time.Duration
		for _, h := range s.handles {
			socks, err := h.TCPSockets(dst)
			if err != nil {
				continue
			}
			sending := false
			for _, so := range socks {
				if !so.HasInfo || so.State != "ESTABLISHED" {
					continue
				}
				prev, seen := acked[so.Cookie]
				acked[so.Cookie] = so.BytesAcked
				if seen && so.BytesAcked > prev {
					sending = true
					rtts = append(rtts, so.RTT)
				}
			}
			if sending {
				moving++
			}
		}
		s.mu.Lock()
		s.polls++
		s.senders = max(s.senders, moving)
		s.rtts = append(s.rtts, rtts...)
		s.mu.Unlock()
	}
}

func (s *sampler) close() {
	for _, h := range s.handles {
		_ = h.Close()
	}
}

// recommendArm runs the scenario once under kernel defaults (the untuned
// state a user starts from) while sampling the connections into the
// receiver, derives the parameters with experiment.Recommend, and returns
// the arm: the v2 profile with a host pair into the receiver carrying them.
func (b *bench) recommendArm(ctx context.Context, agent *agentRunner, base *arm) (*arm, []string, error) {
	defaults := &arm{Name: "defaults", Title: "kernel defaults"}
	ap, err := agent.apply(ctx, b.v, defaults, b.topics[0], b.receiver)
	if err != nil {
		return nil, nil, fmt.Errorf("applying kernel defaults: %w", err)
	}
	s, err := newSampler(b.v, b.receiver)
	if err != nil {
		return nil, nil, err
	}
	defer s.close()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.run(sctx) }()
	_, runErr := b.runArm(ctx, 0, 0, defaults, ap)
	stop()
	<-done
	if runErr != nil {
		return nil, nil, fmt.Errorf("the sampling run: %w", runErr)
	}
	recs, err := experiment.Recommend(experiment.Topology{
		BufferBytes: vehiclesim.DefaultBufferBytes, LinkBitsPerSecond: 1e9,
		Receivers: []experiment.Receiver{{Host: b.receiver.Name, Senders: s.senders, RTTs: s.rtts}},
	})
	if err != nil {
		return nil, nil, err
	}
	rec := recs[0]
	p := base.Profile.DeepCopy()
	p.Spec.HostPairs = append(p.Spec.HostPairs, v1alpha1.HostPair{From: "*", To: b.receiver.Name, Parameters: rec.Parameters.DeepCopy()})
	a := &arm{Name: "recommended", Profile: p, Revision: p.Name + "-" + revision.Hash(p.Spec),
		Title: fmt.Sprintf("recommended (v2 with the pairs into %s set from sock_diag under load: %s)", b.receiver.Name, experiment.Describe(rec.Parameters))}
	lines := []string{fmt.Sprintf("sampled %d polls of sock_diag in %d hosts' namespaces during one run under kernel defaults: %d senders at once into %s, %d RTT samples",
		s.polls, len(s.handles), s.senders, b.receiver.Name, len(s.rtts))}
	lines = append(lines, rec.Reasons...)
	logf("recommended for the pairs into %s: %s\n  %s", b.receiver.Name, experiment.Describe(rec.Parameters), strings.Join(lines, "\n  "))
	return a, lines, nil
}
