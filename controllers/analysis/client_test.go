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
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Response bodies as Loki 3.x and Prometheus 2.42 return them.
const (
	lokiVector    = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1718000000.123,"23.4"]}],"stats":{"summary":{"bytesProcessedPerSecond":2210851,"linesProcessedPerSecond":31214,"totalBytesProcessed":141558,"totalLinesProcessed":1998,"execTime":0.064008,"queueTime":0.000082,"subqueries":0,"totalEntriesReturned":1,"splits":1,"shards":1,"totalPostFilterLines":1998,"totalStructuredMetadataBytesProcessed":0},"querier":{"store":{"totalChunksRef":0,"totalChunksDownloaded":0,"chunksDownloadTime":0}},"ingester":{"totalReached":1,"totalChunksMatched":2,"totalBatches":2,"totalLinesSent":1998}}}}`
	lokiTwoSeries = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"vehicle":"av-001"},"value":[1718000000.123,"17.25"]},{"metric":{"vehicle":"av-002"},"value":[1718000000.123,"99"]}],"stats":{}}}`
	lokiEmpty     = `{"status":"success","data":{"resultType":"vector","result":[],"stats":{"summary":{"totalLinesProcessed":0}}}}`
	lokiScalar    = `{"status":"success","data":{"resultType":"scalar","result":[1718000000.123,"4"],"stats":{}}}`
	lokiStreams   = `{"status":"success","data":{"resultType":"streams","result":[{"stream":{"job":"nettune-probe","revision":"r2","vehicle":"av-001"},"values":[["1718000000123456789","{\"latency_ms\": 12.5}"],["1718000000023456789","{\"latency_ms\": 11.0}"]]}],"stats":{}}}`
	lokiParseErr  = "parse error at line 1, col 37: syntax error: unexpected IDENTIFIER, expecting STRING\n"

	promVector = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1718000000.5,"19.950000000000003"]}]}}`
	promNaN    = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1718000000.5,"NaN"]}]}}`
	promInf    = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1718000000.5,"+Inf"]}]}}`
	promScalar = `{"status":"success","data":{"resultType":"scalar","result":[1718000000.5,"1e3"]}}`
	promEmpty  = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	promMatrix = `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up"},"values":[[1718000000,"1"],[1718000001,"1"]]}]}}`
	promBad    = `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error: unexpected <op:|>"}`
	promTmo    = `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`
	promStrRes = `{"status":"success","data":{"resultType":"string","result":[1718000000.5,"hello"]}}`
)

type recorded struct {
	path  string
	query url.Values
}

func server(t *testing.T, status int, contentType, body string) (*httptest.Server, *recorded) {
	t.Helper()
	rec := &recorded{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			t.Errorf("method = %s, want GET", r.Method)
		}
		rec.path, rec.query = r.URL.Path, r.URL.Query()
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, rec
}

