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
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Selection is a profile's node selector and vehicle label.
func Selection(p *v1alpha1.NetTuningProfile) (labels.Selector, string, error) {
	sel := labels.Everything()
	if p.Spec.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector.AsMetav1())
		if err != nil {
			return nil, "", fmt.Errorf("spec.nodeSelector: %w", err)
		}
		sel = s
	}
	return sel, p.Spec.GetVehicleLabel(), nil
}

// Fleet is the nodes a profile selects, grouped into vehicles.
type Fleet struct {
	VehicleLabel  string
	HardwareLabel string
	// Vehicles holds each vehicle's nodes, sorted by name.
	Vehicles map[string][]*corev1.Node
	// Unlabelled are the nodes the selector matched that name no vehicle,
	// sorted.
	Unlabelled []string
}

// Select groups the nodes p selects into vehicles.
func Select(p *v1alpha1.NetTuningProfile, nodes []corev1.Node) (*Fleet, error) {
	ptrs := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		ptrs[i] = &nodes[i]
	}
	return SelectNodes(p, ptrs)
}

// SelectNodes is Select of nodes by pointer; the fleet keeps the pointers
// (the controller passes the informer cache's own objects, read only).
func SelectNodes(p *v1alpha1.NetTuningProfile, nodes []*corev1.Node) (*Fleet, error) {
	sel, vehicleLabel, err := Selection(p)
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		VehicleLabel:  vehicleLabel,
		HardwareLabel: p.Spec.GetHardwareLabel(),
	}
	// Two passes: the selected nodes and how many each vehicle has, then
	// one array cut into the vehicles' slices (a slice per vehicle grown by
	// append, on every reconcile, was most of what a plan allocated).
	picked := make([]*corev1.Node, 0, len(nodes))
	count := map[string]int{}
	for _, n := range nodes {
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		v := n.Labels[f.VehicleLabel]
		if v == "" {
			f.Unlabelled = append(f.Unlabelled, n.Name)
			continue
		}
		picked = append(picked, n)
		count[v]++
	}
	f.Vehicles = make(map[string][]*corev1.Node, len(count))
	all := make([]*corev1.Node, len(picked))
	next := 0
	for _, n := range picked {
		v := n.Labels[f.VehicleLabel]
		ns, ok := f.Vehicles[v]
		if !ok {
			c := count[v]
			ns, next = all[next:next:next+c], next+c
		}
		f.Vehicles[v] = append(ns, n)
	}
	for _, ns := range f.Vehicles {
		slices.SortFunc(ns, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	}
	sort.Strings(f.Unlabelled)
	return f, nil
}

// VehicleOf returns the vehicle a node belongs to in this fleet ("" if none).
// It searches every vehicle: the planner never asks, and an index by node
// name was a map of the whole fleet built on every reconcile.
func (f *Fleet) VehicleOf(node string) string {
	for v, nodes := range f.Vehicles {
		for _, n := range nodes {
			if n.Name == node {
				return v
			}
		}
	}
	return ""
}
