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
)

// NetTuningExperimentSpec compares variants of a profile's TCP parameters on
// cohorts of its vehicles, each against a control cohort that stays on the
// profile's stable revision.
// +kubebuilder:validation:XValidation:rule="has(self.analysis.judge)",message="analysis must be a judge analysis (the tail exceedance per host pair is what the arms are ranked by)",fieldPath=".analysis"
type NetTuningExperimentSpec struct {
	// profile names the base NetTuningProfile. Its vehicles are the
	// population the cohorts are drawn from; the control cohort and every
	// vehicle outside the experiment stay on its stable revision.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Profile string `json:"profile"`

	// variants are the arms. Each is a patch of TCP parameters over the base
	// profile: a parameter set here replaces the base's in its defaults, in
	// every host pair and in every route.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	Variants []ExperimentVariant `json:"variants"`

	// selector restricts the vehicles the experiment may use (Node labels,
	// within the base profile's nodeSelector): a vehicle takes part only if
	// every one of its nodes matches.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`

	// maxPercent is the most of the base profile's vehicles the experiment
	// may use, arms and control together.
	// +optional
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxPercent *int32 `json:"maxPercent,omitempty"`

	// vehiclesPerArm caps the vehicles of each arm (and of the control) per
	// hardware model; without it each gets as many as maxPercent allows.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	VehiclesPerArm *int32 `json:"vehiclesPerArm,omitempty"`

	// duration is how long the arms are measured once every arm's vehicles
	// run their variant.
	// +required
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('10s')",message="must be at least 10s"
	Duration metav1.Duration `json:"duration"`

	// applyTimeout is how long the arms may take, from their creation, until
	// every vehicle of an arm verified its variant. An arm still applying
	// then (a vehicle offline, an agent that never reports) is stopped and
	// its vehicles return to the base; the others are measured without it.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self) >= duration('1s')",message="must be at least 1s"
	ApplyTimeout *metav1.Duration `json:"applyTimeout,omitempty"`

	// sampleTarget ends the experiment before duration once every running
	// arm and the control have this many messages for every hardware model.
	// +optional
	// +kubebuilder:validation:Minimum=1
	SampleTarget *int64 `json:"sampleTarget,omitempty"`

	// analysis is the metric the arms are ranked by: a judge analysis (the
	// share of messages slower than the threshold, per host pair), measured
	// for each arm against the control cohort of the same hardware model at
	// its interval, over everything since the arm's vehicles were verified.
	// An arm the judge finds worse than the control (more than failureLimit
	// times) is stopped early and its vehicles return to the base.
	// +required
	Analysis AnalysisSpec `json:"analysis"`

	// guards are further analyses (throughput, spurious retransmissions),
	// each measured for every arm against the control; an arm one of them
	// fails is stopped.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	Guards []AnalysisSpec `json:"guards,omitempty"`
}

// ExperimentVariant is one arm of an experiment.
type ExperimentVariant struct {
	// name names the arm; the arm's profile is <experiment>-<name>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'control'",message="control is the name of the base cohort"
	Name string `json:"name"`

	// parameters replace the base's parameters of the same name.
	// +required
	Parameters TCPParameters `json:"parameters"`
}

// Experiment phases (status.phase).
const (
	// ExperimentPending: waiting for the base profile to be stable.
	ExperimentPending = "Pending"
	// ExperimentRunning: the arms are applied or measured.
	ExperimentRunning = "Running"
	// ExperimentCompleted: duration or sampleTarget reached; results final.
	ExperimentCompleted = "Completed"
	// ExperimentAborted: the base profile changed or disappeared under the
	// experiment; results are what was measured until then.
	ExperimentAborted = "Aborted"
)

// Arm phases (status.arms[].phase).
const (
	// ArmApplying: the arm's vehicles are moving to its variant.
	ArmApplying = "Applying"
	// ArmMeasuring: every vehicle of the arm runs its variant.
	ArmMeasuring = "Measuring"
	// ArmStopped: an analysis failed; its vehicles returned to the base.
	ArmStopped = "Stopped"
	// ArmFinished: the experiment ended with the arm running.
	ArmFinished = "Finished"
)

// ControlArm is the name of the control cohort in status.
const ControlArm = "control"

// ExperimentLabel marks an arm's profile with its experiment.
const ExperimentLabel = "nettune.io/experiment"

// NetTuningExperimentStatus is the observed state of an experiment.
type NetTuningExperimentStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// phase: Pending, Running, Completed or Aborted.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`

	// message says what the experiment is waiting for or why it ended.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// baseRevision is the base profile's stable revision the control runs
	// and the variants patch.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	BaseRevision string `json:"baseRevision,omitempty"`

	// started is when the cohorts were drawn.
	// +optional
	Started *metav1.Time `json:"started,omitempty"`

	// measuringSince is when the last arm's vehicles were verified on its
	// variant: duration counts from here.
	// +optional
	MeasuringSince *metav1.Time `json:"measuringSince,omitempty"`

	// lastMeasured is when the arms were last measured.
	// +optional
	LastMeasured *metav1.Time `json:"lastMeasured,omitempty"`

	// finished is when the experiment completed or was aborted.
	// +optional
	Finished *metav1.Time `json:"finished,omitempty"`

	// arms are the control (first, named control) and the variants, with
	// their vehicles per hardware model and their analyses.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=7
	Arms []ExperimentArm `json:"arms,omitempty"`

	// results rank the arms per hardware model by the latest measurement.
	// +optional
	// +listType=map
	// +listMapKey=hardware
	// +kubebuilder:validation:MaxItems=16
	Results []ExperimentResult `json:"results,omitempty"`
}

