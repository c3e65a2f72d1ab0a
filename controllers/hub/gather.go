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
	"strings"
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

// GenerationFeedbackName is the name of the status feedback value carrying
// the metadata.generation of the profile's copy in the cluster (read by the
// work agent with the report, in the same sync).
const GenerationFeedbackName = "generation"

// DefaultWorkStatusSync is OCM's work agent's default
// --status-sync-interval.
const DefaultWorkStatusSync = 10 * time.Second

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
	// Header says when the cluster's controller wrote the report and which
	// generation of its copy it answers (zero for a report without one).
	Header v1alpha1.ReportHeader
	// CopyGeneration is the copy's metadata.generation as the work agent
	// read it with the report (0 when not carried).
	CopyGeneration int64
	// Stale: the cluster is Available but its report is older than
	// unreachableAfter (Judge): nettune's controller there stopped.
	Stale bool
	// Message says what the hub saw of the cluster's work.
	Message string
	// ByAddOn: the hub reads the liveness of the cluster's controller from
	// nettune's add-on (liveness AddOnLease), not from the report's age.
	// AddOnDown is then the add-on's Available condition when it is not
	// True ("" while it is): the controller stopped renewing its Lease.
	ByAddOn   bool
	AddOnDown string
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
			if v.Name == GenerationFeedbackName && v.Value.Integer != nil {
				c.CopyGeneration = *v.Value.Integer
			}
			if v.Name != FeedbackName || v.Value.String == nil {
				continue
			}
			h, rs, err := v1alpha1.ParseVehicleReports(*v.Value.String)
			if err != nil {
				c.Message = "unreadable vehicle report: " + err.Error()
				continue
			}
			if rs == nil {
				rs = []v1alpha1.VehicleReport{}
			}
			c.Reports, c.Header = rs, h
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

// ReportInterval is the heartbeat the hub asks of the clusters' controllers
// (spec.hubAssignment.reportInterval) for a profile's unreachableAfter,
// given the work agents' status sync: a report reaches the hub up to 1.9
// sync intervals after it is written (OCM reads each work's resources again
// after 1 to 1.9 times --status-sync-interval), so a live controller's
// report is at most interval + 1.9 sync old there. The interval is a quarter
// of what unreachableAfter leaves after two syncs, at least
// v1alpha1.MinReportInterval.
func ReportInterval(unreachableAfter, statusSync time.Duration) time.Duration {
	return max((unreachableAfter-2*statusSync)/4, v1alpha1.MinReportInterval)
}

// Judge marks the clusters whose ManagedCluster is Available but whose
// report, written by nettune's controller there, is older than
// unreachableAfter: the controller stopped (crashed, removed, or its work
// agent no longer carries its status). Such a cluster is not Reachable, its
// vehicles were last seen when the report was written, and its message
// names it. A cluster whose report has no header (an older controller) is
// trusted while Available, as before. A fresh report that does not yet
// answer the copy's newest generation is said in the message.
//
// A cluster judged ByAddOn (the add-on gate's liveness AddOnLease) is not
// judged by its report's age: its report changes only with its content.
// It is not Reachable while its add-on is not Available (AddOnDown), its
// vehicles last seen when OCM said so.
func Judge(clusters []Cluster, now time.Time, unreachableAfter time.Duration) []Cluster {
	out := make([]Cluster, len(clusters))
	for i, c := range clusters {
		out[i] = c
		if c.ByAddOn && c.AddOnDown != "" && c.Reachable {
			out[i].Reachable, out[i].Stale = false, true
			out[i].Message = AddOnDownMessage(c.Name, c.AddOnDown)
			continue
		}
		if !c.Reachable || c.Header.Written.IsZero() {
			continue
		}
		behind := ""
		if c.CopyGeneration > c.Header.Generation {
			behind = fmt.Sprintf("; its report answers generation %d of the profile's copy there, which is at %d", c.Header.Generation, c.CopyGeneration)
		}
		if !c.ByAddOn && now.Sub(c.Header.Written) >= unreachableAfter {
			out[i].Reachable, out[i].Stale, out[i].Since = false, true, c.Header.Written
			out[i].Message = StaleMessage(c.Name, c.Header.Written, unreachableAfter) + behind
			continue
		}
		if behind != "" && c.Message == "" {
			out[i].Message = "nettune's controller has not answered the newest share yet" + behind
		}
	}
	return out
}

