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
	// reportInterval is how often the cluster's controller rewrites its
	// status.vehicleReport when none of its lines changed, for the time in
	// its header alone (a heartbeat): the hub counts the vehicles of a
	// cluster whose report is older than unreachableAfter Unreachable. The
	// hub sets it to leave room for OCM's status sync; unset, a quarter of
	// unreachableAfter.
	// +optional
	ReportInterval *metav1.Duration `json:"reportInterval,omitempty"`
	// liveness is how the hub learns that the cluster's controller runs.
	// Report (the default): by the report's heartbeat every reportInterval.
	// AddOnLease: by nettune's Open Cluster Management add-on, whose Lease
	// the controller renews and OCM's registration agent turns into the
	// hub's ManagedClusterAddOn Available condition; the controller then
	// rewrites its report only when a line or the generation it answers
	// changes, and no heartbeat passes through the hub.
	// +optional
	// +kubebuilder:validation:Enum=Report;AddOnLease
	Liveness Liveness `json:"liveness,omitempty"`
}

// Liveness is how a hub learns that a cluster's controller runs
// (spec.hubAssignment.liveness).
type Liveness string

const (
	// LivenessReport: the report's heartbeat every reportInterval.
	LivenessReport Liveness = "Report"
	// LivenessAddOnLease: the add-on's Lease, read by OCM (the hub's
	// ManagedClusterAddOn Available); the report changes only with its
	// content.
	LivenessAddOnLease Liveness = "AddOnLease"
)

// Heartbeat reports whether the cluster's controller rewrites its report
// for the time alone (liveness Report, the default; h may be nil).
func (h *HubAssignment) Heartbeat() bool {
	return h == nil || h.Liveness != LivenessAddOnLease
}

// RevisionFor is the revision h gives each vehicle: the one whose
// assignment names it, else stable ("" for every vehicle when h is nil).
func (h *HubAssignment) RevisionFor() func(vehicle string) string {
	if h == nil {
		return func(string) string { return "" }
	}
	named := map[string]string{}
	for _, a := range h.Assignments {
		for _, v := range a.Vehicles {
			named[v] = a.Revision
		}
	}
	return func(vehicle string) string {
		if r, ok := named[vehicle]; ok {
			return r
		}
		return h.Stable
	}
}

// MinReportInterval is the shortest heartbeat of a vehicle report.
const MinReportInterval = time.Second

// GetReportInterval is reportInterval, or a quarter of unreachableAfter
// (its default when unset), never below MinReportInterval (h may be nil).
func (h *HubAssignment) GetReportInterval() time.Duration {
	d := h.Rollout().GetUnreachableAfter() / 4
	if h != nil && h.ReportInterval != nil {
		d = h.ReportInterval.Duration
	}
	return max(d, MinReportInterval)
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
	// not Available, or nettune's controller in it has not reported for
	// unreachableAfter): its vehicles count as Unreachable, never as Failed.
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

// ReportHeader says when and for what a cluster's controller wrote its
// vehicle report: the first line of status.vehicleReport.
// +kubebuilder:object:generate=false
type ReportHeader struct {
	// Written is when the cluster's controller wrote the report (to the
	// second, its own clock); zero in a report without a header (written by
	// a controller older than the header).
	Written time.Time
	// Generation is the metadata.generation of the copy (the profile the
	// hub placed, with its spec.hubAssignment) the report answers: the hub
	// compares it with the copy's generation the work agent reads beside
	// it, and so tells a controller that has not yet seen the newest share.
	Generation int64
}

// A report is a header line, then one line per vehicle.
//
// The header: "@ <written unix seconds> <generation>"; a reader ignores
// fields after these. A vehicle line: "<vehicle> <revision|-> <flags|->
// <unreachable-since unix|0> <hardware,...|-> <counters,...|?>", flags from
// V (verified), F (failed), M (mixed), D (deferred), G (gate closed); a
// reader ignores flags it does not know. Vehicle names never begin with @
// (they are label values).
//
//	@ 1795707781 4
//	av-001 xavier-lan-6d5f8c V 0 xavier total_retrans,segs_out
//	av-002 xavier-lan-6d5f8c - 1795707650 xavier ?

// EncodeVehicleReports encodes a report: h (no header line when h is the
// zero value), then reports sorted by vehicle, one per line.
func EncodeVehicleReports(h ReportHeader, reports []VehicleReport) string {
	rs := append([]VehicleReport(nil), reports...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Vehicle < rs[j].Vehicle })
	var b strings.Builder
	if h != (ReportHeader{}) {
		written := int64(0)
		if !h.Written.IsZero() {
			written = h.Written.Unix()
		}
		fmt.Fprintf(&b, "@ %d %d\n", written, h.Generation)
	}
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

// ParseVehicleReports decodes what EncodeVehicleReports encoded. A report
// without a header line has a zero header.
func ParseVehicleReports(s string) (ReportHeader, []VehicleReport, error) {
	var h ReportHeader
	var out []VehicleReport
	for i, line := range strings.Split(s, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if f[0] == "@" {
			if i != 0 || len(f) < 3 {
				return ReportHeader{}, nil, fmt.Errorf("vehicle report line %d: a header must be the first line, \"@ <written> <generation>\": %q", i+1, line)
			}
			written, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return ReportHeader{}, nil, fmt.Errorf("vehicle report header: written %q: %w", f[1], err)
			}
			gen, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				return ReportHeader{}, nil, fmt.Errorf("vehicle report header: generation %q: %w", f[2], err)
			}
			if written != 0 {
				h.Written = time.Unix(written, 0).UTC()
			}
			h.Generation = gen
			continue
		}
		if len(f) != 6 {
			return ReportHeader{}, nil, fmt.Errorf("vehicle report line %d: %d fields, want 6: %q", i+1, len(f), line)
		}
		since, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return ReportHeader{}, nil, fmt.Errorf("vehicle report line %d: unreachable-since %q: %w", i+1, f[3], err)
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
	return h, out, nil
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
