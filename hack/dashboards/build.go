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
// (charts/nettune/dashboards/*.json) with Grafana's Go SDK
// (github.com/grafana/grafana-foundation-sdk/go): `go run
// ./hack/dashboards/gen` writes them, and this package's test fails when the
// committed files differ from what it generates.
//
// The dashboards name no datasource UID: every panel, query, variable and
// annotation refers to the datasource variables DS_PROMETHEUS and DS_LOKI,
// so they import into any Grafana as they are.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"sort"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/logs"
	"github.com/grafana/grafana-foundation-sdk/go/loki"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Dir is where the dashboards are committed, relative to the repository root.
const Dir = "charts/nettune/dashboards"

// The datasource references: the datasource variables, never a UID.
var (
	promDS = dashboard.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${DS_PROMETHEUS}")}
	lokiDS = dashboard.DataSourceRef{Type: cog.ToPtr("loki"), Uid: cog.ToPtr("${DS_LOKI}")}
)

// The dashboard (v1) schema is the JSON model Grafana's import and its
// provisioning sidecar read, from Grafana 10 on; the SDK marks it deprecated
// in favor of dashboardv2, the resource of Grafana 12's dashboard API, which
// neither reads.
type (
	dashboardBuilder = dashboard.DashboardBuilder //nolint:staticcheck // v1 is what the chart's Grafana imports, see above
	dashboardModel   = dashboard.Dashboard        //nolint:staticcheck // v1 is what the chart's Grafana imports, see above
)

// all returns the builder of every dashboard by file name.
func all() map[string]*dashboardBuilder {
	return map[string]*dashboardBuilder{
		"rollout-health.json": rolloutHealth(),
		"vehicle.json":        vehicle(),
		"experiment.json":     experiment(),
	}
}

// Files builds and renders every dashboard: path (under Dir) -> JSON.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	boards := all()
	names := make([]string, 0, len(boards))
	for n := range boards {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d, err := boards[n].Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		b, err := render(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[path.Join(Dir, n)] = b
	}
	return out, nil
}

// render is a dashboard's JSON as committed: keys sorted, two-space indent,
// a final newline, no HTML escaping (queries keep their < > &). The SDK's
// own marshalers escape HTML, so its JSON is decoded and encoded again.
func render(d dashboardModel) ([]byte, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// board is a dashboard being built: the SDK's builder, and the grid the
// panels are laid out on left to right, top to bottom (a panel that does not
// fit in what is left of the line starts the next one), numbered in order.
type board struct {
	*dashboardBuilder
	id         uint32
	x, y, rowH uint32
}

func newBoard(uid, title, description string, vars ...cog.Builder[dashboard.VariableModel]) *board {
	d := dashboard.NewDashboardBuilder(title) //nolint:staticcheck // v1 is what the chart's Grafana imports, see dashboardBuilder
	d.Uid(uid).Description(description).Tags([]string{"nettune"}).Editable().Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").Time("now-1h", "now").Timezone("browser").Version(1).
		Link(dashboard.NewDashboardLinkBuilder("nettune").Type(dashboard.DashboardLinkTypeDashboards).Tags([]string{"nettune"}).KeepTime(true)).
		WithVariable(dsVar("DS_PROMETHEUS", "Prometheus", "prometheus")).
		WithVariable(dsVar("DS_LOKI", "Loki", "loki"))
	for _, v := range vars {
		d.WithVariable(v)
	}
	return &board{dashboardBuilder: d}
}

// annotate adds annotation queries.
func (b *board) annotate(as ...*dashboard.AnnotationQueryBuilder) {
	for _, a := range as {
		b.Annotation(a)
	}
}

// row starts a new (expanded) row.
func (b *board) row(title string) {
	b.newline()
	b.id++
	b.WithRow(dashboard.NewRowBuilder(title).Id(b.id).Collapsed(false).GridPos(dashboard.GridPos{H: 1, W: 24, X: 0, Y: b.y}))
	b.y++
}

func (b *board) newline() {
	if b.x > 0 {
		b.y += b.rowH
	}
	b.x, b.rowH = 0, 0
}

// panelBuilder is what every panel builder of the SDK offers.
type panelBuilder[T any] interface {
	cog.Builder[dashboard.Panel]
	Id(id uint32) T
	GridPos(gridPos dashboard.GridPos) T
}

// place puts panel p on b, w columns wide and h high.
func place[T panelBuilder[T]](b *board, p T, w, h uint32) {
	if b.x+w > 24 {
		b.newline()
	}
	b.id++
	p.Id(b.id)
	p.GridPos(dashboard.GridPos{H: h, W: w, X: b.x, Y: b.y})
	b.x += w
	b.rowH = max(b.rowH, h)
	b.WithPanel(p)
}

// Variables.

func dsVar(name, label, plugin string) *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder(name).Label(label).Type(plugin)
}

