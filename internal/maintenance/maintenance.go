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

// Package maintenance reads maintenance windows: a cron schedule that opens
// a window, how long it stays open, and the time zone the schedule is read
// in. The controller checks a profile's windows with it before any vehicle
// gets them, and the node agent decides with it, by its own clock, whether
// it may apply now.
package maintenance

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// Window is a parsed maintenance window.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
	// loc is the window's zone; nil reads the schedule in the vehicle's.
	loc *time.Location
	// Spec is what was parsed.
	Spec v1alpha1.MaintenanceWindow
}

// Parse reads a window. Its errors name the field at fault: schedule (not
// cron, or a schedule that never fires, as on the 30th of February),
// duration, or timeZone (a zone this machine's time zone database lacks).
func Parse(w v1alpha1.MaintenanceWindow) (Window, error) {
	s, err := cron.ParseStandard(w.Schedule)
	if err != nil {
		return Window{}, fmt.Errorf("schedule %q: %w", w.Schedule, err)
	}
	if w.Duration.Duration <= 0 {
		return Window{}, fmt.Errorf("duration %s: must be above 0", w.Duration.Duration)
	}
	out := Window{schedule: s, duration: w.Duration.Duration, Spec: w}
	if w.TimeZone != "" {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil {
			return Window{}, fmt.Errorf("timeZone %q: unknown time zone: %w", w.TimeZone, err)
		}
		out.loc = loc
	}
	// A schedule that fires in no day of the next 5 years (cron's search
	// horizon), e.g. "0 0 30 2 *", opens no window.
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Window{}, fmt.Errorf("schedule %q: never fires (no such day)", w.Schedule)
	}
	return out, nil
}

// At says whether the window is open at now, read in the window's zone or
// else in local (the vehicle's zone), and when it next opens: the start of
// the window now open, or the next start.
func (w Window) At(now time.Time, local *time.Location) (open bool, start time.Time) {
	loc := w.loc
	if loc == nil {
		loc = local
	}
	if loc == nil {
		loc = time.Local
	}
	t := now.In(loc)
	// The latest start within (now-duration, now] keeps the window open.
	if s := w.schedule.Next(t.Add(-w.duration)); !s.IsZero() && !s.After(t) {
		return true, s
	}
	return false, w.schedule.Next(t)
}

// Set is a list of windows, open when any one is.
type Set []Window

// ParseSet reads windows; its errors name the entry (windows[i].field).
func ParseSet(ws []v1alpha1.MaintenanceWindow) (Set, error) {
	out := make(Set, 0, len(ws))
	for i, w := range ws {
		p, err := Parse(w)
		if err != nil {
			return nil, fmt.Errorf("maintenanceWindows[%d].%w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// At says whether any window of the set is open at now and, when none is,
// when the first one opens next (zero when the set is empty or open).
func (s Set) At(now time.Time, local *time.Location) (open bool, next time.Time) {
	if len(s) == 0 {
		return true, time.Time{}
	}
	for _, w := range s {
		o, start := w.At(now, local)
		if o {
			return true, time.Time{}
		}
		if !start.IsZero() && (next.IsZero() || start.Before(next)) {
			next = start
		}
	}
	return false, next
}

// Check reads a profile's apply policy as the agents will, so that a window
// no vehicle could ever open (a schedule that never fires, a time zone the
// controller's database lacks) stops the rollout naming the field instead
// of leaving every vehicle waiting.
func Check(a *v1alpha1.ApplyPolicy) error {
	if a == nil {
		return nil
	}
	if _, err := ParseSet(a.MaintenanceWindows); err != nil {
		return fmt.Errorf("spec.rollout.apply.%w", err)
	}
	return nil
}
