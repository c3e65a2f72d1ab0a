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
	"context"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/charts"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// namespace holds the hub's revisions; it is also nettune's namespace in
// every managed cluster (--cluster-namespace).
const namespace = "nettune-system"

// benchLabel is on every simulated ManagedCluster: the profiles select it.
const benchLabel = "nettune.io/bench"

// clusterName names the i-th cluster (from 1).
func clusterName(i int) string { return fmt.Sprintf("cluster-%04d", i) }

// vehicleName names vehicle j (from 1) of cluster i, of clusters of
// perCluster vehicles: unique across clusters (c0001-av-01, or
// c0001-av-001 for clusters of more than 99).
func vehicleName(i, j, perCluster int) string {
	if perCluster > 99 {
		return fmt.Sprintf("c%04d-av-%03d", i, j)
	}
	return fmt.Sprintf("c%04d-av-%02d", i, j)
}

// hardwareOf is cluster i's hardware model: xavier for the odd clusters,
// orin for the even ones.
func hardwareOf(i int) string {
	if i%2 == 1 {
		return "xavier"
	}
	return "orin"
}

// createClusters creates n ManagedClusters, Available, and their
// namespaces, workers at a time.
func createClusters(ctx context.Context, cl client.Client, n, workers int) error {
	return benchutil.Parallel(ctx, n, workers, func(k int) error {
		i := k + 1
		name := clusterName(i)
		if err := benchutil.CreateNamespace(ctx, cl, name); err != nil {
			return err
		}
		mc := &clusterv1.ManagedCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: "hub", "hardware": hardwareOf(i)}},
			Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true, LeaseDurationSeconds: 60},
		}
		if err := cl.Create(ctx, mc); err != nil {
			return fmt.Errorf("ManagedCluster %s: %w", name, err)
		}
		now := metav1.Now()
		mc.Status.Conditions = []metav1.Condition{
			{Type: clusterv1.ManagedClusterConditionHubAccepted, Status: metav1.ConditionTrue, Reason: "HubClusterAdminAccepted", Message: "accepted by the benchmark", LastTransitionTime: now},
			{Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined", Message: "simulated", LastTransitionTime: now},
			{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue, Reason: "ManagedClusterAvailable", Message: "simulated", LastTransitionTime: now},
		}
		if err := cl.Status().Update(ctx, mc); err != nil {
			return fmt.Errorf("ManagedCluster %s status: %w", name, err)
		}
		return nil
	})
}

// addOnName names nettune's add-on (its ManagedClusterAddOns; the hub
// controller's --addon-name, controllers/addon.DefaultName).
const addOnName = "nettune"

// addOnVersionLabel is, on a ManagedClusterAddOn, the chart version the
// add-on runs (controllers/addon.VersionLabel, written by the add-on
// manager): the hub's add-on gate reads it.
const addOnVersionLabel = "addon.nettune.io/version"

// chartVersion is the version of nettune's chart (charts/nettune/Chart.yaml,
// as built into the controller): the version the simulated add-ons report.
func chartVersion() (string, error) {
	raw, err := fs.ReadFile(charts.FS, path.Join(charts.Dir, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("nettune's chart: %w", err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return "", fmt.Errorf("nettune's chart: Chart.yaml: %w", err)
	}
	if meta.Version == "" {
		return "", fmt.Errorf("nettune's chart: Chart.yaml has no version")
	}
	return meta.Version, nil
}

// createAddOns creates, in each of the n clusters' namespaces, nettune's
// ManagedClusterAddOn (addOnName) at the chart version (label
// addOnVersionLabel, as the add-on manager writes it) with the condition
// Available=True that OCM's registration agent sets while the add-on's
// Lease is renewed; workers at a time.
func createAddOns(ctx context.Context, cl client.Client, n, workers int, version string) error {
	return benchutil.Parallel(ctx, n, workers, func(k int) error {
		ns := clusterName(k + 1)
		a := &addonv1alpha1.ManagedClusterAddOn{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: addOnName, Labels: map[string]string{addOnVersionLabel: version}},
			Spec:       addonv1alpha1.ManagedClusterAddOnSpec{InstallNamespace: namespace},
		}
		if err := cl.Create(ctx, a); err != nil {
			return fmt.Errorf("ManagedClusterAddOn %s/%s: %w", ns, a.Name, err)
		}
		a.Status.Conditions = []metav1.Condition{{Type: addonv1alpha1.ManagedClusterAddOnConditionAvailable, Status: metav1.ConditionTrue,
			Reason: "ManagedClusterAddOnLeaseUpdated", Message: addOnName + " add-on is available.", LastTransitionTime: metav1.Now()}}
		if err := cl.Status().Update(ctx, a); err != nil {
			return fmt.Errorf("ManagedClusterAddOn %s/%s status: %w", ns, a.Name, err)
		}
		return nil
	})
}

// logErrors counts the controller log's error lines by message and error.
func logErrors(path string) map[string]int {
	out := map[string]int{}
	_ = benchutil.ScanLog(path, func(e benchutil.LogEntry, ok bool) {
		if !ok || !e.IsError() {
			return
		}
		k := e.Msg
		if e.Error != "" {
			k += ": " + e.Error
		}
		if len(k) > 200 {
			k = k[:197] + "..."
		}
		out[k]++
	})
	return out
}

// repoPath is path under the repository root.
func repoPath(root string, path ...string) string {
	return filepath.Join(append([]string{root}, path...)...)
}
