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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// addRevision records a rollout of the revision name beginning now.
func (p *plan) addRevision(name, outcome string) {
	st := p.st()
	for i := range st.Revisions {
		if st.Revisions[i].Name == name {
			st.Revisions[i].Outcome = outcome
			st.Revisions[i].Generation = p.in.Generation
			st.Revisions[i].RolloutStarted = p.now()
			r := st.Revisions[i]
			st.Revisions = append(append(st.Revisions[:i:i], st.Revisions[i+1:]...), r)
			return
		}
	}
	st.Revisions = append(st.Revisions, v1alpha1.Revision{Name: name, Generation: p.in.Generation, Created: metav1.NewTime(p.in.Now), RolloutStarted: p.now(), Outcome: outcome})
}

// RolloutStarted is when the latest rollout of the revision name began
// (its creation for a status written before rolloutStarted existed); zero
// when st does not list it.
func RolloutStarted(st *v1alpha1.NetTuningProfileStatus, name string) time.Time {
	for _, r := range st.Revisions {
		if r.Name == name {
			if r.RolloutStarted != nil {
				return r.RolloutStarted.Time
			}
			return r.Created.Time
		}
	}
	return time.Time{}
}

// firstRollout reports whether the rollout of the revision name in
// progress is its first.
func firstRollout(st *v1alpha1.NetTuningProfileStatus, name string) bool {
	for _, r := range st.Revisions {
		if r.Name == name {
			return r.RolloutStarted == nil || !r.RolloutStarted.After(r.Created.Time)
		}
	}
	return true
}

func (p *plan) setOutcome(name, outcome string) {
	for i := range p.st().Revisions {
		if p.st().Revisions[i].Name == name {
			p.st().Revisions[i].Outcome = outcome
		}
	}
}

func (p *plan) supersede(name string) {
	if name == "" || name == p.st().StableRevision || name == p.st().FailedRevision {
		return
	}
	p.setOutcome(name, v1alpha1.OutcomeSuperseded)
}

// pruneRevisions keeps at most revisionHistoryLimit revisions, never dropping
// the current or stable one.
func (p *plan) pruneRevisions() {
	st := p.st()
	limit := p.limit()
	for len(st.Revisions) > limit {
		dropped := false
		for i, r := range st.Revisions {
			if r.Name != st.CurrentRevision && r.Name != st.StableRevision {
				st.Revisions = append(st.Revisions[:i:i], st.Revisions[i+1:]...)
				dropped = true
				break
			}
		}
		if !dropped {
			return
		}
	}
}
