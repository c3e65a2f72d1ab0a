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

import "time"

// The words of a NetTuningProfile's status, shared by the controller, the
// plugin, the demo and the tests: one definition each.

// Phases of a profile's rollout (status.phase).
const (
	PhaseProgressing = "Progressing"
	PhasePaused      = "Paused"
	PhaseHealthy     = "Healthy"
	PhaseRolledBack  = "RolledBack"
	PhaseDegraded    = "Degraded"
)

// Revision outcomes (status.revisions[].outcome).
const (
	OutcomeProgressing = "Progressing"
	OutcomeStable      = "Stable"
	OutcomeRolledBack  = "RolledBack"
	OutcomeSuperseded  = "Superseded"
)

// Phases of an analysis result (status.analysis[].phase): the analysis as a
// whole, accumulated over its measurements.
const (
	AnalysisRunning      = "Running"
	AnalysisSuccessful   = "Successful"
	AnalysisFailed       = "Failed"
	AnalysisInconclusive = "Inconclusive"
	// AnalysisUnavailable is an analysis whose backend has refused or not
	// answered more than consecutiveErrorLimit measurements in a row
	// (credentials, tenant, TLS, rate limits, server errors, no answer):
	// the rollout pauses on it, never promotes or rolls back because of it,
	// and goes on by itself once a measurement is taken again.
	AnalysisUnavailable = "Unavailable"
)

// AnalysisTerminal reports whether an analysis result's phase is final:
// Successful, Failed or Inconclusive.
func AnalysisTerminal(phase string) bool {
	switch phase {
	case AnalysisSuccessful, AnalysisFailed, AnalysisInconclusive:
		return true
	}
	return false
}

// Event reasons the controller records on a profile that other parts read
// back (the Loki event line, metrics, dashboards).
const (
	// ReasonRolledBack: the rollout's revision was rolled back; every
	// vehicle returns to the stable revision.
	ReasonRolledBack = "RolledBack"
	// ReasonAnalysisFailed: an analysis failed and the rollout was rolled
	// back (the RolledBack condition's reason).
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisInconclusive: an analysis was inconclusive; the rollout
	// paused (or, with onInconclusive Abort, was rolled back).
	ReasonAnalysisInconclusive = "AnalysisInconclusive"
	// ReasonAnalysisUnavailable: an analysis' backend refused or did not
	// answer (credentials, tenant, TLS, rate limit, server error); the
	// rollout waits and goes on by itself once it answers.
	ReasonAnalysisUnavailable = "AnalysisUnavailable"
)

// Reasons an agent gives (Applied=False, Degraded=True) for an apply its
// host's environment stopped, not the revision: the agent retries the same
// revision by itself, and the controller counts the vehicle neither verified
// nor failed (it waits, as for an unreachable one).
const (
	// ReasonStateUnwritable: the agent could not record the apply in its
	// state directory (full, read-only); nothing was changed, or the change
	// was undone.
	ReasonStateUnwritable = "StateUnwritable"
	// ReasonInterrupted: the host's network changed under the apply (a link
	// went down, a route it had just written was removed); the change was
	// undone.
	ReasonInterrupted = "Interrupted"
)

// EnvironmentReason is true for the reasons of ReasonStateUnwritable and
// ReasonInterrupted.
func EnvironmentReason(reason string) bool {
	return reason == ReasonStateUnwritable || reason == ReasonInterrupted
}

// Annotations and labels on nettune's and Kubernetes' objects.
const (
	// PromoteAnnotation (on a profile, written by the plugin):
	// "<revision>@<step index>" skips that step's pause or inconclusive
	// analysis in that revision's rollout (a later rollout is never promoted
	// by a leftover annotation).
	PromoteAnnotation = "nettune.io/promote"
	// AbortAnnotation (on a profile): "<revision>" rolls that revision back.
	AbortAnnotation = "nettune.io/abort"
	// ExcludeAnnotation (on a profile): comma-separated vehicles kept on the
	// stable revision.
	ExcludeAnnotation = "nettune.io/exclude"
	// ProfileLabel marks a ControllerRevision with the profile it belongs to.
	ProfileLabel = "nettune.io/profile"
	// LANAddressAnnotation (on a Node) gives its LAN address for host-pair
	// routes (the address peers on the vehicle LAN use to reach it); without
	// it the node's InternalIP is used.
	LANAddressAnnotation = "nettune.io/lan-address"
	// LANDeviceAnnotation (on a Node) names its LAN interface (e.g. eth0).
	// Host-pair routes rendered for that node carry it as their device, so
	// the agent can create a missing /32 route on it; without it the agent
	// can only tune host routes that already exist.
	LANDeviceAnnotation = "nettune.io/lan-device"
	// CleanupFinalizer (on a profile) removes a deleted profile's items from
	// every node before the profile goes.
	CleanupFinalizer = "nettune.io/cleanup"
	// AgentLeaseLabel marks the coordination.k8s.io Lease an agent renews to
	// say it is alive; its value is the node's name. The Lease is named
	// after the node and lives in the controller's namespace; the
	// controller judges liveness by its own clock, from when it observed a
	// renewal, never from the renewTime the vehicle wrote.
	AgentLeaseLabel = "nettune.io/agent-lease"
)

// Agent liveness defaults.
const (
	// DefaultAgentLeaseRenew is how often an agent renews its Lease: three
	// renewals fit in the default unreachableAfter (2m).
	DefaultAgentLeaseRenew = 40 * time.Second
	// DefaultAgentLeaseDuration is the leaseDurationSeconds an agent writes
	// (informational: the controller uses each profile's unreachableAfter).
	DefaultAgentLeaseDuration = 2 * time.Minute
	// DefaultStatusRefresh is how often an agent rewrites an unchanged
	// status (lastHeartbeatTime): liveness comes from the Lease, so this
	// only bounds how stale a status can look.
	DefaultStatusRefresh = 5 * time.Minute
)
