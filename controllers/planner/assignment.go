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
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
)

// assign renders the first target vehicles with rev and the rest with stable,
// within maxUnavailable (a Deferred vehicle is not counted against it: it
// waits for its gate, not for the rollout). It reports whether the targeted
// vehicles settled and, if it waits only for Unreachable or Deferred ones,
// how long until it stops waiting.
func (p *plan) assign(rev string, target int, paused bool) (settled bool, waitUnreachable time.Duration) {
	st := p.st()
	stable := st.StableRevision
	for _, v := range p.in.Vehicles {
		if p.excluded[v.Name] {
			p.out.Assign[v.Name] = stable
		}
	}
	inflight := 0
	for _, v := range p.active {
		if v.Assigned == rev && !v.Mixed && !v.Verified && !v.Failed && p.reachable(v) && !v.Deferred {
			inflight++
		}
	}
	maxUnavail := p.maxUnavailable()
	settled = true
	count := 0
	for _, v := range p.active {
		want := stable
		switch {
		case count < target && v.Assigned == rev && !v.Mixed:
			want = rev
		case count < target && !paused && inflight < maxUnavail:
			want = rev
			inflight++
		case count < target:
			settled = false
		}
		if want == rev {
			count++
			switch {
			case v.Assigned == rev && !v.Mixed && (v.Verified || v.Failed):
			case !p.reachable(v) && !p.in.Now.Before(p.giveUpAt(v)):
			case !p.reachable(v):
				settled = false
				if w := p.giveUpAt(v).Sub(p.in.Now); waitUnreachable == 0 || w > waitUnreachable {
					waitUnreachable = w
				}
			case v.Deferred && v.Assigned == rev && !v.Mixed && !p.in.Now.Before(p.deferredGiveUpAt(v)):
				// Waited deferredTimeout: the step goes on without it; it
				// takes the revision when its gate opens.
			case v.Deferred && v.Assigned == rev && !v.Mixed:
				settled = false
				if w := p.deferredGiveUpAt(v).Sub(p.in.Now); waitUnreachable == 0 || w > waitUnreachable {
					waitUnreachable = w
				}
			default:
				settled = false
				waitUnreachable = 0
			}
		}
		p.out.Assign[v.Name] = want
	}
	if settled {
		waitUnreachable = 0
	}
	return settled, waitUnreachable
}

// AssignmentList is the status form of an assignment: per revision, its
// vehicles sorted, revisions sorted (nil when nothing is assigned).
func AssignmentList(byRev map[string][]string) []v1alpha1.RevisionAssignment {
	var out []v1alpha1.RevisionAssignment
	for rev, vs := range byRev {
		vs = slices.Clone(vs)
		slices.Sort(vs)
		out = append(out, v1alpha1.RevisionAssignment{Revision: rev, Vehicles: slices.Compact(vs)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.RevisionAssignment) int { return strings.Compare(a.Revision, b.Revision) })
	return out
}

func (p *plan) unreachableAfter() time.Duration { return p.in.Rollout.GetUnreachableAfter() }

func (p *plan) unreachableTimeout() time.Duration { return p.in.Rollout.GetUnreachableTimeout() }

// Reachable reports whether a vehicle's agents reported recently enough.
func Reachable(v Vehicle, now time.Time, after time.Duration) bool {
	return !v.LastSeen.IsZero() && now.Sub(v.LastSeen) < after
}

func (p *plan) reachable(v Vehicle) bool { return Reachable(v, p.in.Now, p.unreachableAfter()) }

// unreachableRequeue wakes the controller when a vehicle turns Unreachable.
func (p *plan) unreachableRequeue() {
	if p.in.LivenessTimer {
		return
	}
	after := p.unreachableAfter()
	for _, v := range p.in.Vehicles {
		if p.reachable(v) {
			p.requeue(v.LastSeen.Add(after).Sub(p.in.Now) + time.Second)
		}
	}
}

// deferredGiveUpAt is when the rollout stops waiting for a Deferred
// vehicle: deferredTimeout after it was deferred or after the rollout
// started, whichever is later.
func (p *plan) deferredGiveUpAt(v Vehicle) time.Time {
	since := v.DeferredSince
	if began := RolloutStarted(p.st(), p.st().CurrentRevision); began.After(since) {
		since = began
	}
	return since.Add(p.in.Rollout.GetDeferredTimeout())
}

// giveUpAt is when the rollout stops waiting for an Unreachable vehicle:
// unreachableTimeout after it became Unreachable or after the rollout
// started, whichever is later. Each rollout waits for a vehicle once, not at
// every step.
func (p *plan) giveUpAt(v Vehicle) time.Time {
	since := v.LastSeen.Add(p.unreachableAfter())
	if began := RolloutStarted(p.st(), p.st().CurrentRevision); began.After(since) {
		since = began
	}
	return since.Add(p.unreachableTimeout())
}

func (p *plan) scaled(v *intstr.IntOrString, def int, roundUp bool) int {
	if v == nil {
		return def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, len(p.active), roundUp)
	if err != nil {
		return def
	}
	return n
}

func (p *plan) maxUnavailable() int {
	var v *intstr.IntOrString
	if p.in.Rollout != nil {
		v = p.in.Rollout.MaxUnavailable
	}
	if v == nil && p.in.Rollout == nil {
		return len(p.active) + 1
	}
	n := p.scaled(v, 1, false)
	if n < 1 {
		n = 1
	}
	return n
}

func (p *plan) budget() int {
	if p.in.Rollout == nil {
		return len(p.active)
	}
	return p.scaled(p.in.Rollout.FailureBudget, 0, false)
}

func (p *plan) failed(rev string) int { return len(p.failedNames(rev)) }

func (p *plan) failedNames(rev string) []string {
	var out []string
	for _, v := range p.active {
		if v.Failed && v.Assigned == rev {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

func (p *plan) limit() int {
	if p.in.Rollout != nil && p.in.Rollout.RevisionHistoryLimit != nil {
		return int(*p.in.Rollout.RevisionHistoryLimit)
	}
	return 10
}
