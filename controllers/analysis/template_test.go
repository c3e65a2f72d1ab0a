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
	"strings"
	"testing"
	"time"
)

func TestRenderQuery(t *testing.T) {
	const v2Query = `quantile_over_time(0.9999, {job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}
| json | unwrap latency_ms [{{ .Window }}]) by ()`
	tests := []struct {
		name    string
		tmpl    string
		profile string
		cohort  Cohort
		window  time.Duration
		want    string
		wantErr string
	}{
		{
			name:   "xavier-lan-v2 query",
			tmpl:   v2Query,
			cohort: Cohort{Vehicles: []string{"av-001", "av-002"}, Revision: "xavier-lan-5f7c9d"},
			window: 5 * time.Minute,
			want: `quantile_over_time(0.9999, {job="nettune-probe", vehicle=~"av-001|av-002", revision="xavier-lan-5f7c9d"}
| json | unwrap latency_ms [5m]) by ()`,
		},
		{
			name:   "single vehicle, 90s window",
			tmpl:   `max(x{vehicle=~"{{ .Vehicles }}"}[{{ .Window }}])`,
			cohort: Cohort{Vehicles: []string{"av-007"}},
			window: 90 * time.Second,
			want:   `max(x{vehicle=~"av-007"}[90s])`,
		},
		{
			name:    "profile and hour window",
			tmpl:    `x{profile="{{ .Profile }}"}[{{ .Window }}]`,
			profile: "xavier-lan",
			cohort:  Cohort{Vehicles: []string{"a"}},
			window:  2 * time.Hour,
			want:    `x{profile="xavier-lan"}[2h]`,
		},
		{
			name:   "compound window becomes one unit",
			tmpl:   `[{{ .Window }}]`,
			cohort: Cohort{Vehicles: []string{"a"}},
			window: 90 * time.Minute,
			want:   `[90m]`,
		},
		{
			name:   "millisecond window, sub-ms rounded",
			tmpl:   `[{{ .Window }}]`,
			cohort: Cohort{Vehicles: []string{"a"}},
			window: 1500*time.Millisecond + 300*time.Microsecond,
			want:   `[1500ms]`,
		},
		{
			name:   "regexp metacharacters quoted and escaped for a double-quoted string",
			tmpl:   `{vehicle=~"{{ .Vehicles }}"}`,
			cohort: Cohort{Vehicles: []string{"av.001", "fleet-a/av+2"}},
			window: time.Minute,
			want:   `{vehicle=~"av\\.001|fleet-a/av\\+2"}`,
		},
		{
			name:   "double quote in revision escaped",
			tmpl:   `{revision="{{ .Revision }}"}`,
			cohort: Cohort{Vehicles: []string{"a"}, Revision: `r"1`},
			window: time.Minute,
			want:   `{revision="r\"1"}`,
		},
		{
			name:   "surrounding whitespace trimmed",
			tmpl:   "  sum(x)\n",
			cohort: Cohort{Vehicles: []string{"a"}},
			window: time.Minute,
			want:   "sum(x)",
		},
		{
			name:    "unknown field",
			tmpl:    `x{vehicle=~"{{ .Vehicle }}"}`,
			cohort:  Cohort{Vehicles: []string{"a"}},
			window:  time.Minute,
			wantErr: `rendering query template: template: query:1:15: executing "query" at <.Vehicle>: can't evaluate field Vehicle in type analysis.TemplateData`,
		},
		{
			name:    "syntax error",
			tmpl:    `x{vehicle=~"{{ .Vehicles }"}`,
			cohort:  Cohort{Vehicles: []string{"a"}},
			window:  time.Minute,
			wantErr: `parsing query template: template: query:1: unexpected "}" in operand`,
		},
		{
			name:    "empty cohort",
			tmpl:    `x`,
			window:  time.Minute,
			wantErr: "rendering query: cohort has no vehicles",
		},
		{
			name:    "empty vehicle name",
			tmpl:    `x`,
			cohort:  Cohort{Vehicles: []string{"a", ""}},
			window:  time.Minute,
			wantErr: "rendering query: empty vehicle name in cohort",
		},
		{
			name:    "zero window",
			tmpl:    `x`,
			cohort:  Cohort{Vehicles: []string{"a"}},
			wantErr: "rendering query: window: duration 0s must be at least 1ms",
		},
		{
			name:    "renders to nothing",
			tmpl:    `{{ if false }}x{{ end }}`,
			cohort:  Cohort{Vehicles: []string{"a"}},
			window:  time.Minute,
			wantErr: "rendering query template: rendered query is empty",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderQuery(tt.tmpl, tt.profile, tt.cohort, tt.window)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("RenderQuery() = %q, want error %q", got, tt.wantErr)
				}
				if err.Error() != tt.wantErr {
					t.Fatalf("RenderQuery() error\n got %q\nwant %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("RenderQuery() error: %v", err)
			}
			if got != tt.want {
				t.Fatalf("RenderQuery()\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond:                   "1ms",
		999 * time.Millisecond:             "999ms",
		time.Second:                        "1s",
		59 * time.Second:                   "59s",
		5 * time.Minute:                    "5m",
		61 * time.Second:                   "61s",
		time.Hour:                          "1h",
		25 * time.Hour:                     "25h",
		time.Hour + time.Millisecond:       "3600001ms",
		time.Minute + 400*time.Microsecond: "1m",
	} {
		got, err := FormatDuration(d)
		if err != nil || got != want {
			t.Errorf("FormatDuration(%s) = %q, %v; want %q", d, got, err, want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, 400 * time.Microsecond} {
		if got, err := FormatDuration(d); err == nil {
			t.Errorf("FormatDuration(%s) = %q, want error", d, got)
		}
	}
	if !strings.Contains(mustErr(FormatDuration(-time.Second)).Error(), "at least 1ms") {
		t.Error("error should say the minimum")
	}
}

func mustErr(_ string, err error) error { return err }
