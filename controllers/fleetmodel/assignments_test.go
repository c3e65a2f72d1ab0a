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

package fleetmodel_test

import (
	"slices"
	"testing"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

// ChangedVehicles names exactly the vehicles whose revision differs, the
// equal lists (its fast path) included.
func TestChangedVehicles(t *testing.T) {
	as := func(kv ...any) []v1alpha1.RevisionAssignment {
		var out []v1alpha1.RevisionAssignment
		for i := 0; i < len(kv); i += 2 {
			out = append(out, v1alpha1.RevisionAssignment{Revision: kv[i].(string), Vehicles: kv[i+1].([]string)})
		}
		return out
	}
	for _, c := range []struct {
		name     string
		old, cur []v1alpha1.RevisionAssignment
		want     []string
	}{
		{"both empty", nil, nil, nil},
		{"equal", as("p-1", []string{"a", "b"}, "p-2", []string{"c"}), as("p-1", []string{"a", "b"}, "p-2", []string{"c"}), nil},
		{"first assignment", nil, as("p-1", []string{"b", "a"}), []string{"a", "b"}},
		{"moved", as("p-1", []string{"a", "b"}, "p-2", []string{"c"}), as("p-1", []string{"a"}, "p-2", []string{"b", "c"}), []string{"b"}},
		{"unassigned", as("p-1", []string{"a", "b"}), as("p-1", []string{"a"}), []string{"b"}},
		{"revision renamed", as("p-1", []string{"a"}), as("p-2", []string{"a"}), []string{"a"}},
		{"same vehicles, another order of revisions", as("p-1", []string{"a"}, "p-2", []string{"b"}), as("p-2", []string{"b"}, "p-1", []string{"a"}), nil},
	} {
		if got := fleetmodel.ChangedVehicles(c.old, c.cur); !slices.Equal(got, c.want) {
			t.Errorf("%s: ChangedVehicles %v, want %v", c.name, got, c.want)
		}
	}
}
