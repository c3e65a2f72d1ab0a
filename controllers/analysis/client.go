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
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nettune/nettune/internal/text"
)

// Querier runs one instant query and returns a single scalar: the value of
// the first sample of a vector result, or a scalar result. ok is false when
// the result is empty or the value is NaN (e.g. a quantile over no data).
//
// Queries should aggregate to one series (sum, max, quantile ... by ()):
// only the first series of a vector is read.
type Querier interface {
	Query(ctx context.Context, query string, at time.Time) (value float64, ok bool, err error)
}

// DefaultHTTPTimeout bounds a query when NewLoki or NewPrometheus is given a
// nil client and the context has no earlier deadline.
const DefaultHTTPTimeout = 30 * time.Second

// maxErrorBody is how much of an error response body is quoted in the error.
const maxErrorBody = 512

// maxResponseBody bounds how much of a response is read: an instant query
// reduced to one value is small; a stream result can be large.
const maxResponseBody = 16 << 20

type httpQuerier struct {
	provider string // "loki" or "prometheus", for error messages
	endpoint string // full URL of the instant-query API
	client   *http.Client
	timeArg  func(time.Time) string
}

// NewLoki returns a Querier for the Loki instant-query API at address
// (GET {address}/loki/api/v1/query?query=...&time=<unix nanoseconds>).
// A nil client uses a client with DefaultHTTPTimeout.
func NewLoki(address string, client *http.Client) Querier {
	return &httpQuerier{
		provider: "loki",
		endpoint: strings.TrimRight(address, "/") + "/loki/api/v1/query",
		client:   orDefault(client),
		timeArg:  func(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) },
	}
}

// NewPrometheus returns a Querier for the Prometheus instant-query API at
// address (GET {address}/api/v1/query?query=...&time=<unix seconds.fraction>).
// A nil client uses a client with DefaultHTTPTimeout.
func NewPrometheus(address string, client *http.Client) Querier {
	return &httpQuerier{
		provider: "prometheus",
		endpoint: strings.TrimRight(address, "/") + "/api/v1/query",
		client:   orDefault(client),
		timeArg:  promTime,
	}
}

func orDefault(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return &http.Client{Timeout: DefaultHTTPTimeout}
}

// promTime formats t as Prometheus' float unix seconds, exact to the nanosecond.
func promTime(t time.Time) string {
	ns := t.UnixNano()
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	if frac == 0 {
		return strconv.FormatInt(sec, 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", sec, frac), "0")
}

// Query implements Querier. A zero at leaves the evaluation time to the server (now).
func (h *httpQuerier) Query(ctx context.Context, query string, at time.Time) (float64, bool, error) {
	r, err := h.get(ctx, h.endpoint, h.instantParams(query, at))
	if err != nil {
		return 0, false, err
	}
	v, ok, err := parseInstant(r)
	if err != nil {
		return 0, false, fmt.Errorf("%s query: %w", h.provider, err)
	}
	return v, ok, nil
}

func (h *httpQuerier) instantParams(query string, at time.Time) url.Values {
	params := url.Values{"query": {query}}
	if !at.IsZero() {
		params.Set("time", h.timeArg(at))
	}
	return params
}

// get runs one API request and returns its decoded envelope; a non-2xx
// status or an error envelope is an error.
func (h *httpQuerier) get(ctx context.Context, endpoint string, params url.Values) (apiResponse, error) {
	var r apiResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"?"+params.Encode(), nil)
	if err != nil {
		return r, fmt.Errorf("%s query: %w", h.provider, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		// The query string is in the profile already: name the endpoint.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = endpoint
		}
		return r, transportError(ctx, fmt.Errorf("%s query: %w", h.provider, err))
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return r, fmt.Errorf("%s query: reading response: %w", h.provider, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := fmt.Errorf("%s query: HTTP %d: %s", h.provider, resp.StatusCode, errorBody(body))
		if unavailableStatus(resp.StatusCode) {
			return r, Unavailable(err)
		}
		return r, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%s query: decoding response: %w", h.provider, err)
	}
	if r.Status != "success" {
		msg := r.Error
		if msg == "" {
			msg = "status " + strconv.Quote(r.Status)
		}
		return r, fmt.Errorf("%s query: query failed: %s", h.provider, msg)
	}
	return r, nil
}

// errorBody renders an error response body for an error message: the error
// field of a JSON error envelope when there is one, else the raw text, cut to
// maxErrorBody bytes.
func errorBody(body []byte) string {
	var env apiResponse
	if json.Unmarshal(body, &env) == nil && env.Error != "" {
		body = []byte(env.ErrorType + ": " + env.Error)
		if env.ErrorType == "" {
			body = []byte(env.Error)
		}
	}
	s := strings.TrimSpace(string(body))
	// A gateway's HTML error page: its title says it ("401 Authorization
	// Required").
	if strings.HasPrefix(s, "<") {
		if m := htmlTitle.FindStringSubmatch(s); m != nil {
			s = strings.TrimSpace(m[1]) + " (an HTML page)"
		}
	}
	if len(s) > maxErrorBody {
		cut := maxErrorBody
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "...(truncated)"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

var htmlTitle = regexp.MustCompile(`(?is)<title>([^<]*)</title>`)

// apiResponse is the envelope shared by Prometheus and Loki:
//
//	{"status":"success","data":{"resultType":"vector","result":[...]}}
//	{"status":"error","errorType":"bad_data","error":"..."}
type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// parseInstant reads one value out of a successful instant-query response.
func parseInstant(r apiResponse) (float64, bool, error) {
	switch r.Data.ResultType {
	case "vector":
		var vec []struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &vec); err != nil {
			return 0, false, fmt.Errorf("decoding vector result: %w", err)
		}
		if len(vec) == 0 {
			return 0, false, nil
		}
		return parseSample(vec[0].Value)
	case "scalar":
		return parseSample(r.Data.Result)
	}
	return 0, false, resultTypeError(r.Data.ResultType)
}

func resultTypeError(t string) error {
	switch t {
	case "streams":
		return errors.New("query returned log lines, not a metric (wrap it in a range aggregation such as count_over_time or quantile_over_time)")
	case "matrix":
		return errors.New("query returned a range vector, not an instant value (aggregate it, e.g. with max_over_time)")
	case "vector":
		return errors.New("query returned an instant vector where a range query result was expected")
	case "":
		return errors.New("response has no resultType")
	}
	return fmt.Errorf("unsupported resultType %q", t)
}

// parseSample reads a [<unix time>, "<value>"] pair. Values are JSON strings
// so that NaN and ±Inf survive; NaN means "no value".
func parseSample(raw json.RawMessage) (float64, bool, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return 0, false, fmt.Errorf("malformed sample %s", text.Truncate(string(raw), 64))
	}
	var s string
	if err := json.Unmarshal(pair[1], &s); err != nil {
		return 0, false, fmt.Errorf("malformed sample value %s", text.Truncate(string(pair[1]), 64))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("sample value %q is not a number", text.Truncate(s, 64))
	}
	if math.IsNaN(v) {
		return 0, false, nil
	}
	return v, true, nil
}
