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
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestTrialsLogRoundTrip(t *testing.T) {
	log := filepath.Join(t.TempDir(), "trials.jsonl")
	c := config{vehicles: 4, canaries: 2, maxTrial: 150 * time.Second}
	run := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	tr := trial{arm: "rto2ms-noquickack", n: 3, canary: "av-001,av-002", verified: 4200 * time.Millisecond, load: "1.00 2.00 3.00",
		level: 1, run: run.Format(time.RFC3339),
		by: map[string]decision{"judge": {phase: "Failed", after: 40 * time.Second, enoughAt: 20 * time.Second, msg: "slow"}, "guard": {after: 150 * time.Second}},
		ev: &evidence{window: time.Minute,
			canary:   cohortEvidence{vehicles: 2, msgs: 1000, over: map[int]float64{50: 3, 200: 1}, tcp: map[string]int64{"Tcp.OutSegs": 9000}},
			baseline: cohortEvidence{vehicles: 2, msgs: 1010, over: map[int]float64{50: 2, 200: 0}, tcp: map[string]int64{"Tcp.OutSegs": 9100}}}}
	other := tr
	other.n = 4
	if err := appendRecord(log, toRecord(c, "abc", run, tr)); err != nil {
		t.Fatal(err)
	}
	// Another commit and another fleet shape are logged but never counted
	// with abc's 4x2 trials.
	if err := appendRecord(log, toRecord(c, "def", run, other)); err != nil {
		t.Fatal(err)
	}
	c8 := c
	c8.vehicles = 8
	if err := appendRecord(log, toRecord(c8, "abc", run, other)); err != nil {
		t.Fatal(err)
	}
	recs, err := readRecords(log, record{Commit: "abc", Vehicles: 4, Canaries: 2, MaxTrial: c.maxTrial.String()}.shape())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("want the one trial of commit abc with 4 vehicles, got %d", len(recs))
	}
	if got := recs[0].trial(); !reflect.DeepEqual(got, tr) {
		t.Fatalf("round trip changed the trial:\n got %+v\nwant %+v", got, tr)
	}
}

func TestTrialsLogBadLineNamed(t *testing.T) {
	log := filepath.Join(t.TempDir(), "trials.jsonl")
	if err := os.WriteFile(log, []byte("{\"commit\":\"abc\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readRecords(log, "abc/4/2/2m30s")
	if err == nil || !strings.Contains(err.Error(), "trials.jsonl:2") {
		t.Fatalf("want an error naming line 2, got %v", err)
	}
}

func TestReportRowsPerLevel(t *testing.T) {
	mk := func(arm string, level float64, phase string) trial {
		return trial{arm: arm, level: level, by: map[string]decision{"judge": {phase: phase, after: 30 * time.Second}}}
	}
	r := &report{c: config{arms: []string{"aa", "cwnd1"}}, methods: []method{{name: "judge"}},
		trials: []trial{mk("aa", 0, "Successful"), mk("cwnd1", 0, "Failed"), mk("aa", 1, "Successful"), mk("aa", 1, "Failed")}}
	table := r.table()
	for _, want := range []string{
		"| idle (no background load) | aa | judge | 1 | false rollback: 0/1",
		"| idle (no background load) | cwnd1 | judge | 1 | detection: 1/1",
		"| both CPUs busy (100 % background load) | aa | judge | 2 | false rollback: 1/2",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "both CPUs busy (100 % background load) | cwnd1") {
		t.Errorf("a level without trials of an arm has a row:\n%s", table)
	}
}

func TestWithinTwoIntervalsCountsMeasurements(t *testing.T) {
	for _, c := range []struct {
		gap  time.Duration
		want bool
	}{
		{0, true},
		{10 * time.Second, true},
		{19999 * time.Millisecond, true},
		{20032 * time.Millisecond, true}, // the second measurement after, taken 32 ms late
		{24 * time.Second, true},
		{26 * time.Second, false},
		{29900 * time.Millisecond, false}, // the third, taken 100 ms early
		{30 * time.Second, false},
	} {
		if got := withinIntervals(c.gap, 10*time.Second, 2); got != c.want {
			t.Errorf("withinIntervals(%s, 10s, 2) = %v, want %v", c.gap, got, c.want)
		}
	}

	// The report counts a decision at the second measurement after the
	// minimum samples as within two intervals, however late the scheduler
	// took it, and the third as not.
	spec := &v1alpha1.AnalysisSpec{Interval: &metav1.Duration{Duration: 10 * time.Second}}
	mk := func(after time.Duration) trial {
		return trial{arm: "aa", by: map[string]decision{"judge": {phase: "Successful", after: after, enoughAt: 20 * time.Second}}}
	}
	r := &report{c: config{arms: []string{"aa"}}, methods: []method{{name: "judge", spec: spec}}}
	c := r.cells([]trial{mk(40032 * time.Millisecond), mk(39998 * time.Millisecond), mk(50010 * time.Millisecond)})["aa"]["judge"]
	if c.withEnough != 3 || c.withinTwo != 2 {
		t.Errorf("within two intervals: %d of %d, want 2 of 3", c.withinTwo, c.withEnough)
	}
}
