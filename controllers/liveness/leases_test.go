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
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
)

// TestListLeasesPagesTheAgentsLeasesMetadata: the timer's direct list of
// the agents' Leases (a real kube-apiserver) reads every agent Lease across
// pages, metadata only, with the node each stands for and its current
// resourceVersion, and no other Lease.
func TestListLeasesPagesTheAgentsLeasesMetadata(t *testing.T) {
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := context.Background()
	const ns = "nettune-system"
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // node -> resourceVersion
	create := func(name string, labels map[string]string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &name}}
		if err := cp.Client.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range 7 {
		n := fmt.Sprintf("av-%d-xavier-a", i)
		l := create(n, map[string]string{v1alpha1.AgentLeaseLabel: n, "other": "x"})
		want[n] = l.ResourceVersion
	}
	// A Lease named otherwise still stands for the node in its label.
	l := create("agent-lease-7", map[string]string{v1alpha1.AgentLeaseLabel: "av-7-xavier-b"})
	want["av-7-xavier-b"] = l.ResourceVersion
	create("not-an-agent", map[string]string{"app": "something-else"})
	// A renewal moves the version the list must return.
	renewed := &coordinationv1.Lease{}
	if err := cp.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "av-3-xavier-a"}, renewed); err != nil {
		t.Fatal(err)
	}
	renewed.Spec.RenewTime = &metav1.MicroTime{Time: metav1.Now().Time}
	if err := cp.Client.Update(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	want["av-3-xavier-a"] = renewed.ResourceVersion

	defer func(p int64) { leaseListPage = p }(leaseListPage)
	leaseListPage = 3
	got, err := ListLeases(cp.Client, ns)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for i := range got {
		node := leaseNode(&got[i])
		if _, dup := seen[node]; dup {
			t.Errorf("node %s listed twice", node)
		}
		seen[node] = got[i].ResourceVersion
		if got[i].Annotations != nil || len(got[i].Labels) != 1 {
			t.Errorf("lease %s keeps more than its node label: labels %v", got[i].Name, got[i].Labels)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("listed (node -> version) %v\nwant %v", seen, want)
	}
}
