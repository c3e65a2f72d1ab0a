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
	"fmt"
	"net/http"

	"github.com/nettune/nettune/api/v1alpha1"
)

// QuerierFactory returns the query client for an analysis provider.
type QuerierFactory func(provider v1alpha1.AnalysisProvider, address string) (Querier, error)

// HTTPQueriers builds Loki and Prometheus clients over one HTTP client.
func HTTPQueriers(c *http.Client) QuerierFactory {
	return func(p v1alpha1.AnalysisProvider, address string) (Querier, error) {
		switch p {
		case v1alpha1.ProviderLoki:
			return NewLoki(address, c), nil
		case v1alpha1.ProviderPrometheus:
			return NewPrometheus(address, c), nil
		}
		return nil, fmt.Errorf("unknown analysis provider %q", p)
	}
}

// QuerierFor is the client of spec's provider: at spec.address, else at
// the controller's default for the provider (loki or prom); field names
// where an analysis sets its address, for the error when there is none.
func QuerierFor(queriers QuerierFactory, loki, prom string, spec *v1alpha1.AnalysisSpec, field string) (Querier, error) {
	address := loki
	if spec.Provider == v1alpha1.ProviderPrometheus {
		address = prom
	}
	if spec.Address != nil && *spec.Address != "" {
		address = *spec.Address
	}
	q, err := queriers(spec.Provider, address)
	if err == nil && address == "" {
		err = fmt.Errorf("analysis %s: no %s address (set %s or the controller's default)", spec.Name, spec.Provider, field)
	}
	return q, err
}
