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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Runner runs queries as Grafana would over the time range [Start, End]:
// range queries with Step (their last point at End, so that what happened
// just before End shows), instant queries at End, log queries newest first,
// label_values() through the label values APIs.
type Runner struct {
	LokiURL, PrometheusURL string
	Start, End             time.Time
	Step                   time.Duration
	Client                 *http.Client
}

// Vars are Grafana's built-in variables for the runner's range, as Grafana
// would set them for a panel of about (End-Start)/Step points:
// $__interval = Step, $__rate_interval = max(4 x scrape interval, Step +
// scrape interval) with scrape the Prometheus scrape interval, $__range.
func (r *Runner) Vars(scrape time.Duration) map[string]string {
	rng := r.End.Sub(r.Start).Round(time.Second)
	rate := max(4*scrape, r.Step+scrape)
	return map[string]string{
		"__interval":         promDuration(r.Step),
		"__interval_ms":      strconv.FormatInt(r.Step.Milliseconds(), 10),
		"__rate_interval":    promDuration(rate),
		"__rate_interval_ms": strconv.FormatInt(rate.Milliseconds(), 10),
		"__range":            promDuration(rng),
		"__range_s":          strconv.FormatInt(int64(rng.Seconds()), 10),
		"__range_ms":         strconv.FormatInt(rng.Milliseconds(), 10),
		"__from":             strconv.FormatInt(r.Start.UnixMilli(), 10),
		"__to":               strconv.FormatInt(r.End.UnixMilli(), 10),
	}
}

func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// Result is what a query returned.
type Result struct {
	// Series is the number of series (or streams, or label values).
	Series int
	// Points is the number of values that are numbers (not NaN), or log
	// lines, or label values.
	Points int
	// Max is the largest number returned (metric queries).
	Max float64
	// Values are the label values of a KindLabelValues query.
	Values []string
	// Labels are the labels of each series of a metric query, or of each
	// line of a log query (its stream's, with what the pipeline extracted),
	// in the order returned.
	Labels []map[string]string
	// Sample describes the first series, for the test log.
	Sample string
}

// Empty is true when the query returned nothing a panel would draw.
func (r Result) Empty() bool { return r.Series == 0 || r.Points == 0 }

// Run executes q with the variables of vars substituted (the built-ins
// included); an error is a query the server refused or could not answer.
func (r *Runner) Run(ctx context.Context, q Query, vars map[string]string) (string, Result, error) {
	expr, err := Substitute(q.Expr, vars)
	if err != nil {
		return "", Result{}, err
	}
	var res Result
	switch {
	case q.Kind == KindLabelValues:
		res, err = r.labelValues(ctx, q.Datasource, expr, q.Label)
	case q.Datasource == "prometheus":
		res, err = r.prometheus(ctx, expr, q.Kind)
	case q.Datasource == "loki":
		res, err = r.loki(ctx, expr, q.Kind)
	default:
		err = fmt.Errorf("unknown datasource %q", q.Datasource)
	}
	return expr, res, err
}

func (r *Runner) client() *http.Client {
	if r.Client != nil {
		return r.Client
	}
	return &http.Client{Timeout: 60 * time.Second}
}

func (r *Runner) get(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body[:min(len(body), 2048)])))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding %s: %w", body[:min(len(body), 200)], err)
	}
	return nil
}

// rangeStart is the first point of range queries: at or after Start, a
// whole number of steps before End.
func (r *Runner) rangeStart() time.Time {
	return r.End.Add(-r.End.Sub(r.Start) / r.Step * r.Step)
}

func secs(t time.Time) string  { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }
func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// apiResponse is the shape of both APIs' query answers.
type apiResponse struct {
	Status string `json:"status"`
	Data   struct {
		ResultType string            `json:"resultType"`
		Result     []json.RawMessage `json:"result"`
	} `json:"data"`
}

