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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NodeNetTuning condition types, reported by the node agent.
const (
	// ConditionApplied is True when the agent applied spec.revision.
	ConditionApplied = "Applied"
	// ConditionVerified is True when every item read back equal to the spec
	// and the post-apply probes passed.
	ConditionVerified = "Verified"
	// ConditionDrifted is True while the agent is repairing drift (a route
	// recreated without its metrics, a sysctl changed by someone else).
	ConditionDrifted = "Drifted"
	// ConditionRolledBack is True when the agent reverted to its
	// last-known-good state because a probe failed after an apply.
	ConditionRolledBack = "RolledBack"
	// ConditionDegraded is True when the agent cannot reach the desired state.
	ConditionDegraded = "Degraded"
	// ConditionDeferred is True while the agent holds a new revision back:
	// its apply gate is closed (reason GateClosed), no maintenance window is
	// open (OutsideWindow), the profile requires a gate the agent does not
	// have (GateNotConfigured) or a window cannot be read on this vehicle
	// (WindowInvalid). False (reason Allowed) once nothing waits.
	ConditionDeferred = "Deferred"
	// ConditionLogsShipped is True when Loki accepted the agent's latest
	// push (probe samples and apply events); False with the reason of the
	// latest failure (Unauthorized, Forbidden, RateLimited, ServerError,
	// Unreachable, TLSError, CredentialsInvalid; Rejected when Loki refused a
	// batch's content and it was dropped), the message naming the answer and
	// the lines waiting on disk, never a credential. Absent when the agent
	// ships nothing.
	ConditionLogsShipped = "LogsShipped"
)

// NetTuningProfile condition types, written by the controller.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	ConditionProgressing = "Progressing"
	ConditionPaused      = "Paused"
	ConditionConflict    = "Conflict"
	// ConditionRenderWarnings is True while rendering the profile onto its
	// nodes skipped or cut something (a peer without a LAN address, an
	// invalid device, a list over its cap); the message says what and where.
	ConditionRenderWarnings = "RenderWarnings"
	// ConditionPlacementWarnings is written at a hub for a profile with
	// spec.placement: True while the Placement lets a cluster go that the
	// rollout should keep (it does not tolerate the taints OCM gives a
	// silent cluster forever); the message names the missing tolerations.
	ConditionPlacementWarnings = "PlacementWarnings"
	// ConditionAnalysisWarnings is True while an analysis of the rollout
	// cannot decide on the selected fleet: its window, interval and
	// inconclusiveLimit never collect its minimum samples at the stable
	// revision's message rate with the canary's vehicles, or never hold the
	// rank test's values; the message names the analysis and the numbers.
	// It does not stop the rollout (such an analysis ends Inconclusive and
	// acts as its onInconclusive says).
	ConditionAnalysisWarnings = "AnalysisWarnings"
)

// NodeRoute is one concrete route to tune on the node.
type NodeRoute struct {
	// destination is the route's prefix in CIDR notation; a single peer host
	// is a /32 (or /128).
	// +required
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="destination must be a CIDR such as 192.168.10.3/32"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self).ip() == cidr(self).masked().ip()",message="destination has host bits set, which the kernel refuses for a route: use the prefix's network address"
	Destination string `json:"destination"`

	// device is the outgoing interface; a missing route is created on it.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="the kernel refuses the interface names . and .."
	Device string `json:"device,omitempty"`

	// source is the route's preferred source address.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="source must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip(self).isGlobalUnicast() || ip(self).isLinkLocalUnicast()",message="source must be a host's unicast address (not unspecified, loopback, multicast or broadcast)"
	Source string `json:"source,omitempty"`

	// peer is the host (value of the host label) this route reaches, when it
	// was rendered from a host pair.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Peer string `json:"peer,omitempty"`

	// profile is the NetTuningProfile the route's parameters come from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Profile string `json:"profile,omitempty"`

	// parameters are the route's TCP parameters.
	// +required
	Parameters TCPParameters `json:"parameters"`
}

// Peer is another host of the same vehicle, used by the agent's local probes.
type Peer struct {
	// host is the peer's value of the host label.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Host string `json:"host"`

	// address is the peer's LAN address.
	// +required
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP address"
	// +kubebuilder:validation:XValidation:rule="!isIP(self) || ip(self).isGlobalUnicast() || ip(self).isLinkLocalUnicast()",message="address must be a host's unicast address (not unspecified, loopback, multicast or broadcast)"
	Address string `json:"address"`

	// probePort is a TCP port the post-apply probe connects to (the peer
	// agent's port). Zero disables the connect probe for this peer.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	ProbePort int32 `json:"probePort,omitempty"`
}

// SourceProfile names a profile revision that contributed to the node's spec.
type SourceProfile struct {
	// name of the NetTuningProfile.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// revision of that profile rendered here.
	// +required
	// +kubebuilder:validation:MaxLength=320
	Revision string `json:"revision"`
}

