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

package v1alpha1

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestVehicleReportsRoundTrip(t *testing.T) {
	in := []VehicleReport{
		{Vehicle: "av-002", Revision: "p-abc", Verified: true, Hardware: []string{"orin", "xavier"}, Counters: []string{CounterTotalRetrans, CounterSegsOut}},
		{Vehicle: "av-001", Failed: true, Mixed: true, UnreachableSince: time.Unix(1795707781, 0).UTC()},
		{Vehicle: "av-003", Revision: "p-def", Counters: []string{}, Deferred: true, GateClosed: true},
	}
	s := EncodeVehicleReports(in)
	if got := strings.Count(s, "\n"); got != 3 {
		t.Fatalf("%d lines, want 3:\n%s", got, s)
	}
	if !strings.Contains(s, "av-003 p-def DG ") {
		t.Errorf("a deferred vehicle with its gate closed is not flagged DG:\n%s", s)
	}
	if !strings.HasPrefix(s, "av-001 ") {
		t.Errorf("not sorted by vehicle:\n%s", s)
	}
	out, err := ParseVehicleReports(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []VehicleReport{in[1], in[0], in[2]}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, want)
	}
	if _, err := ParseVehicleReports("av-001 p-abc V\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a short line: %v, want an error naming line 1", err)
	}
	// A flag a reader does not know is ignored (a newer cluster's report).
	if rs, err := ParseVehicleReports("av-001 p-abc VZ 0 - ?\n"); err != nil || len(rs) != 1 || !rs[0].Verified {
		t.Errorf("a report with an unknown flag: %+v %v", rs, err)
	}
	if rs, err := ParseVehicleReports(""); err != nil || len(rs) != 0 {
		t.Errorf("empty report: %v %v", rs, err)
	}
}
