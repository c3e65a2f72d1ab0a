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
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// TestExperimentMetricsFollowTheStatus: the experiment's gauges are its
// status (phase, cohorts, judged messages, effects), an arm that leaves a
// cohort leaves its series, and a deleted experiment leaves none.
func TestExperimentMetricsFollowTheStatus(t *testing.T) {
	exp := &v1alpha1.NetTuningExperiment{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.NetTuningExperimentSpec{Profile: "base"}}
	exp.Status.Phase = v1alpha1.ExperimentRunning
	exp.Status.Arms = []v1alpha1.ExperimentArm{
		{Name: v1alpha1.ControlArm, Phase: v1alpha1.ArmMeasuring, Cohorts: []v1alpha1.ExperimentCohort{
			{Hardware: "xavier", Vehicles: []string{"av-1", "av-2"}, Slow: 3, Total: 1000}}},
		{Name: "cwnd80", Profile: "m-cwnd80", Phase: v1alpha1.ArmStopped, Cohorts: []v1alpha1.ExperimentCohort{
			{Hardware: "xavier", Vehicles: []string{"av-3", "av-4"}, Slow: 40, Total: 900}}},
	}
	exp.Status.Results = []v1alpha1.ExperimentResult{{Hardware: "xavier", Ranking: []v1alpha1.ArmRanking{
		{Arm: v1alpha1.ControlArm}, {Arm: "cwnd80", Effect: "4.14", EffectLow: "2.5", EffectHigh: "5.9"}}}}
	recordExperimentMetrics(exp)
	defer deleteExperimentMetrics("m")

	if v := testutil.ToFloat64(experimentPhase.WithLabelValues("m", v1alpha1.ExperimentRunning)); v != 1 {
		t.Errorf("phase Running %g, want 1", v)
	}
	if v := testutil.ToFloat64(experimentPhase.WithLabelValues("m", v1alpha1.ExperimentCompleted)); v != 0 {
		t.Errorf("phase Completed %g, want 0", v)
	}
	if n := testutil.CollectAndCount(experimentArmVehicle); n != 4 {
		t.Errorf("%d arm vehicle series, want 4", n)
	}
	if v := testutil.ToFloat64(experimentArmVehicle.WithLabelValues("m", "cwnd80", "m-cwnd80", v1alpha1.ArmStopped, "xavier", "av-4")); v != 1 {
		t.Errorf("av-4 in cwnd80: %g", v)
	}
	// The control's status names no profile: it runs on the base, and its
	// series say so (the dashboard's base variable reads it).
	if v := testutil.ToFloat64(experimentArmVehicle.WithLabelValues("m", v1alpha1.ControlArm, "base", v1alpha1.ArmMeasuring, "xavier", "av-1")); v != 1 {
		t.Errorf("av-1 in the control on profile base: %g", v)
	}
	if v := testutil.ToFloat64(experimentArmMessages.WithLabelValues("m", "cwnd80", "xavier", "slow")); v != 40 {
		t.Errorf("cwnd80 slow %g, want 40", v)
	}
	if v := testutil.ToFloat64(experimentArmEffect.WithLabelValues("m", "cwnd80", "xavier", "low")); v != 2.5 {
		t.Errorf("cwnd80 effect low %g, want 2.5", v)
	}
	if n := testutil.CollectAndCount(experimentArmEffect); n != 3 {
		t.Errorf("%d effect series, want 3 (the control has no effect)", n)
	}

	// An arm's phase is a label: its vehicles' series move to the new
	// phase, and the old phase's series go.
	exp.Status.Arms[0].Phase = v1alpha1.ArmFinished
	recordExperimentMetrics(exp)
	if n := testutil.CollectAndCount(experimentArmVehicle); n != 4 {
		t.Errorf("%d arm vehicle series after the control's phase changed, want 4", n)
	}
	if v := testutil.ToFloat64(experimentArmVehicle.WithLabelValues("m", v1alpha1.ControlArm, "base", v1alpha1.ArmFinished, "xavier", "av-2")); v != 1 {
		t.Errorf("av-2 in the finished control: %g", v)
	}

	// The experiment completes and its arm profiles are gone: the cohorts
	// stay (the status keeps them), the phase moves.
	exp.Status.Phase = v1alpha1.ExperimentCompleted
	exp.Status.Arms = exp.Status.Arms[:1]
	recordExperimentMetrics(exp)
	if n := testutil.CollectAndCount(experimentArmVehicle); n != 2 {
		t.Errorf("%d arm vehicle series after cwnd80 left the status, want 2", n)
	}
	if v := testutil.ToFloat64(experimentPhase.WithLabelValues("m", v1alpha1.ExperimentRunning)); v != 0 {
		t.Errorf("phase Running %g after completing, want 0", v)
	}
	deleteExperimentMetrics("m")
	if n := testutil.CollectAndCount(experimentArmVehicle) + testutil.CollectAndCount(experimentPhase) +
		testutil.CollectAndCount(experimentArmMessages) + testutil.CollectAndCount(experimentArmEffect); n != 0 {
		t.Errorf("%d series left after the experiment was deleted, want 0", n)
	}
}
