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
	"hash/fnv"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// order puts the canaries first, then the other vehicles in a stable order
// (at a hub, cluster by cluster; with a Placement's decision groups, group
// by group first).
func (p *plan) order() {
	canary := map[string]int{}
	for i, c := range p.st().CanaryVehicles {
		canary[c] = i
	}
	p.active = make([]Vehicle, 0, len(p.in.Vehicles))
	for _, v := range p.in.Vehicles {
		if !p.excluded[v.Name] {
			p.active = append(p.active, v)
		}
	}
	sort.SliceStable(p.active, func(i, j int) bool {
		a, b := p.active[i], p.active[j]
		ia, ca := canary[a.Name]
		ib, cb := canary[b.Name]
		if ca != cb {
			return ca
		}
		if ca {
			return ia < ib
		}
		if ga, gb := p.groupOf(a), p.groupOf(b); ga != gb {
			// A Placement's decision groups: all of group 0 before
			// group 1.
			return ga < gb
		}
		if a.Group != b.Group {
			// At a hub, whole clusters move together, in a stable
			// pseudo-random order of the clusters: a step touches each
			// cluster's work once, not once per vehicle.
			return p.before(a.Group, b.Group)
		}
		return p.before(a.Name, b.Name)
	})
}

// groupOf is the decision group of a vehicle's cluster (0 without one).
func (p *plan) groupOf(v Vehicle) int32 { return p.decisionGroup[v.Group] }

// before orders vehicles in the profile's stable pseudo-random order.
func (p *plan) before(a, b string) bool {
	ha, hb := p.hash(a), p.hash(b)
	if ha != hb {
		return ha < hb
	}
	return a < b
}

func (p *plan) hash(vehicle string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.in.Profile + "/" + vehicle))
	return h.Sum64()
}

// pickCanaries chooses the canary cohort of a new rollout.
func (p *plan) pickCanaries() []string {
	r := p.in.Rollout
	if r == nil {
		return nil
	}
	var out []string
	switch {
	case len(r.Canary.Vehicles) > 0:
		for _, name := range r.Canary.Vehicles {
			if _, ok := p.byName[name]; ok && !p.excluded[name] {
				out = append(out, name)
			} else {
				p.event(true, "CanaryMissing", "canary vehicle %s is not selected by the profile or is excluded", name)
			}
		}
	case r.Canary.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(r.Canary.Selector.AsMetav1())
		if err != nil {
			p.event(true, "CanarySelector", "canary selector: %v", err)
			return nil
		}
		for _, v := range p.in.Vehicles {
			lbls := v.Labels
			if lbls == nil {
				lbls = labels.Set(nil)
			}
			if !p.excluded[v.Name] && sel.Matches(lbls) {
				out = append(out, v.Name)
			}
		}
	case r.Canary.Count != nil:
		out = p.stratified(int(*r.Canary.Count))
	}
	if len(out) > MaxCanaryVehicles {
		// status.canaryVehicles holds at most MaxCanaryVehicles: a status
		// that could not be written would stop the rollout for good. The
		// canary is the first of them in the profile's stable
		// pseudo-random order; the rest follow with the steps.
		sort.Slice(out, func(i, j int) bool { return p.before(out[i], out[j]) })
		p.event(true, "CanaryTruncated", "the canary selects %d vehicles; status.canaryVehicles holds at most %d: the canary is %d of them, the rest follow with the steps",
			len(out), MaxCanaryVehicles, MaxCanaryVehicles)
		out = out[:MaxCanaryVehicles]
	}
	sort.Strings(out)
	return out
}

// MaxCanaryVehicles is the most vehicles status.canaryVehicles holds (its
// CRD MaxItems).
const MaxCanaryVehicles = 1000

// stratified picks n vehicles so that every hardware model of the fleet is
// represented (n is raised to the number of models), preferring reachable
// vehicles, round-robin across models in a stable pseudo-random order; at a
// hub, within a model, round-robin across clusters too. With a Placement's
// decision groups the cohort comes from the lowest group (the models
// counted are that group's), and from the next groups only when it has
// fewer than n vehicles.
func (p *plan) stratified(n int) []string {
	pools := [][]Vehicle{p.in.Vehicles}
	if p.grouped {
		pools = p.byDecisionGroup()
	}
	var out []string
	closed := 0
	for i, pool := range pools {
		if len(out) >= n {
			break
		}
		picked, c := p.stratifiedOf(pool, n-len(out), i == 0)
		out = append(out, picked...)
		closed += c
	}
	passed := 0
	for _, v := range p.in.Vehicles {
		if v.GateClosed && !p.excluded[v.Name] {
			passed++
		}
	}
	passed -= closed
	switch {
	case passed > 0:
		p.event(false, "CanaryGatesOpen", "canary cohort chosen among vehicles that can take the change now: %d vehicle(s) with a closed apply gate passed over", passed)
	case closed > 0:
		p.event(true, "CanaryGatesClosed", "%d canary vehicle(s) have a closed apply gate: they are Deferred until it opens", closed)
	}
	return out
}

// byDecisionGroup is the vehicles by their cluster's decision group, the
// lowest group first.
func (p *plan) byDecisionGroup() [][]Vehicle {
	byGroup := map[int32][]Vehicle{}
	var groups []int32
	for _, v := range p.in.Vehicles {
		g := p.groupOf(v)
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], v)
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i] < groups[j] })
	out := make([][]Vehicle, 0, len(groups))
	for _, g := range groups {
		out = append(out, byGroup[g])
	}
	return out
}

// stratifiedOf picks up to n of vs as stratified does (n raised to the
// number of their models when raise), and says how many of those picked
// have a closed apply gate.
func (p *plan) stratifiedOf(vs []Vehicle, n int, raise bool) (out []string, closed int) {
	groups := map[string][]Vehicle{}
	var models []string
	for _, v := range vs {
		if p.excluded[v.Name] {
			continue
		}
		m := strings.Join(v.Hardware, "+")
		if _, ok := groups[m]; !ok {
			models = append(models, m)
		}
		groups[m] = append(groups[m], v)
	}
	sort.Strings(models)
	for _, m := range models {
		g := groups[m]
		sort.Slice(g, func(i, j int) bool {
			ri, rj := p.reachable(g[i]), p.reachable(g[j])
			if ri != rj {
				return ri
			}
			// A vehicle that can take the change now before one whose
			// apply gate is closed.
			if oi, oj := !g[i].GateClosed, !g[j].GateClosed; oi != oj {
				return oi
			}
			return p.before(g[i].Name, g[j].Name)
		})
		groups[m] = spreadGroups(g)
	}
	if raise && n < len(models) {
		n = len(models)
	}
	for round := 0; len(out) < n; round++ {
		took := false
		for _, m := range models {
			if round < len(groups[m]) && len(out) < n {
				v := groups[m][round]
				out = append(out, v.Name)
				if v.GateClosed {
					closed++
				}
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out, closed
}