// promVar is a Prometheus label_values() variable.
func promVar(name, label, query, description string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Description(description).
		Datasource(promDS).Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
}

// multi lets the variable take several values, All by default; allValue ""
// lets Grafana join every value into a regexp.
func multi(v *dashboard.QueryVariableBuilder, allValue string) *dashboard.QueryVariableBuilder {
	v.Multi(true).IncludeAll(true)
	if allValue != "" {
		v.AllValue(allValue)
	}
	return v
}

// Annotations. None has a panel filter: each is drawn on every panel.

// lokiAnnotation marks the log lines of expr: titled and described by
// title and text (templates of the lines' labels and extracted fields),
// tagged with the labels of tags.
func lokiAnnotation(name, color, expr, title, text, tags string) *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().Name(name).Datasource(lokiDS).Enable(true).Hide(false).IconColor(color).
		Expr(expr).TitleFormat(title).TextFormat(text).TagKeys(tags)
}

// promAnnotation marks, as a region, each stretch of time where expr is
// above 0 (Grafana joins the points at most step apart).
func promAnnotation(name, color, expr, step, title, text string) *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().Name(name).Datasource(promDS).Enable(true).Hide(false).IconColor(color).
		Expr(expr).Step(step).TitleFormat(title).TextFormat(text)
}

// Targets.

// query is a panel target: a Prometheus or a Loki query.
type query struct {
	prom *prometheus.DataqueryBuilder
	loki *loki.DataqueryBuilder
}

func promQuery(expr, legend string) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().Datasource(promDS).EditorMode(prometheus.QueryEditorModeCode).Expr(expr)
	if legend != "" {
		q.LegendFormat(legend)
	}
	return q
}

func promRange(expr, legend string) query { return query{prom: promQuery(expr, legend).Range()} }

func promInstant(expr, legend string) query { return query{prom: promQuery(expr, legend).Instant()} }

func promTable(expr string) query {
	return query{prom: promQuery(expr, "").Instant().Format(prometheus.PromQueryFormatTable)}
}

func lokiQuery(expr, legend string, typ loki.LokiQueryType) *loki.DataqueryBuilder {
	q := loki.NewDataqueryBuilder().Datasource(lokiDS).EditorMode(loki.QueryEditorModeCode).Expr(expr).QueryType(string(typ)).
		Range(typ == loki.LokiQueryTypeRange).Instant(typ == loki.LokiQueryTypeInstant)
	if legend != "" {
		q.LegendFormat(legend)
	}
	return q
}

func lokiRange(expr, legend string) query {
	return query{loki: lokiQuery(expr, legend, loki.LokiQueryTypeRange)}
}

func lokiInstant(expr, legend string) query {
	return query{loki: lokiQuery(expr, legend, loki.LokiQueryTypeInstant)}
}

func lokiLogs(expr string) query {
	return query{loki: lokiQuery(expr, "", loki.LokiQueryTypeRange).MaxLines(500)}
}

// targets names the queries A, B, ... and returns them with the datasource
// of the first, the panel's.
func targets(qs []query) (dashboard.DataSourceRef, []cog.Builder[variants.Dataquery]) {
	var ds dashboard.DataSourceRef
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		ref := string(rune('A' + i))
		qds := lokiDS
		if q.prom != nil {
			qds = promDS
			out[i] = q.prom.RefId(ref)
		} else {
			out[i] = q.loki.RefId(ref)
		}
		if i == 0 {
			ds = qds
		}
	}
	return ds, out
}

// Panels.

// greenBase is the thresholds of every panel: one base step, green.
func greenBase() *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).
		Steps([]dashboard.Threshold{{Color: "green", Value: nil}})
}

func colors(mode dashboard.FieldColorModeId) *dashboard.FieldColorBuilder {
	return dashboard.NewFieldColorBuilder().Mode(mode)
}

type seriesStyle int

const (
	lines seriesStyle = iota
	bars
	stacked
	steps
)

