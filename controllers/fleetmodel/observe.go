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

package fleetmodel

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/planner"
)

// Liveness says when a node's agent was last seen alive. heartbeat is the
// node's status.lastHeartbeatTime (zero when none), for a node with no
// other sign of life.
type Liveness interface {
	LastSeen(node string, heartbeat time.Time) time.Time
}

// Observe summarizes each vehicle, sorted by name, from its nodes'
// NodeNetTunings (by node name; a missing one is a node that has not
// reported). live says when each node was last seen; nil takes the status
// heartbeat.
func (f *Fleet) Observe(profile string, nnts map[string]*v1alpha1.NodeNetTuning, live Liveness) []planner.Vehicle {
	return f.ObserveWith(profile, func(node string) *v1alpha1.NodeNetTuning { return nnts[node] }, live)
}

// ObserveWith is Observe with the NodeNetTunings looked up by nnt (a
// node's, read only; nil for a node that has not reported).
func (f *Fleet) ObserveWith(profile string, nnt func(node string) *v1alpha1.NodeNetTuning, live Liveness) []planner.Vehicle {
	out := make([]planner.Vehicle, 0, len(f.Vehicles))
	for name, nodes := range f.Vehicles {
		v := planner.Vehicle{Name: name, Verified: true, Nodes: len(nodes), Labels: commonLabels(nodes)}
		for i, n := range nodes {
			if h := n.Labels[f.HardwareLabel]; h != "" && !slices.Contains(v.Hardware, h) {
				v.Hardware = append(v.Hardware, h)
			}
			nt := nnt(n.Name)
			assigned := ""
			if nt != nil {
				assigned = AssignedRevision(nt, profile)
			}
			if i == 0 {
				v.Assigned = assigned
			} else if assigned != v.Assigned {
				v.Mixed = true
			}
			verified, failed, seen := NodeReport(nt)
			if live != nil {
				seen = live.LastSeen(n.Name, seen)
			}
			if verified {
				v.VerifiedNodes++
				if t := nt.Status.VerifiedTime; t != nil && t.After(v.VerifiedAt) {
					v.VerifiedAt = t.Time
				}
			}
			v.Verified = v.Verified && verified
			v.Failed = v.Failed || failed
			if deferred, since, reason := NodeDeferred(nt); deferred {
				if !v.Deferred || since.Before(v.DeferredSince) {
					v.DeferredSince = since
				}
				if !v.Deferred {
					v.DeferredReason = reason
				}
				v.Deferred = true
			}
			if nt != nil && nt.Status.Gate != nil && nt.Status.Gate.State == v1alpha1.GateClosed {
				v.GateClosed = true
			}
			// The vehicle is as recent as its most silent node; a node that
			// never reported makes it never seen.
			switch {
			case i == 0:
				v.LastSeen = seen
			case v.LastSeen.IsZero() || seen.IsZero():
				v.LastSeen = time.Time{}
			case seen.Before(v.LastSeen):
				v.LastSeen = seen
			}
		}
		if !v.Verified {
			v.VerifiedAt = time.Time{}
		} else {
			v.Deferred, v.DeferredSince, v.DeferredReason = false, time.Time{}, ""
		}
		sort.Strings(v.Hardware)
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// commonLabels are the labels a vehicle's nodes have in common, with the
// same value on every node: a view of the nodes (the cache's own, read
// only), computed when a label is asked for. A map of them per vehicle on
// every reconcile was 1.6 GB of the allocations of one 30,000-node rollout,
// for the canary selector, which only a rollout's start reads.
type commonLabels []*corev1.Node

// Lookup returns the label's value when every node has it with that value.
func (c commonLabels) Lookup(label string) (string, bool) {
	if len(c) == 0 {
		return "", false
	}
	val, ok := c[0].Labels[label]
	if !ok {
		return "", false
	}
	for _, n := range c[1:] {
		if w, ok := n.Labels[label]; !ok || w != val {
			return "", false
		}
	}
	return val, true
}

// Has reports whether every node has the label, with one value.
func (c commonLabels) Has(label string) bool {
	_, ok := c.Lookup(label)
	return ok
}

// Get returns the label's value when every node has it with one value.
func (c commonLabels) Get(label string) string {
	v, _ := c.Lookup(label)
	return v
}

// AssignedRevision is the revision of profile a NodeNetTuning is rendered with.
func AssignedRevision(nnt *v1alpha1.NodeNetTuning, profile string) string {
	for _, sp := range nnt.Spec.Profiles {
		if sp.Name == profile {
			return sp.Revision
		}
	}
	return ""
}

// NodeReport reads an agent's report on the NodeNetTuning's current spec:
// verified when it applied and verified this generation, failed when it
// rolled it back or is degraded, and its latest heartbeat.
func NodeReport(nnt *v1alpha1.NodeNetTuning) (verified, failed bool, seen time.Time) {
	if nnt == nil {
		return false, false, time.Time{}
	}
	st := nnt.Status
	if st.LastHeartbeatTime != nil {
		seen = st.LastHeartbeatTime.Time
	}
	current := func(t string) bool {
		c := meta.FindStatusCondition(st.Conditions, t)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == nnt.Generation
	}
	verified = st.ObservedGeneration == nnt.Generation && st.AppliedRevision == nnt.Spec.Revision && current(v1alpha1.ConditionVerified)
	// Degraded by the host's environment (a full state directory, a link
	// down) is not the revision's failure: the agent retries it.
	degraded := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	failed = current(v1alpha1.ConditionRolledBack) ||
		(current(v1alpha1.ConditionDegraded) && !v1alpha1.EnvironmentReason(degraded.Reason))
	return verified, failed, seen
}

// NodeDeferred reads whether the node's agent holds the NodeNetTuning's
// current spec back (its apply gate closed, no maintenance window open),
// since when, and why (the Deferred condition's reason: GateClosed,
// OutsideWindow, GateNotConfigured, WindowInvalid).
func NodeDeferred(nnt *v1alpha1.NodeNetTuning) (deferred bool, since time.Time, reason string) {
	if nnt == nil || nnt.Status.Gate == nil || nnt.Status.Gate.PendingRevision != nnt.Spec.Revision {
		return false, time.Time{}, ""
	}
	c := meta.FindStatusCondition(nnt.Status.Conditions, v1alpha1.ConditionDeferred)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != nnt.Generation {
		return false, time.Time{}, ""
	}
	return true, c.LastTransitionTime.Time, c.Reason
}

// Kernels returns what the nodes of each of vehicles reported of their
// kernels (NodeNetTuning status.kernel; nil for a node that has not), by
// vehicle, for an analysis to check what each cohort can measure.
func (f *Fleet) Kernels(vehicles []string, nnt func(node string) *v1alpha1.NodeNetTuning) map[string][]analysis.NodeKernel {
	out := make(map[string][]analysis.NodeKernel, len(vehicles))
	for _, v := range vehicles {
		nodes := f.Vehicles[v]
		ks := make([]analysis.NodeKernel, 0, len(nodes))
		for _, n := range nodes {
			k := analysis.NodeKernel{Node: n.Name}
			if o := nnt(n.Name); o != nil {
				k.Kernel = o.Status.Kernel
			}
			ks = append(ks, k)
		}
		out[v] = ks
	}
	return out
}

// Counters are the tcp_info counters every node of vehicle reported its
// kernel provides, in the agent's order; nil when a node has not reported
// its kernel.
func (f *Fleet) Counters(vehicle string, nnt func(node string) *v1alpha1.NodeNetTuning) []string {
	var out []string
	for i, n := range f.Vehicles[vehicle] {
		o := nnt(n.Name)
		if o == nil || o.Status.Kernel == nil {
			return nil
		}
		if i == 0 {
			out = append([]string{}, o.Status.Kernel.TCPInfoCounters...)
			continue
		}
		out = slices.DeleteFunc(out, func(c string) bool { return !o.Status.Kernel.Provides(c) })
	}
	return out
}
