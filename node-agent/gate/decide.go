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

package gate

import (
	"fmt"
	"strings"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/maintenance"
)

// Reasons of the Deferred condition.
const (
	ReasonAllowed           = "Allowed"
	ReasonImmediate         = "Immediate"
	ReasonGateClosed        = "GateClosed"
	ReasonGateNotConfigured = "GateNotConfigured"
	ReasonOutsideWindow     = "OutsideWindow"
	ReasonWindowInvalid     = "WindowInvalid"
)

// Decision is whether an apply may start now.
type Decision struct {
	Allowed bool
	// Reason is one of the Reason constants.
	Reason  string
	Message string
	// NextWindow is when the next window opens, while one is awaited.
	NextWindow time.Time
}

// Decide says whether a revision with policy p may start to apply now,
// given the gate's state g (NotConfigured for an agent without a gate) and
// the vehicle's zone local. Only the start is gated: an apply that started
// runs to its commit or its revert, whatever the gate does meanwhile.
func Decide(p *v1alpha1.NodeApplyPolicy, g State, now time.Time, local *time.Location) Decision {
	if p == nil {
		p = &v1alpha1.NodeApplyPolicy{}
	}
	if p.Immediate != "" {
		return Decision{Allowed: true, Reason: ReasonImmediate, Message: "applied at once, whatever the gate and the windows say: " + p.Immediate}
	}
	var held []string
	reason := ""
	hold := func(r, msg string) {
		if reason == "" {
			reason = r
		}
		held = append(held, msg)
	}
	switch mode := p.Gate; {
	case mode == v1alpha1.ApplyGateIgnored:
	case g.State == v1alpha1.GateNotConfigured || g.State == "":
		if mode == v1alpha1.ApplyGateRequired {
			hold(ReasonGateNotConfigured, "the profile requires an apply gate and this agent has none (--apply-gate-file)")
		}
	case !g.Open():
		msg := "apply gate closed"
		if !g.Since.IsZero() {
			msg += " since " + g.Since.UTC().Format(time.RFC3339)
		}
		if g.Reason != "" {
			msg += ": " + g.Reason
		}
		hold(ReasonGateClosed, msg)
	}
	var next time.Time
	for _, pw := range p.Windows {
		set, err := maintenance.ParseSet(pw.Windows)
		if err != nil {
			hold(ReasonWindowInvalid, fmt.Sprintf("profile %s: %v (on this vehicle)", pw.Profile, err))
			continue
		}
		open, n := set.At(now, local)
		if open {
			continue
		}
		msg := fmt.Sprintf("no maintenance window of profile %s is open", pw.Profile)
		if !n.IsZero() {
			msg += " (next opens " + n.UTC().Format(time.RFC3339) + ")"
			// Every profile's window must be open: the apply waits for the
			// latest of the next openings.
			if n.After(next) {
				next = n
			}
		}
		hold(ReasonOutsideWindow, msg)
	}
	if reason != "" {
		return Decision{Reason: reason, Message: strings.Join(held, "; "), NextWindow: next}
	}
	return Decision{Allowed: true, Reason: ReasonAllowed, Message: "nothing holds the apply"}
}
