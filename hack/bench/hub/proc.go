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

	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// ctrlMetrics is what the hub controller's metrics say.
type ctrlMetrics struct {
	workWrites map[string]float64 // nettune_hub_work_writes_total by verb
	reconciles float64            // controller_runtime_reconcile_total{controller="hubprofile"}
	reconcileS float64            // controller_runtime_reconcile_time_seconds_sum of it
	errors     float64            // reconciles that ended in an error
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
		return n == "nettune_hub_work_writes_total" || n == "controller_runtime_reconcile_total" || n == "controller_runtime_reconcile_time_seconds_sum"
	}
	for _, s := range benchutil.ParseSamples(body, keep) {
		switch {
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
