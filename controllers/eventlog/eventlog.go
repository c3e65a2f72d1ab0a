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

// Package eventlog writes the rollout and experiment events as JSON log
// lines (to Loki, by the controller binary's shipper) besides the
// Kubernetes Events. It decides nothing: it formats what the reconcilers
// announce, and never reads or writes the cluster.
package eventlog

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// Log receives the rollout's events as log lines, besides the
// Kubernetes Events: a *lokipush.Shipper ships them to Loki, where
// dashboards draw rollbacks and rollout milestones as annotations. Add must
// not block (the shipper only queues the line).
type Log interface {
	Add(labels map[string]string, t time.Time, line string)
}

// ControllerJob is the job label of the controller's event stream in Loki:
// {job="nettune-controller", profile="<profile>"}.
const ControllerJob = "nettune-controller"

// RolloutLine is the JSON line of one rollout event, e.g.
//
//	{"event":"RolledBack","type":"Warning","revision":"xavier-lan-168f819107",
//	 "stable":"xavier-lan-8bf34728cc","failed":"xavier-lan-168f819107",
//	 "phase":"RolledBack","step":1,"reason":"AnalysisFailed","message":"..."}
//
// event is the Kubernetes Event reason (RolloutStarted, StepAdvanced,
// Promoted, RolloutRestarted, RolloutComplete, RolledBack, Paused,
// Resumed, ...); revision,
// stable, failed, phase and step are the profile's status after the
// reconcile that emitted it; reason is the RolledBack condition's reason
// (AnalysisFailed, FailureBudgetExceeded, Aborted) on RolledBack events.
type RolloutLine struct {
	Event    string `json:"event"`
	Type     string `json:"type"`
	Revision string `json:"revision,omitempty"`
	Stable   string `json:"stable,omitempty"`
	Failed   string `json:"failed,omitempty"`
	Phase    string `json:"phase,omitempty"`
	Step     *int32 `json:"step,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Message  string `json:"message"`
}

// Rollout writes one planner event of p to l (nil: nothing).
func Rollout(l Log, p *v1alpha1.NetTuningProfile, e planner.Event, at time.Time) {
	if l == nil {
		return
	}
	line := RolloutLine{
		Event: e.Reason, Type: "Normal", Revision: p.Status.CurrentRevision, Stable: p.Status.StableRevision,
		Failed: p.Status.FailedRevision, Phase: p.Status.Phase, Step: p.Status.CurrentStep, Message: e.Message,
	}
	if e.Warning {
		line.Type = "Warning"
	}
	if e.Reason == v1alpha1.ReasonRolledBack {
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack); c != nil {
			line.Reason = c.Reason
		}
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	l.Add(map[string]string{"job": ControllerJob, "profile": p.Name}, at, string(b))
}

// ExperimentLine is the JSON line of one experiment event, e.g.
//
//	{"event":"ArmStopped","type":"Warning","phase":"Running","message":"arm cwnd80 stopped, ..."}
//
// event is the Kubernetes Event reason (Started, ArmVerified, ArmStopped,
// Completed, Aborted); phase is the experiment's phase when it was emitted.
type ExperimentLine struct {
	Event   string `json:"event"`
	Type    string `json:"type"`
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message"`
}

// Experiment writes one experiment event to l (nil: nothing).
func Experiment(l Log, exp *v1alpha1.NetTuningExperiment, typ, reason, msg string, at time.Time) {
	if l == nil {
		return
	}
	b, err := json.Marshal(ExperimentLine{Event: reason, Type: typ, Phase: exp.Status.Phase, Message: msg})
	if err != nil {
		return
	}
	l.Add(map[string]string{"job": ControllerJob, "experiment": exp.Name}, at, string(b))
}
