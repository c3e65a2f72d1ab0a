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
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/summary.txt from the generated dashboards")

// summaryFile lists what the generated dashboards show, one line per fact:
// a change of meaning (a query, a unit, a threshold, a variable, an
// annotation, a panel moved) shows as a diff of it, whatever produced the
// JSON; field order, ids and defaults the JSON carries besides do not.
const summaryFile = "testdata/summary.txt"

// TestSummary: the generated dashboards show what testdata/summary.txt says
// (`go test ./hack/dashboards -run Summary -update` rewrites it).
func TestSummary(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		lines, err := summarize(path.Base(p), files[p])
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			got.WriteString(l + "\n")
		}
	}
	if *update {
		if err := os.WriteFile(summaryFile, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(summaryFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			g, w := at(gl, i), at(wl, i)
			if g != w {
				t.Fatalf("%s differs from the generated dashboards at line %d:\n  want %s\n  got  %s\n(rerun with -update if the change is meant, and review the diff)",
					filepath.ToSlash(summaryFile), i+1, w, g)
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "<end>"
}

// summarize reads a dashboard's JSON as Grafana would, without this
// package's types, and lists it: the dashboard, its links, variables and
// annotations, then every panel (rows' panels included) with its targets.
func summarize(name string, raw []byte) ([]string, error) {
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, name+" "+fmt.Sprintf(format, args...)) }
	add("dashboard %s", fields(d, "uid", "title", "description", "tags", "editable", "graphTooltip", "refresh", "time", "timezone"))
	for _, l := range list(d["links"]) {
		add("link %s", fields(l, "title", "type", "tags", "asDropdown", "includeVars", "keepTime", "url"))
	}
	for _, v := range list(dig(d, "templating", "list")) {
		add("variable %s", fields(v, "name", "type", "label", "description", "datasource", "query", "definition",
			"multi", "includeAll", "allValue", "refresh", "sort", "regex", "hide"))
	}
	for _, a := range list(dig(d, "annotations", "list")) {
		add("annotation %s", fields(a, "name", "datasource", "expr", "enable", "hide", "iconColor", "titleFormat", "textFormat",
			"tagKeys", "step", "filter", "builtIn"))
	}
	var walk func(ps []map[string]any)
	walk = func(ps []map[string]any) {
		for _, p := range ps {
			add("panel %s", fields(p, "type", "title", "gridPos", "description", "datasource", "transformations"))
			if fc, ok := p["fieldConfig"].(map[string]any); ok {
				add("  fieldConfig %s", fields(map[string]any{
					"defaults":  pick(dig(fc, "defaults"), "unit", "decimals", "min", "max", "thresholds", "color", "mappings"),
					"overrides": fc["overrides"],
				}, "defaults", "overrides"))
			}
			for _, t := range list(p["targets"]) {
				add("  target %s", fields(t, "refId", "datasource", "expr", "legendFormat", "instant", "range", "format", "queryType", "maxLines"))
			}
			walk(list(p["panels"]))
		}
	}
	walk(list(d["panels"]))
	return out, nil
}

func dig(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func list(v any) []map[string]any {
	var out []map[string]any
	items, _ := v.([]any)
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// fields is key=value for each key of m set, values as compact JSON (maps
// with sorted keys). A zero value (null, false, 0, "", [] or {}) is left
// out: Grafana reads it as it reads the field absent.
func fields(m any, keys ...string) string {
	mm, _ := m.(map[string]any)
	var parts []string
	for _, k := range keys {
		if v, ok := mm[k]; ok && !zero(v) {
			parts = append(parts, k+"="+js(v))
		}
	}
	return strings.Join(parts, " ")
}

// pick is m with only the keys given that are set.
func pick(m any, keys ...string) map[string]any {
	mm, _ := m.(map[string]any)
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := mm[k]; ok && !zero(v) {
			out[k] = v
		}
	}
	return out
}

func zero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func js(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
