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

package liveness

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// ListLeases is a Liveness.List: it lists the agents' Leases in namespace
// from the API server through reader (every pollEvery; there is no Lease
// informer): their metadata only, in pages of leaseListPage, so that a
// fleet of 30,000 nodes is not decoded whole at once, keeping of each only
// what the timer reads.
func ListLeases(reader client.Reader, namespace string) func(ctx context.Context) ([]metav1.PartialObjectMetadata, error) {
	return func(ctx context.Context) ([]metav1.PartialObjectMetadata, error) {
		var out []metav1.PartialObjectMetadata
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("LeaseList"))
		for {
			opts := []client.ListOption{client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: agentLeases}, client.Limit(leaseListPage)}
			if list.Continue != "" {
				opts = append(opts, client.Continue(list.Continue))
			}
			if err := reader.List(ctx, list, opts...); err != nil {
				return nil, err
			}
			for i := range list.Items {
				m := &list.Items[i].ObjectMeta
				out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
					Name: m.Name, ResourceVersion: m.ResourceVersion,
					Labels: map[string]string{v1alpha1.AgentLeaseLabel: m.Labels[v1alpha1.AgentLeaseLabel]}}})
			}
			if list.Continue == "" {
				return out, nil
			}
		}
	}
}

// agentLeases selects the Leases the agents renew.
var agentLeases = func() labels.Selector {
	req, err := labels.NewRequirement(v1alpha1.AgentLeaseLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key
	}
	return labels.NewSelector().Add(*req)
}()

// leaseListPage is the page size of ListLeases (a variable for a test).
var leaseListPage int64 = 2000