// ExperimentArm is one arm's state.
type ExperimentArm struct {
	// name is the variant's name, or control.
	// +required
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`

	// profile is the arm's NetTuningProfile (empty for the control).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Profile string `json:"profile,omitempty"`

	// phase: Applying, Measuring, Stopped or Finished.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`

	// verified is when every vehicle of the arm was verified on its
	// variant: its messages count from one judge step after it.
	// +optional
	Verified *metav1.Time `json:"verified,omitempty"`

	// stopReason says which analysis stopped the arm and why.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	StopReason string `json:"stopReason,omitempty"`

	// cohorts are the arm's vehicles per hardware model, with that
	// cohort's analyses against the control of the same model.
	// +optional
	// +listType=map
	// +listMapKey=hardware
	// +kubebuilder:validation:MaxItems=16
	Cohorts []ExperimentCohort `json:"cohorts,omitempty"`
}

// ExperimentCohort is an arm's vehicles of one hardware model.
type ExperimentCohort struct {
	// hardware is the hardware model: the hardware label's values of the
	// vehicle's nodes, sorted and joined with +.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Hardware string `json:"hardware"`

	// vehicles of this arm and model.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Vehicles []string `json:"vehicles,omitempty"`

	// slow and total are the cohort's messages over the threshold and in
	// all, summed over host pairs, at the latest measurement.
	// +optional
	Slow int64 `json:"slow,omitempty"`
	// +optional
	Total int64 `json:"total,omitempty"`

	// controlSlow and controlTotal are the control's of the same model in
	// the same measurement (control only: its own).
	// +optional
	ControlSlow int64 `json:"controlSlow,omitempty"`
	// +optional
	ControlTotal int64 `json:"controlTotal,omitempty"`

	// analysis holds the accumulated result of the experiment's analysis
	// and of each guard for this cohort against the control.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	Analysis []AnalysisResult `json:"analysis,omitempty"`
}

// ExperimentResult ranks the arms for one hardware model.
type ExperimentResult struct {
	// hardware is the hardware model.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Hardware string `json:"hardware"`

	// winner is the best-ranked variant that beats the control with the
	// analysis' judge confidence (Bonferroni-corrected over the variants),
	// or control when none does.
	// +optional
	// +kubebuilder:validation:MaxLength=40
	Winner string `json:"winner,omitempty"`

	// ranking lists the arms, control included, best (lowest slow share)
	// first.
	// +optional
	// +kubebuilder:validation:MaxItems=7
	Ranking []ArmRanking `json:"ranking,omitempty"`
}

// ArmRanking is one arm's place for one hardware model.
type ArmRanking struct {
	// arm is the variant's name, or control.
	// +required
	// +kubebuilder:validation:MaxLength=40
	Arm string `json:"arm"`

	// rank, 1 for the best.
	// +required
	Rank int32 `json:"rank"`

	// slow and total are the arm's messages over the threshold and in all.
	// +required
	Slow int64 `json:"slow"`
	// +required
	Total int64 `json:"total"`

	// share is slow/total in percent.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Share string `json:"share,omitempty"`

	// effect is the arm's share minus the control's, in percentage points
	// (negative is better), with its central credible interval at the
	// judge's confidence (effectLow, effectHigh).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Effect string `json:"effect,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	EffectLow string `json:"effectLow,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=32
	EffectHigh string `json:"effectHigh,omitempty"`

	// probBetter is the posterior probability that the arm's slow share is
	// below the control's.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ProbBetter string `json:"probBetter,omitempty"`

	// probAboveNext is the posterior probability that this arm's slow share
	// is below the next-ranked arm's: how settled the order is.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	ProbAboveNext string `json:"probAboveNext,omitempty"`

	// stopped is true for an arm an analysis stopped early.
	// +optional
	Stopped bool `json:"stopped,omitempty"`

	// unguarded says why the arm cannot be recommended on this model
	// however it ranks: a guard that has not passed on its vehicles, e.g.
	// one whose counter their kernels lack (docs/kernels.md). Empty when
	// every guard passed at least one measurement.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Unguarded string `json:"unguarded,omitempty"`
}

// NetTuningExperiment tries variants of a profile's TCP parameters on
// cohorts of its vehicles and ranks them against a control per hardware
// model.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nte,categories=nettune
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Winner",type=string,JSONPath=`.status.results[0].winner`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NetTuningExperiment struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the experiment.
	// +required
	Spec NetTuningExperimentSpec `json:"spec"`

	// status is the observed state, written by the controller.
	// +optional
	Status NetTuningExperimentStatus `json:"status,omitempty"`
}

// NetTuningExperimentList is a list of NetTuningExperiment.
// +kubebuilder:object:root=true
type NetTuningExperimentList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetTuningExperiment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NetTuningExperiment{}, &NetTuningExperimentList{})
}