func TestQueriers(t *testing.T) {
	at := time.Unix(1718000000, 123456789).UTC()
	longBody := strings.Repeat("x", 600)
	tests := []struct {
		name        string
		prom        bool
		status      int
		contentType string
		body        string
		wantValue   float64
		wantOK      bool
		wantErr     string // exact error text
	}{
		{name: "loki vector", body: lokiVector, wantValue: 23.4, wantOK: true},
		{name: "loki first series of several", body: lokiTwoSeries, wantValue: 17.25, wantOK: true},
		{name: "loki empty vector", body: lokiEmpty},
		{name: "loki scalar", body: lokiScalar, wantValue: 4, wantOK: true},
		{name: "loki streams", body: lokiStreams,
			wantErr: "loki query: query returned log lines, not a metric (wrap it in a range aggregation such as count_over_time or quantile_over_time)"},
		{name: "loki 400 text body", status: 400, contentType: "text/plain; charset=utf-8", body: lokiParseErr,
			wantErr: "loki query: HTTP 400: parse error at line 1, col 37: syntax error: unexpected IDENTIFIER, expecting STRING"},
		{name: "loki 502 long body truncated", status: 502, contentType: "text/html", body: longBody,
			wantErr: "loki query: HTTP 502: " + strings.Repeat("x", 512) + "...(truncated)"},
		{name: "loki 500 empty body", status: 500,
			wantErr: "loki query: HTTP 500: (empty body)"},
		{name: "loki not json", body: "<html>gateway</html>",
			wantErr: "loki query: decoding response: invalid character '<' looking for beginning of value"},
		{name: "prometheus vector", prom: true, body: promVector, wantValue: 19.950000000000003, wantOK: true},
		{name: "prometheus NaN", prom: true, body: promNaN},
		{name: "prometheus +Inf", prom: true, body: promInf, wantValue: posInf, wantOK: true},
		{name: "prometheus scalar", prom: true, body: promScalar, wantValue: 1000, wantOK: true},
		{name: "prometheus empty vector", prom: true, body: promEmpty},
		{name: "prometheus matrix", prom: true, body: promMatrix,
			wantErr: "prometheus query: query returned a range vector, not an instant value (aggregate it, e.g. with max_over_time)"},
		{name: "prometheus string result", prom: true, body: promStrRes,
			wantErr: `prometheus query: unsupported resultType "string"`},
		{name: "prometheus 400 bad_data", prom: true, status: 400, body: promBad,
			wantErr: `prometheus query: HTTP 400: bad_data: invalid parameter "query": 1:5: parse error: unexpected <op:|>`},
		{name: "prometheus 503 timeout", prom: true, status: 503, body: promTmo,
			wantErr: "prometheus query: HTTP 503: timeout: query timed out in expression evaluation"},
		{name: "prometheus 200 with error status", prom: true, body: promTmo,
			wantErr: "prometheus query: query failed: query timed out in expression evaluation"},
		{name: "prometheus malformed sample", prom: true, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1718000000.5]}]}}`,
			wantErr: "prometheus query: malformed sample [1718000000.5]"},
		{name: "prometheus non-numeric value", prom: true, body: `{"status":"success","data":{"resultType":"scalar","result":[1718000000.5,"abc"]}}`,
			wantErr: `prometheus query: sample value "abc" is not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := tt.status
			if status == 0 {
				status = 200
			}
			ct := tt.contentType
			if ct == "" {
				ct = "application/json"
			}
			srv, rec := server(t, status, ct, tt.body)
			var q Querier
			wantPath, wantTime := "/loki/api/v1/query", "1718000000123456789"
			if tt.prom {
				q = NewPrometheus(srv.URL+"/", nil) // trailing slash tolerated
				wantPath, wantTime = "/api/v1/query", "1718000000.123456789"
			} else {
				q = NewLoki(srv.URL, srv.Client())
			}
			const query = `sum(count_over_time({job="nettune-probe", vehicle=~"av-001|av-002"} [5m]))`
			v, ok, err := q.Query(context.Background(), query, at)
			if rec.path != wantPath {
				t.Errorf("path = %q, want %q", rec.path, wantPath)
			}
			if got := rec.query.Get("query"); got != query {
				t.Errorf("query param = %q, want %q", got, query)
			}
			if got := rec.query.Get("time"); got != wantTime {
				t.Errorf("time param = %q, want %q", got, wantTime)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error\n got %v\nwant %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Query() error: %v", err)
			}
			if ok != tt.wantOK || v != tt.wantValue {
				t.Fatalf("Query() = %v, %v; want %v, %v", v, ok, tt.wantValue, tt.wantOK)
			}
		})
	}
}

func TestQueryTimeParam(t *testing.T) {
	for _, tc := range []struct {
		at       time.Time
		prom     bool
		wantTime string
	}{
		{time.Unix(1718000000, 0), true, "1718000000"},
		{time.Unix(1718000000, 500_000_000), true, "1718000000.5"},
		{time.Unix(1718000000, 1), true, "1718000000.000000001"},
		{time.Unix(1718000000, 0), false, "1718000000000000000"},
		{time.Time{}, true, ""}, // zero: server evaluates at its now
		{time.Time{}, false, ""},
	} {
		srv, rec := server(t, 200, "application/json", promEmpty)
		q := NewLoki(srv.URL, nil)
		if tc.prom {
			q = NewPrometheus(srv.URL, nil)
		}
		if _, _, err := q.Query(context.Background(), "up", tc.at); err != nil {
			t.Fatal(err)
		}
		if got := rec.query.Get("time"); got != tc.wantTime {
			t.Errorf("at=%v prom=%v: time = %q, want %q", tc.at, tc.prom, got, tc.wantTime)
		}
		if _, present := rec.query["time"]; present != (tc.wantTime != "") {
			t.Errorf("at=%v: time param present = %v", tc.at, present)
		}
	}
}

func TestQueryContextCancelled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := NewPrometheus(srv.URL, nil).Query(ctx, "up", time.Now())
	if err == nil || !strings.Contains(err.Error(), "context deadline exceeded") || !strings.HasPrefix(err.Error(), "prometheus query: ") {
		t.Fatalf("error = %v, want a prometheus query error with context deadline exceeded", err)
	}
}

func TestQueryUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	_, _, err := NewLoki(addr, nil).Query(context.Background(), "x", time.Now())
	if err == nil || !strings.HasPrefix(err.Error(), "loki query: ") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error = %v, want loki query ... connection refused", err)
	}
}

var posInf = math.Inf(1)
