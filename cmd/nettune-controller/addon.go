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
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/charts"
	"github.com/nettune/nettune/controllers/addon"
	"github.com/nettune/nettune/controllers/hub"
)

// setupAddOnManager registers the add-on manager with --addon-manager.
func setupAddOnManager(mgr ctrl.Manager, o Options) error {
	if !o.AddOn.Manager {
		return nil
	}
	m, err := newAddOnManager(o)
	if err != nil {
		return err
	}
	m.Client, m.Recorder = mgr.GetClient(), mgr.GetEventRecorder("nettune-addon-manager")
	if err := m.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("add-on manager: %w", err)
	}
	return nil
}

// newAddOnManager reads the add-on flags: the chart built in, the
// placements, the rollout strategy and the values.
func newAddOnManager(o Options) (*addon.Manager, error) {
	ch, err := addon.LoadChart(charts.FS, charts.Dir)
	if err != nil {
		return nil, err
	}
	placements, err := addon.Placements(o.AddOn.Placements)
	if err != nil {
		return nil, err
	}
	m := &addon.Manager{Chart: ch, Name: o.AddOn.Name, Namespace: o.ClusterNamespace, Placements: placements}
	switch o.AddOn.Rollout {
	case "All":
		m.Rollout = clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
	case "Progressive":
		m.Rollout = clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
			Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.Parse(o.AddOn.MaxConcurrency)}}
		if _, err := addon.StrategyFrom(&m.Rollout, 100, "--addon-max-concurrency"); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--addon-rollout %q: want All or Progressive", o.AddOn.Rollout)
	}
	if o.AddOn.ValuesFile != "" {
		raw, err := os.ReadFile(o.AddOn.ValuesFile)
		if err != nil {
			return nil, fmt.Errorf("--addon-values: %w", err)
		}
		if err := yaml.Unmarshal(raw, &m.Values); err != nil {
			return nil, fmt.Errorf("--addon-values %s: %w", o.AddOn.ValuesFile, err)
		}
		// The chart's schema says which value is wrong, before any cluster
		// gets it.
		if _, err := addon.Render(ch, addon.Release{Name: m.Name, Namespace: m.Namespace, Values: m.Values}); err != nil {
			return nil, fmt.Errorf("--addon-values %s: %w", o.AddOn.ValuesFile, err)
		}
	}
	return m, nil
}

// addOnGate is the hub profile's add-on gate, nil when off.
func addOnGate(o Options) (*hub.AddOnGate, error) {
	on := false
	switch o.AddOn.Gate {
	case "auto":
		on = o.AddOn.Manager
	case "true":
		on = true
	case "false":
	default:
		return nil, fmt.Errorf("--addon-gate %q: want auto, true or false", o.AddOn.Gate)
	}
	if !on {
		return nil, nil
	}
	return &hub.AddOnGate{Name: o.AddOn.Name, VersionLabel: addon.VersionLabel, MinVersion: o.AddOn.MinVersion}, nil
}
