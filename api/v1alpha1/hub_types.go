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

package v1alpha1

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HubAssignment is a hub's decision for one cluster's vehicles
// (spec.hubAssignment of the profile the hub places in the cluster).
type HubAssignment struct {
	// stable is the revision of every vehicle of the cluster not listed in
	// assignments; empty gives them nothing of this profile (before its
	// first rollout finished). A revision other than the profile's own
	// content is a ControllerRevision the hub places beside the profile.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Stable string `json:"stable,omitempty"`
	// assignments name, per revision, the vehicles rendered with it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=101
	Assignments []RevisionAssignment `json:"assignments,omitempty"`
	// unreachableAfter is the hub profile's rollout.unreachableAfter: the
	// cluster reports a vehicle Unreachable by the same measure.
	// +optional
	UnreachableAfter *metav1.Duration `json:"unreachableAfter,omitempty"`
	// apply is the hub profile's rollout.apply: when the cluster's vehicles
	// may take a revision (their apply gates, maintenance windows).
	// +optional
	Apply *ApplyPolicy `json:"apply,omitempty"`
}

// Rollout is what a cluster's controller plans a hub's copy with: no
// steps of its own, the hub's unreachableAfter and apply policy.
func (h *HubAssignment) Rollout() *RolloutSpec {
	if h == nil || (h.UnreachableAfter == nil && h.Apply == nil) {
		return nil
	}
	return &RolloutSpec{UnreachableAfter: h.UnreachableAfter, Apply: h.Apply}
}

