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

package main

import (
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

// tracker follows, from the informers' events, which revision of the
// profile each node has verified and what the profile's status says, and
// when each of those things happened: the scenarios' times are the times of
// the events, not of a poll.
//
// A node counts as verified on a revision when that revision of the profile
// is rendered into its NodeNetTuning and the agent reported it verified for
// the current generation (fleetmodel.NodeReport, the controller's own rule).
type tracker struct {
	profile string
	hosts   int
	total   int

	mu        sync.Mutex
	on        map[string]string               // node -> revision verified ("" = none)
	verified  map[string]int                  // revision -> nodes verified on it
	firstNode map[string]time.Time            // revision -> first node verified on it
	fullAt    map[string]time.Time            // revision -> latest time every node became verified on it
	vehicles  map[string]map[string]int       // revision -> vehicle -> nodes verified
	vehicleAt map[string]map[string]time.Time // revision -> vehicle -> latest time all its nodes became verified
	latest    *v1alpha1.NetTuningProfile
	healthy   map[string]time.Time // revision -> first seen stable, current and Healthy
	rolled    map[string]time.Time // revision -> first seen rolled back (phase RolledBack)
}

// newTracker follows profile over total nodes of hosts nodes per vehicle.
func newTracker(profile string, total, hosts int) *tracker {
	return &tracker{
		profile: profile, total: total, hosts: hosts,
		on: map[string]string{}, verified: map[string]int{}, firstNode: map[string]time.Time{}, fullAt: map[string]time.Time{},
		vehicles: map[string]map[string]int{}, vehicleAt: map[string]map[string]time.Time{},
		healthy: map[string]time.Time{}, rolled: map[string]time.Time{},
	}
}

// nodeHandler is the NodeNetTuning informer's handler: the tracker first,
// then also.
func (t *tracker) nodeHandler(also func(any)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.onNode(o); also(o) },
		UpdateFunc: func(_, o any) { t.onNode(o); also(o) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if nnt, ok := o.(*v1alpha1.NodeNetTuning); ok {
				t.set(nnt.Name, "", time.Now())
			}
		},
	}
}

// profileHandler is the NetTuningProfile informer's handler.
func (t *tracker) profileHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.onProfile,
		UpdateFunc: func(_, o any) { t.onProfile(o) },
	}
}

// onNode records a NodeNetTuning's state.
func (t *tracker) onNode(o any) {
	nnt, ok := o.(*v1alpha1.NodeNetTuning)
	if !ok {
		return
	}
	rev := ""
	if verified, _, _ := fleetmodel.NodeReport(nnt); verified {
		rev = fleetmodel.AssignedRevision(nnt, t.profile)
	}
	t.set(nnt.Name, rev, time.Now())
}

// set moves node to revision rev (or to none) at now.
func (t *tracker) set(node, rev string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.on[node]
	if old == rev {
		return
	}
	t.on[node] = rev
	v := vehicleOf(node)
	if old != "" {
		t.verified[old]--
		t.vehicles[old][v]--
	}
	if rev == "" {
		return
	}
	t.verified[rev]++
	if t.vehicles[rev] == nil {
		t.vehicles[rev], t.vehicleAt[rev] = map[string]int{}, map[string]time.Time{}
	}
	t.vehicles[rev][v]++
	if _, ok := t.firstNode[rev]; !ok {
		t.firstNode[rev] = now
	}
	if t.vehicles[rev][v] == t.hosts {
		t.vehicleAt[rev][v] = now
	}
	if t.verified[rev] == t.total {
		t.fullAt[rev] = now
	}
}

// onProfile records the profile's latest status.
func (t *tracker) onProfile(o any) {
	p, ok := o.(*v1alpha1.NetTuningProfile)
	if !ok || p.Name != t.profile {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.latest = p
	st := p.Status
	if st.Phase == v1alpha1.PhaseHealthy && st.CurrentRevision != "" && st.CurrentRevision == st.StableRevision {
		if _, ok := t.healthy[st.CurrentRevision]; !ok {
			t.healthy[st.CurrentRevision] = now
		}
	}
	if st.Phase == v1alpha1.PhaseRolledBack && st.FailedRevision != "" {
		if _, ok := t.rolled[st.FailedRevision]; !ok {
			t.rolled[st.FailedRevision] = now
		}
	}
}

// revision is the profile's current revision once its status describes
// generation gen or a later one ("" until then).
func (t *tracker) revision(gen int64) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latest == nil || t.latest.Status.ObservedGeneration < gen {
		return ""
	}
	return t.latest.Status.CurrentRevision
}

// status is the profile's latest status (zero before the first event).
func (t *tracker) status() v1alpha1.NetTuningProfileStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.latest == nil {
		return v1alpha1.NetTuningProfileStatus{}
	}
	return *t.latest.Status.DeepCopy()
}

// count is how many nodes verified rev.
func (t *tracker) count(rev string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.verified[rev]
}

// marks are the times the tracker recorded for a revision (zero: not yet).
type marks struct {
	firstNode time.Time // first node verified
	full      time.Time // latest time every node became verified
	healthy   time.Time // the profile Healthy with it stable
	rolled    time.Time // the profile RolledBack from it
}

// marksOf returns the recorded times of rev.
func (t *tracker) marksOf(rev string) marks {
	t.mu.Lock()
	defer t.mu.Unlock()
	return marks{firstNode: t.firstNode[rev], full: t.fullAt[rev], healthy: t.healthy[rev], rolled: t.rolled[rev]}
}

// vehiclesVerified returns, of vehicles, when each had every node verified
// on rev (latest time; absent when it has not).
func (t *tracker) vehiclesVerified(rev string, vehicles []string) map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]time.Time{}
	for _, v := range vehicles {
		if t.vehicles[rev][v] == t.hosts {
			out[v] = t.vehicleAt[rev][v]
		}
	}
	return out
}