func timeseriesPanel(title, description, unit string, style seriesStyle, qs ...query) *timeseries.PanelBuilder {
	ds, ts := targets(qs)
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Datasource(ds).Targets(ts).
		ColorScheme(colors(dashboard.FieldColorModeIdPaletteClassic)).Thresholds(greenBase()).
		DrawStyle(common.GraphDrawStyleLine).LineInterpolation(common.LineInterpolationLinear).LineWidth(1).FillOpacity(0).
		PointSize(4).ShowPoints(common.VisibilityModeNever).SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		AxisPlacement(common.AxisPlacementAuto).
		Stacking(common.NewStackingConfigBuilder().Group("A").Mode(common.StackingModeNone)).
		Legend(common.NewVizLegendOptionsBuilder().Calcs([]string{"max", "lastNotNull"}).DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementRight).ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	if unit != "" {
		p.Unit(unit)
	}
	switch style {
	case bars:
		p.DrawStyle(common.GraphDrawStyleBars).FillOpacity(80)
	case stacked:
		p.FillOpacity(40).LineInterpolation(common.LineInterpolationStepAfter).
			Stacking(common.NewStackingConfigBuilder().Group("A").Mode(common.StackingModeNormal))
	case steps:
		p.LineInterpolation(common.LineInterpolationStepAfter)
	}
	return p
}

// dashed draws the series whose name matches regexp re dashed and red (a
// threshold).
func dashed(p *timeseries.PanelBuilder, re string) *timeseries.PanelBuilder {
	return p.OverrideByRegexp(re, []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: common.LineStyle{Dash: []float64{10, 10}, Fill: cog.ToPtr(common.LineStyleFillDash)}},
		{Id: "color", Value: dashboard.FieldColor{Mode: dashboard.FieldColorModeIdFixed, FixedColor: cog.ToPtr("red")}},
	})
}

func statPanel(title, description, unit string, textMode common.BigValueTextMode, qs ...query) *stat.PanelBuilder {
	ds, ts := targets(qs)
	p := stat.NewPanelBuilder().Title(title).Description(description).Datasource(ds).Targets(ts).
		ColorScheme(colors(dashboard.FieldColorModeIdThresholds)).Thresholds(greenBase()).
		ColorMode(common.BigValueColorModeValue).GraphMode(common.BigValueGraphModeNone).JustifyMode(common.BigValueJustifyModeAuto).
		Orientation(common.VizOrientationAuto).TextMode(textMode).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false))
	if unit != "" {
		p.Unit(unit)
	}
	return p
}

// tablePanel shows instant queries as rows, without the time column.
func tablePanel(title, description, unit string, qs ...query) *table.PanelBuilder {
	ds, ts := targets(qs)
	p := table.NewPanelBuilder().Title(title).Description(description).Datasource(ds).Targets(ts).
		ColorScheme(colors(dashboard.FieldColorModeIdPaletteClassic)).Thresholds(greenBase()).
		Align(common.FieldTextAlignmentAuto).
		CellOptions(common.TableCellOptions{TableAutoCellOptions: &common.TableAutoCellOptions{Type: common.TableCellDisplayModeAuto}}).
		ShowHeader(true).CellHeight(common.TableCellHeightSm).Footer(common.NewTableFooterOptionsBuilder().Show(false)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true, "__name__": true, "job": true, "instance": true},
		}})
	if unit != "" {
		p.Unit(unit)
	}
	return p
}

func logsPanel(title, description string, q query) *logs.PanelBuilder {
	ds, ts := targets([]query{q})
	return logs.NewPanelBuilder().Title(title).Description(description).Datasource(ds).Targets(ts).
		DedupStrategy(common.LogsDedupStrategyNone).EnableLogDetails(true).PrettifyLogMessage(false).ShowCommonLabels(false).
		ShowLabels(false).ShowTime(true).SortOrder(common.LogsSortOrderDescending).WrapLogMessage(true)
}

// stateTimeline shows which series is at 1 over time (e.g. the phase).
func stateTimeline(title, description string, qs ...query) *statetimeline.PanelBuilder {
	ds, ts := targets(qs)
	return statetimeline.NewPanelBuilder().Title(title).Description(description).Datasource(ds).Targets(ts).
		ColorScheme(colors(dashboard.FieldColorModeIdThresholds)).Thresholds(greenBase()).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Color: cog.ToPtr("transparent"), Index: cog.ToPtr[int32](0), Text: cog.ToPtr(" ")},
				"1": {Color: cog.ToPtr("blue"), Index: cog.ToPtr[int32](1), Text: cog.ToPtr("active")},
			}}}}).
		FillOpacity(80).LineWidth(0).
		AlignValue(common.TimelineValueAlignmentLeft).MergeValues(true).RowHeight(0.9).ShowValue(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(false)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone))
}
