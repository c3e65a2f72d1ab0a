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
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nettune/nettune/api/v1alpha1"
)

var (
	experimentPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_experiment_phase", Help: "1 for the experiment's current phase, 0 for the others.",
	}, []string{"experiment", "phase"})
	experimentArmVehicle = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_experiment_arm_vehicle", Help: "1 for each vehicle of an experiment's arm (the control included), with the profile its arm runs on and the arm's phase: the cohorts, to join with the agents' and the probe's vehicle label.",
	}, []string{"experiment", "arm", "profile", "phase", "hardware", "vehicle"})
	experimentArmMessages = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_experiment_arm_messages", Help: "Messages an experiment's arm has been judged on since measuring began, per hardware model: all of them (kind=total) and those slower than the judge's threshold (kind=slow).",
	}, []string{"experiment", "arm", "hardware", "kind"})
	experimentArmEffect = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nettune_experiment_arm_effect_points", Help: "A variant's effect against the control on the slow share, in percentage points (positive: worse), with the interval at the judge's confidence (bound=estimate, low, high), per hardware model, from the experiment's latest ranking.",
	}, []string{"experiment", "arm", "hardware", "bound"})
)

func init() {
	metrics.Registry.MustRegister(experimentPhase, experimentArmVehicle, experimentArmMessages, experimentArmEffect)
}

// experimentPhases are the phases nettune_experiment_phase reports.
var experimentPhases = []string{v1alpha1.ExperimentPending, v1alpha1.ExperimentRunning, v1alpha1.ExperimentCompleted, v1alpha1.ExperimentAborted}

// experimentSeries remembers, per experiment, the series its last record
// set, so that the next record removes only those no longer in its status
// (a scrape never sees the experiment's series half gone).
var experimentSeries = struct {
	sync.Mutex
	m map[string]map[seriesKey]bool
}{m: map[string]map[seriesKey]bool{}}

// seriesKey is one series of an experiment gauge: the vector and its label
// values joined.
type seriesKey struct {
	vec    *prometheus.GaugeVec
	values string
}

// recordExperimentMetrics sets the experiment's gauges from its status and
// then removes the series of its previous record that the status no longer
// has (arms stop, cohorts and rankings change).
func recordExperimentMetrics(exp *v1alpha1.NetTuningExperiment) {
	now := map[seriesKey]bool{}
	set := func(vec *prometheus.GaugeVec, v float64, values ...string) {
		vec.WithLabelValues(values...).Set(v)
		now[seriesKey{vec, strings.Join(values, "\x00")}] = true
	}
	st := exp.Status
	for _, ph := range experimentPhases {
		v := 0.0
		if st.Phase == ph {
			v = 1
		}
		set(experimentPhase, v, exp.Name, ph)
	}
	for _, a := range st.Arms {
		profile := a.Profile
		if profile == "" && a.Name == v1alpha1.ControlArm {
			profile = exp.Spec.Profile // the control runs on the base
		}
		for _, c := range a.Cohorts {
			for _, v := range c.Vehicles {
				set(experimentArmVehicle, 1, exp.Name, a.Name, profile, a.Phase, c.Hardware, v)
			}
			if c.Total > 0 {
				set(experimentArmMessages, float64(c.Total), exp.Name, a.Name, c.Hardware, "total")
				set(experimentArmMessages, float64(c.Slow), exp.Name, a.Name, c.Hardware, "slow")
			}
		}
	}
	for _, res := range st.Results {
		for _, r := range res.Ranking {
			for bound, s := range map[string]string{"estimate": r.Effect, "low": r.EffectLow, "high": r.EffectHigh} {
				if v, err := strconv.ParseFloat(s, 64); err == nil {
					set(experimentArmEffect, v, exp.Name, r.Arm, res.Hardware, bound)
				}
			}
		}
	}
	experimentSeries.Lock()
	defer experimentSeries.Unlock()
	for k := range experimentSeries.m[exp.Name] {
		if !now[k] {
			k.vec.DeleteLabelValues(strings.Split(k.values, "\x00")...)
		}
	}
	experimentSeries.m[exp.Name] = now
}

func deleteExperimentMetrics(name string) {
	experimentSeries.Lock()
	delete(experimentSeries.m, name)
	experimentSeries.Unlock()
	for _, v := range []*prometheus.GaugeVec{experimentPhase, experimentArmVehicle, experimentArmMessages, experimentArmEffect} {
		v.DeletePartialMatch(prometheus.Labels{"experiment": name})
	}
}
