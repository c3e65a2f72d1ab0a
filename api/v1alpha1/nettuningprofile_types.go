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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Default label keys used to group nodes into vehicles and hosts.
const (
	DefaultVehicleLabel  = "nettune.io/vehicle"
	DefaultHostLabel     = "nettune.io/host"
	DefaultHardwareLabel = "nettune.io/hardware"
)

// NetTuningProfileSpec declares TCP tuning for the host pairs of every selected
// vehicle and how a change to it is rolled out across the fleet.
// +kubebuilder:validation:XValidation:rule="has(self.defaults) || has(self.hostPairs) || has(self.routes) || has(self.sysctls) || has(self.interfaces)",message="a profile must set at least one of defaults, hostPairs, routes, sysctls or interfaces"
// +kubebuilder:validation:XValidation:rule="!has(self.defaults) || !has(self.defaults.cwnd) || !has(self.hostPairs) || self.hostPairs.all(p, !has(p.parameters) || !has(p.parameters.initcwnd) || has(p.parameters.cwnd) || p.parameters.initcwnd <= self.defaults.cwnd.value)",message="a host pair's initcwnd must not exceed the cwnd.value it inherits from defaults",fieldPath=".hostPairs"
// +kubebuilder:validation:XValidation:rule="!has(self.defaults) || !has(self.defaults.initcwnd) || !has(self.hostPairs) || self.hostPairs.all(p, !has(p.parameters) || !has(p.parameters.cwnd) || has(p.parameters.initcwnd) || self.defaults.initcwnd <= p.parameters.cwnd.value)",message="a host pair's cwnd.value must not be below the initcwnd it inherits from defaults",fieldPath=".hostPairs"
// +kubebuilder:validation:XValidation:rule="!has(self.defaults) || !has(self.defaults.cwnd) || !has(self.hostPairs) || self.hostPairs.all(p, !has(p.parameters) || !has(p.parameters.ssthresh) || has(p.parameters.cwnd) || p.parameters.ssthresh <= self.defaults.cwnd.value)",message="a host pair's ssthresh must not exceed the cwnd.value it inherits from defaults",fieldPath=".hostPairs"
// +kubebuilder:validation:XValidation:rule="!has(self.defaults) || !has(self.defaults.ssthresh) || !has(self.hostPairs) || self.hostPairs.all(p, !has(p.parameters) || !has(p.parameters.cwnd) || has(p.parameters.ssthresh) || self.defaults.ssthresh <= p.parameters.cwnd.value)",message="a host pair's cwnd.value must not be below the ssthresh it inherits from defaults",fieldPath=".hostPairs"
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterSelector) && has(self.hubAssignment))",message="clusterSelector (read at a hub) and hubAssignment (written by a hub into a cluster) exclude each other",fieldPath=".hubAssignment"
// +kubebuilder:validation:XValidation:rule="!(has(self.clusterSelector) && has(self.placement))",message="placement and clusterSelector exclude each other: a hub profile selects its clusters with one of them",fieldPath=".placement"
// +kubebuilder:validation:XValidation:rule="!(has(self.placement) && has(self.hubAssignment))",message="placement (read at a hub) and hubAssignment (written by a hub into a cluster) exclude each other",fieldPath=".hubAssignment"
type NetTuningProfileSpec struct {
	// nodeSelector selects the nodes this profile tunes. Empty selects every
	// node that carries the vehicle label.
	// +optional
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`

	// vehicleLabel is the node label whose value names the node's vehicle.
	// Every node of a vehicle moves to a new revision together.
	// +optional
	// +kubebuilder:default="nettune.io/vehicle"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	VehicleLabel string `json:"vehicleLabel,omitempty"`

	// hostLabel is the node label whose value names the compute unit inside its
	// vehicle (e.g. xavier-a). Host pairs refer to these names.
	// +optional
	// +kubebuilder:default="nettune.io/host"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	HostLabel string `json:"hostLabel,omitempty"`

	// hardwareLabel is the node label whose value names the hardware model
	// (e.g. xavier, orin); canary cohorts chosen by count include every model.
	// +optional
	// +kubebuilder:default="nettune.io/hardware"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	HardwareLabel string `json:"hardwareLabel,omitempty"`

	// defaults are the TCP parameters applied to every host pair of the vehicle
	// (each host to each other host) unless a host pair overrides them.
	// +optional
	Defaults *TCPParameters `json:"defaults,omitempty"`

	// hostPairs tune traffic from one host to another inside the same vehicle.
	// A more specific pair (named hosts) wins over a wildcard one.
	// +optional
	// +listType=map
	// +listMapKey=from
	// +listMapKey=to
	// +kubebuilder:validation:MaxItems=64
	HostPairs []HostPair `json:"hostPairs,omitempty"`

	// routes tune explicit destination prefixes (e.g. a remote logging server).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Routes []ProfileRoute `json:"routes,omitempty"`

	// sysctls set allow-listed kernel parameters on every selected node.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Sysctls []Sysctl `json:"sysctls,omitempty"`

	// interfaces set MTU and offloads of named interfaces.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Interfaces []ProfileInterface `json:"interfaces,omitempty"`

	// priority decides between two profiles that set the same item on one
	// node: the higher wins. Equal priorities clash: the item is applied from
	// neither and both profiles report a Conflict condition.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// switchBufferBytes is the packet buffer of the vehicle switch's ports
	// (e.g. 131072 for the 128 KB of a Xavier's SJA1105), used only to warn
	// at admission when a cwnd clamp lets one connection put more bytes in
	// flight than a port can hold: an incast of that host pair then
	// overflows the port. Nothing is applied from it.
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=1073741824
	SwitchBufferBytes *int64 `json:"switchBufferBytes,omitempty"`

	// rollout says how a new revision of this profile reaches the fleet. Without
	// it, every selected vehicle receives a new revision at once.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// clusterSelector is read by a nettune hub only (docs/hub.md): the
	// managed clusters (Open Cluster Management ManagedClusters, by their
	// labels) whose vehicles this profile is rolled out to as one fleet,
	// with one canary, one judge and one rollback. Empty selects every
	// managed cluster. A cluster's own controller ignores it, and it is not
	// part of the revision.
	// +optional
	ClusterSelector *LabelSelector `json:"clusterSelector,omitempty"`

	// placement is read by a nettune hub only (docs/hub.md): the Open
	// Cluster Management Placement (cluster.open-cluster-management.io/v1beta1)
	// whose decisions are the managed clusters this profile is rolled out
	// to, bounded by the ManagedClusterSetBindings of the Placement's
	// namespace; its decision groups set the rollout's order across
	// clusters (canaries from the first group, then group by group).
	// Excludes clusterSelector. A cluster's own controller ignores it, and
	// it is not part of the revision.
	// +optional
	Placement *PlacementRef `json:"placement,omitempty"`

	// hubAssignment is written by a nettune hub into the copy of a profile
	// it places in a cluster: the revision of each of the cluster's vehicles,
	// as the hub's rollout decided it. The cluster's controller then plans
	// no rollout of its own (rollout is ignored): it renders every vehicle
	// with the revision named for it, and reports every vehicle in
	// status.vehicleReport for the hub to read back. Not for hand edits.
	// +optional
	HubAssignment *HubAssignment `json:"hubAssignment,omitempty"`
}

// HostPair tunes the traffic sent from one host to another in the same vehicle.
// +kubebuilder:validation:XValidation:rule="self.from == '*' || self.to == '*' || self.from != self.to",message="a host pair from a host to itself tunes nothing (traffic to the host's own address does not leave it): from and to must differ",fieldPath=".to"
type HostPair struct {
	// from is the sending host (value of the host label), or "*" for any host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	From string `json:"from"`

	// to is the receiving host (value of the host label), or "*" for any host.
	// The controller resolves it to the peer node's LAN address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$`
	To string `json:"to"`

	// parameters override the profile's defaults for this pair.
	// +optional
	Parameters *TCPParameters `json:"parameters,omitempty"`
}

