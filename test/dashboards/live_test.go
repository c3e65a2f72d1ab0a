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
	"os"
	"strings"
	"testing"
	"time"
)

// TestLiveFleet runs every dashboard query against a running fleet (`make
// demo` prints its Loki and Prometheus addresses), e.g.
//
//	NETTUNE_LOKI=http://127.0.0.1:41617 NETTUNE_PROMETHEUS=http://127.0.0.1:33453 \
//	NETTUNE_VARS=profile=xavier-lan,revision=xavier-lan-8bf34728cc,vehicle=av-004,node=av-004-xavier-a \
//	go test ./test/dashboards -run Live -v
//
// over the last NETTUNE_RANGE (default 15m). Skipped without NETTUNE_LOKI.
// The end-to-end suite (test/e2e) makes the same check on its own fleet.
func TestLiveFleet(t *testing.T) {
	lokiURL, promURL := os.Getenv("NETTUNE_LOKI"), os.Getenv("NETTUNE_PROMETHEUS")
	if lokiURL == "" || promURL == "" {
		t.Skip("NETTUNE_LOKI and NETTUNE_PROMETHEUS are not set")
	}
	rng := 15 * time.Minute
	if s := os.Getenv("NETTUNE_RANGE"); s != "" {
		var err error
		if rng, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now()
	r := &Runner{LokiURL: lokiURL, PrometheusURL: promURL, Start: end.Add(-rng), End: end, Step: 15 * time.Second}
	vars := r.Vars(time.Second)
	for _, kv := range strings.Split(os.Getenv("NETTUNE_VARS"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	var ds []*Dashboard
	for _, d := range loadChart(t) {
		ds = append(ds, d)
	}
	outcomes, err := r.RunAll(context.Background(), ds, vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outcomes {
		if why := o.Failed(vars); why != "" {
			t.Errorf("%s: %s\n    query: %s", o.Query.Where, why, o.Expr)
		} else {
			t.Logf("ok %s (%d series, %d points, %s): %s", o.Query.Where, o.Result.Series, o.Result.Points, o.Took.Round(time.Millisecond), o.Result.Sample)
		}
	}
}
