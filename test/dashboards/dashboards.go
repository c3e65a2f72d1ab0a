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

// Package dashboards reads the chart's Grafana dashboards as Grafana would
// (charts/nettune/dashboards/*.json, whatever produced them), checks their
// structure (Validate), and lists every query they make — panel targets,
// annotations and template variables — with the variables substituted, to
// run against a real Loki and Prometheus (Runner). Grafana itself cannot run
// here: this is what stands in for it.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Dir is where the chart's dashboards live, relative to the repository root.
const Dir = "charts/nettune/dashboards"

// Dashboard is the part of Grafana's dashboard model the checks read.
type Dashboard struct {
	Path          string `json:"-"`
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []Panel
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []Annotation `json:"list"`
	} `json:"annotations"`
}

// Panel is a panel or a row (whose collapsed panels are in Panels).
type Panel struct {
	ID          *int            `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Datasource  json.RawMessage `json:"datasource"`
	GridPos     *GridPos        `json:"gridPos"`
	Targets     []Target        `json:"targets"`
	Panels      []Panel         `json:"panels"`
}

// GridPos is a panel's place on the 24-column grid.
type GridPos struct {
	H, W, X, Y int
}

// Target is a panel query.
type Target struct {
	RefID        string          `json:"refId"`
	Datasource   json.RawMessage `json:"datasource"`
	Expr         string          `json:"expr"`
	LegendFormat string          `json:"legendFormat"`
	Instant      bool            `json:"instant"`
	Range        bool            `json:"range"`
	QueryType    string          `json:"queryType"`
	Format       string          `json:"format"`
}

// Variable is a template variable.
type Variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource json.RawMessage `json:"datasource"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

// QueryString is the variable's query: a string, or the "query" field of
// the object newer Grafana versions store.
func (v Variable) QueryString() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(v.Query, &o) == nil {
		return o.Query
	}
	return ""
}

// Annotation is an annotation query.
type Annotation struct {
	Name        string          `json:"name"`
	Datasource  json.RawMessage `json:"datasource"`
	Expr        string          `json:"expr"`
	Enable      bool            `json:"enable"`
	BuiltIn     int             `json:"builtIn"`
	TitleFormat string          `json:"titleFormat"`
	TextFormat  string          `json:"textFormat"`
	// Filter limits the panels the annotation is drawn on.
	Filter json.RawMessage `json:"filter,omitempty"`
}

