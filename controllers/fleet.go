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

package controllers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/planner"
)

// Annotations the kubectl plugin writes on a profile. Each names what it acts
// on (a step, a revision), so acting on it twice does nothing more.
const (
	// PromoteAnnotation: "<revision>@<step index>" skips that step's pause
	// or inconclusive analysis in that revision's rollout (a later rollout
	// is never promoted by a leftover annotation).
	PromoteAnnotation = "nettune.io/promote"
	// AbortAnnotation: "<revision>" rolls that revision back.
	AbortAnnotation = "nettune.io/abort"
	// ExcludeAnnotation: comma-separated vehicles kept on the stable revision.
	ExcludeAnnotation = "nettune.io/exclude"
)

// Commands reads the plugin's annotations.
func Commands(p *v1alpha1.NetTuningProfile) planner.Commands {
	var c planner.Commands
	a := p.GetAnnotations()
	if rev, step, ok := ParsePromote(a[PromoteAnnotation]); ok {
		c.PromoteRevision, c.PromoteStep = rev, &step
	}
	c.AbortRevision = strings.TrimSpace(a[AbortAnnotation])
	c.Excluded = SplitList(a[ExcludeAnnotation])
	return c
}

// PromoteValue is the promote annotation for a revision's step.
func PromoteValue(revision string, step int32) string {
	return fmt.Sprintf("%s@%d", revision, step)
}

// ParsePromote reads a promote annotation ("<revision>@<step>").
func ParsePromote(v string) (revision string, step int32, ok bool) {
	rev, s, found := strings.Cut(strings.TrimSpace(v), "@")
	if !found || rev == "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return rev, int32(n), true
}

// SplitList splits a comma-separated annotation into sorted unique names.
func SplitList(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

func labelOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// fleet is the nodes a profile selects, grouped into vehicles.
type fleet struct {
	vehicleLabel  string
	hardwareLabel string
	// nodes by vehicle, sorted by name.
	vehicles map[string][]*corev1.Node
	// vehicle by node name.
	byNode map[string]string
	// unlabelled nodes the selector matched but that name no vehicle.
	unlabelled []string
}

// profileSelection is a profile's node selector and vehicle label.
func profileSelection(p *v1alpha1.NetTuningProfile) (labels.Selector, string, error) {
	sel := labels.Everything()
	if p.Spec.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
		if err != nil {
			return nil, "", fmt.Errorf("spec.nodeSelector: %w", err)
		}
		sel = s
	}
	return sel, labelOr(p.Spec.VehicleLabel, v1alpha1.DefaultVehicleLabel), nil
}

func selectFleet(p *v1alpha1.NetTuningProfile, nodes []corev1.Node) (*fleet, error) {
	sel, vehicleLabel, err := profileSelection(p)
	if err != nil {
		return nil, err
	}
	f := &fleet{
		vehicleLabel:  vehicleLabel,
		hardwareLabel: labelOr(p.Spec.HardwareLabel, v1alpha1.DefaultHardwareLabel),
		vehicles:      map[string][]*corev1.Node{},
		byNode:        map[string]string{},
	}
	for i := range nodes {
		n := &nodes[i]
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		v := n.Labels[f.vehicleLabel]
		if v == "" {
			f.unlabelled = append(f.unlabelled, n.Name)
			continue
		}
		f.vehicles[v] = append(f.vehicles[v], n)
		f.byNode[n.Name] = v
	}
	for _, ns := range f.vehicles {
		sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	}
	return f, nil
}

// vehicleOf returns the vehicle a node belongs to in this fleet ("" if none).
func (f *fleet) vehicleOf(node string) string { return f.byNode[node] }

// observe summarizes each vehicle from its nodes' NodeNetTunings.
func (f *fleet) observe(profile string, nnts map[string]*v1alpha1.NodeNetTuning) []planner.Vehicle {
	var out []planner.Vehicle
	for name, nodes := range f.vehicles {
		v := planner.Vehicle{Name: name, Verified: true}
		hw := map[string]bool{}
		var common map[string]string
		for i, n := range nodes {
			if h := n.Labels[f.hardwareLabel]; h != "" {
				hw[h] = true
			}
			if common == nil {
				common = map[string]string{}
				for k, val := range n.Labels {
					common[k] = val
				}
			} else {
				for k, val := range common {
					if n.Labels[k] != val {
						delete(common, k)
					}
				}
			}
			nnt := nnts[n.Name]
			assigned := ""
			if nnt != nil {
				assigned = AssignedRevision(nnt, profile)
			}
			if i == 0 {
				v.Assigned = assigned
			} else if assigned != v.Assigned {
				v.Mixed = true
			}
			verified, failed, seen := NodeReport(nnt)
			v.Verified = v.Verified && verified
			v.Failed = v.Failed || failed
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
		for h := range hw {
			v.Hardware = append(v.Hardware, h)
		}
		sort.Strings(v.Hardware)
		v.Labels = common
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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
	failed = current(v1alpha1.ConditionRolledBack) || current(v1alpha1.ConditionDegraded)
	return verified, failed, seen
}
