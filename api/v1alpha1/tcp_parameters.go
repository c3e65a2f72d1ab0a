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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The rules of TCPParameters, for every Go reader of them: the renderer
// (overlay, defaults, checks), the experiments (overlay) and the node agent
// (the cwnd lock). The CRD states the same rules for the API server
// (+kubebuilder:default, +kubebuilder:validation:XValidation on the types);
// TestCwndLockDefaultMatchesTheCRD and TestTCPParametersAgreeWithTheAPIServer
// keep the two equal.

// DefaultCwndLock is cwnd.lock when unset (+kubebuilder:default on Cwnd.Lock):
// a cwnd is a hard clamp unless it says otherwise.
const DefaultCwndLock = true

// IsLocked is whether the cwnd is a hard clamp (the kernel's RTAX_LOCK bit):
// lock, or DefaultCwndLock when unset.
func (c *Cwnd) IsLocked() bool {
	if c.Lock == nil {
		return DefaultCwndLock
	}
	return *c.Lock
}

// Overlay sets on p every parameter over sets, as copies: the parameters
// over leaves unset keep p's, and a cwnd is replaced as a whole (value and
// lock together). A nil over changes nothing.
func (p *TCPParameters) Overlay(over *TCPParameters) {
	if over == nil {
		return
	}
	if over.Cwnd != nil {
		p.Cwnd = over.Cwnd.DeepCopy()
	}
	if over.Initcwnd != nil {
		p.Initcwnd = ptrTo(*over.Initcwnd)
	}
	if over.Initrwnd != nil {
		p.Initrwnd = ptrTo(*over.Initrwnd)
	}
	if over.Ssthresh != nil {
		p.Ssthresh = ptrTo(*over.Ssthresh)
	}
	if over.RTOMin != nil {
		p.RTOMin = &metav1.Duration{Duration: over.RTOMin.Duration}
	}
	if over.Quickack != nil {
		p.Quickack = ptrTo(*over.Quickack)
	}
	if over.CongestionControl != nil {
		p.CongestionControl = ptrTo(*over.CongestionControl)
	}
	if over.AdvMSS != nil {
		p.AdvMSS = ptrTo(*over.AdvMSS)
	}
	if over.MTU != nil {
		p.MTU = ptrTo(*over.MTU)
	}
}

// SetDefaults fills in the defaults the API server fills in: an unset
// cwnd.lock becomes DefaultCwndLock. (No other parameter has a default: an
// unset one leaves the kernel's in place.)
func (p *TCPParameters) SetDefaults() {
	if p.Cwnd != nil && p.Cwnd.Lock == nil {
		p.Cwnd.Lock = ptrTo(DefaultCwndLock)
	}
}

// IsEmpty is whether p sets no parameter.
func (p *TCPParameters) IsEmpty() bool {
	return *p == TCPParameters{}
}

// Validate checks the rules between parameters that the CRD checks on
// every TCPParameters (the XValidation rules of the type): initcwnd and
// ssthresh not above cwnd.value. Each parameter's own bounds are not
// checked: a merge of parameters the API server accepted keeps those, but
// can break these (an ssthresh from a profile's defaults above a host
// pair's smaller cwnd). The error names the parameter.
func (p *TCPParameters) Validate() error {
	if p.Cwnd == nil {
		return nil
	}
	if p.Initcwnd != nil && *p.Initcwnd > p.Cwnd.Value {
		return fmt.Errorf("initcwnd %d exceeds cwnd %d", *p.Initcwnd, p.Cwnd.Value)
	}
	if p.Ssthresh != nil && *p.Ssthresh > p.Cwnd.Value {
		return fmt.Errorf("ssthresh %d exceeds cwnd %d", *p.Ssthresh, p.Cwnd.Value)
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