// PlacementRef names an Open Cluster Management Placement
// (cluster.open-cluster-management.io/v1beta1) in a namespace of the hub.
type PlacementRef struct {
	// namespace is the Placement's namespace: the ManagedClusterSetBindings
	// there bound the clusters it may select.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// name is the Placement's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// String is "namespace/name".
func (r *PlacementRef) String() string { return r.Namespace + "/" + r.Name }

// ClusterRolloutStatus is a cluster's state in a hub's rollout, in Open
// Cluster Management's rollout vocabulary (sdk-go
// pkg/apis/cluster/v1alpha1 RolloutStatus).
// +kubebuilder:validation:Enum=ToApply;Progressing;Succeeded;Failed;TimeOut
type ClusterRolloutStatus string

const (
	// ClusterToApply: none of the cluster's vehicles is assigned the
	// revision being rolled out yet (or the cluster has not reported).
	ClusterToApply ClusterRolloutStatus = "ToApply"
	// ClusterProgressing: a vehicle of the cluster is assigned a revision
	// it has not verified yet.
	ClusterProgressing ClusterRolloutStatus = "Progressing"
	// ClusterSucceeded: every vehicle of the cluster verified the revision
	// the plan assigns it.
	ClusterSucceeded ClusterRolloutStatus = "Succeeded"
	// ClusterFailed: a vehicle of the cluster failed its revision.
	ClusterFailed ClusterRolloutStatus = "Failed"
	// ClusterTimeOut: a vehicle of the cluster that has not verified its
	// revision has been Unreachable past the rollout's unreachableTimeout
	// (the rollout went on without it).
	ClusterTimeOut ClusterRolloutStatus = "TimeOut"
)

// ClusterStatus is one managed cluster of a hub profile.
type ClusterStatus struct {
	// name is the ManagedCluster's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// vehicles is how many vehicles the cluster reports for the profile.
	// +optional
	Vehicles int32 `json:"vehicles"`
	// verified is how many of them verified the revision the hub assigned.
	// +optional
	Verified int32 `json:"verified"`
	// reachable is false while the cluster is silent (its ManagedCluster is
	// not Available): its vehicles count as Unreachable, never as Failed.
	// +optional
	Reachable bool `json:"reachable"`
	// decisionGroup is the index of the Placement's decision group the
	// cluster is in (spec.placement; 0 with clusterSelector): group 0 moves
	// first.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DecisionGroup int32 `json:"decisionGroup,omitempty"`
	// rolloutStatus is the cluster's state in the rollout, in Open Cluster
	// Management's rollout vocabulary, from its vehicles' reports.
	// +optional
	RolloutStatus ClusterRolloutStatus `json:"rolloutStatus,omitempty"`
	// message says what the hub last saw of the cluster's work.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// VehicleReport is one vehicle as its cluster's controller observes it for a
// profile placed by a hub: one line of status.vehicleReport.
// +kubebuilder:object:generate=false
type VehicleReport struct {
	// Vehicle is the vehicle's name (unique across the hub's clusters).
	Vehicle string
	// Revision is the revision every node of the vehicle is rendered with
	// ("" when none, or when the nodes disagree: Mixed).
	Revision string
	Verified bool
	Failed   bool
	Mixed    bool
	// Deferred: its agents hold the revision back (apply gate closed, no
	// maintenance window open); GateClosed: a node's apply gate is closed.
	Deferred   bool
	GateClosed bool
	// UnreachableSince is the vehicle's last heartbeat when its cluster
	// counts it Unreachable; zero while it reports.
	UnreachableSince time.Time
	// Hardware is the vehicle's hardware models, sorted.
	Hardware []string
	// Counters are the tcp_info counters every node of the vehicle's kernels
	// provides; nil when a node did not report its kernel.
	Counters []string
}

// A report line: "<vehicle> <revision|-> <flags|-> <unreachable-since
// unix|0> <hardware,...|-> <counters,...|?>", flags from V (verified),
// F (failed), M (mixed), D (deferred), G (gate closed). A reader ignores
// flags it does not know.

// EncodeVehicleReports encodes reports, sorted by vehicle, one per line.
func EncodeVehicleReports(reports []VehicleReport) string {
	rs := append([]VehicleReport(nil), reports...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Vehicle < rs[j].Vehicle })
	var b strings.Builder
	for _, r := range rs {
		flags := ""
		if r.Verified {
			flags += "V"
		}
		if r.Failed {
			flags += "F"
		}
		if r.Mixed {
			flags += "M"
		}
		if r.Deferred {
			flags += "D"
		}
		if r.GateClosed {
			flags += "G"
		}
		since := int64(0)
		if !r.UnreachableSince.IsZero() {
			since = r.UnreachableSince.Unix()
		}
		counters := "?"
		if r.Counters != nil {
			counters = orDash(strings.Join(r.Counters, ","))
		}
		fmt.Fprintf(&b, "%s %s %s %d %s %s\n", r.Vehicle, orDash(r.Revision), orDash(flags), since,
			orDash(strings.Join(r.Hardware, ",")), counters)
	}
	return b.String()
}

// ParseVehicleReports decodes what EncodeVehicleReports encoded.
func ParseVehicleReports(s string) ([]VehicleReport, error) {
	var out []VehicleReport
	for i, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 6 {
			return nil, fmt.Errorf("vehicle report line %d: %d fields, want 6: %q", i+1, len(f), line)
		}
		since, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("vehicle report line %d: unreachable-since %q: %w", i+1, f[3], err)
		}
		r := VehicleReport{Vehicle: f[0], Revision: fromDash(f[1])}
		flags := fromDash(f[2])
		r.Verified, r.Failed, r.Mixed = strings.Contains(flags, "V"), strings.Contains(flags, "F"), strings.Contains(flags, "M")
		r.Deferred, r.GateClosed = strings.Contains(flags, "D"), strings.Contains(flags, "G")
		if since != 0 {
			r.UnreachableSince = time.Unix(since, 0).UTC()
		}
		if hw := fromDash(f[4]); hw != "" {
			r.Hardware = strings.Split(hw, ",")
		}
		switch f[5] {
		case "?":
		case "-":
			r.Counters = []string{}
		default:
			r.Counters = strings.Split(f[5], ",")
		}
		out = append(out, r)
	}
	return out, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fromDash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}
