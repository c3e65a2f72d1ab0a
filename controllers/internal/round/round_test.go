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

package round_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/internal/measure"
	"github.com/nettune/nettune/controllers/internal/round"
	"github.com/nettune/nettune/controllers/planner"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/scheme"
)

const ns = "nettune-system"

var (
	t0       = time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	measured = t0.Add(3 * time.Second)
)

// querier answers every query with value, and counts the queries.
type querier struct {
	mu    sync.Mutex
	asked []string
	value float64
}

func (q *querier) Query(_ context.Context, query string, _ time.Time) (float64, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.asked = append(q.asked, query)
	return q.value, true, nil
}

// fixture is a profile mid-rollout: its canary av-1 verified the revision
// in force, av-2 stays on the stable one, and step 0 is an analysis that
// takes two measurements, one Fail ending it.
type fixture struct {
	t      *testing.T
	c      client.Client
	scheme *runtime.Scheme
	p      *v1alpha1.NetTuningProfile
	rev    string
	q      *querier
}

func newFixture(t *testing.T, canaryValue float64) *fixture {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	one, two := int32(1), int32(2)
	maxValue := "20"
	p := &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "lan", UID: "uid-lan", Generation: 4},
		Spec: v1alpha1.NetTuningProfileSpec{Rollout: &v1alpha1.RolloutSpec{
			Canary: v1alpha1.CanarySpec{Count: &one},
			Steps:  []v1alpha1.RolloutStep{{Analysis: &v1alpha1.AnalysisStep{Name: "latency"}}},
			Analyses: []v1alpha1.AnalysisSpec{{
				Name: "latency", Provider: v1alpha1.ProviderLoki, Measurements: &two, MaxValue: &maxValue,
				Query: `avg(latency_ms{revision="{{ .Revision }}", vehicle=~"{{ .Vehicles }}"})`,
			}},
		}},
	}
	rev := revision.Name(p)
	step := int32(0)
	started := metav1.NewTime(t0.Add(-10 * time.Minute))
	p.Status = v1alpha1.NetTuningProfileStatus{
		CurrentRevision: rev, StableRevision: "lan-stable", CurrentStep: &step, StepStarted: &started,
		CanaryVehicles: []string{"av-1"}, Phase: v1alpha1.PhaseProgressing, ObservedGeneration: 3,
		Revisions: []v1alpha1.Revision{
			{Name: "lan-stable", Generation: 1, Outcome: v1alpha1.OutcomeStable},
			{Name: rev, Generation: 4, Outcome: v1alpha1.OutcomeProgressing},
		},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(p.DeepCopy()).Build()
	// A revision the status no longer names: the round prunes it.
	if err := revision.NewStore(c, ns).Ensure(context.Background(), p, "lan-gone", s); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, c: c, scheme: s, p: p, rev: rev, q: &querier{value: canaryValue}}
}

func (f *fixture) stored(name string) bool {
	f.t.Helper()
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &appsv1.ControllerRevision{})
	return err == nil
}

// round is the round of the fixture's profile; calls records its hooks in
// the order they ran.
func (f *fixture) round(calls *[]string) round.Round {
	return round.Round{
		Revisions: revision.NewStore(f.c, ns), Scheme: f.scheme,
		Backends: analysis.Backends{LokiAddress: "http://loki.test", Queriers: func(v1alpha1.AnalysisProvider, string, *httpauth.Credentials) (analysis.Querier, error) {
			return f.q, nil
		}},
		Observe: func(_ context.Context, in *planner.Input) (measure.Kernels, error) {
			*calls = append(*calls, "observe")
			if !f.stored(in.Revision) {
				f.t.Errorf("observing before the revision %s is stored", in.Revision)
			}
			if in.Profile != "lan" || in.Revision != f.rev || in.Generation != 4 || in.Status.CurrentRevision != f.rev {
				f.t.Errorf("input from the profile: %s %s %d %s", in.Profile, in.Revision, in.Generation, in.Status.CurrentRevision)
			}
			in.Now, in.Rollout = t0, f.p.Spec.Rollout
			in.Vehicles = []planner.Vehicle{
				{Name: "av-1", Assigned: f.rev, Verified: true, VerifiedAt: t0.Add(-10 * time.Minute), LastSeen: t0, Nodes: 1, VerifiedNodes: 1},
				{Name: "av-2", Assigned: "lan-stable", Verified: true, VerifiedAt: t0.Add(-time.Hour), LastSeen: t0, Nodes: 1, VerifiedNodes: 1},
			}
			return func([]string) map[string][]analysis.NodeKernel { return nil }, nil
		},
		MeasureClock: func() time.Time { return measured },
		Replan: func(in *planner.Input) {
			*calls = append(*calls, "replan")
			if len(in.Results) != 1 || in.Results[0].Name != "latency" {
				f.t.Errorf("replanning on results %+v, want latency's", in.Results)
			}
		},
	}
}