// NodeNetTuningSpec is one node's fully rendered desired network state.
type NodeNetTuningSpec struct {
	// revision identifies the content of this spec; the agent reports it back
	// in status.appliedRevision once applied.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=320
	Revision string `json:"revision"`

	// profiles are the profile revisions rendered into this spec, one per
	// profile name.
	// Atomic, written whole by the controller: managedFields then hold one
	// entry for the list instead of one per item (every write of the object
	// encodes, decodes and merges them; docs/bench-writes.md).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.name == x.name))",message="two profiles have the same name"
	Profiles []SourceProfile `json:"profiles,omitempty"`

	// routes to tune, one per destination. Atomic, like profiles.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.destination == x.destination))",message="two routes have the same destination"
	Routes []NodeRoute `json:"routes,omitempty"`

	// sysctls to set, one per name. Atomic, like profiles.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.name == x.name))",message="two sysctls have the same name"
	Sysctls []Sysctl `json:"sysctls,omitempty"`

	// interfaces to set, one per name. Atomic, like profiles.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.name == x.name))",message="two interfaces have the same name"
	Interfaces []InterfaceTuning `json:"interfaces,omitempty"`

	// peers are the other hosts of the vehicle, probed after every apply,
	// one per host. Atomic, like profiles.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.host == x.host))",message="two peers have the same host"
	Peers []Peer `json:"peers,omitempty"`

	// applyPolicy says when the agent may apply this revision: its gate and
	// the profiles' maintenance windows. It never changes the host itself.
	// +optional
	ApplyPolicy *NodeApplyPolicy `json:"applyPolicy,omitempty"`
}

