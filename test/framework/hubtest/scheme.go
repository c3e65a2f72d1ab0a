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

package hubtest

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	"github.com/nettune/nettune/internal/scheme"
)

// Scheme returns the hub scheme of nettune's binaries (scheme.NewHub: the
// core Kubernetes types, nettune's, and Open Cluster Management's
// ManagedCluster, ManifestWork and AppliedManifestWork) with OCM's
// Placement and PlacementDecision (cluster/v1beta1) and ManagedClusterSet
// and ManagedClusterSetBinding (cluster/v1beta2) added.
func Scheme() (*runtime.Scheme, error) {
	s, err := scheme.NewHub()
	if err != nil {
		return nil, err
	}
	for _, add := range []func(*runtime.Scheme) error{clusterv1beta1.Install, clusterv1beta2.Install} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("adding Open Cluster Management types: %w", err)
		}
	}
	return s, nil
}
