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

// ApplyGateMode says whether a vehicle's apply gate holds new revisions.
// +kubebuilder:validation:Enum=IfConfigured;Required;Ignored
type ApplyGateMode string

const (
	// ApplyGateIfConfigured: a vehicle whose agent has a gate applies only
	// while it is open; a vehicle without one applies at once.
	ApplyGateIfConfigured ApplyGateMode = "IfConfigured"
	// ApplyGateRequired: a vehicle applies only while its gate is open; a
	// vehicle whose agent has no gate never applies and says so.
	ApplyGateRequired ApplyGateMode = "Required"
	// ApplyGateIgnored: the gate is not consulted (windows still are).
	ApplyGateIgnored ApplyGateMode = "Ignored"
)

// RollbackApply says whether a rollback waits for a vehicle's gate and
// maintenance windows.
// +kubebuilder:validation:Enum=Immediate;WhenAllowed
type RollbackApply string

const (
	// RollbackImmediate: a rollback is applied at once, gate closed or not,
	// window open or not. The revision being undone was judged to hurt the
	// vehicle's messages, and the revision rolled back to ran on it before.
	RollbackImmediate RollbackApply = "Immediate"
	// RollbackWhenAllowed: a rollback waits for the gate and the windows
	// like any other change.
	RollbackWhenAllowed RollbackApply = "WhenAllowed"
)

// ApplyPolicy says when a vehicle may take a new revision of the profile:
// only while its apply gate is open (the autonomy stack opens and closes it
// on the vehicle) and inside one of the maintenance windows. The agent
// decides on the vehicle, by its own clock, so an offline vehicle keeps to
// it. A vehicle that waits is Deferred: neither failed nor unreachable.
type ApplyPolicy struct {
	// gate: IfConfigured (default) waits for the vehicle's gate where its
	// agent has one; Required also holds a vehicle without a gate (and says
	// so on it); Ignored applies whatever the gate says.
	// +optional
	// +kubebuilder:default=IfConfigured
	Gate ApplyGateMode `json:"gate,omitempty"`

	// maintenanceWindows: when set, a vehicle applies only inside one of
	// them (any one), by its own clock.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	MaintenanceWindows []MaintenanceWindow `json:"maintenanceWindows,omitempty"`

	// rollback: Immediate (default) applies a rollback at once, whatever the
	// gate and the windows say; WhenAllowed waits for them as for any change.
	// +optional
	// +kubebuilder:default=Immediate
	Rollback RollbackApply `json:"rollback,omitempty"`

	// deferredTimeout is how long a step waits for Deferred vehicles before
	// it moves on without them; they take the revision when their gate
	// opens or their window comes.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) > duration('0s')",message="must be a positive duration"
	DeferredTimeout *metav1.Duration `json:"deferredTimeout,omitempty"`
}

// MaintenanceWindow is a recurring time when a vehicle may apply: it opens
// at every time the schedule names and stays open for duration.
type MaintenanceWindow struct {
	// schedule is when the window opens, in cron's five fields: minute,
	// hour, day of month, month, day of week (e.g. "0 22 * * 1-5": 22:00 on
	// weekdays); @daily, @weekly and the like are accepted too.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.startsWith('@') ? self in ['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@midnight', '@hourly'] : self.matches('^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ *$')",message="must be five cron fields (minute hour day-of-month month day-of-week) or one of @yearly, @monthly, @weekly, @daily, @hourly"
	Schedule string `json:"schedule"`

	// duration is how long the window stays open (e.g. 4h), more than zero
	// and at most 7 days.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || (duration(self) > duration('0s') && duration(self) <= duration('168h'))",message="must be a duration above 0 and at most 168h"
	Duration metav1.Duration `json:"duration"`

	// timeZone is the IANA time zone the schedule is read in (e.g.
	// Europe/Berlin). Empty: the vehicle's own zone (its agent's
	// --time-zone, else the host's local time).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$`
	TimeZone string `json:"timeZone,omitempty"`
}

// NodeApplyPolicy is the apply policy rendered onto one node: the
// strictest gate of the profiles it carries, and each profile's windows.
type NodeApplyPolicy struct {
	// gate: Required when a profile on the node requires one, Ignored when
	// every profile ignores it, IfConfigured otherwise.
	// +optional
	Gate ApplyGateMode `json:"gate,omitempty"`

	// windows: one entry per profile with maintenance windows; the node
	// applies only while each entry has an open window.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Windows []ProfileWindows `json:"windows,omitempty"`

	// immediate, when set, says why this revision is applied at once,
	// whatever the gate and the windows say (a rollback).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Immediate string `json:"immediate,omitempty"`
}

// ProfileWindows are one profile's maintenance windows on a node.
type ProfileWindows struct {
	// profile names the NetTuningProfile.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Profile string `json:"profile"`
	// windows of that profile (any one open lets it apply).
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Windows []MaintenanceWindow `json:"windows"`
}

// GateState is the state of a vehicle's apply gate.
// +kubebuilder:validation:Enum=Open;Closed;NotConfigured
type GateState string

const (
	// GateOpen: the autonomy stack said the vehicle may apply.
	GateOpen GateState = "Open"
	// GateClosed: the autonomy stack said it may not (or said nothing the
	// agent could read: the gate fails closed).
	GateClosed GateState = "Closed"
	// GateNotConfigured: the agent has no gate.
	GateNotConfigured GateState = "NotConfigured"
)

// ApplyGateStatus is the agent's report on its gate and windows.
type ApplyGateStatus struct {
	// state of the gate.
	// +required
	State GateState `json:"state"`
	// reason the autonomy stack gave (e.g. "driving"), or why the agent
	// reads the gate as closed.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// since when the gate has been in this state, as the agent saw it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// pendingRevision is the revision the agent holds back (gate closed or
	// outside every window); empty when nothing waits.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	PendingRevision string `json:"pendingRevision,omitempty"`
	// nextWindow is when the next maintenance window opens, by the agent's
	// clock, while a revision waits for one.
	// +optional
	NextWindow *metav1.Time `json:"nextWindow,omitempty"`
}
