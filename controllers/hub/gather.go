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

package hub

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/planner"
)

// ClusterLabel is the label a hub gives each vehicle (for a canary selector):
// the name of its managed cluster.
const ClusterLabel = "nettune.io/cluster"

// FeedbackName is the name of the status feedback value carrying a
// cluster's status.vehicleReport.
const FeedbackName = "vehicleReport"

// Cluster is one managed cluster as the hub sees it for one profile.
type Cluster struct {
	Name string
	// Reachable: the ManagedCluster is Available. Since is when it stopped
	// being Available (zero while it is).
	Reachable bool
	Since     time.Time
	// Reports are its vehicles as its controller last reported them (nil
	// before the first report).
	Reports []v1alpha1.VehicleReport
	// Message says what the hub saw of the cluster's work.
	Message string
}

// Observe reads a managed cluster and the profile's ManifestWork in it
// (nil before the first one is written).
func Observe(mc *clusterv1.ManagedCluster, w *workv1.ManifestWork, profile string) Cluster {
	c := Cluster{Name: mc.Name}
	if a := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); a != nil && a.Status == metav1.ConditionTrue {
		c.Reachable = true
	} else if a != nil {
		c.Since = a.LastTransitionTime.Time
		c.Message = fmt.Sprintf("not Available (%s: %s)", a.Reason, a.Message)
	} else {
		c.Since = mc.CreationTimestamp.Time
		c.Message = "not Available yet (the cluster's agent has not reported)"
	}
	if w == nil {
		if c.Message == "" {
			c.Message = "no work placed yet"
		}
		return c
	}
	for _, m := range w.Status.ResourceStatus.Manifests {
		if m.ResourceMeta.Resource != "nettuningprofiles" || m.ResourceMeta.Name != profile {
			continue
		}
		for _, v := range m.StatusFeedbacks.Values {
			if v.Name != FeedbackName || v.Value.String == nil {
				continue
			}
			rs, err := v1alpha1.ParseVehicleReports(*v.Value.String)
			if err != nil {
				c.Message = "unreadable vehicle report: " + err.Error()
				continue
			}
			if rs == nil {
				rs = []v1alpha1.VehicleReport{}
			}
			c.Reports = rs
		}
		if a := meta.FindStatusCondition(m.Conditions, workv1.ManifestApplied); a != nil && a.Status != metav1.ConditionTrue && c.Message == "" {
			c.Message = fmt.Sprintf("the profile is not applied in the cluster (%s: %s)", a.Reason, a.Message)
		}
	}
	if c.Reports == nil && c.Message == "" {
		c.Message = "waiting for the cluster's first vehicle report"
	}
	return c
}

// Vehicles turns the clusters' reports into the planner's vehicles, sorted
// by name. A vehicle of a silent cluster was last seen when the cluster went
// silent (or earlier, if its cluster already counted it Unreachable): the
// planner then counts it Unreachable after unreachableAfter, never Failed.
// A vehicle reported by two clusters is kept in the first (by name) and
// named in dup.
func Vehicles(clusters []Cluster, now time.Time) (vs []planner.Vehicle, cluster map[string]string, dup []string) {
	cluster = map[string]string{}
	for _, c := range clusters {
		seen := now
		if !c.Reachable {
			seen = c.Since
		}
		for _, r := range c.Reports {
			if _, ok := cluster[r.Vehicle]; ok {
				dup = append(dup, r.Vehicle)
				continue
			}
			cluster[r.Vehicle] = c.Name
			last := seen
			if !r.UnreachableSince.IsZero() && r.UnreachableSince.Before(last) {
				last = r.UnreachableSince
			}
			lbls := labels.Set{ClusterLabel: c.Name}
			v := planner.Vehicle{Name: r.Vehicle, Group: c.Name, Hardware: r.Hardware, Labels: lbls, Assigned: r.Revision,
				Mixed: r.Mixed, Verified: r.Verified, Failed: r.Failed, LastSeen: last, Counters: r.Counters, Nodes: 1,
				// A deferred vehicle's own since is not reported: the hub
				// waits deferredTimeout from the rollout's start.
				Deferred: r.Deferred, GateClosed: r.GateClosed}
			if r.Verified {
				v.VerifiedNodes = 1
			}
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Name < vs[j].Name })
	sort.Strings(dup)
	return vs, cluster, dup
}

// Kernels are the vehicles' kernels as their clusters reported them (the
// counters every node provides), one entry per vehicle; nil Kernel when a
// node did not report.
func Kernels(vs []planner.Vehicle) func(vehicles []string) map[string][]analysis.NodeKernel {
	byName := make(map[string]*planner.Vehicle, len(vs))
	for i := range vs {
		byName[vs[i].Name] = &vs[i]
	}
	return func(vehicles []string) map[string][]analysis.NodeKernel {
		out := make(map[string][]analysis.NodeKernel, len(vehicles))
		for _, name := range vehicles {
			k := analysis.NodeKernel{Node: name}
			if v := byName[name]; v != nil && v.Counters != nil {
				k.Kernel = &v1alpha1.KernelFeatures{TCPInfoCounters: v.Counters}
			}
			out[name] = []analysis.NodeKernel{k}
		}
		return out
	}
}
