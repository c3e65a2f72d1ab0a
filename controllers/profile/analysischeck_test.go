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

package profile_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/envtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// slowMessagesJudge is the demo's judge (per host pair, the share of
// messages over 200 ms) with test-sized limits.
func slowMessagesJudge(name string, window time.Duration, inconclusiveLimit int32, minSamples int64, rank bool) v1alpha1.AnalysisSpec {
	sel := `{job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}`
	j := &v1alpha1.JudgeSpec{
		Threshold: envtest.Dur(200 * time.Millisecond), Quantile: envtest.Ptr("0.99"), Confidence: envtest.Ptr("0.99"),
		MaxRatio: envtest.Ptr("2"), MaxIncrease: envtest.Ptr("0.005"),
		SlowQuery:  `sum by (host, peer) (count_over_time(` + sel + ` | json | latency_ms > {{ .ThresholdMs }} [{{ .Window }}]))`,
		TotalQuery: `sum by (host, peer) (count_over_time(` + sel + ` [{{ .Window }}]))`,
	}
	if rank {
		j.IntervalQuery = envtest.Ptr(`sum by (host, peer, vehicle) (count_over_time(` + sel + ` | json | latency_ms > {{ .ThresholdMs }} [{{ .Step }}]))`)
	}
	return v1alpha1.AnalysisSpec{
		Name: name, Provider: v1alpha1.ProviderLoki, Judge: j,
		Interval: envtest.Dur(10 * time.Second), Window: envtest.Dur(window), Measurements: envtest.Ptr(int32(1)),
		MinSamples: envtest.Ptr(minSamples), FailureLimit: envtest.Ptr(int32(0)), InconclusiveLimit: envtest.Ptr(inconclusiveLimit),
		OnInconclusive: v1alpha1.InconclusivePause,
	}
}

// TestAnalysisWarningsBeforeTheCanaryStep: a rollout whose judge can never
// collect its minimum samples at the stable revision's message rate (2 a
// second per vehicle on one host pair: with 2 canary vehicles, 100 messages
// in the 25 s window it reaches before inconclusiveLimit 3 x 10 s, against
// minSamples 1000), and a second judge whose window cannot hold its rank
// test's values, is reported in the AnalysisWarnings condition and a
// Warning event naming both analyses and the numbers, from the reconcile
// that starts the rollout, before the canary's analysis measures; the
// rollout is not stopped by it. Analyses that can decide clear it.
func TestAnalysisWarningsBeforeTheCanaryStep(t *testing.T) {
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, "")
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)

	p := envtest.LanProfile(40, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	r1 := e.Settle(p)
	// 600 messages per vehicle on xavier-a -> xavier-b in the last three
	// minutes: 2 a second over the judge's 5-minute window.
	now := time.Now()
	for i, v := range envtest.AllVehicles() {
		entries := make([]testenv.LokiEntry, 600)
		for k := range entries {
			entries[k] = testenv.LokiEntry{Time: now.Add(-3*time.Minute + time.Duration(k)*170*time.Second/600 + time.Duration(i)*time.Microsecond),
				Line: fmt.Sprintf(`{"latency_ms":5,"seq":%d}`, k)}
		}
		l.Push(t, map[string]string{"job": "nettune-probe", "vehicle": v, "node": v + "-xavier-a", "host": "xavier-a", "peer": "xavier-b",
			"profile": "xavier-lan", "revision": r1}, entries)
	}
	l.WaitForCount(t, `sum(count_over_time({job="nettune-probe", peer="xavier-b"}[10m]))`, 3600, time.Minute)

	rollout := p.Spec.Rollout // Settle created the profile without it
	r2 := e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		envtest.SetCwnd(p, 30)
		p.Spec.Rollout = rollout.DeepCopy()
		p.Spec.Rollout.Analyses = []v1alpha1.AnalysisSpec{
			slowMessagesJudge("slow-messages", 5*time.Minute, 3, 1000, false),
			slowMessagesJudge("ranked", 20*time.Second, 15, 100, true),
		}
		p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{{Analysis: &v1alpha1.AnalysisStep{Name: "slow-messages", With: []string{"ranked"}}}}
	})
	got := e.WaitProfile("xavier-lan", 60*time.Second, "AnalysisWarnings True", func(p *v1alpha1.NetTuningProfile) bool {
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionAnalysisWarnings)
	})
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnalysisWarnings)
	t.Logf("AnalysisWarnings: %s: %s", c.Reason, c.Message)
	for _, want := range []string{
		"2 analysis warning(s): ",
		"analysis slow-messages: at the stable revision " + r1 + "'s message rate over the last 5m0s, with 2 canary and 4 baseline vehicles, " +
			"1 of 1 host pairs never collect minSamples 1000 per cohort before the analysis gives up (window 25s by its last measurement at inconclusiveLimit 3 x interval 10s): host=xavier-a,peer=xavier-b (canary 100, baseline 200)",
		"analysis ranked: the rank test (intervalQuery) needs 5 values of judge.step 5s, a window of 25s, but window 20s holds 4: the analysis can never fail",
	} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("AnalysisWarnings message lacks %q:\n%s", want, c.Message)
		}
	}
	if c.Reason != "AnalysisCannotDecide" || c.ObservedGeneration != got.Generation {
		t.Errorf("condition %+v", c)
	}
	// Reported at the rollout's start: no later than the analysis' first
	// measurement.
	for _, a := range got.Status.Analysis {
		if a.Started != nil && a.Started.Before(&c.LastTransitionTime) {
			t.Errorf("analysis %s measured at %s, before the warning at %s", a.Name, a.Started, c.LastTransitionTime)
		}
	}
	if got.Status.CurrentRevision != r2 {
		t.Errorf("current revision %s, want the rollout of %s going on", got.Status.CurrentRevision, r2)
	}
	envtest.Eventually(t, 30*time.Second, "the AnalysisWarnings event", func() (bool, string) {
		evs := strings.Join(e.Events("xavier-lan"), "\n")
		return strings.Contains(evs, "AnalysisWarnings: 2 analysis warning(s): analysis slow-messages: at the stable revision"), evs
	})

	// Limits that can decide: the warning clears.
	e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		p.Spec.Rollout.Analyses = []v1alpha1.AnalysisSpec{
			slowMessagesJudge("slow-messages", 5*time.Minute, 40, 1000, false),
			slowMessagesJudge("ranked", 5*time.Minute, 40, 100, true),
		}
	})
	got = e.WaitProfile("xavier-lan", 60*time.Second, "AnalysisWarnings False", func(p *v1alpha1.NetTuningProfile) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionAnalysisWarnings)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == p.Generation
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionAnalysisWarnings); c.Reason != "AnalysesCanDecide" {
		t.Errorf("condition %+v", c)
	}
}