// ItemResult is the agent's report on one item of the spec.
type ItemResult struct {
	// kind is Route, Sysctl or Interface.
	// +required
	// +kubebuilder:validation:Enum=Route;Sysctl;Interface
	Kind string `json:"kind"`
	// name is the route destination, sysctl name or interface name.
	// +required
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// state is Verified, NotEffective (set but ignored by the kernel, e.g.
	// ssthresh while tcp_no_ssthresh_metrics_save=1), Mismatch or Failed.
	// +required
	// +kubebuilder:validation:Enum=Verified;NotEffective;Mismatch;Failed
	State string `json:"state"`
	// desired is the value asked for, in iproute2 notation for routes.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Desired string `json:"desired,omitempty"`
	// observed is the value read back from the kernel.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Observed string `json:"observed,omitempty"`
	// message explains a state other than Verified.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// NodeNetTuningStatus is the node agent's report.
type NodeNetTuningStatus struct {
	// observedGeneration is the spec generation the agent acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// appliedRevision is the revision in force on the node (after a local
	// revert, the last-known-good one).
	// +optional
	// +kubebuilder:validation:MaxLength=320
	AppliedRevision string `json:"appliedRevision,omitempty"`

	// conditions: Applied, Verified, Drifted, RolledBack, Degraded, one per
	// type. Atomic: the node's agent is their only writer and writes them
	// whole, so managedFields hold one entry for the list instead of seven
	// fields per condition.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.type == x.type))",message="two conditions have the same type"
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// items report desired versus observed values of every item.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Items []ItemResult `json:"items,omitempty"`

	// verifiedTime is when the agent verified appliedRevision after
	// applying it: kept while that revision stays verified, set anew when
	// another revision is verified. An analysis counts a vehicle's samples
	// only from this time on (docs/observability.md, "The application's own
	// latency").
	// +optional
	VerifiedTime *metav1.Time `json:"verifiedTime,omitempty"`

	// gate is the agent's apply gate and what waits for it (absent from an
	// agent that does not report it).
	// +optional
	Gate *ApplyGateStatus `json:"gate,omitempty"`

	// driftRepairs counts drift repairs since the agent started.
	// +optional
	DriftRepairs int64 `json:"driftRepairs,omitempty"`

	// lastHeartbeatTime is when the agent last reported, even unchanged.
	// +optional
	LastHeartbeatTime *metav1.Time `json:"lastHeartbeatTime,omitempty"`

	// kernel is what the node's kernel provides, as the agent probed it at
	// start-up (by trying, not by version number). An analysis whose
	// metric needs a counter a vehicle's kernel lacks is never a Pass on
	// that vehicle. Unset: an agent that does not report it.
	// +optional
	Kernel *KernelFeatures `json:"kernel,omitempty"`
}

// tcp_info counters the agent reads through sock_diag, named after their
// struct tcp_info fields (include/uapi/linux/tcp.h).
const (
	// CounterTotalRetrans is tcpi_total_retrans (every kernel the agent runs on).
	CounterTotalRetrans = "tcpi_total_retrans"
	// CounterSegsOut is tcpi_segs_out (Linux 4.2+).
	CounterSegsOut = "tcpi_segs_out"
	// CounterDSACKDups is tcpi_dsack_dups (Linux 4.19+).
	CounterDSACKDups = "tcpi_dsack_dups"
	// CounterTotalRTO is tcpi_total_rto (Linux 6.7+).
	CounterTotalRTO = "tcpi_total_rto"
)

// KernelFeatures is what a node's kernel provides, probed by its agent.
type KernelFeatures struct {
	// release is the kernel's release (uname -r), e.g. 5.10.0-32-arm64.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Release string `json:"release,omitempty"`
	// machine is the kernel's architecture (uname -m), e.g. aarch64.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Machine string `json:"machine,omitempty"`
	// tcpInfoCounters are the tcp_info counters the kernel reports on a
	// live socket (tcpi_total_retrans, tcpi_segs_out, tcpi_dsack_dups,
	// tcpi_total_rto), in that order; a counter not named is not provided.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	TCPInfoCounters []string `json:"tcpInfoCounters,omitempty"`
	// congestionControls are the congestion control algorithms the kernel
	// has loaded (tcp_available_congestion_control) when probed; others may
	// be loaded on demand from modules.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=32
	CongestionControls []string `json:"congestionControls,omitempty"`
	// nodeCounters are the node-level TCP counters the kernel has (TcpExt
	// in /proc/net/netstat: TCPTimeouts, TCPSpuriousRTOs, TCPLossProbes,
	// TCPDSACKRecv, TCPDSACKOfoRecv), counted over every socket of the
	// node, not per peer, and what each counts on this kernel. The agent
	// exports them as nettune_node_tcpext_*_total. Where tcp_info lacks a
	// per-connection counter (4.9: tcpi_dsack_dups, tcpi_total_rto) they
	// are what remains.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	NodeCounters []NodeCounter `json:"nodeCounters,omitempty"`
	// estimatedCounters are counters the agent estimates where the kernel
	// has no exact one, and the method of each: rto_episodes, the
	// retransmission timeouts per peer (nettune_tcp_rto_episodes_total) on
	// kernels without tcpi_total_rto (before 6.7). An analysis on
	// nettune_tcp_rto_timeouts_total falls back to it where a vehicle's
	// kernel lacks tcpi_total_rto and every such node reports it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	EstimatedCounters []NodeCounter `json:"estimatedCounters,omitempty"`
}

// NodeCounter is a node-level TCP counter of a kernel.
type NodeCounter struct {
	// name is the TcpExt field, e.g. TCPTimeouts.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// meaning says what the counter counts on this kernel, e.g. that
	// TCPTimeouts counts only the first timeout from the Open state before
	// 4.9.207.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Meaning string `json:"meaning,omitempty"`
}

// Node-level TcpExt counters the agent reports (KernelFeatures.nodeCounters).
const (
	// NodeCounterTimeouts is TcpExt TCPTimeouts: retransmission timeouts.
	NodeCounterTimeouts = "TCPTimeouts"
	// NodeCounterSpuriousRTOs is TcpExt TCPSpuriousRTOs.
	NodeCounterSpuriousRTOs = "TCPSpuriousRTOs"
	// NodeCounterLossProbes is TcpExt TCPLossProbes.
	NodeCounterLossProbes = "TCPLossProbes"
	// NodeCounterDSACKRecv is TcpExt TCPDSACKRecv: D-SACKs received.
	NodeCounterDSACKRecv = "TCPDSACKRecv"
	// NodeCounterDSACKOfoRecv is TcpExt TCPDSACKOfoRecv.
	NodeCounterDSACKOfoRecv = "TCPDSACKOfoRecv"
)

// EstimateRTOEpisodes is the agent's estimate of retransmission timeouts
// per peer (KernelFeatures.estimatedCounters), exported as
// nettune_tcp_rto_episodes_total.
const EstimateRTOEpisodes = "rto_episodes"

// ProvidesEstimate reports whether the node's agent reports the estimated
// counter.
func (k *KernelFeatures) ProvidesEstimate(name string) bool {
	for _, c := range k.EstimatedCounters {
		if c.Name == name {
			return true
		}
	}
	return false
}

// ProvidesNodeCounter reports whether the kernel has the node-level counter.
func (k *KernelFeatures) ProvidesNodeCounter(name string) bool {
	for _, c := range k.NodeCounters {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Provides reports whether the kernel reports the tcp_info counter.
func (k *KernelFeatures) Provides(counter string) bool {
	for _, c := range k.TCPInfoCounters {
		if c == counter {
			return true
		}
	}
	return false
}

// NodeNetTuning is one node's rendered network tuning, named after the node,
// written by the controller and reported on by that node's agent.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nnt,categories=nettune
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="Applied")].status`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].status`
// +kubebuilder:printcolumn:name="Applied-Revision",type=string,JSONPath=`.status.appliedRevision`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeNetTuning struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the node's rendered desired state.
	// +required
	Spec NodeNetTuningSpec `json:"spec"`

	// status is the agent's report.
	// +optional
	Status NodeNetTuningStatus `json:"status,omitempty"`
}

// NodeNetTuningList is a list of NodeNetTuning.
// +kubebuilder:object:root=true
type NodeNetTuningList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeNetTuning `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeNetTuning{}, &NodeNetTuningList{})
}
