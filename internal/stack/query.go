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

package stack

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// queryResponse is the answer of Prometheus' /api/v1/query and Loki's
// /loki/api/v1/query (same envelope for metric queries).
type queryResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// sampleValues decodes an instant query answer into its sample values: one per
// series for a vector, one for a scalar, none for an empty vector.
func sampleValues(body []byte) ([]float64, error) {
	var r queryResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding query answer %q: %w", truncate(body), err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query failed: %s: %s", r.ErrorType, r.Error)
	}
	switch r.Data.ResultType {
	case "vector":
		var series []struct {
			Value [2]json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			return nil, fmt.Errorf("decoding vector %q: %w", truncate(r.Data.Result), err)
		}
		values := make([]float64, 0, len(series))
		for _, s := range series {
			v, err := sampleValue(s.Value[1])
			if err != nil {
				return nil, err
			}
			values = append(values, v)
		}
		return values, nil
	case "scalar":
		var sample [2]json.RawMessage
		if err := json.Unmarshal(r.Data.Result, &sample); err != nil {
			return nil, fmt.Errorf("decoding scalar %q: %w", truncate(r.Data.Result), err)
		}
		v, err := sampleValue(sample[1])
		if err != nil {
			return nil, err
		}
		return []float64{v}, nil
	default:
		return nil, fmt.Errorf("query answered a %q, want a vector or a scalar (an instant metric query)", r.Data.ResultType)
	}
}

// sampleValue decodes the value half of a [time, "value"] pair.
func sampleValue(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("decoding sample value %s: %w", raw, err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("parsing sample value %q: %w", s, err)
	}
	return v, nil
}

func truncate(b []byte) string {
	const limit = 512
	if len(b) > limit {
		return string(b[:limit]) + "..."
	}
	return string(b)
}
