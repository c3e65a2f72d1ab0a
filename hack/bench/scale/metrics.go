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
	"context"
	"net/http"
	"strings"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// reconcileCounts scrapes controller_runtime_reconcile_total by controller
// (every result) from the controller's metrics endpoint.
func reconcileCounts(ctx context.Context, url string) (map[string]float64, error) {
	samples, err := benchutil.Scrape(ctx, http.DefaultClient, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, s := range samples {
		if s.Name == "controller_runtime_reconcile_total" {
			out[s.Labels["controller"]] += s.Value
		}
	}
	return out, nil
}

// logSummary counts a controller log's lines by level and its distinct
// errors.
type logSummary struct {
	lines  int
	levels map[string]int
	errors []benchutil.KindCount // "message: error" by count, largest first
}

// summarizeLog reads a controller log.
func summarizeLog(path string) (logSummary, error) {
	s := logSummary{levels: map[string]int{}}
	errs := map[string]float64{}
	err := benchutil.ScanLog(path, func(e benchutil.LogEntry, ok bool) {
		s.lines++
		if !ok {
			s.levels["(not JSON)"]++
			return
		}
		s.levels[e.Level]++
		if e.IsError() {
			errs[errorKey(e)]++
		}
	})
	for k, v := range errs {
		s.errors = append(s.errors, benchutil.KindCount{Kind: k, Count: v})
	}
	benchutil.SortKindCounts(s.errors)
	return s, err
}

// errorKey groups an error line: its message, controller and error text
// with object names and numbers blurred, so one cause counts once.
func errorKey(e benchutil.LogEntry) string {
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
