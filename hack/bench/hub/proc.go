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
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// ctrlMetrics is what the hub controller's metrics say.
type ctrlMetrics struct {
	workWrites map[string]float64 // nettune_hub_work_writes_total by verb
	reconciles float64            // controller_runtime_reconcile_total{controller="hubprofile"}
	reconcileS float64            // controller_runtime_reconcile_time_seconds_sum of it
	errors     float64            // reconciles that ended in an error
	heapInuse  float64            // go_memstats_heap_inuse_bytes
}

// hubController is the hub reconciler's controller name.
const hubController = "hubprofile"

// controllerMetrics scrapes the hub controller's metrics endpoint.
func controllerMetrics(ctx context.Context, url string) (ctrlMetrics, error) {
	m := ctrlMetrics{workWrites: map[string]float64{}}
	body, err := benchutil.Fetch(ctx, http.DefaultClient, url)
	if err != nil {
		return m, err
	}
	keep := func(n string) bool {
		return n == "nettune_hub_work_writes_total" || n == "controller_runtime_reconcile_total" || n == "controller_runtime_reconcile_time_seconds_sum" ||
			n == "go_memstats_heap_inuse_bytes"
	}
	for _, s := range benchutil.ParseSamples(body, keep) {
		switch {
		case s.Name == "go_memstats_heap_inuse_bytes":
			m.heapInuse = s.Value
		case s.Name == "nettune_hub_work_writes_total":
			m.workWrites[s.Labels["verb"]] += s.Value
		case s.Labels["controller"] != hubController:
		case s.Name == "controller_runtime_reconcile_total":
			m.reconciles += s.Value
			if s.Labels["result"] == "error" {
				m.errors += s.Value
			}
		default:
			m.reconcileS += s.Value
		}
	}
	return m, nil
}

// profiles saves the controller's CPU profile, in slices of 10 s, into
// dir/<name>-cpu-NN.pprof until the returned stop is called, which then
// saves its heap profile into dir/<name>-heap.pprof (no-op without
// pprof). Read them with `go tool pprof -top <binary> <files>`.
func profiles(ctx context.Context, pprofURL, dir, name string) (stop func()) {
	if pprofURL == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			body, err := benchutil.FetchWithin(ctx, http.DefaultClient, pprofURL+"/profile?seconds=10", 30*time.Second)
			if err != nil {
				return
			}
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-cpu-%02d.pprof", name, i)), body, 0o644)
		}
	}()
	return func() {
		cancel()
		<-done
		if body, err := benchutil.Fetch(context.Background(), http.DefaultClient, pprofURL+"/heap"); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name+"-heap.pprof"), body, 0o644)
		}
	}
}