// TestRound: a round stores the revision before observing, takes the
// measurement the plan asks for at the measuring clock, plans again on its
// result, carries the decision out, then prunes; the planner's status is
// the whole status.
func TestRound(t *testing.T) {
	f := newFixture(t, 12)
	var calls []string
	rd := f.round(&calls)
	rd.Apply = func(_ context.Context, out planner.Output) error {
		calls = append(calls, "apply")
		if !f.stored("lan-gone") {
			t.Errorf("pruned before the decision was carried out")
		}
		if len(out.Status.Analysis) != 1 || out.Status.Analysis[0].Successful != 1 {
			t.Errorf("carrying out %+v, want the plan that recorded the measurement", out.Status.Analysis)
		}
		return nil
	}
	res, err := rd.Run(context.Background(), f.p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, ","); got != "observe,replan,apply" {
		t.Errorf("hooks ran %s, want observe,replan,apply", got)
	}
	if len(f.q.asked) != 2 || !strings.Contains(f.q.asked[0], `revision="`+f.rev+`"`) || !strings.Contains(f.q.asked[0], "av-1") {
		t.Errorf("queries %q, want the canary's then the baseline's", f.q.asked)
	}
	if len(res.Taken) != 1 || res.Taken[0].Measurement.Verdict != analysis.VerdictPass || !res.Taken[0].Measurement.At.Equal(measured) {
		t.Fatalf("taken %+v, want one Pass at the measuring clock", res.Taken)
	}
	if typ, reason, _ := res.Taken[0].Event(); typ != "Normal" || reason != "AnalysisSuccessful" {
		t.Errorf("event %s %s, want Normal AnalysisSuccessful", typ, reason)
	}
	st := res.Status
	if len(st.Analysis) != 1 || st.Analysis[0].Phase != v1alpha1.AnalysisRunning || st.Analysis[0].Successful != 1 || st.Analysis[0].CanaryValue != "12" ||
		st.Analysis[0].LastMeasured == nil || !st.Analysis[0].LastMeasured.Time.Equal(measured) {
		t.Errorf("status.analysis %+v, want latency Running, 1 successful at 12, measured at the measuring clock", st.Analysis)
	}
	if st.ObservedGeneration != 4 || st.VehicleReport != "" || st.Clusters != nil {
		t.Errorf("observedGeneration %d, vehicleReport %q, clusters %v; want 4 and none of the others", st.ObservedGeneration, st.VehicleReport, st.Clusters)
	}
	if want := measured.Add(time.Minute).Sub(t0); len(res.Measures) != 1 || res.RequeueAfter != want {
		t.Errorf("measures %v requeue %s, want latency asked again in %s (a minute after it was measured)", res.Measures, res.RequeueAfter, want)
	}
	if f.stored("lan-gone") || !f.stored(f.rev) {
		t.Errorf("revisions after the round: lan-gone %v, %s %v; want only the named one kept", f.stored("lan-gone"), f.rev, f.stored(f.rev))
	}
}

// TestRoundFailingApplyStillPrunes: a decision not carried out fails the
// round, after the revisions are pruned all the same.
func TestRoundFailingApplyStillPrunes(t *testing.T) {
	f := newFixture(t, 12)
	var calls []string
	rd := f.round(&calls)
	boom := errors.New("work not written")
	rd.Apply = func(context.Context, planner.Output) error { return boom }
	if _, err := rd.Run(context.Background(), f.p); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the apply's", err)
	}
	if f.stored("lan-gone") {
		t.Errorf("lan-gone kept after a failed apply")
	}
}

// TestRoundWithoutMeasurements: nothing due, nothing measured, one plan.
func TestRoundWithoutMeasurements(t *testing.T) {
	f := newFixture(t, 12)
	last := metav1.NewTime(t0.Add(-10 * time.Second))
	f.p.Status.Analysis = []v1alpha1.AnalysisResult{{Name: "latency", Phase: v1alpha1.AnalysisRunning, Successful: 1, LastMeasured: &last, Started: &last}}
	var calls []string
	res, err := f.round(&calls).Run(context.Background(), f.p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, ","); got != "observe" || len(f.q.asked) != 0 || len(res.Taken) != 0 {
		t.Errorf("hooks %s, %d queries, %d taken; want the observation only", got, len(f.q.asked), len(res.Taken))
	}
	if len(res.Measures) != 1 || res.RequeueAfter <= 0 || res.RequeueAfter > 50*time.Second {
		t.Errorf("measures %v requeue %s, want latency asked again in 50s", res.Measures, res.RequeueAfter)
	}
}

// TestRoundFailingMeasurement: a canary over its ceiling is a Fail, which
// the second plan acts on (rolled back) and the event warns of.
func TestRoundFailingMeasurement(t *testing.T) {
	f := newFixture(t, 35)
	var calls []string
	res, err := f.round(&calls).Run(context.Background(), f.p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Taken) != 1 || res.Taken[0].Measurement.Verdict != analysis.VerdictFail {
		t.Fatalf("taken %+v, want one Fail", res.Taken)
	}
	if typ, reason, _ := res.Taken[0].Event(); typ != "Warning" || reason != "AnalysisFailed" {
		t.Errorf("event %s %s, want Warning AnalysisFailed", typ, reason)
	}
	if res.Status.Phase != v1alpha1.PhaseRolledBack || res.Status.FailedRevision != f.rev || res.Assign["av-1"] != "lan-stable" {
		t.Errorf("phase %s failed %s av-1 on %s; want rolled back to lan-stable", res.Status.Phase, res.Status.FailedRevision, res.Assign["av-1"])
	}
}