// ProfileRoute tunes an explicit destination prefix.
// +kubebuilder:validation:XValidation:rule="!has(self.source) || !isCIDR(self.destination) || !isIP(self.source) || cidr(self.destination).ip().family() == ip(self.source).family()",message="source must be of the same address family as destination",fieldPath=".source"
type ProfileRoute struct {
	// name identifies the route inside the profile.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// destination is the route's prefix in CIDR notation, e.g. 10.20.0.0/16.
	// +required
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="destination must be a CIDR such as 10.20.0.0/16"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).ip() == cidr(self).masked().ip()",message="destination has host bits set, which the kernel refuses for a route: use the prefix's network address (e.g. 10.20.0.0/16, not 10.20.0.1/16)"
	Destination string `json:"destination"`

	// device is the outgoing interface. When the destination has no route on
	// the host, one is created on this device; without a device, a missing
	// route is an error.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="the kernel refuses the interface names . and .."
	Device *string `json:"device,omitempty"`

	// source is the preferred source address of the route.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="source must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip(self).isGlobalUnicast() || ip(self).isLinkLocalUnicast()",message="source must be a host's unicast address (not unspecified, loopback, multicast or broadcast)"
	Source *string `json:"source,omitempty"`

	// hosts limits the route to these hosts (values of the host label). Empty
	// means every selected host.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Hosts []string `json:"hosts,omitempty"`

	// parameters are the route's TCP parameters; they do not inherit defaults.
	// +required
	Parameters TCPParameters `json:"parameters"`
}

