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

// Defaults the API server fills in (+kubebuilder:default), as Go values for
// code that reads an object the defaulting has not seen (an older stored
// object, a test fixture). TestDefaultsMatchTheCRD keeps them equal to the
// CRD's.
const (
	DefaultUnreachableAfter   = 2 * time.Minute
	DefaultUnreachableTimeout = 10 * time.Minute
	DefaultAnalysisInterval   = time.Minute
	DefaultAnalysisWindow     = 5 * time.Minute
	DefaultJudgeStep          = 5 * time.Second
)

// GetUnreachableAfter is unreachableAfter or its default (r may be nil).
func (r *RolloutSpec) GetUnreachableAfter() time.Duration {
	if r != nil && r.UnreachableAfter != nil {
		return r.UnreachableAfter.Duration
	}
	return DefaultUnreachableAfter
}

// GetUnreachableTimeout is unreachableTimeout or its default (r may be nil).
func (r *RolloutSpec) GetUnreachableTimeout() time.Duration {
	if r != nil && r.UnreachableTimeout != nil {
		return r.UnreachableTimeout.Duration
	}
	return DefaultUnreachableTimeout
}

// GetApply is the rollout's apply policy (nil when none).
func (r *RolloutSpec) GetApply() *ApplyPolicy {
	if r == nil {
		return nil
	}
	return r.Apply
}

// DefaultDeferredTimeout is applyPolicy.deferredTimeout's default.
const DefaultDeferredTimeout = 30 * time.Minute

// GetDeferredTimeout is how long a step waits for Deferred vehicles.
func (r *RolloutSpec) GetDeferredTimeout() time.Duration {
	if r != nil && r.Apply != nil && r.Apply.DeferredTimeout != nil {
		return r.Apply.DeferredTimeout.Duration
	}
	return DefaultDeferredTimeout
}

// GetInterval is the analysis' interval, or its default when unset or not
// positive.
func (a *AnalysisSpec) GetInterval() time.Duration {
	if a.Interval != nil && a.Interval.Duration > 0 {
		return a.Interval.Duration
	}
	return DefaultAnalysisInterval
}

// GetWindow is the analysis' window, or its default when unset or not
// positive.
func (a *AnalysisSpec) GetWindow() time.Duration {
	if a.Window != nil && a.Window.Duration > 0 {
		return a.Window.Duration
	}
	return DefaultAnalysisWindow
}

// GetStep is the judge's step, or its default when unset or not positive
// (j may be nil).
func (j *JudgeSpec) GetStep() time.Duration {
	if j != nil && j.Step != nil && j.Step.Duration > 0 {
		return j.Step.Duration
	}
	return DefaultJudgeStep
}

// GetVehicleLabel is vehicleLabel or its default.
func (s *NetTuningProfileSpec) GetVehicleLabel() string {
	if s.VehicleLabel != "" {
		return s.VehicleLabel
	}
	return DefaultVehicleLabel
}

// GetHostLabel is hostLabel or its default.
func (s *NetTuningProfileSpec) GetHostLabel() string {
	if s.HostLabel != "" {
		return s.HostLabel
	}
	return DefaultHostLabel
}

// GetHardwareLabel is hardwareLabel or its default.
func (s *NetTuningProfileSpec) GetHardwareLabel() string {
	if s.HardwareLabel != "" {
		return s.HardwareLabel
	}
	return DefaultHardwareLabel
}
