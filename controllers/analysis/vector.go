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
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Series is one series of a vector or range-query result.
type Series struct {
	// Key names the series by its labels, sorted, without __name__:
	// "host=xavier-b,peer=xavier-a"; "" for a series without labels.
	Key string
	// Labels are the series' labels.
	Labels map[string]string
	// Value is the series' value in an instant vector.
	Value float64
	// Values are the series' values of a range query, in time order, NaN
	// values left out.
	Values []float64
}

// VectorQuerier runs queries that return one value per series (instant
// vectors) or a list of values per series (range queries), for analyses
// that judge per host pair. The Loki and Prometheus clients implement it.
type VectorQuerier interface {
	// QueryVector runs an instant query at at. NaN samples are left out.
	QueryVector(ctx context.Context, query string, at time.Time) ([]Series, error)
	// QueryRange runs a range query from start to end every step.
	QueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) ([]Series, error)
}

// QueryVector implements VectorQuerier.
func (h *httpQuerier) QueryVector(ctx context.Context, query string, at time.Time) ([]Series, error) {
	r, err := h.get(ctx, h.endpoint, h.instantParams(query, at))
	if err != nil {
		return nil, err
	}
	switch r.Data.ResultType {
	case "vector":
	case "scalar":
		v, ok, err := parseSample(r.Data.Result)
		if err != nil || !ok {
			return nil, err
		}
		return []Series{{Value: v}}, nil
	default:
		return nil, fmt.Errorf("%s query: %w", h.provider, resultTypeError(r.Data.ResultType))
	}
	var vec []struct {
		Metric map[string]string `json:"metric"`
		Value  json.RawMessage   `json:"value"`
	}
	if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
		return nil, fmt.Errorf("%s query: decoding vector result: %w", h.provider, err)
	}
	out := make([]Series, 0, len(vec))
	for _, s := range vec {
		v, ok, err := parseSample(s.Value)
		if err != nil {
			return nil, fmt.Errorf("%s query: %w", h.provider, err)
		}
		if ok {
			out = append(out, Series{Key: SeriesKey(s.Metric), Labels: s.Metric, Value: v})
		}
	}
	return out, nil
}

// QueryRange implements VectorQuerier.
func (h *httpQuerier) QueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) ([]Series, error) {
	if step <= 0 {
		return nil, fmt.Errorf("%s range query: step %s must be positive", h.provider, step)
	}
	params := url.Values{
		"query": {query},
		"start": {h.timeArg(start)},
		"end":   {h.timeArg(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	r, err := h.get(ctx, strings.TrimSuffix(h.endpoint, "/query")+"/query_range", params)
	if err != nil {
		return nil, err
	}
	if r.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("%s range query: %w", h.provider, resultTypeError(r.Data.ResultType))
	}
	var mat []struct {
		Metric map[string]string `json:"metric"`
		Values []json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(r.Data.Result, &mat); err != nil {
		return nil, fmt.Errorf("%s range query: decoding matrix result: %w", h.provider, err)
	}
	out := make([]Series, 0, len(mat))
	for _, s := range mat {
		ser := Series{Key: SeriesKey(s.Metric), Labels: s.Metric}
		for _, raw := range s.Values {
			v, ok, err := parseSample(raw)
			if err != nil {
				return nil, fmt.Errorf("%s range query: %w", h.provider, err)
			}
			if ok && !math.IsInf(v, 0) {
				ser.Values = append(ser.Values, v)
			}
		}
		out = append(out, ser)
	}
	return out, nil
}

// SeriesKey renders a label set as "k=v,k=v", sorted by key, without
// __name__.
func SeriesKey(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ",")
}
