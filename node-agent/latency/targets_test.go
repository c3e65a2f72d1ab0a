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
	"reflect"
	"testing"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

func TestTargets(t *testing.T) {
	t.Parallel()
	profiles := []v1alpha1.SourceProfile{{Name: "xavier-lan", Revision: "xavier-lan-5f7c9d"}, {Name: "orin-lan", Revision: "orin-lan-0a1b2c"}}
	peerB := v1alpha1.Peer{Host: "xavier-b", Address: "192.168.10.2", ProbePort: 9102}
	peerC := v1alpha1.Peer{Host: "orin-c", Address: "192.168.10.3", ProbePort: 9102}
	route := func(dst, peer, profile string) v1alpha1.NodeRoute {
		return v1alpha1.NodeRoute{Destination: dst, Peer: peer, Profile: profile}
	}
	tests := []struct {
		name string
		spec v1alpha1.NodeNetTuningSpec
		want []Target
	}{
		{name: "empty spec", spec: v1alpha1.NodeNetTuningSpec{}, want: nil},
		{
			name: "one target per peer with a probe port, in spec order",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes:   []v1alpha1.NodeRoute{route("192.168.10.3/32", "orin-c", "orin-lan"), route("192.168.10.2/32", "xavier-b", "xavier-lan")},
				Peers:    []v1alpha1.Peer{peerB, {Host: "no-port", Address: "192.168.10.9"}, peerC},
			},
			want: []Target{
				{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "xavier-lan", Revision: "xavier-lan-5f7c9d"},
				{Peer: "orin-c", Address: "192.168.10.3", Port: 9102, Profile: "orin-lan", Revision: "orin-lan-0a1b2c"},
			},
		},
		{
			name: "a peer without a route is untuned: no profile, no revision",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes:   []v1alpha1.NodeRoute{route("192.168.10.2/32", "xavier-b", "xavier-lan")},
				Peers:    []v1alpha1.Peer{peerB, peerC},
			},
			want: []Target{
				{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "xavier-lan", Revision: "xavier-lan-5f7c9d"},
				{Peer: "orin-c", Address: "192.168.10.3", Port: 9102},
			},
		},
		{
			name: "of several routes to the peer, the one holding its address",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes: []v1alpha1.NodeRoute{
					route("10.0.0.2/32", "xavier-b", "orin-lan"), // the peer's second address
					route("192.168.10.2/32", "xavier-b", "xavier-lan"),
				},
				Peers: []v1alpha1.Peer{peerB},
			},
			want: []Target{{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "xavier-lan", Revision: "xavier-lan-5f7c9d"}},
		},
		{
			name: "a peer route not holding the address still names the profile",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes:   []v1alpha1.NodeRoute{route("10.0.0.2/32", "xavier-b", "xavier-lan")},
				Peers:    []v1alpha1.Peer{peerB},
			},
			want: []Target{{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "xavier-lan", Revision: "xavier-lan-5f7c9d"}},
		},
		{
			name: "without a peer route, the most specific explicit route holding the address",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes: []v1alpha1.NodeRoute{
					route("192.168.0.0/16", "", "xavier-lan"),
					route("192.168.10.0/24", "", "orin-lan"),
					route("192.168.10.2/32", "orin-c", "xavier-lan"), // rendered for another peer
				},
				Peers: []v1alpha1.Peer{peerB},
			},
			want: []Target{{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "orin-lan", Revision: "orin-lan-0a1b2c"}},
		},
		{
			name: "a profile missing from spec.profiles has no revision",
			spec: v1alpha1.NodeNetTuningSpec{
				Routes: []v1alpha1.NodeRoute{route("192.168.10.2/32", "xavier-b", "xavier-lan")},
				Peers:  []v1alpha1.Peer{peerB},
			},
			want: []Target{{Peer: "xavier-b", Address: "192.168.10.2", Port: 9102, Profile: "xavier-lan"}},
		},
		{
			name: "IPv6",
			spec: v1alpha1.NodeNetTuningSpec{
				Profiles: profiles,
				Routes:   []v1alpha1.NodeRoute{route("fd00::/64", "", "orin-lan")},
				Peers:    []v1alpha1.Peer{{Host: "v6", Address: "fd00::2", ProbePort: 9102}},
			},
			want: []Target{{Peer: "v6", Address: "fd00::2", Port: 9102, Profile: "orin-lan", Revision: "orin-lan-0a1b2c"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Targets(tc.spec); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Targets =\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
	if got := (Target{Address: "fd00::2", Port: 9102}).Addr(); got != "[fd00::2]:9102" {
		t.Errorf("Addr = %q", got)
	}
}
