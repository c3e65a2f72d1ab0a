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

package dashboards

import (
	"fmt"
	"path"
	"sort"
)

// Dir is where the dashboards are committed, relative to the repository root.
const Dir = "charts/nettune/dashboards"

// All returns every dashboard by file name.
func All() map[string]*Dashboard {
	return map[string]*Dashboard{
		"rollout-health.json": RolloutHealth(),
		"vehicle.json":        Vehicle(),
		"experiment.json":     Experiment(),
	}
}

// Files renders every dashboard: path (under Dir) -> JSON.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	all := All()
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := all[n].Render()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[path.Join(Dir, n)] = b
	}
	return out, nil
}

// builder lays panels out on the grid left to right, top to bottom, and
// numbers them.
type builder struct {
	d          *Dashboard
	id         int
	x, y, rowH int
}

func newDashboard(uid, title, description string, vars ...Variable) *builder {
	d := &Dashboard{
		Description: description, Editable: true, GraphTooltip: 1, Refresh: "30s", SchemaVersion: SchemaVersion,
		Tags:  []string{"nettune"},
		Links: []Link{{AsDropdown: false, IncludeVars: false, KeepTime: true, Tags: []string{"nettune"}, Title: "nettune", Type: "dashboards"}},
		Time:  TimeRange{From: "now-1h", To: "now"}, Timezone: "browser", Title: title, UID: uid, Version: 1,
		Annotations: Annotations{List: []Annotation{}},
		Templating: Templating{List: append([]Variable{
			dsVar("DS_PROMETHEUS", "Prometheus", "prometheus"),
			dsVar("DS_LOKI", "Loki", "loki"),
		}, vars...)},
	}
	return &builder{d: d}
}

func (b *builder) annotate(a ...Annotation) {
	b.d.Annotations.List = append(b.d.Annotations.List, a...)
}

// row starts a new (expanded) row.
func (b *builder) row(title string) {
	b.newline()
	b.id++
	b.d.Panels = append(b.d.Panels, &Panel{Type: "row", Title: title, ID: b.id, Collapsed: new(bool), Panels: []*Panel{},
		GridPos: GridPos{H: 1, W: 24, X: 0, Y: b.y}})
	b.y++
}

func (b *builder) newline() {
	if b.x > 0 {
		b.y += b.rowH
	}
	b.x, b.rowH = 0, 0
}

// add places p w columns wide and h high.
func (b *builder) add(p *Panel, w, h int) {
	if b.x+w > 24 {
		b.newline()
	}
	b.id++
	p.ID = b.id
	p.GridPos = GridPos{H: h, W: w, X: b.x, Y: b.y}
	b.x += w
	b.rowH = max(b.rowH, h)
	b.d.Panels = append(b.d.Panels, p)
}

func dsVar(name, label, plugin string) Variable {
	return Variable{Type: "datasource", Name: name, Label: label, Query: plugin, Refresh: 1, Options: []any{}}
}

// promVar is a Prometheus label_values() variable.
func promVar(name, label, query, description string) Variable {
	ds := prom
	return Variable{Type: "query", Name: name, Label: label, Datasource: &ds, Query: query, Definition: query,
		Description: description, Refresh: 2, Sort: 1, Options: []any{}}
}

// multi lets the variable take several values, All by default; allValue ""
// lets Grafana join every value into a regexp.
func multi(v Variable, allValue string) Variable {
	v.Multi, v.IncludeAll, v.AllValue = true, true, allValue
	return v
}

// Targets.

func promRange(expr, legend string) Target {
	return Target{Datasource: prom, EditorMode: "code", Expr: expr, LegendFormat: legend, Range: true}
}

func promInstant(expr, legend string) Target {
	return Target{Datasource: prom, EditorMode: "code", Expr: expr, LegendFormat: legend, Instant: true}
}

func promTable(expr string) Target {
	return Target{Datasource: prom, EditorMode: "code", Expr: expr, Format: "table", Instant: true}
}

func lokiRange(expr, legend string) Target {
	return Target{Datasource: loki, EditorMode: "code", Expr: expr, LegendFormat: legend, QueryType: "range", Range: true}
}

func lokiInstant(expr, legend string) Target {
	return Target{Datasource: loki, EditorMode: "code", Expr: expr, LegendFormat: legend, QueryType: "instant", Instant: true}
}

func lokiLogs(expr string) Target {
	return Target{Datasource: loki, EditorMode: "code", Expr: expr, MaxLines: 500, QueryType: "range", Range: true}
}

// Panels.

func panel(typ, title, description string, targets []Target) *Panel {
	for i := range targets {
		targets[i].RefID = string(rune('A' + i))
	}
	ds := targets[0].Datasource
	return &Panel{Type: typ, Title: title, Description: description, Datasource: &ds, Targets: targets}
}

