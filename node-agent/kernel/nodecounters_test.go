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
	"strings"
	"testing"
)

// TestNodeCountersMeaning: the counters listed are the ones the namespace
// has, in NodeCounterDefs order, and TCPTimeouts says it undercounts on 4.9
// before 4.9.207 only.
func TestNodeCountersMeaning(t *testing.T) {
	all := map[string]int64{"TcpExt.TCPTimeouts": 3, "TcpExt.TCPDSACKRecv": 0, "TcpExt.TCPLossProbes": 1, "Tcp.RetransSegs": 9}
	for _, tc := range []struct {
		release    string
		undercount bool
	}{
		{"4.9.140-tegra", true}, // L4T R32.4
		{"4.9.206", true},
		{"4.9.207", false},
		{"4.9.253-tegra", false}, // L4T R32.7
		{"5.10.0-32-arm64", false},
		{"4.19.100", false},
		{"4.9", false},
	} {
		got := NodeCounters(tc.release, all)
		var names []string
		for _, c := range got {
			names = append(names, c.Name)
			if c.Meaning == "" {
				t.Errorf("%s %s: no meaning", tc.release, c.Name)
			}
		}
		if strings.Join(names, ",") != "TCPTimeouts,TCPLossProbes,TCPDSACKRecv" {
			t.Errorf("%s: counters %v", tc.release, names)
		}
		if u := strings.Contains(got[0].Meaning, "undercounts"); u != tc.undercount {
			t.Errorf("%s: TCPTimeouts %q: undercount %v, want %v", tc.release, got[0].Meaning, u, tc.undercount)
		}
	}
	if got := NodeCounters("6.1.0", map[string]int64{}); got != nil {
		t.Errorf("no TcpExt: %v", got)
	}
}
