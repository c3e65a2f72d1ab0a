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

// Package dashboards generates the Grafana dashboards of the chart
// (charts/nettune/dashboards/*.json): `go run ./hack/dashboards/gen` writes
// them, and this package's test fails when the committed files differ from
// what it generates.
//
// The dashboards name no datasource UID: every panel, query and annotation
// refers to the datasource variables DS_PROMETHEUS and DS_LOKI, so they
// import into any Grafana as they are.
package dashboards

import (
	"bytes"
	"encoding/json"
)

// SchemaVersion is the Grafana dashboard schema written (Grafana 10.4/11).
const SchemaVersion = 39

// DS is a datasource reference.
type DS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

var (
	prom = DS{Type: "prometheus", UID: "${DS_PROMETHEUS}"}
	loki = DS{Type: "loki", UID: "${DS_LOKI}"}
)

// Dashboard is the part of Grafana's dashboard model written here.
type Dashboard struct {
	Annotations   Annotations `json:"annotations"`
	Description   string      `json:"description"`
	Editable      bool        `json:"editable"`
	GraphTooltip  int         `json:"graphTooltip"`
	Links         []Link      `json:"links"`
	Panels        []*Panel    `json:"panels"`
	Refresh       string      `json:"refresh"`
	SchemaVersion int         `json:"schemaVersion"`
	Tags          []string    `json:"tags"`
	Templating    Templating  `json:"templating"`
	Time          TimeRange   `json:"time"`
	Timepicker    struct{}    `json:"timepicker"`
	Timezone      string      `json:"timezone"`
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	Version       int         `json:"version"`
}

// Link links to the other dashboards of the chart.
type Link struct {
	AsDropdown  bool     `json:"asDropdown"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
	Tags        []string `json:"tags"`
	Title       string   `json:"title"`
	Type        string   `json:"type"`
}

// Annotations holds the annotation queries.
type Annotations struct {
	List []Annotation `json:"list"`
}

// Annotation is a Loki or Prometheus annotation query.
type Annotation struct {
	Datasource  DS     `json:"datasource"`
	Enable      bool   `json:"enable"`
	Expr        string `json:"expr"`
	Hide        bool   `json:"hide"`
	IconColor   string `json:"iconColor"`
	Instant     bool   `json:"instant"`
	Name        string `json:"name"`
	TagKeys     string `json:"tagKeys,omitempty"`
	TextFormat  string `json:"textFormat,omitempty"`
	TitleFormat string `json:"titleFormat,omitempty"`
}

// Templating holds the variables.
type Templating struct {
	List []Variable `json:"list"`
}

// Variable is a datasource or query variable.
type Variable struct {
	AllValue    string   `json:"allValue,omitempty"`
	Current     struct{} `json:"current"`
	Datasource  *DS      `json:"datasource,omitempty"`
	Definition  string   `json:"definition,omitempty"`
	Description string   `json:"description,omitempty"`
	Hide        int      `json:"hide"`
	IncludeAll  bool     `json:"includeAll"`
	Label       string   `json:"label"`
	Multi       bool     `json:"multi"`
	Name        string   `json:"name"`
	Options     []any    `json:"options"`
	Query       string   `json:"query"`
	Refresh     int      `json:"refresh"`
	Regex       string   `json:"regex"`
	SkipURLSync bool     `json:"skipUrlSync"`
	Sort        int      `json:"sort"`
	Type        string   `json:"type"`
}

// TimeRange is the default time range.
type TimeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Panel is a panel or a row.
type Panel struct {
	Collapsed   *bool        `json:"collapsed,omitempty"`
	Datasource  *DS          `json:"datasource,omitempty"`
	Description string       `json:"description,omitempty"`
	FieldConfig *FieldConfig `json:"fieldConfig,omitempty"`
	GridPos     GridPos      `json:"gridPos"`
	ID          int          `json:"id"`
	Options     any          `json:"options,omitempty"`
	Panels      []*Panel     `json:"panels,omitempty"`
	Targets     []Target     `json:"targets,omitempty"`
	Title       string       `json:"title"`
	Transforms  []any        `json:"transformations,omitempty"`
	Type        string       `json:"type"`
}

// FieldConfig is a panel's field defaults and overrides.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []any         `json:"overrides"`
}

// FieldDefaults are the defaults of every field.
type FieldDefaults struct {
	Color      map[string]any `json:"color,omitempty"`
	Custom     map[string]any `json:"custom,omitempty"`
	Decimals   *int           `json:"decimals,omitempty"`
	Mappings   []any          `json:"mappings"`
	Min        *float64       `json:"min,omitempty"`
	Thresholds map[string]any `json:"thresholds,omitempty"`
	Unit       string         `json:"unit,omitempty"`
}

// Target is one query of a panel.
type Target struct {
	Datasource   DS     `json:"datasource"`
	EditorMode   string `json:"editorMode"`
	Expr         string `json:"expr"`
	Format       string `json:"format,omitempty"`
	Instant      bool   `json:"instant"`
	LegendFormat string `json:"legendFormat,omitempty"`
	MaxLines     int    `json:"maxLines,omitempty"`
	QueryType    string `json:"queryType,omitempty"`
	Range        bool   `json:"range"`
	RefID        string `json:"refId"`
}

// Render is the dashboard's JSON as committed: two-space indent, a final
// newline, no HTML escaping (queries keep their < > &).
func (d *Dashboard) Render() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
