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

package planner

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/nettune/nettune/api/v1alpha1"
)

// progress moves a rollout of CurrentRevision along its steps.
func (p *plan) progress() {
	st := p.st()
	rev := st.CurrentRevision
	steps := p.steps()
	p.out.Status.Conditions = removeCondition(p.out.Status.Conditions, v1alpha1.ConditionRolledBack)

	// Failure budget, counted over the vehicles of this rollout.
	if failed := p.failed(rev); failed > p.budget() {
		p.rollback("FailureBudgetExceeded", fmt.Sprintf("%d vehicle(s) on %s report RolledBack or Degraded (%s), failure budget %d",
			failed, rev, strings.Join(p.failedNames(rev), ", "), p.budget()))
		return
	}

	step := int32(0)
	if st.CurrentStep != nil {
		step = *st.CurrentStep
	}
	if int(step) > len(steps) {
		step = int32(len(steps))
	}
	paused := p.in.Rollout != nil && p.in.Rollout.Paused

	for {
		target := p.target(step)
		settled, waitUnreachable := p.assign(rev, target, paused)
		st.CurrentStep = ptr(step)
		if paused {
			st.Phase = v1alpha1.PhasePaused
			return
		}
		st.Phase = v1alpha1.PhaseProgressing
		if !settled {
			if waitUnreachable > 0 {
				p.requeue(waitUnreachable)
			}
			return
		}
		if int(step) == len(steps) {
			p.complete(rev)
			return
		}
		done, stop := p.runStep(step, steps[step])
		if stop || !done {
			return
		}
		step++
		st.StepStarted = p.now()
		st.Analysis = nil
		p.event(false, "StepAdvanced", "revision %s: step %d/%d %s", rev, step, len(steps), describeStep(steps, step))
	}
}

// runStep acts on a settled step: done when the rollout may move past it;
// stop when the rollout has been rolled back.
func (p *plan) runStep(i int32, s v1alpha1.RolloutStep) (done, stop bool) {
	st := p.st()
	promoted := p.in.Commands.PromoteStep != nil && *p.in.Commands.PromoteStep == i && p.in.Commands.PromoteRevision == st.CurrentRevision &&
		p.promoteIsForThisRollout()
	switch {
	case s.SetVehicles != nil:
		return true, false
	case s.Pause != nil:
		if promoted {
			p.event(false, "Promoted", "step %d (pause) promoted by the user", i)
			return true, false
		}
		if s.Pause.Duration == nil {
			st.Phase = v1alpha1.PhasePaused
			return false, false
		}
		started := p.in.Now
		if st.StepStarted != nil {
			started = st.StepStarted.Time
		}
		left := started.Add(s.Pause.Duration.Duration).Sub(p.in.Now)
		if left > 0 {
			p.requeue(left)
			return false, false
		}
		return true, false
	case s.Analysis != nil:
		return p.runAnalysis(i, s.Analysis, promoted)
	}
	return true, false
}

