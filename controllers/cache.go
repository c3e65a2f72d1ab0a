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

package controllers

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// CacheOptions is the controller's informer cache: only its own revisions
// and the agents' Leases in namespace, and every cached object trimmed to
// what the controllers read (TrimForCache), so that memory grows with the
// fleet by a few hundred bytes a node, not by whole Node objects.
func CacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: TrimForCache,
		ByObject: map[client.Object]cache.ByObject{
			// Only the controller's own revisions.
			&appsv1.ControllerRevision{}: {Namespaces: map[string]cache.Config{namespace: {}}, Field: fields.Everything()},
			// Only the agents' Leases (not the leader election's).
			&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{namespace: {}}, Label: agentLeases},
		},
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

// TrimForCache is the cache's transform: it drops what no controller reads
// (and never writes back: the controllers patch the fields they own).
//   - every object: metadata.managedFields;
//   - Node: everything but its metadata (with only the nettune.io/
//     annotations) and status.addresses (render.NodeFromCore reads labels,
//     the LAN annotations and the InternalIP); a kubelet's Node carries its
//     images, capacity and conditions, several kilobytes each;
//   - NodeNetTuning: status.items (the agent's per-item report, read by
//     people and the kubectl plugin, not by the controller).
func TrimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Node:
		var keep map[string]string
		for k, v := range o.Annotations {
			if strings.HasPrefix(k, "nettune.io/") {
				if keep == nil {
					keep = map[string]string{}
				}
				keep[k] = v
			}
		}
		o.Annotations = keep
		o.Spec = corev1.NodeSpec{}
		o.Status = corev1.NodeStatus{Addresses: o.Status.Addresses}
	case *v1alpha1.NodeNetTuning:
		o.Status.Items = nil
	}
	return obj, nil
}
