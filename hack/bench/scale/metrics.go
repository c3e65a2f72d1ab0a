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

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
)

// sample is one series of a scraped metric.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape GETs a Prometheus text endpoint and parses its samples.
func scrape(ctx context.Context, hc *http.Client, url string) ([]sample, error) {
	body, err := fetch(ctx, hc, url)
	if err != nil {
		return nil, err
	}
	return parseSamples(body, nil), nil
}

// parseSamples parses the Prometheus text exposition format, keeping the
// metrics keep accepts (every one when nil). Malformed lines are skipped.
func parseSamples(body []byte, keep func(name string) bool) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSample(line, keep)
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// parseSample parses one `name{l="v",...} value [timestamp]` line.
func parseSample(line string, keep func(string) bool) (sample, bool) {
	end := strings.IndexAny(line, "{ ")
	if end <= 0 {
		return sample{}, false
	}
	s := sample{name: line[:end], labels: map[string]string{}}
	if keep != nil && !keep(s.name) {
		return sample{}, false
	}
	rest := line[end:]
	if rest[0] == '{' {
		var ok bool
		if rest, ok = parseLabels(rest[1:], s.labels); !ok {
			return sample{}, false
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return sample{}, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return sample{}, false
	}
	s.value = v
	return s, true
}

// parseLabels reads `l="v",...}` into into and returns what follows the
// closing brace.
func parseLabels(s string, into map[string]string) (string, bool) {
	for {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			return "", false
		}
		if s[0] == '}' {
			return s[1:], true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return "", false
		}
		name := strings.TrimSpace(s[:eq])
		var val strings.Builder
		i := eq + 2
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			val.WriteByte(s[i])
		}
		if i >= len(s) {
			return "", false
		}
		into[name] = val.String()
		s = s[i+1:]
	}
}

// reqKey is one kind of API request: verb, resource (with its subresource)
// and response code.
type reqKey struct {
	verb, resource, code string
}

// requestCounts are apiserver_request_total by reqKey.
type requestCounts map[reqKey]float64

// apiserverRequests scrapes apiserver_request_total from the kube-apiserver.
func apiserverRequests(ctx context.Context, hc *http.Client, host string) (requestCounts, error) {
	body, err := fetch(ctx, hc, strings.TrimSuffix(host, "/")+"/metrics")
	if err != nil {
		return nil, err
	}
	out := requestCounts{}
	for _, s := range parseSamples(body, func(n string) bool { return n == "apiserver_request_total" }) {
		res := s.labels["resource"]
		if res == "" {
			res = "(non-resource)"
		}
		if sub := s.labels["subresource"]; sub != "" {
			res += "/" + sub
		}
		out[reqKey{verb: s.labels["verb"], resource: res, code: s.labels["code"]}] += s.value
	}
	return out, nil
}

// minus is c - before, per key (counters only grow; a key missing before
// counts from zero).
func (c requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// total sums the requests keep accepts (every one when nil).
func (c requestCounts) total(keep func(reqKey) bool) float64 {
	t := 0.0
	for k, v := range c {
		if keep == nil || keep(k) {
			t += v
		}
	}
	return t
}

// isWrite says whether a request's verb changes state.
func isWrite(k reqKey) bool {
	switch k.verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// isConflict says whether a request was answered 409 Conflict.
func isConflict(k reqKey) bool { return k.code == "409" }

// kindCount is the requests of one verb and resource.
type kindCount struct {
	kind  string // "VERB resource"
	count float64
}

// byKind sums c by verb and resource, keep-filtered, largest first.
func (c requestCounts) byKind(keep func(reqKey) bool) []kindCount {
	sums := map[string]float64{}
	for k, v := range c {
		if keep == nil || keep(k) {
			sums[k.verb+" "+k.resource] += v
		}
	}
	out := make([]kindCount, 0, len(sums))
	for k, v := range sums {
		out = append(out, kindCount{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].kind < out[j].kind
	})
	return out
}

// reconcileCounts scrapes controller_runtime_reconcile_total by controller
// (every result) from the controller's metrics endpoint.
func reconcileCounts(ctx context.Context, url string) (map[string]float64, error) {
	samples, err := scrape(ctx, http.DefaultClient, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		if s.name == "controller_runtime_reconcile_total" {
			out[s.labels["controller"]] += s.value
		}
	}
	return out, nil
}

// logEntry is what the summary reads of one controller log line (zap's
// JSON encoder).
type logEntry struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Error      string `json:"error"`
	Controller string `json:"controller"`
}

// parseLogLine decodes a JSON log line.
func parseLogLine(b []byte) (logEntry, bool) {
	var e logEntry
	if len(b) == 0 || b[0] != '{' {
		return e, false
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, false
	}
	return e, true
}

// logSummary counts a controller log's lines by level and its distinct
// errors.
type logSummary struct {
	lines  int
	levels map[string]int
	errors []kindCount // "message: error" by count, largest first
}

// summarizeLog reads a controller log.
func summarizeLog(path string) (logSummary, error) {
	s := logSummary{levels: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return s, fmt.Errorf("reading controller log: %w", err)
	}
	defer f.Close()
	errs := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		s.lines++
		e, ok := parseLogLine(sc.Bytes())
		if !ok {
			s.levels["(not JSON)"]++
			continue
		}
		s.levels[e.Level]++
		if e.Level == "error" || e.Level == "dpanic" || e.Level == "panic" || e.Level == "fatal" {
			errs[errorKey(e)]++
		}
	}
	for k, v := range errs {
		s.errors = append(s.errors, kindCount{k, v})
	}
	sort.Slice(s.errors, func(i, j int) bool {
		if s.errors[i].count != s.errors[j].count {
			return s.errors[i].count > s.errors[j].count
		}
		return s.errors[i].kind < s.errors[j].kind
	})
	return s, sc.Err()
}

// errorKey groups an error line: its message, controller and error text
// with object names and numbers blurred, so one cause counts once.
func errorKey(e logEntry) string {
	k := e.Msg
	if e.Controller != "" {
		k += " [" + e.Controller + "]"
	}
	if e.Error != "" {
		k += ": " + blur(e.Error)
	}
	if len(k) > 240 {
		k = k[:237] + "..."
	}
	return k
}

// blur replaces runs of digits with "N", so "av-00012-h3" and "av-00411-h0"
// (or two resource versions) read the same.
func blur(s string) string {
	var b strings.Builder
	digits := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteRune(r)
	}
	return b.String()
}