// ProfileInterface sets MTU and offloads of an interface on the selected hosts.
type ProfileInterface struct {
	InterfaceTuning `json:",inline"`

	// hosts limits the setting to these hosts (values of the host label). Empty
	// means every selected host.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	Hosts []string `json:"hosts,omitempty"`
}

// RolloutSpec is a staged rollout: the canary cohort receives a new revision
// first, then steps run in order; after the last step every selected vehicle
// receives it and it becomes the stable revision.
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || self.steps.all(s, !has(s.analysis) || (has(self.analyses) && self.analyses.exists(a, a.name == s.analysis.name) && (!has(s.analysis.with) || s.analysis.with.all(w, self.analyses.exists(a, a.name == w)))))",message="every analysis step must name entries of analyses (name and with)",fieldPath=".steps"
type RolloutSpec struct {
	// canary chooses the vehicles that receive a new revision first.
	// +required
	Canary CanarySpec `json:"canary"`

	// steps run in order after the canary cohort is updated.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Steps []RolloutStep `json:"steps,omitempty"`

	// analyses define the checks that analysis steps run.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Analyses []AnalysisSpec `json:"analyses,omitempty"`

	// maxUnavailable caps the vehicles being updated at once, as a count or a
	// percentage of the selected vehicles ("25%"). Defaults to 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^(100|[1-9][0-9]?)%$')",message="maxUnavailable must be a count of at least 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// failureBudget is how many vehicles of the rollout may report RolledBack
	// or Degraded before the whole rollout is rolled back, as a count or a
	// percentage. Defaults to 0: the first failing vehicle rolls it back.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="failureBudget must be a count of at least 0 or a percentage from 0% to 100%"
	FailureBudget *intstr.IntOrString `json:"failureBudget,omitempty"`

	// unreachableAfter is how long a vehicle's agents may stay silent before
	// the vehicle counts as Unreachable (neither success nor failure).
	// +optional
	// +kubebuilder:default="2m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	UnreachableAfter *metav1.Duration `json:"unreachableAfter,omitempty"`

	// unreachableTimeout is how long a step waits for Unreachable vehicles
	// before it moves on without them; they catch up when they return.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	UnreachableTimeout *metav1.Duration `json:"unreachableTimeout,omitempty"`

	// revisionHistoryLimit bounds the revisions kept in status.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// paused holds the rollout at its current step until set back to false.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// apply says when a vehicle may take a new revision: while its apply
	// gate is open and inside a maintenance window (docs/apply-gates.md).
	// Unset: at once, unless the vehicle's agent has a gate and it is closed.
	// +optional
	Apply *ApplyPolicy `json:"apply,omitempty"`
}

// CanarySpec chooses the canary cohort by exactly one of vehicles, selector or count.
// +kubebuilder:validation:XValidation:rule="[has(self.vehicles), has(self.selector), has(self.count)].exists_one(x, x)",message="canary must set exactly one of vehicles, selector or count"
type CanarySpec struct {
	// vehicles names the canary vehicles (values of the vehicle label).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:MinLength=1
	Vehicles []string `json:"vehicles,omitempty"`

	// selector chooses canary vehicles by node labels; a vehicle is a canary
	// when any of its nodes matches.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`

	// count picks this many vehicles, stratified so that every hardware model
	// in the selected fleet is represented.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Count *int32 `json:"count,omitempty"`
}

// RolloutStep is exactly one of setVehicles, pause or analysis.
// +kubebuilder:validation:XValidation:rule="[has(self.setVehicles), has(self.pause), has(self.analysis)].exists_one(x, x)",message="a step must set exactly one of setVehicles, pause or analysis"
type RolloutStep struct {
	// setVehicles grows the set of vehicles on the new revision.
	// +optional
	SetVehicles *SetVehiclesStep `json:"setVehicles,omitempty"`

	// pause waits for a duration, or until promoted when no duration is given.
	// +optional
	Pause *PauseStep `json:"pause,omitempty"`

	// analysis runs a named check from rollout.analyses and rolls the
	// rollout back when it fails.
	// +optional
	Analysis *AnalysisStep `json:"analysis,omitempty"`
}