func fieldConfig(unit string, custom map[string]any) *FieldConfig {
	return &FieldConfig{
		Defaults: FieldDefaults{
			Color: map[string]any{"mode": "palette-classic"}, Custom: custom, Mappings: []any{}, Unit: unit,
			Thresholds: map[string]any{"mode": "absolute", "steps": []any{map[string]any{"color": "green", "value": nil}}},
		},
		Overrides: []any{},
	}
}

type seriesStyle int

const (
	lines seriesStyle = iota
	bars
	stacked
	steps
)

func timeseries(title, description, unit string, style seriesStyle, targets ...Target) *Panel {
	p := panel("timeseries", title, description, targets)
	custom := map[string]any{
		"drawStyle": "line", "lineInterpolation": "linear", "lineWidth": 1, "fillOpacity": 0, "pointSize": 4,
		"showPoints": "never", "spanNulls": false, "axisPlacement": "auto",
		"stacking": map[string]any{"group": "A", "mode": "none"},
	}
	switch style {
	case bars:
		custom["drawStyle"], custom["fillOpacity"] = "bars", 80
	case stacked:
		custom["fillOpacity"] = 40
		custom["stacking"] = map[string]any{"group": "A", "mode": "normal"}
		custom["lineInterpolation"] = "stepAfter"
	case steps:
		custom["lineInterpolation"] = "stepAfter"
	}
	p.FieldConfig = fieldConfig(unit, custom)
	p.Options = map[string]any{
		"legend":  map[string]any{"calcs": []string{"max", "lastNotNull"}, "displayMode": "table", "placement": "right", "showLegend": true},
		"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
	}
	return p
}

// dashed draws the series whose name matches regexp re dashed and red (a
// threshold).
func dashed(p *Panel, re string) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, map[string]any{
		"matcher": map[string]any{"id": "byRegexp", "options": re},
		"properties": []any{
			map[string]any{"id": "custom.lineStyle", "value": map[string]any{"dash": []int{10, 10}, "fill": "dash"}},
			map[string]any{"id": "color", "value": map[string]any{"fixedColor": "red", "mode": "fixed"}},
		},
	})
	return p
}

func stat(title, description, unit, textMode string, targets ...Target) *Panel {
	p := panel("stat", title, description, targets)
	p.FieldConfig = fieldConfig(unit, nil)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.Options = map[string]any{
		"colorMode": "value", "graphMode": "none", "justifyMode": "auto", "orientation": "auto", "textMode": textMode,
		"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
	}
	return p
}

// table shows instant queries as rows, without the time column.
func table(title, description, unit string, targets ...Target) *Panel {
	p := panel("table", title, description, targets)
	p.FieldConfig = fieldConfig(unit, map[string]any{"align": "auto", "cellOptions": map[string]any{"type": "auto"}})
	p.Options = map[string]any{"showHeader": true, "cellHeight": "sm", "footer": map[string]any{"show": false}}
	p.Transforms = []any{
		map[string]any{"id": "merge", "options": map[string]any{}},
		map[string]any{"id": "organize", "options": map[string]any{"excludeByName": map[string]any{"Time": true, "__name__": true, "job": true, "instance": true}}},
	}
	return p
}

func logs(title, description string, target Target) *Panel {
	p := panel("logs", title, description, []Target{target})
	p.Options = map[string]any{
		"dedupStrategy": "none", "enableLogDetails": true, "prettifyLogMessage": false, "showCommonLabels": false,
		"showLabels": false, "showTime": true, "sortOrder": "Descending", "wrapLogMessage": true,
	}
	return p
}

// stateTimeline shows which series is at 1 over time (e.g. the phase).
func stateTimeline(title, description string, targets ...Target) *Panel {
	p := panel("state-timeline", title, description, targets)
	p.FieldConfig = fieldConfig("", map[string]any{"fillOpacity": 80, "lineWidth": 0})
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.FieldConfig.Defaults.Mappings = []any{map[string]any{"type": "value", "options": map[string]any{
		"0": map[string]any{"color": "transparent", "index": 0, "text": " "},
		"1": map[string]any{"color": "blue", "index": 1, "text": "active"},
	}}}
	p.Options = map[string]any{
		"alignValue": "left", "mergeValues": true, "rowHeight": 0.9, "showValue": "never",
		"legend":  map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": false},
		"tooltip": map[string]any{"mode": "single", "sort": "none"},
	}
	return p
}

func lokiAnnotation(name, color, expr, title, text, tags string) Annotation {
	return Annotation{Datasource: loki, Enable: true, Expr: expr, IconColor: color, Name: name,
		TitleFormat: title, TextFormat: text, TagKeys: tags}
}