func (p *plan) runAnalysis(i int32, step *v1alpha1.AnalysisStep, promoted bool) (done, stop bool) {
	st := p.st()
	names := step.Names()
	specs := make([]*v1alpha1.AnalysisSpec, len(names))
	for k, name := range names {
		if specs[k] = p.analysisSpec(name); specs[k] == nil {
			// Admission forbids this; treat it as a pause rather than skipping a check.
			st.Phase = v1alpha1.PhasePaused
			p.event(true, "AnalysisMissing", "step %d names analysis %q which is not defined", i, name)
			return false, false
		}
	}
	if promoted {
		p.event(false, "Promoted", "step %d (analysis %s) promoted by the user", i, strings.Join(names, ", "))
		return true, false
	}
	results := make([]*v1alpha1.AnalysisResult, len(names))
	for k, name := range names {
		for j := range st.Analysis {
			if st.Analysis[j].Name == name && st.Analysis[j].Step == i {
				results[k] = &st.Analysis[j]
			}
		}
	}
	phase := func(k int) string {
		if results[k] == nil {
			return ""
		}
		return results[k].Phase
	}
	// A failure rolls back at once, whatever the others say.
	for k, name := range names {
		if phase(k) == v1alpha1.AnalysisFailed && !specs[k].DryRun {
			p.rollback(v1alpha1.ReasonAnalysisFailed, fmt.Sprintf("analysis %s at step %d failed: %s", name, i, results[k].Message))
			return false, true
		}
	}
	// An inconclusive analysis that aborts rolls back, whatever the
	// others say and in whichever order the step names them; one that
	// pauses pauses.
	for k, name := range names {
		if phase(k) == v1alpha1.AnalysisInconclusive && !specs[k].DryRun && specs[k].OnInconclusive == v1alpha1.InconclusiveAbort {
			p.rollback(v1alpha1.ReasonAnalysisInconclusive, fmt.Sprintf("analysis %s at step %d was inconclusive: %s", name, i, results[k].Message))
			return false, true
		}
	}
	for k := range names {
		if phase(k) == v1alpha1.AnalysisInconclusive && !specs[k].DryRun {
			st.Phase = v1alpha1.PhasePaused
			return false, false
		}
	}
	// A backend that refuses or does not answer pauses the rollout, which
	// goes on by itself once it answers: the analysis is measured again at
	// its interval below.
	unavailable := false
	for k := range names {
		if phase(k) == v1alpha1.AnalysisUnavailable && !specs[k].DryRun {
			unavailable = true
		}
	}
	// Running or not started: ask for a measurement of each.
	var canary, baseline []string
	for _, v := range p.in.Vehicles {
		if p.excluded[v.Name] {
			continue
		}
		switch p.out.Assign[v.Name] {
		case st.CurrentRevision:
			canary = append(canary, v.Name)
		case st.StableRevision:
			if st.StableRevision != "" {
				baseline = append(baseline, v.Name)
			}
		}
	}
	sort.Strings(canary)
	sort.Strings(baseline)
	verifiedAt := p.verifiedAt(canary, st.CurrentRevision, baseline, st.StableRevision)
	pending := false
	for k, name := range names {
		if v1alpha1.AnalysisTerminal(phase(k)) {
			continue // decided (a failed or inconclusive one is a dry run)
		}
		pending = true
		p.out.Measures = append(p.out.Measures, &Measure{Analysis: name, Spec: specs[k], Step: i,
			Canary: canary, CanaryRevision: st.CurrentRevision, Baseline: baseline, BaselineRevision: st.StableRevision, VerifiedAt: verifiedAt})
		interval := specs[k].GetInterval()
		next := interval
		if r := results[k]; r != nil && r.LastMeasured != nil {
			next = r.LastMeasured.Add(interval).Sub(p.in.Now)
		}
		p.requeue(next)
	}
	if unavailable {
		st.Phase = v1alpha1.PhasePaused
	}
	if pending {
		return false, false
	}
	// Every analysis decided and none acts: the step is done. A dry run's
	// failure is reported once, here.
	for k, name := range names {
		if phase(k) == v1alpha1.AnalysisFailed {
			p.event(true, "AnalysisFailedDryRun", "analysis %s failed (dry run, not acted on): %s", name, results[k].Message)
		}
	}
	return true, false
}

// complete makes the rollout's revision stable.
func (p *plan) complete(rev string) {
	st := p.st()
	prev := st.StableRevision
	if prev != "" && prev != rev {
		p.setOutcome(prev, v1alpha1.OutcomeSuperseded)
	}
	st.StableRevision = rev
	st.Phase = v1alpha1.PhaseHealthy
	st.CurrentStep = ptr(p.stepCount())
	p.setOutcome(rev, v1alpha1.OutcomeStable)
	p.event(false, "RolloutComplete", "revision %s is stable on %d vehicle(s)", rev, len(p.active))
}

// target is how many vehicles should run the revision at step i.
func (p *plan) target(i int32) int {
	steps := p.steps()
	n := len(p.active)
	if int(i) >= len(steps) {
		return n
	}
	t := 0
	for _, c := range p.st().CanaryVehicles {
		if _, ok := p.byName[c]; ok && !p.excluded[c] {
			t++
		}
	}
	for k := int32(0); k <= i; k++ {
		s := steps[k].SetVehicles
		if s == nil {
			continue
		}
		switch {
		case s.Count != nil:
			t = int(*s.Count)
		case s.Percent != nil:
			t = int(math.Ceil(float64(n) * float64(*s.Percent) / 100))
		}
	}
	if t > n {
		t = n
	}
	return t
}

