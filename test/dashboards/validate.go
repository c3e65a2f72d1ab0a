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
	"encoding/json"
	"fmt"
	"strings"
)

// MinSchemaVersion is the oldest dashboard schema accepted (Grafana 9.4).
const MinSchemaVersion = 36

// RequiredDatasources are the datasource variables every dashboard declares,
// with their plugin type.
var RequiredDatasources = map[string]string{"DS_PROMETHEUS": "prometheus", "DS_LOKI": "loki"}

// Validate returns every structural problem of d, each naming where it is:
//   - a uid, a title and a schemaVersion of at least MinSchemaVersion;
//   - the datasource variables DS_PROMETHEUS (prometheus) and DS_LOKI
//     (loki), unique variable names;
//   - every panel, panel target, query variable and annotation refers to its
//     datasource as {"type": T, "uid": "${VAR}"} where VAR is a declared
//     datasource variable of plugin type T (no fixed UID);
//   - every panel has a unique id and a gridPos inside the 24 columns, and
//     no two panels overlap;
//   - every non-row panel has targets with an expression and unique refIds;
//   - every $var, ${var} or [[var]] in a query, legend, title or annotation is
//     a declared variable or a Grafana built-in, and a variable's query
//     refers only to variables declared before it;
//   - every query variable is used by a panel query, and every panel query
//     uses a query variable (no panel silently shows the whole fleet);
//   - no annotation has a panel filter: each is drawn on every panel.
func Validate(d *Dashboard) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	if d.UID == "" {
		bad("no uid")
	}
	if d.Title == "" {
		bad("no title")
	}
	if d.SchemaVersion < MinSchemaVersion {
		bad("schemaVersion %d < %d", d.SchemaVersion, MinSchemaVersion)
	}

	// Variables.
	declared := map[string]bool{}
	dsPlugin := map[string]string{}
	queryVars := map[string]bool{}
	for _, v := range d.Templating.List {
		if v.Name == "" {
			bad("a variable has no name")
			continue
		}
		if declared[v.Name] {
			bad("variable %s declared twice", v.Name)
		}
		declared[v.Name] = true
		switch v.Type {
		case "datasource":
			dsPlugin[v.Name] = v.QueryString()
		case "query":
			queryVars[v.Name] = true
		}
	}
	for name, plugin := range RequiredDatasources {
		if got, ok := dsPlugin[name]; !ok {
			bad("no datasource variable %s", name)
		} else if got != plugin {
			bad("datasource variable %s is of type %q, want %q", name, got, plugin)
		}
	}
	checkDS := func(where string, raw json.RawMessage) string {
		ds, err := ParseDS(raw)
		if err != nil {
			bad("%s: %v", where, err)
			return ""
		}
		name := ds.DSVar()
		plugin, ok := dsPlugin[name]
		switch {
		case name == "" || !ok:
			bad("%s: datasource uid %q is not a declared datasource variable (${DS_PROMETHEUS} or ${DS_LOKI})", where, ds.UID)
			return ""
		case ds.Type != plugin:
			bad("%s: datasource type %q but ${%s} is a %q datasource", where, ds.Type, name, plugin)
		}
		return plugin
	}
	checkRefs := func(where, s string, allowed map[string]bool) {
		for _, r := range Refs(s) {
			if !allowed[r] && !Builtin[r] {
				bad("%s: $%s is not a variable of the dashboard", where, r)
			}
		}
	}
	before := map[string]bool{}
	for _, v := range d.Templating.List {
		where := "variable " + v.Name
		if v.Type == "query" {
			checkDS(where, v.Datasource)
			if strings.TrimSpace(v.QueryString()) == "" {
				bad("%s: no query", where)
			}
			checkRefs(where+" query", v.QueryString(), before)
			checkRefs(where+" definition", v.Definition, before)
		}
		before[v.Name] = true
	}

	// Panels.
	ids := map[int]string{}
	used := map[string]bool{}
	for _, p := range d.AllPanels() {
		where := fmt.Sprintf("panel %q", p.Title)
		if p.ID == nil {
			bad("%s: no id", where)
		} else {
			where = fmt.Sprintf("panel %d %q", *p.ID, p.Title)
			if other, dup := ids[*p.ID]; dup {
				bad("%s: id also used by %s", where, other)
			}
			ids[*p.ID] = where
		}
		if p.Title == "" {
			bad("%s: no title", where)
		}
		checkRefs(where+" title", p.Title, declared)
		if g := p.GridPos; g == nil {
			bad("%s: no gridPos", where)
		} else {
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				bad("%s: gridPos %+v outside the 24-column grid", where, *g)
			}
		}
		if p.Type == "row" {
			continue
		}
		plugin := checkDS(where, p.Datasource)
		if len(p.Targets) == 0 {
			bad("%s: no targets", where)
		}
		refIDs := map[string]bool{}
		for _, t := range p.Targets {
			tw := fmt.Sprintf("%s target %s", where, t.RefID)
			if t.RefID == "" || refIDs[t.RefID] {
				bad("%s: missing or repeated refId", tw)
			}
			refIDs[t.RefID] = true
			if len(t.Datasource) > 0 {
				if tp := checkDS(tw, t.Datasource); plugin != "" && tp != "" && tp != plugin {
					bad("%s: a %s target in a %s panel", tw, tp, plugin)
				}
			}
			if strings.TrimSpace(t.Expr) == "" {
				bad("%s: no expr", tw)
			}
			checkRefs(tw, t.Expr, declared)
			checkRefs(tw+" legend", t.LegendFormat, declared)
			uses := false
			for _, r := range Refs(t.Expr) {
				used[r] = true
				uses = uses || queryVars[r]
			}
			if !uses && len(queryVars) > 0 {
				bad("%s: the query uses no template variable: %s", tw, t.Expr)
			}
		}
	}
	// Top-level panels share the grid (a collapsed row's panels are placed
	// when it opens).
	for i, p := range d.Panels {
		for _, o := range d.Panels[:i] {
			if p.GridPos != nil && o.GridPos != nil && overlap(*p.GridPos, *o.GridPos) {
				bad("panel %d %q: gridPos %+v overlaps panel %d %q at %+v", derefID(p.ID), p.Title, *p.GridPos, derefID(o.ID), o.Title, *o.GridPos)
			}
		}
	}
	for name := range queryVars {
		if !used[name] {
			bad("variable %s is used by no panel query", name)
		}
	}

	// Annotations.
	for _, a := range d.Annotations.List {
		where := fmt.Sprintf("annotation %q", a.Name)
		if a.Name == "" {
			bad("an annotation has no name")
		}
		if a.BuiltIn != 0 {
			if ds, err := ParseDS(a.Datasource); err != nil || ds.Type != "grafana" {
				bad("%s: a built-in annotation must use the grafana datasource", where)
			}
			continue
		}
		checkDS(where, a.Datasource)
		if len(a.Filter) > 0 && string(a.Filter) != "null" {
			bad("%s: a panel filter %s: the annotation would be missing from some panels", where, a.Filter)
		}
		if strings.TrimSpace(a.Expr) == "" {
			bad("%s: no expr", where)
		}
		checkRefs(where, a.Expr, declared)
		checkRefs(where+" title", a.TitleFormat, declared)
		checkRefs(where+" text", a.TextFormat, declared)
	}
	return problems
}

func overlap(a, b GridPos) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}