// SetVehiclesStep sets how many vehicles run the new revision, by exactly one
// of count or percent of the selected vehicles (canaries included).
// +kubebuilder:validation:XValidation:rule="[has(self.count), has(self.percent)].exists_one(x, x)",message="setVehicles must set exactly one of count or percent"
type SetVehiclesStep struct {
	// count is the number of vehicles on the new revision after this step.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Count *int32 `json:"count,omitempty"`

	// percent is the share of selected vehicles on the new revision after this
	// step, rounded up.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Percent *int32 `json:"percent,omitempty"`
}

// PauseStep holds the rollout.
type PauseStep struct {
	// duration of the pause; without it the rollout waits until promoted.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// AnalysisStep runs a named analysis, and the analyses named in with beside
// it.
// +kubebuilder:validation:XValidation:rule="!has(self.with) || !(self.name in self.with)",message="with repeats the step's own analysis",fieldPath=".with"
type AnalysisStep struct {
	// name of an entry in rollout.analyses.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// with names more entries of rollout.analyses measured beside name, on
	// the same cohorts at the same instants: a TCP guard (spurious
	// retransmissions, retransmission timeouts) beside a latency judge. The
	// step passes when every one of them passed and rolls back as soon as
	// one failed; an inconclusive one pauses or aborts as its onInconclusive
	// says.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	With []string `json:"with,omitempty"`
}

// Names are the step's analyses: name, then with.
func (s *AnalysisStep) Names() []string {
	return append([]string{s.Name}, s.With...)
}

// AnalysisProvider is the metrics backend an analysis queries.
// +kubebuilder:validation:Enum=Loki;Prometheus
type AnalysisProvider string

// Analysis providers.
const (
	ProviderLoki       AnalysisProvider = "Loki"
	ProviderPrometheus AnalysisProvider = "Prometheus"
)

// InconclusivePolicy is what an Inconclusive analysis does to the rollout.
// +kubebuilder:validation:Enum=Pause;Abort
type InconclusivePolicy string

// Inconclusive policies.
const (
	InconclusivePause InconclusivePolicy = "Pause"
	InconclusiveAbort InconclusivePolicy = "Abort"
)

// AnalysisSpec compares the canary vehicles against the baseline vehicles
// (those still on the stable revision), in one of two ways: query, a single
// value per cohort held to an absolute ceiling (maxValue) and a ceiling
// relative to the baseline (maxBaselineFactor, maxBaselineOffset); or judge,
// a statistical comparison per host pair of the share of slow messages.
// +kubebuilder:validation:XValidation:rule="has(self.query) != has(self.judge)",message="an analysis sets exactly one of query or judge",fieldPath=".query"
// +kubebuilder:validation:XValidation:rule="!has(self.query) || has(self.maxValue) || has(self.maxBaselineFactor)",message="a query analysis must set maxValue, maxBaselineFactor or both",fieldPath=".maxValue"
// +kubebuilder:validation:XValidation:rule="!has(self.judge) || (!has(self.maxValue) && !has(self.maxBaselineFactor) && !has(self.maxBaselineOffset) && !has(self.samplesQuery))",message="maxValue, maxBaselineFactor, maxBaselineOffset and samplesQuery belong to query analyses; a judge analysis states its thresholds in judge",fieldPath=".judge"
type AnalysisSpec struct {
	// name identifies the analysis for analysis steps.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// provider is the backend queried: Loki (LogQL) or Prometheus (PromQL).
	// +required
	Provider AnalysisProvider `json:"provider"`

	// address overrides the controller's default URL for the provider.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="address must be an http or https URL"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getHostname() != ''",message="address must name a host, e.g. http://loki.monitoring:3100"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="address must not carry credentials (user:password@): every reader of profiles would see them; put them in a Secret in the controller's namespace and name it in secretRef (docs/observability.md)"
	Address *string `json:"address,omitempty"`

	// secretRef names a Secret in the controller's namespace holding what
	// the backend asks of a client, under any of the keys tenant
	// (X-Scope-OrgID; several tenants joined by |), username and password
	// (basic auth) or token (bearer), ca.crt (PEM CA bundle), tls.crt and
	// tls.key (client certificate), header.NAME (an extra header). It is
	// read at every measurement, so a rotated Secret is used at the next
	// one. Without it, an analysis at the controller's default address uses
	// the controller's default credentials, and one with its own address
	// sends none. See docs/observability.md.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`

	// insecureSkipTLSVerify turns off verification of the backend's TLS
	// certificate. Verification is on unless this is true; prefer a ca.crt
	// in the secretRef's Secret.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// query is a Go template of a LogQL or PromQL instant query returning one
	// value, rendered once for the canary vehicles and once for the baseline.
	// Fields: .Vehicles (a regex alternation of vehicle names), .Revision,
	// .Profile, .Window (e.g. 5m). Exactly one of query and judge is set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	Query string `json:"query,omitempty"`

	// judge decides the analysis per host pair with a statistical test of
	// the share of slow messages, canary against baseline over the same
	// window. Exactly one of query and judge is set.
	// +optional
	Judge *JudgeSpec `json:"judge,omitempty"`

	// samplesQuery is a template like query returning the number of samples
	// behind the value; below minSamples the measurement is Inconclusive.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	SamplesQuery *string `json:"samplesQuery,omitempty"`

	// interval between measurements.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// window is the range each measurement covers.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	Window *metav1.Duration `json:"window,omitempty"`

	// measurements is how many successful measurements pass the analysis.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Measurements *int32 `json:"measurements,omitempty"`

	// minSamples is the fewest samples (per cohort) a measurement needs; for
	// a judge analysis, per cohort and host pair (raised to what
	// judge.quantile needs).
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000000
	MinSamples *int64 `json:"minSamples,omitempty"`

	// maxValue is the absolute ceiling for the canary value, a decimal in the
	// query's unit (e.g. "20" for 20 ms).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MaxValue *string `json:"maxValue,omitempty"`

	// maxBaselineFactor bounds the canary relative to the baseline:
	// canary <= baseline * maxBaselineFactor + maxBaselineOffset (e.g. "1.10").
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MaxBaselineFactor *string `json:"maxBaselineFactor,omitempty"`

	// maxBaselineOffset is added to the relative ceiling (e.g. "1" for 1 ms).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MaxBaselineOffset *string `json:"maxBaselineOffset,omitempty"`

	// failureLimit is how many failed measurements are tolerated; one more
	// fails the analysis.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailureLimit *int32 `json:"failureLimit,omitempty"`

	// consecutiveErrorLimit is how many query errors in a row are tolerated;
	// one more makes the analysis Inconclusive.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ConsecutiveErrorLimit *int32 `json:"consecutiveErrorLimit,omitempty"`

	// inconclusiveLimit is how many Inconclusive measurements are tolerated
	// before onInconclusive applies.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	InconclusiveLimit *int32 `json:"inconclusiveLimit,omitempty"`

	// onInconclusive is what an Inconclusive analysis does: Pause the rollout
	// until promoted, or Abort it (roll back).
	// +optional
	// +kubebuilder:default=Pause
	OnInconclusive InconclusivePolicy `json:"onInconclusive,omitempty"`

	// dryRun evaluates and reports the analysis without acting on its result.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// SecretReference names a Secret in the controller's namespace.
type SecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ProbeLatencyThresholds are bucket bounds (seconds) of the agents'
// nettune_probe_latency_seconds histogram at the latencies analyses judge by,
// so that the count of messages slower than each is exact: a Prometheus
// judge's threshold must be one of them.
var ProbeLatencyThresholds = []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.5}

// JudgeSpec compares, per host pair, the share of messages slower than a
// threshold on the canary vehicles against the baseline vehicles over the same
// window, with a Bayesian beta-binomial test at a stated confidence; a rank
// test (Mann-Whitney U) of per-interval quantiles, when intervalQuery is set,
// must confirm a failure. A measurement is Successful (Pass) when every host
// pair is confidently no worse than the baseline by more than maxIncrease,
// Failed (Fail) when a pair is confidently worse, and Inconclusive otherwise,
// including whenever a pair has too few messages for the quantile asked.
//
// The count queries return one series per host pair; series of the canary and
// the baseline are matched by their labels (e.g. sum by (host, peer)). Their
// templates see the fields of query plus .ThresholdMs (e.g. "100") and
// .ThresholdSeconds (e.g. "0.1"); intervalQuery also sees .Step.
//
// The same test judges any count against a total per host pair: a TCP guard
// counts the segments a peer received twice (D-SACK) against the segments
// sent, from the agents' nettune_tcp_* counters, and needs no threshold.
// +kubebuilder:validation:XValidation:rule="has(self.threshold) || !(self.slowQuery.contains('.Threshold') || self.totalQuery.contains('.Threshold') || (has(self.intervalQuery) && self.intervalQuery.contains('.Threshold')))",message="threshold is required when a query uses .ThresholdMs or .ThresholdSeconds",fieldPath=".threshold"
type JudgeSpec struct {
	// threshold: a message slower than this is slow (e.g. 200ms: the
	// kernel's RTO floor; 20ms: the fleet's latency target). With
	// Prometheus, it must be a bucket bound of nettune_probe_latency_seconds
	// (5ms, 10ms, 20ms, 50ms, 100ms, 150ms, 200ms or 500ms). Required when
	// a query uses .ThresholdMs or .ThresholdSeconds.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	Threshold *metav1.Duration `json:"threshold,omitempty"`

	// quantile is the tail the verdict is about: each cohort needs at least
	// 3/(1-quantile) messages on a pair (and minSamples) before that pair is
	// judged, so "0.999" needs 3000 messages and a p99.99 verdict is never
	// drawn from a few thousand.
	// +optional
	// +kubebuilder:default="0.99"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^0\.[0-9]*[1-9][0-9]*$`
	Quantile *string `json:"quantile,omitempty"`

	// confidence is the posterior probability a Pass or a Fail needs, for the
	// whole set of pairs (each pair is judged at 1-(1-confidence)/pairs).
	// +optional
	// +kubebuilder:default="0.99"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^0\.(5[0-9]*[1-9][0-9]*|[6-9][0-9]*)$`
	Confidence *string `json:"confidence,omitempty"`

	// maxIncrease is how much larger the canary's slow share may be than the
	// baseline's, as a share (e.g. "0.005": half a percentage point).
	// +optional
	// +kubebuilder:default="0.005"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^0(\.[0-9]+)?$`
	MaxIncrease *string `json:"maxIncrease,omitempty"`

	// maxRatio is how many times the baseline's slow share the canary's may
	// be before maxIncrease is added: the canary is worse when its share
	// exceeds maxRatio x baseline + maxIncrease (e.g. "2"). Slow messages
	// from CPU stalls come and go with the machine's load on every vehicle
	// alike; a ratio keeps a busier hour from reading as a regression.
	// +optional
	// +kubebuilder:default="1"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([1-9][0-9]*)(\.[0-9]+)?$`
	MaxRatio *string `json:"maxRatio,omitempty"`

	// slowQuery is a template of an instant query returning, per host pair,
	// the number of messages slower than the threshold over .Window.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	SlowQuery string `json:"slowQuery"`

	// totalQuery is a template of an instant query returning, per host pair,
	// the number of messages over .Window.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	TotalQuery string `json:"totalQuery"`

	// intervalQuery is a template of a range query returning, per host pair,
	// a latency quantile of each .Step over the window, for the rank test
	// that must confirm a failure. With a series per vehicle (e.g.
	// max_over_time(... [{{ .Step }}]) by (host, peer, vehicle)) every
	// vehicle's interval is one value of its pair, so the canary and the
	// baseline compare like with like whatever their sizes.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	IntervalQuery *string `json:"intervalQuery,omitempty"`

	// step is the length of one interval of intervalQuery. The judge counts
	// messages from one step after the analysis' first measurement (the
	// cohorts have just settled and connections are switching to the new
	// revision), over at most window.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	Step *metav1.Duration `json:"step,omitempty"`

	// nodeFallback are the judge's queries over the agents' node-level
	// counters (nettune_node_tcpext_*_total, per host, not per pair), used
	// for both cohorts when a vehicle's kernel lacks a per-pair counter the
	// queries above read but has the node-level one: a D-SACK guard on
	// TcpExt TCPDSACKRecv where tcpi_dsack_dups is missing (before 4.19,
	// JetPack 4's 4.9), an RTO guard on TCPTimeouts where tcpi_total_rto is
	// (before 6.7). The measurement says so ("per node, not per pair").
	// +optional
	NodeFallback *JudgeFallback `json:"nodeFallback,omitempty"`
}

// JudgeFallback are a judge's queries over node-level counters, grouped by
// host instead of host pair.
type JudgeFallback struct {
	// slowQuery as the judge's, per host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	SlowQuery string `json:"slowQuery"`

	// totalQuery as the judge's, per host.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	TotalQuery string `json:"totalQuery"`

	// intervalQuery as the judge's, per host.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^{}]|[{][^{]|[}][^{}]|[{][{](- )? *[.](Vehicles|Revision|Profile|Window|ThresholdMs|ThresholdSeconds|Step) *( -)?[}][}])*[}]?$')",message="every {{ }} action of the template must be one of {{ .Vehicles }}, {{ .Revision }}, {{ .Profile }}, {{ .Window }}, {{ .ThresholdMs }}, {{ .ThresholdSeconds }}, {{ .Step }} (no functions, pipelines or other fields; {{ and }} in pairs)"
	IntervalQuery *string `json:"intervalQuery,omitempty"`
}

// VehicleCounts counts the vehicles of a profile.
type VehicleCounts struct {
	// total is the number of vehicles the profile selects.
	// +optional
	Total int32 `json:"total"`
	// updated is the number of vehicles assigned the current revision.
	// +optional
	Updated int32 `json:"updated"`
	// verified is the number of vehicles whose every node verified its revision.
	// +optional
	Verified int32 `json:"verified"`
	// unreachable is the number of vehicles whose agents stopped reporting.
	// +optional
	Unreachable int32 `json:"unreachable"`
	// failed is the number of vehicles with a node RolledBack or Degraded.
	// +optional
	Failed int32 `json:"failed"`
	// deferred is the number of vehicles assigned the current revision
	// whose agents hold it back: their apply gate is closed or no
	// maintenance window is open (neither failed nor unreachable).
	// +optional
	Deferred int32 `json:"deferred,omitempty"`
}

// RevisionVehicles counts the vehicles assigned one revision.
type RevisionVehicles struct {
	// revision is the revision name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Revision string `json:"revision"`
	// vehicles is the number of vehicles assigned it.
	// +required
	Vehicles int32 `json:"vehicles"`
}

// RevisionAssignment lists the vehicles a revision is rendered for.
type RevisionAssignment struct {
	// revision is the revision name.
	// +required
	// +kubebuilder:validation:MaxLength=320
	Revision string `json:"revision"`
	// vehicles are the vehicle names (values of the vehicle label), sorted.
	// Atomic: the controller writes the list whole, and managedFields then
	// hold one entry for it instead of one per vehicle.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100000
	// +kubebuilder:validation:items:MaxLength=63
	Vehicles []string `json:"vehicles"`
}

// Revision is one immutable, content-addressed revision of a profile.
type Revision struct {
	// name is "<profile>-<hash>", the hash covering the tuning content.
	// +required
	// +kubebuilder:validation:MaxLength=320
	Name string `json:"name"`
	// generation is the profile generation that produced it.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// created is when the revision was first seen.
	// +optional
	Created metav1.Time `json:"created,omitempty"`
	// rolloutStarted is when the revision's latest rollout began: a
	// revision rolled out again (its content edited away and back) starts
	// anew, waiting again for its Unreachable vehicles, and a promote
	// written for an earlier rollout does not promote it.
	// +optional
	RolloutStarted *metav1.Time `json:"rolloutStarted,omitempty"`
	// outcome is Stable, Progressing, RolledBack or Superseded.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Outcome string `json:"outcome,omitempty"`
}

// AnalysisResult is the latest outcome of one analysis.
type AnalysisResult struct {
	// name of the analysis.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// step is the index of the step that ran it.
	// +optional
	Step int32 `json:"step,omitempty"`
	// phase is Running, Successful, Failed, Inconclusive or Error.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`
	// canaryValue is the latest canary value.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	CanaryValue string `json:"canaryValue,omitempty"`
	// baselineValue is the latest baseline value.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	BaselineValue string `json:"baselineValue,omitempty"`
	// threshold is the ceiling the canary value was held to.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Threshold string `json:"threshold,omitempty"`
	// successful, failed, inconclusive and errors count measurements so far.
	// +optional
	Successful int32 `json:"successful,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// +optional
	Inconclusive int32 `json:"inconclusive,omitempty"`
	// +optional
	Errors int32 `json:"errors,omitempty"`
	// message explains the phase.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// verdict is the judge's latest verdict: Pass, Fail or Inconclusive
	// (judge analyses only).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Verdict string `json:"verdict,omitempty"`
	// pair is the host pair that decided the latest verdict.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Pair string `json:"pair,omitempty"`
	// effect is the canary's slow share minus the baseline's on that pair.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Effect string `json:"effect,omitempty"`
	// probability is the posterior probability that the canary's slow share
	// exceeds maxRatio x the baseline's + maxIncrease on that pair.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Probability string `json:"probability,omitempty"`
	// confidence is the confidence each pair was judged at.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Confidence string `json:"confidence,omitempty"`
	// canarySamples and baselineSamples are the messages behind the latest
	// verdict on that pair.
	// +optional
	CanarySamples *int64 `json:"canarySamples,omitempty"`
	// +optional
	BaselineSamples *int64 `json:"baselineSamples,omitempty"`
	// pairs is the latest verdict on every host pair, the deciding one first.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Pairs []PairVerdict `json:"pairs,omitempty"`
	// started is when the analysis took its first measurement, right after
	// its cohorts settled; a judge counts only messages from one step after
	// it (connections switch to the new revision in between).
	// +optional
	Started *metav1.Time `json:"started,omitempty"`
	// lastMeasured is when the latest measurement was taken.
	// +optional
	LastMeasured *metav1.Time `json:"lastMeasured,omitempty"`
}

// PairVerdict is the judge's verdict on one host pair.
type PairVerdict struct {
	// pair names the host pair by the labels of its series.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Pair string `json:"pair"`
	// verdict is Pass, Fail or Inconclusive.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Verdict string `json:"verdict"`
	// canarySlow and canaryTotal count the canary's slow and all messages.
	// +optional
	CanarySlow int64 `json:"canarySlow"`
	// +optional
	CanaryTotal int64 `json:"canaryTotal"`
	// baselineSlow and baselineTotal count the baseline's.
	// +optional
	BaselineSlow int64 `json:"baselineSlow"`
	// +optional
	BaselineTotal int64 `json:"baselineTotal"`
	// probability that the canary is worse by more than maxIncrease.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Probability string `json:"probability,omitempty"`
	// rankP is the rank test's one-sided p-value (canary slower), when it ran.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	RankP string `json:"rankP,omitempty"`
}

// NetTuningProfileStatus is the observed state of a profile and its rollout.
type NetTuningProfileStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling, Stalled, Progressing, RolledBack,
	// Paused, Conflict, RenderWarnings; at a hub, PlacementWarnings.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// currentRevision is the revision being rolled out (or the stable one).
	// +optional
	// +kubebuilder:validation:MaxLength=320
	CurrentRevision string `json:"currentRevision,omitempty"`

	// stableRevision is the last revision that finished a rollout.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	StableRevision string `json:"stableRevision,omitempty"`

	// failedRevision is a revision that was rolled back; it is not retried
	// until the spec changes.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	FailedRevision string `json:"failedRevision,omitempty"`

	// currentStep is the index of the rollout step in progress; equal to the
	// number of steps when the rollout is complete.
	// +optional
	CurrentStep *int32 `json:"currentStep,omitempty"`

	// stepStarted is when the current step began.
	// +optional
	StepStarted *metav1.Time `json:"stepStarted,omitempty"`

	// phase summarizes the rollout: Progressing, Paused, Healthy, RolledBack
	// or Degraded.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`

	// vehicles counts the selected vehicles by state.
	// +optional
	Vehicles VehicleCounts `json:"vehicles,omitempty"`

	// revisionVehicles counts vehicles per assigned revision.
	// +optional
	// +listType=map
	// +listMapKey=revision
	// +kubebuilder:validation:MaxItems=101
	RevisionVehicles []RevisionVehicles `json:"revisionVehicles,omitempty"`

	// assignments is the rollout's decision: per revision, the vehicles it
	// is rendered for. The node renderer writes every node's NodeNetTuning
	// from the assignments of every profile; a vehicle listed under no
	// revision gets none of this profile.
	// Atomic, written whole by the controller (one managedFields entry).
	// Not written at a hub: there the decision lives in each cluster's
	// ManifestWork (the copy's spec.hubAssignment names the vehicles that
	// differ from the stable revision), so that the hub's status does not
	// grow with the vehicles (status.clusters and the counts say how far
	// the rollout is).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=101
	Assignments []RevisionAssignment `json:"assignments,omitempty"`

	// canaryVehicles are the vehicles of the canary cohort.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	CanaryVehicles []string `json:"canaryVehicles,omitempty"`

	// revisions is the bounded revision history, newest last.
	// +optional
	// +kubebuilder:validation:MaxItems=101
	Revisions []Revision `json:"revisions,omitempty"`

	// analysis holds the latest result of each analysis of the current step.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Analysis []AnalysisResult `json:"analysis,omitempty"`

	// vehicleReport is written only when spec.hubAssignment is set: one line
	// per vehicle of the cluster (VehicleReport, EncodeVehicleReports), read
	// by the hub through Open Cluster Management's status feedback, which
	// carries scalar values only. Its lines change when a vehicle's revision,
	// verification, failure or reachability does, never with heartbeats.
	// +optional
	// +kubebuilder:validation:MaxLength=4194304
	VehicleReport string `json:"vehicleReport,omitempty"`

	// clusters is written at a hub only: per managed cluster the profile
	// selects, its vehicles and whether the cluster is reachable. Atomic,
	// written whole by the hub's controller: one
	// managedFields entry, not one per cluster (which doubled the stored
	// profile at 3,500 clusters).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// NetTuningProfile declares per-host-pair TCP tuning for a fleet of vehicles
// and rolls it out canary first.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ntp,categories=nettune
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableRevision`
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.currentRevision`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.vehicles.updated`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.vehicles.total`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetTuningProfile struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired tuning and rollout.
	// +required
	Spec NetTuningProfileSpec `json:"spec"`

	// status is the observed state, written by the controller.
	// +optional
	Status NetTuningProfileStatus `json:"status,omitempty"`
}

// NetTuningProfileList is a list of NetTuningProfile.
// +kubebuilder:object:root=true
type NetTuningProfileList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetTuningProfile `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NetTuningProfile{}, &NetTuningProfileList{})
}
