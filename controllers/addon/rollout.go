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

package addon

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// Installed is what the hub observed of the add-on in one cluster.
type Installed struct {
	Cluster string
	// Work is the chart version the cluster's ManifestWork carries ("" when
	// there is no work yet).
	Work string
	// Version is the chart version the cluster runs: the work's feedback
	// from the applied controller Deployment, for the work's current
	// generation ("" when not known yet).
	Version string
	// Available: the ManagedClusterAddOn's Available condition is True.
	Available bool
}

// Done: the cluster runs version and is healthy.
func (i Installed) Done(version string) bool {
	return i.Work == version && i.Version == version && i.Available
}

// Strategy is how a new chart version goes out: all at once, or to at most
// MaxConcurrency clusters that have not finished it (Progressive).
type Strategy struct {
	Progressive    bool
	MaxConcurrency int
}

// StrategyFrom reads an OCM rollout strategy for total clusters. All (and
// none) go at once; Progressive bounds the clusters upgrading at once by
// maxConcurrency (a number or a percentage of total, rounded up; all when
// unset). Other types are refused, naming field.
func StrategyFrom(rs *clusterv1alpha1.RolloutStrategy, total int, field string) (Strategy, error) {
	if rs == nil || rs.Type == "" || rs.Type == clusterv1alpha1.All {
		return Strategy{}, nil
	}
	if rs.Type != clusterv1alpha1.Progressive {
		return Strategy{}, fmt.Errorf("%s.type: %q is not supported by nettune's add-on manager (All or Progressive)", field, rs.Type)
	}
	s := Strategy{Progressive: true, MaxConcurrency: total}
	if rs.Progressive != nil && rs.Progressive.MaxConcurrency.String() != "" && rs.Progressive.MaxConcurrency.String() != "0" {
		mc := rs.Progressive.MaxConcurrency
		n, err := intstr.GetScaledValueFromIntOrPercent(&mc, total, true)
		if err != nil || n < 1 {
			return Strategy{}, fmt.Errorf("%s.progressive.maxConcurrency: %q is not a count above 0 or a percentage", field, mc.String())
		}
		s.MaxConcurrency = n
	}
	if s.MaxConcurrency < 1 {
		s.MaxConcurrency = 1
	}
	return s, nil
}

// Plan decides which clusters get version's work now. A cluster without
// a work gets it at once (an install is not an upgrade); a cluster on
// another version gets it while fewer than MaxConcurrency clusters carry
// version without having finished it (Installed.Done), in name order; with
// All every cluster gets it. The answer is the set of clusters to write,
// and why the others wait.
func Plan(version string, s Strategy, clusters []Installed) (write []string, waiting []string) {
	cs := append([]Installed(nil), clusters...)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Cluster < cs[j].Cluster })
	busy := 0
	for _, c := range cs {
		if c.Work == version && !c.Done(version) {
			busy++
		}
	}
	for _, c := range cs {
		switch {
		case c.Work == version:
		case c.Work == "" || !s.Progressive:
			write = append(write, c.Cluster)
		case busy < s.MaxConcurrency:
			write = append(write, c.Cluster)
			busy++
		default:
			waiting = append(waiting, c.Cluster)
		}
	}
	return write, waiting
}