// StaleMessage is a stale cluster's status.clusters[].message (it does not
// change while the cluster stays silent: no status write per reconcile).
func StaleMessage(cluster string, written time.Time, unreachableAfter time.Duration) string {
	return fmt.Sprintf("nettune's controller in cluster %s has not reported since %s, longer than unreachableAfter %s: its vehicles count as Unreachable",
		cluster, written.UTC().Format(time.RFC3339), unreachableAfter)
}

// AddOnDownMessage is the status.clusters[].message of a cluster whose
// add-on is not Available (liveness AddOnLease).
func AddOnDownMessage(cluster, available string) string {
	return fmt.Sprintf("nettune's controller in cluster %s is not running as OCM reads its add-on's Lease (Available %s): its vehicles count as Unreachable",
		cluster, available)
}

// FreshnessEvents are the events of the clusters whose controller went
// silent or came back since the previous status (prev, status.clusters).
func FreshnessEvents(prev []v1alpha1.ClusterStatus, clusters []Cluster, now time.Time, unreachableAfter time.Duration) []planner.Event {
	was := map[string]bool{}
	for _, c := range prev {
		was[c.Name] = strings.HasPrefix(c.Message, "nettune's controller in cluster "+c.Name+" has not reported since") ||
			strings.HasPrefix(c.Message, "nettune's controller in cluster "+c.Name+" is not running as OCM reads")
	}
	var out []planner.Event
	for _, c := range clusters {
		switch stale, before := c.Stale, was[c.Name]; {
		case stale && !before && c.AddOnDown != "":
			out = append(out, planner.Event{Warning: true, Reason: "ClusterControllerSilent", Message: fmt.Sprintf(
				"nettune's add-on in cluster %s is not Available (%s): its controller stopped renewing the add-on's Lease; its %d vehicle(s) count as Unreachable after unreachableAfter %s",
				c.Name, c.AddOnDown, len(c.Reports), unreachableAfter)})
		case !stale && before && c.Reachable && c.ByAddOn:
			out = append(out, planner.Event{Reason: "ClusterControllerReturned", Message: fmt.Sprintf(
				"nettune's add-on in cluster %s is Available again", c.Name)})
		case stale && !before:
			out = append(out, planner.Event{Warning: true, Reason: "ClusterControllerSilent", Message: fmt.Sprintf(
				"nettune's controller in cluster %s last reported %s ago (at %s), longer than unreachableAfter %s: its %d vehicle(s) count as Unreachable",
				c.Name, now.Sub(c.Header.Written).Round(time.Second), c.Header.Written.UTC().Format(time.RFC3339), unreachableAfter, len(c.Reports))})
		case !stale && before && c.Reachable:
			out = append(out, planner.Event{Reason: "ClusterControllerReturned", Message: fmt.Sprintf(
				"nettune's controller in cluster %s reports again (at %s)", c.Name, c.Header.Written.UTC().Format(time.RFC3339))})
		}
	}
	return out
}

// Vehicles turns the clusters' reports into the planner's vehicles, sorted
// by name. A vehicle of a silent cluster was last seen when the cluster went
// silent (or earlier, if its cluster already counted it Unreachable): the
// planner then counts it Unreachable after unreachableAfter, never Failed.
// A vehicle of a reachable cluster was last seen when the report was written
// (now for a report without a header, or one from a clock ahead of the
// hub's), so the planner wakes when the report would turn stale.
// A vehicle reported by two clusters is kept in the first (by name) and
// named in dup.
func Vehicles(clusters []Cluster, now time.Time) (vs []planner.Vehicle, cluster map[string]string, dup []string) {
	cluster = map[string]string{}
	for _, c := range clusters {
		seen := now
		if !c.Reachable {
			seen = c.Since
		} else if w := c.Header.Written; !c.ByAddOn && !w.IsZero() && w.Before(now) {
			seen = w
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
