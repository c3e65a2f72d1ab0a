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

package experiment_test

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/experiment"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/envtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

const (
	expSlowQuery = `sum by (host, peer) (count_over_time({job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} | json | latency_ms > {{ .ThresholdMs }} [{{ .Window }}]))`
	expTotal     = `sum by (host, peer) (count_over_time({job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"} [{{ .Window }}]))`
)

func experimentOf(name, profile string, duration time.Duration, variants ...v1alpha1.ExperimentVariant) *v1alpha1.NetTuningExperiment {
	return &v1alpha1.NetTuningExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.NetTuningExperimentSpec{
			Profile: profile, Variants: variants, MaxPercent: envtest.Ptr(int32(100)),
			Duration: metav1.Duration{Duration: duration},
			Analysis: v1alpha1.AnalysisSpec{
				Name: "slow-messages", Provider: v1alpha1.ProviderLoki, Interval: envtest.Dur(2 * time.Second),
				MinSamples: envtest.Ptr(int64(300)), FailureLimit: envtest.Ptr(int32(0)),
				Judge: &v1alpha1.JudgeSpec{
					Threshold: envtest.Dur(10 * time.Millisecond), Quantile: envtest.Ptr("0.99"), Confidence: envtest.Ptr("0.99"),
					MaxIncrease: envtest.Ptr("0.01"), SlowQuery: expSlowQuery, TotalQuery: expTotal, Step: envtest.Dur(time.Second),
				},
			},
		},
	}
}

func cwndVariant(name string, cwnd, initcwnd int32) v1alpha1.ExperimentVariant {
	p := v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: cwnd}}
	if initcwnd > 0 {
		p.Initcwnd = envtest.Ptr(initcwnd)
	}
	return v1alpha1.ExperimentVariant{Name: name, Parameters: p}
}

// messagePusher writes probe messages for every vehicle of a running
// experiment, labeled with the revision the vehicle runs, each slower than
// the 10 ms threshold with its arm's probability, as the agents' Loki
// shipping does.
type messagePusher struct {
	t      *testing.T
	e      *envtest.Fleet
	l      *testenv.Loki
	slow   map[string]float64 // arm -> share of slow messages
	mu     sync.Mutex
	pushed map[string]int // arm -> messages pushed
}

func (m *messagePusher) run(ctx context.Context, name string) {
	rng := rand.New(rand.NewSource(42))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		x := &v1alpha1.NetTuningExperiment{}
		if err := m.e.Client.Get(ctx, client.ObjectKey{Name: name}, x); err != nil || x.Status.Phase != v1alpha1.ExperimentRunning {
			last = time.Now()
			continue
		}
		now := time.Now()
		for _, arm := range x.Status.Arms {
			rev := x.Status.BaseRevision
			if arm.Name != v1alpha1.ControlArm {
				if arm.Phase != v1alpha1.ArmMeasuring && arm.Phase != v1alpha1.ArmApplying {
					continue
				}
				p := &v1alpha1.NetTuningProfile{}
				if err := m.e.Client.Get(ctx, client.ObjectKey{Name: arm.Profile}, p); err != nil || p.Status.CurrentRevision == "" {
					continue
				}
				rev = p.Status.CurrentRevision
			}
			for _, c := range arm.Cohorts {
				for _, v := range c.Vehicles {
					const n = 40 // 80 messages a second per vehicle
					entries := make([]testenv.LokiEntry, n)
					for i := range entries {
						ms := 2 + rng.Float64()*2
						if rng.Float64() < m.slow[arm.Name] {
							ms = 40 + rng.Float64()*40
						}
						entries[i] = testenv.LokiEntry{Time: last.Add(time.Duration(i) * now.Sub(last) / n), Line: fmt.Sprintf(`{"latency_ms":%.3f}`, ms)}
					}
					m.l.Push(m.t, map[string]string{"job": "nettune-probe", "vehicle": v, "host": "xavier-a", "peer": "xavier-b", "revision": rev}, entries)
					m.mu.Lock()
					m.pushed[arm.Name] += n
					m.mu.Unlock()
				}
			}
		}
		last = now
	}
}

