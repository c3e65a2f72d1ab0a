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
	"strings"
	"testing"
	"time"
)

func TestRecommendFromTheSwitchBufferAndTheLoadedRTT(t *testing.T) {
	rtts := make([]time.Duration, 0, 1000)
	for i := range 1000 {
		rtts = append(rtts, 200*time.Microsecond+time.Duration(i)*4*time.Microsecond) // 0.2 .. 4.196 ms
	}
	recs, err := Recommend(Topology{BufferBytes: 131072, LinkBitsPerSecond: 1e9, Receivers: []Receiver{
		{Host: "xavier-b", Senders: 2, RTTs: rtts},
		{Host: "xavier-a", Senders: 1},
		{Host: "xavier-c", Senders: 200},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[0].Host != "xavier-a" || recs[1].Host != "xavier-b" {
		t.Fatalf("recommendations %+v", recs)
	}
	// The field's arithmetic: about 80 segments for one flow in a 128 KB
	// buffer, about 40 for two (1514-byte frames: 86 and 43).
	one, two := recs[0].Parameters, recs[1].Parameters
	if one.Cwnd.Value != 86 || *one.Initcwnd != 71 || *one.Ssthresh != 86 || !*one.Cwnd.Lock || !*one.Quickack {
		t.Errorf("one sender: %+v", one)
	}
	if one.RTOMin != nil {
		t.Errorf("rtoMin %s without RTT samples", one.RTOMin.Duration)
	}
	if two.Cwnd.Value != 43 || *two.Initcwnd != 35 {
		t.Errorf("two senders: %+v", two)
	}
	// p99.9 of the samples is 4.192 ms; x 1.5 = 6.288 ms, rounded up: 7 ms.
	if two.RTOMin == nil || two.RTOMin.Duration != 7*time.Millisecond {
		t.Errorf("rtoMin %v, want 7ms", two.RTOMin)
	}
	why := strings.Join(recs[1].Reasons, "\n")
	for _, want := range []string{"131072 / (2 x 1514-byte frames) = 43", "p99.9 RTT into xavier-b under load is 4.19ms", "quickack on"} {
		if !strings.Contains(why, want) {
			t.Errorf("reasons do not say %q:\n%s", want, why)
		}
	}
	if c := recs[2].Parameters.Cwnd.Value; c != 2 || !strings.Contains(recs[2].Reasons[0], "clamped to 2") {
		t.Errorf("200 senders: cwnd %d, %v", c, recs[2].Reasons)
	}
	if _, err := Recommend(Topology{}); err == nil || !strings.Contains(err.Error(), "switch buffer") {
		t.Errorf("no buffer: %v", err)
	}
}