type seriesResult struct {
	Metric map[string]string `json:"metric"`
	Stream map[string]string `json:"stream"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

func (r *Runner) prometheus(ctx context.Context, expr, kind string) (Result, error) {
	v := url.Values{"query": {expr}}
	path := "/api/v1/query_range"
	if kind == KindInstant {
		path = "/api/v1/query"
		v.Set("time", secs(r.End))
	} else {
		v.Set("start", secs(r.rangeStart()))
		v.Set("end", secs(r.End))
		v.Set("step", strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64))
	}
	var resp apiResponse
	if err := r.get(ctx, strings.TrimRight(r.PrometheusURL, "/")+path+"?"+v.Encode(), &resp); err != nil {
		return Result{}, err
	}
	return summarize(resp)
}

func (r *Runner) loki(ctx context.Context, expr, kind string) (Result, error) {
	v := url.Values{"query": {expr}}
	path := "/loki/api/v1/query_range"
	switch kind {
	case KindInstant:
		path = "/loki/api/v1/query"
		v.Set("time", nanos(r.End))
	case KindLogs:
		v.Set("start", nanos(r.Start))
		v.Set("end", nanos(r.End))
		v.Set("limit", "100")
		v.Set("direction", "backward")
	default:
		v.Set("start", nanos(r.rangeStart()))
		v.Set("end", nanos(r.End))
		v.Set("step", strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64))
	}
	var resp apiResponse
	if err := r.get(ctx, strings.TrimRight(r.LokiURL, "/")+path+"?"+v.Encode(), &resp); err != nil {
		return Result{}, err
	}
	if kind == KindLogs && resp.Data.ResultType != "streams" {
		return Result{}, fmt.Errorf("a log query answered %q, not streams", resp.Data.ResultType)
	}
	if kind != KindLogs && resp.Data.ResultType == "streams" {
		return Result{}, fmt.Errorf("a metric panel's query answered log streams")
	}
	return summarize(resp)
}

// summarize counts the series and the points that are numbers (or lines).
func summarize(resp apiResponse) (Result, error) {
	if resp.Status != "success" {
		return Result{}, fmt.Errorf("status %q", resp.Status)
	}
	res := Result{Max: math.Inf(-1)}
	for _, raw := range resp.Data.Result {
		var s seriesResult
		if err := json.Unmarshal(raw, &s); err != nil {
			return Result{}, fmt.Errorf("decoding a %s result: %w", resp.Data.ResultType, err)
		}
		res.Series++
		labels := s.Metric
		if s.Stream != nil {
			labels = s.Stream
			for range s.Values {
				res.Labels = append(res.Labels, labels)
			}
		} else {
			res.Labels = append(res.Labels, labels)
		}
		points := 0
		last := ""
		count := func(v []any) {
			if len(v) != 2 {
				return
			}
			str, _ := v[1].(string)
			if resp.Data.ResultType == "streams" {
				points++
				last = str
				return
			}
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) {
				points++
				last = str
				res.Max = max(res.Max, f)
			}
		}
		if s.Value != nil {
			count(s.Value)
		}
		for _, v := range s.Values {
			count(v)
		}
		res.Points += points
		if res.Sample == "" && points > 0 {
			if len(last) > 160 {
				last = last[:160] + "..."
			}
			res.Sample = fmt.Sprintf("%v %s", labels, last)
		}
	}
	return res, nil
}

func (r *Runner) labelValues(ctx context.Context, datasource, selector, label string) (Result, error) {
	var u string
	v := url.Values{}
	switch datasource {
	case "prometheus":
		v.Set("start", secs(r.Start))
		v.Set("end", secs(r.End))
		if selector != "" {
			v.Set("match[]", selector)
		}
		u = strings.TrimRight(r.PrometheusURL, "/") + "/api/v1/label/" + url.PathEscape(label) + "/values?" + v.Encode()
	case "loki":
		v.Set("start", nanos(r.Start))
		v.Set("end", nanos(r.End))
		if selector != "" {
			v.Set("query", selector)
		}
		u = strings.TrimRight(r.LokiURL, "/") + "/loki/api/v1/label/" + url.PathEscape(label) + "/values?" + v.Encode()
	default:
		return Result{}, fmt.Errorf("unknown datasource %q", datasource)
	}
	var resp struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := r.get(ctx, u, &resp); err != nil {
		return Result{}, err
	}
	if resp.Status != "success" {
		return Result{}, fmt.Errorf("status %q", resp.Status)
	}
	return Result{Series: len(resp.Data), Points: len(resp.Data), Values: resp.Data, Sample: strings.Join(resp.Data, ", ")}, nil
}

// Outcome is one query run by RunAll.
type Outcome struct {
	Query Query
	// Expr is the query as sent (variables substituted).
	Expr   string
	Result Result
	Err    error
	Took   time.Duration
}

// Failed says why the outcome fails the check, "" when it passes: the
// query must run and return something a panel would draw; a variable's
// values must include the value vars gives it, each of them when vars
// chooses several as a regex alternation ("a|b", as Grafana substitutes a
// multi-value variable).
func (o Outcome) Failed(vars map[string]string) string {
	switch {
	case o.Err != nil:
		return o.Err.Error()
	case o.Result.Empty():
		return "empty result"
	case o.Query.Kind == KindLabelValues && vars[o.Query.Variable] != "":
		for _, v := range strings.Split(vars[o.Query.Variable], "|") {
			if !slices.Contains(o.Result.Values, v) {
				return fmt.Sprintf("values %v lack %q", o.Result.Values, v)
			}
		}
	}
	return ""
}

// RunAll runs every query of the dashboards, one at a time.
func (r *Runner) RunAll(ctx context.Context, ds []*Dashboard, vars map[string]string) ([]Outcome, error) {
	var out []Outcome
	for _, d := range ds {
		qs, err := d.Queries()
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			began := time.Now()
			qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			expr, res, err := r.Run(qctx, q, vars)
			cancel()
			out = append(out, Outcome{Query: q, Expr: expr, Result: res, Err: err, Took: time.Since(began)})
		}
	}
	return out, nil
}