func waitExperiment(e *envtest.Fleet, name string, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningExperiment) bool) *v1alpha1.NetTuningExperiment {
	t := e.T()
	t.Helper()
	x := &v1alpha1.NetTuningExperiment{}
	deadline := time.Now().Add(timeout)
	for {
		err := e.Client.Get(e.Ctx, client.ObjectKey{Name: name}, x)
		if err == nil && cond(x) {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("experiment %s: %s not reached in %s; status %+v", name, what, timeout, x.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func vehicleNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i+1)
	}
	return out
}

// TestExperimentRanksArmsStopsABadOneAndCleansUp runs an experiment with
// two variants on 12 xavier and 6 orin vehicles (4 and 2 per arm), the
// messages of each arm slow with its own probability: the good variant
// (0.5 %) against the control (3 %) and a bad one (20 %). The bad arm must
// be stopped by the judge before the experiment ends, the good one must
// rank first and win on both hardware models, and at the end no arm
// profile is left and every node renders the base profile alone.
func TestExperimentRanksArmsStopsABadOneAndCleansUp(t *testing.T) {
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, "")
	e.AddVehicles("xavier", vehicleNames("xv", 12)...)
	e.AddVehicles("orin", vehicleNames("or", 6)...)
	base := envtest.LanProfile(30, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	baseRev := e.Settle(base)
	// The base keeps its canary rollout (not part of its revision): the
	// winner adopted at the end goes to 2 canary vehicles first.
	e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) { p.Spec.Rollout = base.Spec.Rollout })

	pusher := &messagePusher{t: t, e: e, l: l, pushed: map[string]int{},
		slow: map[string]float64{v1alpha1.ControlArm: 0.03, "cwnd20": 0.005, "cwnd80": 0.20}}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	go pusher.run(ctx, "cwnd")

	const duration = 40 * time.Second
	x := experimentOf("cwnd", "xavier-lan", duration, cwndVariant("cwnd20", 20, 15), cwndVariant("cwnd80", 80, 0))
	if err := e.Client.Create(e.Ctx, x); err != nil {
		t.Fatal(err)
	}
	running := waitExperiment(e, "cwnd", 60*time.Second, "Running", func(x *v1alpha1.NetTuningExperiment) bool {
		return x.Status.Phase == v1alpha1.ExperimentRunning
	})
	if running.Status.BaseRevision != baseRev {
		t.Errorf("baseRevision %s, want %s", running.Status.BaseRevision, baseRev)
	}
	// Cohorts: 4 xavier and 2 orin vehicles per arm, disjoint.
	seen := map[string]string{}
	for _, arm := range running.Status.Arms {
		for _, c := range arm.Cohorts {
			want := map[string]int{"xavier": 4, "orin": 2}[c.Hardware]
			if len(c.Vehicles) != want {
				t.Errorf("arm %s: %d %s vehicles, want %d", arm.Name, len(c.Vehicles), c.Hardware, want)
			}
			for _, v := range c.Vehicles {
				if !strings.HasPrefix(v, map[string]string{"xavier": "xv-", "orin": "or-"}[c.Hardware]) {
					t.Errorf("arm %s: %s drawn as %s", arm.Name, v, c.Hardware)
				}
				if other, dup := seen[v]; dup {
					t.Errorf("%s in arms %s and %s", v, other, arm.Name)
				}
				seen[v] = arm.Name
			}
		}
	}
	// The arm's nodes render the variant, the control's the base only.
	armVehicle := func(arm string) string {
		for _, a := range running.Status.Arms {
			if a.Name == arm {
				return a.Cohorts[0].Vehicles[0]
			}
		}
		return ""
	}
	waitRoutesCwnd := func(vehicle string, want int32) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		var got []int32
		for time.Now().Before(deadline) {
			nnt := &v1alpha1.NodeNetTuning{}
			got = nil
			if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: vehicle + "-xavier-a"}, nnt); err == nil {
				for _, r := range nnt.Spec.Routes {
					if r.Parameters.Cwnd != nil {
						got = append(got, r.Parameters.Cwnd.Value)
					}
				}
				if len(got) > 0 && got[0] == want {
					return
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("%s: route cwnd %v, want %d", vehicle, got, want)
	}
	waitRoutesCwnd(armVehicle("cwnd20"), 20)
	waitRoutesCwnd(armVehicle("cwnd80"), 80)
	waitRoutesCwnd(armVehicle(v1alpha1.ControlArm), 30)

	stopped := waitExperiment(e, "cwnd", 90*time.Second, "cwnd80 stopped", func(x *v1alpha1.NetTuningExperiment) bool {
		for _, a := range x.Status.Arms {
			if a.Name == "cwnd80" && a.Phase == v1alpha1.ArmStopped {
				return true
			}
		}
		return x.Status.Phase == v1alpha1.ExperimentCompleted
	})
	for _, a := range stopped.Status.Arms {
		if a.Name == "cwnd80" {
			if a.Phase != v1alpha1.ArmStopped {
				t.Errorf("cwnd80 %s, want Stopped before the end", a.Phase)
			}
			if !strings.Contains(a.StopReason, "slow-messages") {
				t.Errorf("cwnd80 stop reason %q", a.StopReason)
			}
		}
		if a.Name == "cwnd20" && a.Phase == v1alpha1.ArmStopped {
			t.Errorf("cwnd20 stopped: %s", a.StopReason)
		}
	}
	if stopped.Status.Phase == v1alpha1.ExperimentRunning {
		// The stopped arm's profile goes, its vehicles back on the base.
		waitRoutesCwnd(armVehicle("cwnd80"), 30)
	}

	done := waitExperiment(e, "cwnd", duration+90*time.Second, "Completed", func(x *v1alpha1.NetTuningExperiment) bool {
		return x.Status.Phase == v1alpha1.ExperimentCompleted
	})
	if len(done.Status.Results) != 2 {
		t.Fatalf("results %+v, want one per hardware model", done.Status.Results)
	}
	for _, res := range done.Status.Results {
		var order []string
		for _, r := range res.Ranking {
			order = append(order, r.Arm)
		}
		if fmt.Sprint(order) != "[cwnd20 control cwnd80]" {
			t.Errorf("%s ranking %v, want [cwnd20 control cwnd80]", res.Hardware, order)
		}
		if res.Winner != "cwnd20" {
			t.Errorf("%s winner %q, want cwnd20 (%+v)", res.Hardware, res.Winner, res.Ranking)
		}
		if res.Ranking[0].Total < 300 || res.Ranking[0].Effect == "" || !strings.HasPrefix(res.Ranking[0].Effect, "-") {
			t.Errorf("%s: cwnd20 %+v", res.Hardware, res.Ranking[0])
		}
	}
	if c := meta.FindStatusCondition(done.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
	// No arm profile left; every node back on the base.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var list v1alpha1.NetTuningProfileList
		if err := e.Client.List(e.Ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: "cwnd"}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d arm profiles left after the experiment", len(list.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitRoutesCwnd(armVehicle("cwnd20"), 30)

	// Adopting the winner is an edit of the base: its rollout takes it to
	// the canaries first, and (its analysis finding no messages of the new
	// revision) no further.
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	adopt := exec.Command(filepath.Join(root, "bin", "kubectl-nettune"), "experiment", "adopt", "cwnd", "--kubeconfig", e.CP.Kubeconfig)
	out, err := adopt.CombinedOutput()
	t.Logf("kubectl nettune experiment adopt cwnd: %s", out)
	if err != nil {
		t.Fatalf("adopt: %v (bin/kubectl-nettune is built by make build)", err)
	}
	adopted := e.WaitProfile("xavier-lan", 60*time.Second, "the adopted revision on its canaries", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision != baseRev && len(p.Status.CanaryVehicles) == 2 && p.Status.Vehicles.Updated == 2
	})
	if adopted.Spec.Defaults.Cwnd.Value != 20 || *adopted.Spec.Defaults.Initcwnd != 15 {
		t.Errorf("adopted defaults %+v", adopted.Spec.Defaults)
	}
	// The renderer writes the canaries' nodes after the profile's status
	// (two controllers): wait for them, then see no further node follow.
	canariesOnly := func() (bool, string) {
		onNew := 0
		for _, rev := range e.NodeRevisions("xavier-lan") {
			if rev == adopted.Status.CurrentRevision {
				onNew++
			}
		}
		return onNew == 4, fmt.Sprintf("%d nodes on the adopted revision, want the 2 canaries' 4", onNew)
	}
	envtest.Eventually(t, 30*time.Second, "the adopted revision on the canaries' nodes", canariesOnly)
	envtest.Consistently(t, 3*time.Second, "the adopted revision on the canaries' nodes only", canariesOnly)
	pusher.mu.Lock()
	t.Logf("messages pushed per arm: %v", pusher.pushed)
	pusher.mu.Unlock()
	for _, a := range done.Status.Arms {
		t.Logf("arm %s: %s %s", a.Name, a.Phase, a.StopReason)
		for _, c := range a.Cohorts {
			for _, r := range c.Analysis {
				t.Logf("  %s %s: %s (%d ok, %d failed, %d inconclusive, %d errors) %s", c.Hardware, r.Name, r.Phase, r.Successful, r.Failed, r.Inconclusive, r.Errors, r.Message)
			}
		}
	}
	for _, res := range done.Status.Results {
		for _, r := range res.Ranking {
			t.Logf("%s #%d %s: %d/%d slow (%s %%), effect %s pp [%s, %s], P(better) %s", res.Hardware, r.Rank, r.Arm, r.Slow, r.Total, r.Share, r.Effect, r.EffectLow, r.EffectHigh, r.ProbBetter)
		}
	}
}

