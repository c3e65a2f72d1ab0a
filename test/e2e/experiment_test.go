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

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
)

// demoAnalyses reads the judge and the TCP guard of the demo's v2 profile.
func demoAnalyses(t *testing.T) (judge, guard v1alpha1.AnalysisSpec) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samples, "02-xavier-lan-v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p v1alpha1.NetTuningProfile
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Spec.Rollout.Analyses {
		switch a.Name {
		case "slow-messages":
			judge = a
		case "spurious-retransmissions":
			guard = a
		}
	}
	if judge.Judge == nil || guard.Judge == nil {
		t.Fatal("02-xavier-lan-v2.yaml: slow-messages and spurious-retransmissions judge analyses not found")
	}
	return judge, guard
}

// TestExperiment runs a NetTuningExperiment on the fleet of real agents:
// the base is whatever revision TestE2E left stable; one variant is the
// demo's bad edit applied to every pair (cwnd 1, rto_min 1s: a message
// caught in a UDP burst waits for the tail-loss probe or the RTO), drawn on
// 2 of the 4 vehicles against a control of the other 2, judged with the
// demo's own analyses. The judge must stop the arm before the experiment's
// end, the control must win, and afterwards no arm profile is left and
// every node is back on the base revision, verified.
func TestExperiment(t *testing.T) {
	evidence(t)
	ctx := context.Background()
	// TestE2E ends on a revision its agents rolled back: the profile's
	// content is that revision, not the stable one. An experiment starts
	// from stable content, so bring it back as a user would.
	existing := &v1alpha1.NetTuningProfile{}
	if err := f.CP.Client.Get(ctx, client.ObjectKey{Name: profile}, existing); err != nil {
		// Run alone (-run TestExperiment): the stage-1 profile is the base.
		apply(t, "01-xavier-lan-v1.yaml")
	} else if revision.Name(existing) != existing.Status.StableRevision {
		for attempt := 1; ; attempt++ {
			out, err := f.Plugin(ctx, "undo", profile)
			if err == nil {
				t.Logf("kubectl nettune undo %s: %s", profile, strings.TrimSpace(out))
				break
			}
			if attempt == 5 {
				t.Fatal(err)
			}
			t.Logf("kubectl nettune undo %s (attempt %d): %v", profile, attempt, err)
			time.Sleep(time.Second)
		}
	}
	base := waitProfile(t, 3*time.Minute, "the base stable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision != "" && p.Status.CurrentRevision == p.Status.StableRevision
	})
	baseRev := base.Status.StableRevision
	judge, guard := demoAnalyses(t)
	x := &v1alpha1.NetTuningExperiment{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-edit"},
		Spec: v1alpha1.NetTuningExperimentSpec{
			Profile: profile, MaxPercent: ptr(int32(100)), Duration: metav1.Duration{Duration: 3 * time.Minute},
			Variants: []v1alpha1.ExperimentVariant{{Name: "cwnd1-rto1s", Parameters: v1alpha1.TCPParameters{
				Cwnd: &v1alpha1.Cwnd{Value: 1, Lock: ptr(true)}, Initcwnd: ptr(int32(1)), Ssthresh: ptr(int32(1)),
				RTOMin: &metav1.Duration{Duration: time.Second},
			}}},
			Analysis: judge,
			Guards:   []v1alpha1.AnalysisSpec{guard},
		},
	}
	began := time.Now()
	if err := f.CP.Client.Create(ctx, x); err != nil {
		t.Fatal(err)
	}
	get := func() *v1alpha1.NetTuningExperiment {
		x := &v1alpha1.NetTuningExperiment{}
		if err := f.CP.Client.Get(ctx, client.ObjectKey{Name: "bad-edit"}, x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	var stoppedAfter time.Duration
	waitFor(t, 5*time.Minute, "the experiment completed", func() bool {
		x := get()
		for _, a := range x.Status.Arms {
			if a.Name == "cwnd1-rto1s" && a.Phase == v1alpha1.ArmStopped && stoppedAfter == 0 {
				stoppedAfter = time.Since(began)
			}
		}
		return x.Status.Phase == v1alpha1.ExperimentCompleted || x.Status.Phase == v1alpha1.ExperimentAborted
	})
	x = get()
	out, err := f.Plugin(ctx, "experiment", "status", "bad-edit")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl nettune experiment status bad-edit (arm stopped %s after the create, completed %s after):\n%s",
		stoppedAfter.Round(time.Second), time.Since(began).Round(time.Second), out)
	if x.Status.Phase != v1alpha1.ExperimentCompleted {
		t.Fatalf("phase %s: %s", x.Status.Phase, x.Status.Message)
	}
	for _, a := range x.Status.Arms {
		if a.Name != "cwnd1-rto1s" {
			continue
		}
		if a.Phase != v1alpha1.ArmStopped {
			t.Errorf("the bad arm ended %s, want Stopped early", a.Phase)
		}
		if !strings.Contains(a.StopReason, "slow-messages") && !strings.Contains(a.StopReason, "spurious-retransmissions") {
			t.Errorf("the bad arm was stopped for %q, want an analysis", a.StopReason)
		}
		for _, c := range a.Cohorts {
			if len(c.Vehicles) != 2 {
				t.Errorf("arm of %d vehicles on %s, want 2", len(c.Vehicles), c.Hardware)
			}
		}
	}
	if x.Status.MeasuringSince != nil && x.Status.Finished != nil &&
		x.Status.Finished.Sub(x.Status.MeasuringSince.Time) >= x.Spec.Duration.Duration {
		t.Errorf("the experiment ran its whole %s: the bad arm was not stopped early", x.Spec.Duration.Duration)
	}
	if len(x.Status.Results) != 1 || x.Status.Results[0].Winner != v1alpha1.ControlArm {
		t.Errorf("results %+v, want the control winning on xavier", x.Status.Results)
	}
	testExperimentDashboard(t, x, began, judge.Judge.Threshold.Duration)
	waitFor(t, 2*time.Minute, "no arm profile left", func() bool {
		var list v1alpha1.NetTuningProfileList
		return f.CP.Client.List(ctx, &list, client.MatchingLabels{v1alpha1.ExperimentLabel: "bad-edit"}) == nil && len(list.Items) == 0
	})
	waitFor(t, 2*time.Minute, "every node verified on the base revision "+baseRev, func() bool { return allVerified(t, baseRev) })
	for _, n := range nodes(t) {
		for _, p := range n.Spec.Profiles {
			if p.Name != profile {
				t.Errorf("node %s still renders profile %s", n.Name, p.Name)
			}
		}
	}

	// recommend reads what the agents measured (sock_diag, scraped by the
	// fleet's Prometheus) while the topics ran: every host the topics go
	// into gets parameters, with the reasoning.
	out, err = f.Plugin(ctx, append(append([]string{"recommend", profile}, prometheusForPlugin(t)...), "--switch-buffer", "131072", "--window", "10m")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl nettune recommend %s:\n%s", profile, out)
	for _, want := range []string{"Into xavier-a: cwnd=", "concurrent sender(s) into xavier-a share the port's 131072-byte buffer", "p99.9 RTT into xavier-a under load", "rtoMin", "to: xavier-a"} {
		if !strings.Contains(out, want) {
			t.Errorf("recommend does not say %q", want)
		}
	}
}