func describeProgress(p *plan) string {
	st := p.st()
	steps := p.steps()
	step := int32(0)
	if st.CurrentStep != nil {
		step = *st.CurrentStep
	}
	msg := fmt.Sprintf("revision %s step %d/%d %s: %d/%d vehicles updated, %d verified",
		st.CurrentRevision, step, len(steps), describeStep(steps, step), st.Vehicles.Updated, st.Vehicles.Total, st.Vehicles.Verified)
	if st.Vehicles.Deferred > 0 {
		msg += fmt.Sprintf(", %d deferred (waiting for the vehicle's apply gate or a maintenance window)", st.Vehicles.Deferred)
	}
	return msg
}

func describeStep(steps []v1alpha1.RolloutStep, i int32) string {
	if int(i) >= len(steps) {
		return "(all vehicles)"
	}
	if t := StepText(steps[i], time.Duration.String, ", "); t != "" {
		return "(" + t + ")"
	}
	return ""
}

// StepText names a rollout step: "setVehicles 3", "setVehicles 50%",
// "pause " and its duration as d formats it, "pause until promoted",
// "analysis " and its analyses joined by sep; "" for an empty step. The
// planner's conditions and the kubectl plugin describe steps with it.
func StepText(s v1alpha1.RolloutStep, d func(time.Duration) string, sep string) string {
	switch {
	case s.SetVehicles != nil && s.SetVehicles.Count != nil:
		return fmt.Sprintf("setVehicles %d", *s.SetVehicles.Count)
	case s.SetVehicles != nil && s.SetVehicles.Percent != nil:
		return fmt.Sprintf("setVehicles %d%%", *s.SetVehicles.Percent)
	case s.Pause != nil && s.Pause.Duration != nil:
		return "pause " + d(s.Pause.Duration.Duration)
	case s.Pause != nil:
		return "pause until promoted"
	case s.Analysis != nil:
		return "analysis " + strings.Join(s.Analysis.Names(), sep)
	}
	return ""
}

func (p *plan) steps() []v1alpha1.RolloutStep {
	if p.in.Rollout == nil {
		return nil
	}
	return p.in.Rollout.Steps
}

func (p *plan) stepCount() int32 { return int32(len(p.steps())) }

func (p *plan) analysisSpec(name string) *v1alpha1.AnalysisSpec {
	if p.in.Rollout == nil {
		return nil
	}
	for i := range p.in.Rollout.Analyses {
		if p.in.Rollout.Analyses[i].Name == name {
			return &p.in.Rollout.Analyses[i]
		}
	}
	return nil
}

// verifiedAt is Measure.VerifiedAt for the cohorts: when each vehicle
// verified its cohort's revision, the zero time when it has not.
func (p *plan) verifiedAt(canary []string, canaryRev string, baseline []string, baselineRev string) map[string]time.Time {
	out := make(map[string]time.Time, len(canary)+len(baseline))
	add := func(names []string, rev string) {
		for _, name := range names {
			i, ok := p.byName[name]
			if !ok {
				continue
			}
			v := &p.in.Vehicles[i]
			switch {
			case !v.Verified || v.Mixed || v.Assigned != rev:
				out[name] = time.Time{}
			case !v.VerifiedAt.IsZero():
				out[name] = v.VerifiedAt
			}
		}
	}
	add(canary, canaryRev)
	add(baseline, baselineRev)
	return out
}

// promoteIsForThisRollout: the promote command names the rollout in
// progress (its start, to the second), or names none and this is the
// revision's first rollout.
func (p *plan) promoteIsForThisRollout() bool {
	st := p.st()
	if p.in.Commands.PromoteRollout.IsZero() {
		return firstRollout(st, st.CurrentRevision)
	}
	return p.in.Commands.PromoteRollout.Unix() == RolloutStarted(st, st.CurrentRevision).Unix()
}