// TestExperimentStopsAnArmThatNeverVerifies: the agents of one arm's
// vehicles never report the variant (as vehicles gone offline would): at
// spec.applyTimeout that arm is stopped and its profile deleted, the other
// arm is measured, the experiment completes, and the silent vehicles get
// the base back and verify it.
func TestExperimentStopsAnArmThatNeverVerifies(t *testing.T) {
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, "")
	e.AddVehicles("xavier", vehicleNames("xv", 6)...)
	baseRev := e.Settle(envtest.LanProfile(30, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount))
	pusher := &messagePusher{t: t, e: e, l: l, pushed: map[string]int{}, slow: map[string]float64{}}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	go pusher.run(ctx, "stuck")

	x := experimentOf("stuck", "xavier-lan", 15*time.Second, cwndVariant("fine", 40, 0), cwndVariant("offline", 35, 0))
	const timeout = 6 * time.Second
	x.Spec.ApplyTimeout = &metav1.Duration{Duration: timeout}
	e.SetSilent(experiment.ArmProfileName("stuck", "offline"))
	if err := e.Client.Create(e.Ctx, x); err != nil {
		t.Fatal(err)
	}
	done := waitExperiment(e, "stuck", 2*time.Minute, "Completed", func(x *v1alpha1.NetTuningExperiment) bool {
		return x.Status.Phase == v1alpha1.ExperimentCompleted || x.Status.Phase == v1alpha1.ExperimentAborted
	})
	if done.Status.Phase != v1alpha1.ExperimentCompleted {
		t.Fatalf("phase %s: %s", done.Status.Phase, done.Status.Message)
	}
	for _, arm := range done.Status.Arms {
		switch arm.Name {
		case "offline":
			if arm.Phase != v1alpha1.ArmStopped || !strings.Contains(arm.StopReason, "0 of its 2 vehicles verified the variant within applyTimeout 6s") {
				t.Errorf("the silent arm ended %s: %q", arm.Phase, arm.StopReason)
			}
			if arm.Verified != nil {
				t.Errorf("the silent arm was verified at %s", arm.Verified)
			}
		case "fine":
			if arm.Phase != v1alpha1.ArmFinished || arm.Verified == nil {
				t.Errorf("the other arm ended %s (verified %v), want measured to the end", arm.Phase, arm.Verified)
			}
		}
	}
	if done.Status.MeasuringSince == nil || done.Status.Started == nil ||
		done.Status.MeasuringSince.Sub(done.Status.Started.Time) < timeout-time.Second {
		t.Errorf("measuring began %v after the start: before the silent arm's applyTimeout %s", done.Status.MeasuringSince, timeout)
	}
	// The silent vehicles leave the variant: their agents report again.
	e.SetSilent()
	deadline := time.Now().Add(time.Minute)
	for {
		var list v1alpha1.NetTuningProfileList
		if err := e.Client.List(e.Ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: "stuck"}); err != nil {
			t.Fatal(err)
		}
		p := e.Profile("xavier-lan")
		if len(list.Items) == 0 && p.Status.Vehicles.Verified == 6 && p.Status.CurrentRevision == baseRev {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d arm profiles left; base %s verified on %d of 6", len(list.Items), p.Status.CurrentRevision, p.Status.Vehicles.Verified)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestExperimentWithAnInvalidVariantStartsNoArm: a variant the profile's
// validation refuses (cwnd 10 under the base's initcwnd 25) leaves the
// experiment Pending and Stalled, naming the variant and the API server's
// reason, with no arm profile created, not even the valid variant's.
func TestExperimentWithAnInvalidVariantStartsNoArm(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", vehicleNames("xv", 6)...)
	e.Settle(envtest.LanProfile(30, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount))
	x := experimentOf("bad-input", "xavier-lan", time.Minute, cwndVariant("fine", 40, 0), cwndVariant("tiny", 10, 0))
	if err := e.Client.Create(e.Ctx, x); err != nil {
		t.Fatal(err)
	}
	got := waitExperiment(e, "bad-input", 60*time.Second, "Stalled", func(x *v1alpha1.NetTuningExperiment) bool {
		return meta.IsStatusConditionTrue(x.Status.Conditions, v1alpha1.ConditionStalled)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
	if c.Reason != "InvalidVariant" || !strings.Contains(c.Message, "variant tiny") || !strings.Contains(c.Message, "initcwnd must not exceed cwnd.value") {
		t.Errorf("Stalled %s: %s", c.Reason, c.Message)
	}
	if got.Status.Phase != v1alpha1.ExperimentPending {
		t.Errorf("phase %s, want Pending", got.Status.Phase)
	}
	var list v1alpha1.NetTuningProfileList
	if err := e.Client.List(e.Ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: "bad-input"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d arm profiles created for an experiment with an invalid variant", len(list.Items))
	}
	// Deleting it goes through (the finalizer finds nothing to clean up).
	if err := e.Client.Delete(e.Ctx, got); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !apierrors.IsNotFound(e.Client.Get(e.Ctx, client.ObjectKey{Name: "bad-input"}, &v1alpha1.NetTuningExperiment{})) {
		if time.Now().After(deadline) {
			t.Fatal("experiment not deleted")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
