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

package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// Cohort is a set of vehicles running one revision.
type Cohort struct {
	// Vehicles are vehicle names (values of the vehicle label).
	Vehicles []string
	// Revision is the revision those vehicles run.
	Revision string
	// Since, when set, is when the cohort settled on Revision (the
	// analysis' first measurement): a judge counts no message from before
	// Since plus one step.
	Since time.Time
	// Kernels are what the cohort's vehicles' nodes reported of their
	// kernels, by vehicle (nil: not known, nothing is checked).
	Kernels map[string][]NodeKernel
	// VerifiedAt is when each vehicle verified Revision (planner.Measure):
	// a vehicle is measured only once the whole window is after that time,
	// so that a query without nettune's revision label (the application's
	// own latency) never counts a sample from before the change; the zero
	// time leaves the vehicle out; a vehicle absent from the map is
	// counted (its time is not known).
	VerifiedAt map[string]time.Time
}

// settled is c without the vehicles that did not verify c.Revision before
// from, and a note naming them ("" when none was left out).
func (c Cohort) settled(name string, from time.Time) (Cohort, string) {
	if c.VerifiedAt == nil {
		return c, ""
	}
	var kept, out []string
	for _, v := range c.Vehicles {
		t, known := c.VerifiedAt[v]
		switch {
		case !known:
			kept = append(kept, v)
		case t.IsZero():
			out = append(out, v+" (not verified)")
		case t.After(from):
			out = append(out, fmt.Sprintf("%s (verified %s)", v, t.UTC().Format(time.RFC3339)))
		default:
			kept = append(kept, v)
		}
	}
	if len(out) == 0 {
		return c, ""
	}
	c.Vehicles = kept
	const maxNamed = 5
	named := out
	if len(named) > maxNamed {
		named = append(named[:maxNamed:maxNamed], fmt.Sprintf("%d more", len(out)-maxNamed))
	}
	return c, fmt.Sprintf("%d %s vehicle(s) left out until their revision was verified before the window's start %s: %s",
		len(out), name, from.UTC().Format(time.RFC3339), strings.Join(named, ", "))
}

// TemplateData is what query templates see.
//
// Every string field is escaped for use INSIDE a double-quoted PromQL/LogQL
// string literal (a backslash becomes `\\`, a double quote `\"`), which is
// where the templates put them: vehicle=~"{{ .Vehicles }}",
// revision="{{ .Revision }}". For ordinary names (av-001, xavier-lan-abc123)
// the escaping changes nothing.
type TemplateData struct {
	// Vehicles is a regexp alternation of the regexp-quoted vehicle names,
	// e.g. "av-001|av-002". Prometheus and Loki anchor label regexps, so it
	// matches exactly those vehicles.
	Vehicles string
	// Revision is the cohort's revision name.
	Revision string
	// Profile is the NetTuningProfile name.
	Profile string
	// Window is the measurement window as a Prometheus/Loki duration, e.g.
	// "5m", "90s", "1h30m", "1500ms".
	Window string
	// ThresholdMs and ThresholdSeconds are a judge's threshold as a decimal
	// number of milliseconds ("100") and of seconds ("0.1", the form of a
	// Prometheus histogram's le label); empty for query analyses.
	ThresholdMs, ThresholdSeconds string
	// Step is a judge's interval length as a duration ("5s"); empty for
	// query analyses.
	Step string
}

// RenderQuery renders an analysis query template for one cohort.
//
// The template is parsed with text/template and executed with
// missingkey=error; unknown fields and syntax errors are returned with the
// template position. An empty cohort is an error: an empty alternation would
// match every series without a vehicle label instead of none.
func RenderQuery(tmpl string, profile string, c Cohort, window time.Duration) (string, error) {
	return renderQuery(tmpl, profile, c, window, func(*TemplateData) error { return nil })
}

// renderQuery renders tmpl for c with the common fields, after extra has set
// the others.
func renderQuery(tmpl string, profile string, c Cohort, window time.Duration, extra func(*TemplateData) error) (string, error) {
	if len(c.Vehicles) == 0 {
		return "", errors.New("rendering query: cohort has no vehicles")
	}
	w, err := FormatDuration(window)
	if err != nil {
		return "", fmt.Errorf("rendering query: window: %w", err)
	}
	quoted := make([]string, 0, len(c.Vehicles))
	for _, v := range c.Vehicles {
		if v == "" {
			return "", errors.New("rendering query: empty vehicle name in cohort")
		}
		quoted = append(quoted, regexp.QuoteMeta(v))
	}
	data := TemplateData{
		Vehicles: escapeString(strings.Join(quoted, "|")),
		Revision: escapeString(c.Revision),
		Profile:  escapeString(profile),
		Window:   w,
	}
	if err := extra(&data); err != nil {
		return "", fmt.Errorf("rendering query: %w", err)
	}
	t, err := template.New("query").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("parsing query template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("rendering query template: %w", err)
	}
	q := strings.TrimSpace(b.String())
	if q == "" {
		return "", errors.New("rendering query template: rendered query is empty")
	}
	return q, nil
}

// escapeString escapes s for the inside of a double-quoted PromQL/LogQL string.
func escapeString(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// FormatDuration formats d the way Prometheus and Loki parse range and
// duration literals, as a single number in the largest unit of h, m, s and ms
// that divides it: "5m", "90s", "90m", "1500ms". Single-unit literals are
// accepted by every Prometheus and Loki version (compound ones like "1m30s"
// are not). Sub-millisecond parts are rounded to the millisecond; a duration
// below 1ms is an error.
func FormatDuration(d time.Duration) (string, error) {
	ms := d.Round(time.Millisecond).Milliseconds()
	if ms <= 0 {
		return "", fmt.Errorf("duration %s must be at least 1ms", d)
	}
	for _, u := range []struct {
		suffix string
		ms     int64
	}{{"h", 3600_000}, {"m", 60_000}, {"s", 1000}} {
		if ms%u.ms == 0 {
			return strconv.FormatInt(ms/u.ms, 10) + u.suffix, nil
		}
	}
	return strconv.FormatInt(ms, 10) + "ms", nil
}