// Load reads one dashboard.
func Load(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{Path: path}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// LoadAll reads every dashboard of the chart under root, sorted by file.
func LoadAll(root string) ([]*Dashboard, error) {
	paths, err := filepath.Glob(filepath.Join(root, Dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Dashboard
	for _, p := range paths {
		d, err := Load(p)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// AllPanels is every panel, rows' collapsed panels included, in order.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Builtin are Grafana's global variables.
var Builtin = map[string]bool{
	"__interval": true, "__interval_ms": true, "__rate_interval": true, "__rate_interval_ms": true, "__range": true,
	"__range_s": true, "__range_ms": true, "__from": true, "__to": true, "__auto": true, "__dashboard": true,
	"__org": true, "__user": true, "timeFilter": true, "__timeFilter": true,
}

// varRef matches $name, ${name}, ${name:format} and [[name]].
var varRef = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[A-Za-z0-9_]+)?\]\]`)

// Refs are the variable names s refers to, in order.
func Refs(s string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		for _, g := range m[1:] {
			if g != "" {
				out = append(out, g)
			}
		}
	}
	return out
}

// Substitute replaces every variable reference of s by its value in vars;
// it fails on a reference vars lacks.
func Substitute(s string, vars map[string]string) (string, error) {
	var missing []string
	out := varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := Refs(ref)[0]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for %s in %q", strings.Join(missing, ", "), s)
	}
	return out, nil
}

// DSRef is a parsed datasource reference.
type DSRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// ParseDS reads a datasource reference; Grafana's legacy string form and a
// missing one are errors here (the dashboards use the object form only).
func ParseDS(raw json.RawMessage) (DSRef, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return DSRef{}, fmt.Errorf("no datasource")
	}
	var ds DSRef
	if err := json.Unmarshal(raw, &ds); err != nil {
		return DSRef{}, fmt.Errorf("datasource %s is not an object {type, uid}", raw)
	}
	return ds, nil
}

// DSVar is the datasource variable a reference's uid names ("${X}" or "$X").
func (r DSRef) DSVar() string {
	refs := Refs(r.UID)
	if len(refs) != 1 || varRef.FindString(r.UID) != r.UID {
		return ""
	}
	return refs[0]
}

// Query is one query a dashboard makes.
type Query struct {
	// Where names it: dashboard, panel (id and title) and refId, annotation
	// or variable.
	Where string
	// Datasource is "prometheus" or "loki".
	Datasource string
	// Kind is KindRange, KindInstant, KindLogs or KindLabelValues.
	Kind string
	// Expr is the query as written (variables not substituted); for
	// KindLabelValues the selector of label_values(), possibly empty.
	Expr string
	// Label is the label of a KindLabelValues query.
	Label string
	// Variable is the variable a KindLabelValues query fills.
	Variable string
}

// Kinds of Query.
const (
	KindRange       = "range"
	KindInstant     = "instant"
	KindLogs        = "logs"
	KindLabelValues = "label_values"
)

var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(?:(.*?)\s*,\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// IsLogQuery reports whether a LogQL expression is a log query (a stream
// selector and pipeline) rather than a metric query.
func IsLogQuery(expr string) bool { return strings.HasPrefix(strings.TrimSpace(expr), "{") }

// Queries lists every query of d: panel targets, annotations, and query
// variables (label_values()).
func (d *Dashboard) Queries() ([]Query, error) {
	dsType := map[string]string{}
	for _, v := range d.Templating.List {
		if v.Type == "datasource" {
			dsType[v.Name] = v.QueryString()
		}
	}
	typeOf := func(raw json.RawMessage) (string, error) {
		ds, err := ParseDS(raw)
		if err != nil {
			return "", err
		}
		if t := dsType[ds.DSVar()]; t != "" {
			return t, nil
		}
		return "", fmt.Errorf("datasource %s names no datasource variable", raw)
	}
	base := filepath.Base(d.Path)
	var out []Query
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := fmt.Sprintf("%s variable %s", base, v.Name)
		t, err := typeOf(v.Datasource)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		m := labelValues.FindStringSubmatch(v.QueryString())
		if m == nil {
			return nil, fmt.Errorf("%s: query %q is not label_values(...)", where, v.QueryString())
		}
		out = append(out, Query{Where: where, Datasource: t, Kind: KindLabelValues, Expr: m[1], Label: m[2], Variable: v.Name})
	}
	for _, p := range d.AllPanels() {
		if p.Type == "row" {
			continue
		}
		for _, tg := range p.Targets {
			where := fmt.Sprintf("%s panel %d %q target %s", base, derefID(p.ID), p.Title, tg.RefID)
			raw := tg.Datasource
			if len(raw) == 0 {
				raw = p.Datasource
			}
			t, err := typeOf(raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			kind := KindRange
			switch {
			case t == "loki" && IsLogQuery(tg.Expr):
				kind = KindLogs
			case tg.Instant && !tg.Range, tg.QueryType == "instant":
				kind = KindInstant
			}
			out = append(out, Query{Where: where, Datasource: t, Kind: kind, Expr: tg.Expr})
		}
	}
	for _, a := range d.Annotations.List {
		if a.BuiltIn != 0 {
			continue
		}
		where := fmt.Sprintf("%s annotation %q", base, a.Name)
		t, err := typeOf(a.Datasource)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		kind := KindRange
		if t == "loki" && IsLogQuery(a.Expr) {
			kind = KindLogs
		}
		out = append(out, Query{Where: where, Datasource: t, Kind: kind, Expr: a.Expr})
	}
	return out, nil
}

func derefID(id *int) int {
	if id == nil {
		return -1
	}
	return *id
}
