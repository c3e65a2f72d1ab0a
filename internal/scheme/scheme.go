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

// Package scheme builds the runtime.Scheme shared by nettune's binaries.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"

	nettunev1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

// New returns a scheme with the core Kubernetes types and nettune's.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding client-go types: %w", err)
	}
	if err := nettunev1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("adding nettune types: %w", err)
	}
	return s, nil
}

// NewHub returns New's scheme with the Open Cluster Management types a
// nettune hub reads and writes: ManagedCluster (cluster/v1), Placement and
// PlacementDecision (cluster/v1beta1), ManagedClusterSetBinding
// (cluster/v1beta2), ManifestWork (work/v1) and the add-on's types
// (addon/v1alpha1).
func NewHub() (*runtime.Scheme, error) {
	s, err := New()
	if err != nil {
		return nil, err
	}
	for _, add := range []func(*runtime.Scheme) error{clusterv1.Install, clusterv1beta1.Install, clusterv1beta2.Install, workv1.Install, addonv1alpha1.Install} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("adding Open Cluster Management types: %w", err)
		}
	}
	return s, nil
}
