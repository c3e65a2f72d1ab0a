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

package latency

import (
	"fmt"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// Topic is one emulated middleware topic: Size-byte messages at Rate
// messages per second.
type Topic struct {
	Name string
	Size int
	Rate float64 // messages per second
}

// Bounds of a topic.
const (
	MaxTopicSize = 16 << 20
	MaxTopicRate = 10000.0
)

var topicName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// ParseTopic parses "name:size:rate", e.g. "planning:4096:100" (4 KiB at
// 100 Hz). size is in bytes (0..16 MiB), rate in messages per second
// (0 < rate <= 10000).
func ParseTopic(s string) (Topic, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Topic{}, fmt.Errorf("topic %q: want name:size:rate, e.g. planning:4096:100", s)
	}
	t := Topic{Name: parts[0]}
	if !topicName.MatchString(t.Name) {
		return Topic{}, fmt.Errorf("topic %q: name must be 1-63 of [A-Za-z0-9_.-]", s)
	}
	size, err := strconv.Atoi(parts[1])
	if err != nil || size < 0 || size > MaxTopicSize {
		return Topic{}, fmt.Errorf("topic %q: size must be 0..%d bytes", s, MaxTopicSize)
	}
	t.Size = size
	rate, err := strconv.ParseFloat(parts[2], 64)
	if err != nil || !(rate > 0) || rate > MaxTopicRate || math.IsInf(rate, 0) {
		return Topic{}, fmt.Errorf("topic %q: rate must be > 0 and <= %g messages per second", s, MaxTopicRate)
	}
	t.Rate = rate
	return t, nil
}

func (t Topic) String() string {
	return fmt.Sprintf("%s:%d:%s", t.Name, t.Size, strconv.FormatFloat(t.Rate, 'f', -1, 64))
}

// Target is one peer host the emulator sends to, with the tuning in force on
// the way there (the labels of its samples).
type Target struct {
	// Peer is the peer's host name (value of the host label).
	Peer string
	// Address and Port are the peer agent's probe listener.
	Address string
	Port    int
	// Profile is the NetTuningProfile tuning the route to the peer, and
	// Revision that profile's revision rendered on this node; both empty
	// when no route of the spec reaches the peer.
	Profile, Revision string
}

// Addr is Address:Port.
func (t Target) Addr() string { return net.JoinHostPort(t.Address, strconv.Itoa(t.Port)) }

// Targets derives the emulator's targets from a node's applied spec: one per
// peer with a probe port, in spec order. The profile is that of the route
// rendered for the peer (route.peer == peer.host), preferring the one whose
// destination holds the peer's address; without such a route, the most
// specific explicit route holding the address (that route's tuning is what
// the probe's packets get). The revision is the profile's entry in
// spec.profiles.
func Targets(spec v1alpha1.NodeNetTuningSpec) []Target {
	revisions := make(map[string]string, len(spec.Profiles))
	for _, p := range spec.Profiles {
		revisions[p.Name] = p.Revision
	}
	var out []Target
	for _, p := range spec.Peers {
		if p.ProbePort == 0 {
			continue
		}
		t := Target{Peer: p.Host, Address: p.Address, Port: int(p.ProbePort)}
		if r := routeFor(spec.Routes, p); r != nil {
			t.Profile = r.Profile
			t.Revision = revisions[r.Profile]
		}
		out = append(out, t)
	}
	return out
}

// routeFor picks the route whose tuning the traffic to peer p gets.
func routeFor(routes []v1alpha1.NodeRoute, p v1alpha1.Peer) *v1alpha1.NodeRoute {
	ip := net.ParseIP(p.Address)
	contains := func(r *v1alpha1.NodeRoute) (bool, int) {
		_, n, err := net.ParseCIDR(r.Destination)
		if err != nil || ip == nil || !n.Contains(ip) {
			return false, 0
		}
		ones, _ := n.Mask.Size()
		return true, ones
	}
	var byPeer *v1alpha1.NodeRoute
	for i := range routes {
		r := &routes[i]
		if r.Peer != p.Host {
			continue
		}
		if ok, _ := contains(r); ok {
			return r
		}
		if byPeer == nil {
			byPeer = r
		}
	}
	if byPeer != nil {
		return byPeer
	}
	var best *v1alpha1.NodeRoute
	bestLen := -1
	for i := range routes {
		r := &routes[i]
		if r.Peer != "" {
			continue // rendered for another peer
		}
		if ok, ones := contains(r); ok && ones > bestLen {
			best, bestLen = r, ones
		}
	}
	return best
}
