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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/hack/bench/internal/benchutil"
)

// namespace holds the controller's revisions and the agents' Leases.
const namespace = "nettune-system"

// hardware is every simulated node's hardware label: the profile selects it.
const hardware = "orin"

// lanDevice is every simulated Node's nettune.io/lan-device annotation (the
// Ansible role's default).
const lanDevice = "eth0"

// nodeName names host h of vehicle v.
func nodeName(vehicle string, h int) string { return fmt.Sprintf("%s-h%d", vehicle, h) }

// vehicleName names the i-th vehicle.
func vehicleName(i int) string { return fmt.Sprintf("av-%05d", i) }

// vehicleOf is the vehicle a node name belongs to.
func vehicleOf(node string) string {
	if i := strings.LastIndexByte(node, '-'); i > 0 {
		return node[:i]
	}
	return node
}

// nodeAddress is host h of vehicle i's InternalIP: 10.<i/256>.<i%256>.<h+1>.
func nodeAddress(i, h int) string {
	return fmt.Sprintf("10.%d.%d.%d", (i/256)%256, i%256, h+1)
}

// newUnstructured is an empty object of the given kind (no typed Kubernetes
// API package is needed for the few core objects the simulator writes).
func newUnstructured(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// nodeObject is host h of vehicle i, labeled as the profile selects it,
// with an InternalIP for the host-pair routes.
func nodeObject(i, h int) *unstructured.Unstructured {
	v := vehicleName(i)
	n := newUnstructured("v1", "Node", "", nodeName(v, h))
	n.SetLabels(map[string]string{
		v1alpha1.DefaultVehicleLabel:  v,
		v1alpha1.DefaultHostLabel:     fmt.Sprintf("h%d", h),
		v1alpha1.DefaultHardwareLabel: hardware,
	})
	// As the Ansible role annotates every vehicle's Nodes (a Node without it
	// renders with a warning: routes with no device).
	n.SetAnnotations(map[string]string{v1alpha1.LANDeviceAnnotation: lanDevice})
	n.Object["status"] = addressStatus(nodeAddress(i, h))
	return n
}

// addressStatus is a Node status with one InternalIP.
func addressStatus(ip string) map[string]any {
	return map[string]any{"addresses": []any{map[string]any{"type": "InternalIP", "address": ip}}}
}

// createNode creates one Node and, when the create dropped its status,
// writes the status separately.
func createNode(ctx context.Context, c client.Client, i, h int) error {
	n := nodeObject(i, h)
	want := n.Object["status"]
	if err := c.Create(ctx, n); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", n.GetName(), err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: n.GetName()}, n); err != nil {
			return fmt.Errorf("reading node %s: %w", n.GetName(), err)
		}
	}
	if addrs, _, _ := unstructured.NestedSlice(n.Object, "status", "addresses"); len(addrs) > 0 {
		return nil
	}
	n.Object["status"] = want
	if err := c.Status().Update(ctx, n); err != nil {
		return fmt.Errorf("writing node %s status: %w", n.GetName(), err)
	}
	return nil
}

// createNodes creates vehicles x hosts Nodes with workers parallel creates,
// printing progress every period.
func createNodes(ctx context.Context, c client.Client, vehicles, hosts, workers int, period time.Duration, progress func(string)) error {
	total := vehicles * hosts
	var done atomic.Int64
	stop := ticker(period, func() { progress(fmt.Sprintf("creating nodes: %d/%d", done.Load(), total)) })
	defer stop()
	return benchutil.Parallel(ctx, total, workers, func(k int) error {
		err := createNode(ctx, c, k/hosts, k%hosts)
		done.Add(1)
		return err
	})
}

// ticker calls fn every period until the returned stop is called.
func ticker(period time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// controllersStarted are the controllers whose workers must be running
// (their caches synced) before a scenario starts.
var controllersStarted = []string{"nettuningprofile", "noderenderer"}
