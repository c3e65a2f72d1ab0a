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

package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// TestLeaseKeeperRenewsWithOneWrite: against a real kube-apiserver, the
// first renewal reads and creates the Lease, every later one is a single
// Update; after another writer changed the Lease (a conflict) or deleted it,
// the keeper reads it again and the renewal still lands.
func TestLeaseKeeperRenewsWithOneWrite(t *testing.T) {
	cp := rtControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.NewWithWatch(cp.Config, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lease-test"}}); err != nil {
		t.Fatal(err)
	}
	kube, err := NewKube(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	counted := &countingLeases{kube: kube, note: func(call string) {
		mu.Lock()
		calls = append(calls, call)
		mu.Unlock()
	}}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := &LeaseKeeper{Client: counted, Namespace: "lease-test", Node: "av-1-h0", Now: func() time.Time { return clock }}
	renew := func(want ...string) {
		t.Helper()
		mu.Lock()
		calls = nil
		mu.Unlock()
		clock = clock.Add(40 * time.Second)
		if err := k.RenewOnce(ctx); err != nil {
			t.Fatalf("renewing: %v", err)
		}
		mu.Lock()
		got := append([]string(nil), calls...)
		mu.Unlock()
		if len(got) != len(want) {
			t.Fatalf("requests %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("requests %v, want %v", got, want)
			}
		}
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "lease-test", Name: "av-1-h0"}, l); err != nil {
			t.Fatal(err)
		}
		if l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(clock) {
			t.Fatalf("renewTime %v, want %v", l.Spec.RenewTime, clock)
		}
		if l.Labels[v1alpha1.AgentLeaseLabel] != "av-1-h0" || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "av-1-h0" {
			t.Fatalf("lease labels %v holder %v", l.Labels, l.Spec.HolderIdentity)
		}
	}
	renew("get", "create")
	renew("update")
	renew("update")

	// Another writer: the cached resourceVersion is stale.
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "lease-test", Name: "av-1-h0"}, l); err != nil {
		t.Fatal(err)
	}
	l.Annotations = map[string]string{"touched": "yes"}
	if err := c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	renew("update", "get", "update")
	renew("update")

	// Deleted: read, then create again.
	if err := c.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	renew("update", "get", "create")
	renew("update")
}

// countingLeases is the agent's own LeaseClient (Kube), noting every call.
type countingLeases struct {
	kube *Kube
	note func(string)
}

func (c *countingLeases) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	c.note("get")
	return c.kube.GetLease(ctx, namespace, name)
}

func (c *countingLeases) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	c.note("create")
	return c.kube.CreateLease(ctx, l)
}

func (c *countingLeases) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	c.note("update")
	return c.kube.UpdateLease(ctx, l)
}
