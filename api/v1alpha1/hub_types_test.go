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
	head := ReportHeader{Written: time.Unix(1795707790, 0).UTC(), Generation: 7}
	s := EncodeVehicleReports(head, in)
	if got := strings.Count(s, "\n"); got != 4 {
		t.Fatalf("%d lines, want a header and 3:\n%s", got, s)
	}
	if !strings.HasPrefix(s, "@ 1795707790 7\n") {
		t.Errorf("header: want \"@ 1795707790 7\" first:\n%s", s)
	}
	if !strings.Contains(s, "av-003 p-def DG ") {
		t.Errorf("a deferred vehicle with its gate closed is not flagged DG:\n%s", s)
	}
	if !strings.HasPrefix(strings.SplitN(s, "\n", 2)[1], "av-001 ") {
		t.Errorf("not sorted by vehicle:\n%s", s)
	}
	gotHead, out, err := ParseVehicleReports(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []VehicleReport{in[1], in[0], in[2]}
	if !reflect.DeepEqual(out, want) || gotHead != head {
		t.Errorf("round trip:\n got %+v %+v\nwant %+v %+v", gotHead, out, head, want)
	}
	if _, _, err := ParseVehicleReports("av-001 p-abc V\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a short line: %v, want an error naming line 1", err)
	}
	// A flag a reader does not know is ignored (a newer cluster's report).
	if _, rs, err := ParseVehicleReports("av-001 p-abc VZ 0 - ?\n"); err != nil || len(rs) != 1 || !rs[0].Verified {
		t.Errorf("a report with an unknown flag: %+v %v", rs, err)
	}
	if h, rs, err := ParseVehicleReports(""); err != nil || len(rs) != 0 || h != (ReportHeader{}) {
		t.Errorf("empty report: %v %v %v", h, rs, err)
	}
	// A report without a header (an older controller): a zero header.
	if h, rs, err := ParseVehicleReports(EncodeVehicleReports(ReportHeader{}, in)); err != nil || len(rs) != 3 || h != (ReportHeader{}) {
		t.Errorf("a report without a header: %+v %d vehicles %v", h, len(rs), err)
	}
	// A header-only report: a cluster with no vehicle, still reporting.
	if h, rs, err := ParseVehicleReports(EncodeVehicleReports(head, nil)); err != nil || len(rs) != 0 || h != head {
		t.Errorf("a header alone: %+v %v %v", h, rs, err)
	}
	// Fields a reader does not know after the header's are ignored.
	if h, _, err := ParseVehicleReports("@ 1795707790 7 future\n"); err != nil || h != head {
		t.Errorf("a header with a later field: %+v %v", h, err)
	}
	for _, bad := range []string{"@ 1795707790\n", "@ x 7\n", "@ 1 y\n", "av-001 p-abc V 0 - ?\n@ 1795707790 7\n"} {
		if _, _, err := ParseVehicleReports(bad); err == nil || !strings.Contains(err.Error(), "header") {
			t.Errorf("bad header %q: %v, want an error about the header", bad, err)
		}
	}
}

// TestRevisionFor: a vehicle an assignment names gets that revision, any
// other the stable one; a nil share gives none.
func TestRevisionFor(t *testing.T) {
	h := &HubAssignment{Stable: "lan-r1", Assignments: []RevisionAssignment{{Revision: "lan-r2", Vehicles: []string{"a1", "a2"}}, {Revision: "lan-r3", Vehicles: []string{"a3"}}}}
	revisionFor := h.RevisionFor()
	for v, want := range map[string]string{"a1": "lan-r2", "a2": "lan-r2", "a3": "lan-r3", "a9": "lan-r1"} {
		if got := revisionFor(v); got != want {
			t.Errorf("RevisionFor(%s) = %q, want %q", v, got, want)
		}
	}
	if got := (*HubAssignment)(nil).RevisionFor()("a1"); got != "" {
		t.Errorf("a nil share gives a1 %q, want none", got)
	}
}
