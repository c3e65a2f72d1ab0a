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

package hub

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestHeartbeatOnly(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	vs := []v1alpha1.VehicleReport{{Vehicle: "av-1", Revision: "lan-1", Verified: true}}
	work := func(gen int64, written time.Time, reports []v1alpha1.VehicleReport) *workv1.ManifestWork {
		s := v1alpha1.EncodeVehicleReports(v1alpha1.ReportHeader{Written: written, Generation: 3}, reports)
		w := &workv1.ManifestWork{}
		w.Generation = gen
		w.Status.ResourceStatus.Manifests = []workv1.ManifestCondition{{
			ResourceMeta:    workv1.ManifestResourceMeta{Resource: "nettuningprofiles", Name: "lan"},
			StatusFeedbacks: workv1.StatusFeedbackResult{Values: []workv1.FeedbackValue{{Name: FeedbackName, Value: workv1.FieldValue{Type: workv1.String, String: &s}}}},
		}}
		return w
	}
	moved := []v1alpha1.VehicleReport{{Vehicle: "av-1", Revision: "lan-2", Verified: true}}
	for _, tc := range []struct {
		name     string
		old, cur *workv1.ManifestWork
		want     bool
	}{
		{"the time alone", work(1, at, vs), work(1, at.Add(25*time.Second), vs), true},
		{"unchanged", work(1, at, vs), work(1, at, vs), true},
		{"a vehicle moved", work(1, at, vs), work(1, at.Add(25*time.Second), moved), false},
		{"a new generation of the work", work(1, at, vs), work(2, at, vs), false},
		{"no report before", &workv1.ManifestWork{}, work(1, at, vs), false},
	} {
		if got := HeartbeatOnly(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: HeartbeatOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHeartbeatEndsSilence(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	vs := []v1alpha1.VehicleReport{{Vehicle: "av-1", Revision: "lan-1", Verified: true}}
	work := func(written time.Time, interval time.Duration) *workv1.ManifestWork {
		return heartbeatWork(t, 0, written, interval)
	}
	for _, tc := range []struct {
		name     string
		old, cur *workv1.ManifestWork
		want     bool
	}{
		{"the next heartbeat", work(at, 25*time.Second), work(at.Add(25*time.Second), 25*time.Second), false},
		{"a heartbeat late by two status syncs", work(at, 25*time.Second), work(at.Add(44*time.Second), 25*time.Second), false},
		{"a 1 s heartbeat through a 10 s status sync", work(at, time.Second), work(at.Add(20*time.Second), time.Second), false},
		{"the first report after 2 minutes of silence", work(at, 25*time.Second), work(at.Add(2*time.Minute), 25*time.Second), true},
		{"no copy of the profile to read the interval from", work(at, 25*time.Second), reportWork(v1alpha1.ReportHeader{Written: at.Add(time.Second), Generation: 3}, 0, vs...), true},
		{"no time in the report before", reportWork(v1alpha1.ReportHeader{}, 0, vs...), work(at, 25*time.Second), true},
	} {
		if got := HeartbeatEndsSilence(tc.old, tc.cur, "lan", 10*time.Second, nil); got != tc.want {
			t.Errorf("%s: HeartbeatEndsSilence = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestHeartbeatIntervalKeptPerGeneration: the interval read from a work's
// generation is used for its heartbeats, and read again from a new one.
func TestHeartbeatIntervalKeptPerGeneration(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	work := func(gen int64, written time.Time, interval time.Duration) *workv1.ManifestWork {
		return heartbeatWork(t, gen, written, interval)
	}
	var c ReportIntervals
	// Generation 1 asks a 25 s heartbeat: 45 s apart is not a silence.
	if HeartbeatEndsSilence(work(1, at, 25*time.Second), work(1, at.Add(45*time.Second), 25*time.Second), "lan", 0, &c) {
		t.Fatal("45 s apart with a 25 s heartbeat counted a silence")
	}
	// The kept interval answers for generation 1 even from a work whose
	// manifest cannot be read.
	bare := work(1, at.Add(90*time.Second), 25*time.Second)
	bare.Spec.Workload.Manifests = nil
	if HeartbeatEndsSilence(work(1, at.Add(45*time.Second), 25*time.Second), bare, "lan", 0, &c) {
		t.Fatal("the interval kept for generation 1 was not used")
	}
	// Generation 2 asks a 10 s heartbeat: 45 s apart is a silence.
	if !HeartbeatEndsSilence(work(2, at, 10*time.Second), work(2, at.Add(45*time.Second), 10*time.Second), "lan", 0, &c) {
		t.Fatal("generation 2's 10 s heartbeat was judged with generation 1's 25 s")
	}
	c.forget("w-1")
	if _, ok := c.get(work(2, at, 10*time.Second)); ok {
		t.Fatal("a forgotten work's interval is still kept")
	}
}

// heartbeatWork is work w-1 at generation gen placing profile lan's copy
// with a reportInterval, its report written at written.
func heartbeatWork(t *testing.T, gen int64, written time.Time, interval time.Duration) *workv1.ManifestWork {
	t.Helper()
	w := reportWork(v1alpha1.ReportHeader{Written: written, Generation: 3}, 0, v1alpha1.VehicleReport{Vehicle: "av-1", Revision: "lan-1", Verified: true})
	w.UID, w.Generation = "w-1", gen
	cp := &v1alpha1.NetTuningProfile{}
	cp.APIVersion, cp.Kind, cp.Name = v1alpha1.GroupVersion.String(), "NetTuningProfile", "lan"
	cp.Spec.HubAssignment = &v1alpha1.HubAssignment{Stable: "lan-1", ReportInterval: &metav1.Duration{Duration: interval}}
	m, err := manifest(cp)
	if err != nil {
		t.Fatal(err)
	}
	w.Spec.Workload.Manifests = []workv1.Manifest{m}
	return w
}
