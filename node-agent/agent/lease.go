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
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

// LeaseKeeper renews the node's agent Lease: the agent's sign of life, so
// that its NodeNetTuning status is written only when its report changes.
// The Lease is named after the node, lives in Namespace and carries
// v1alpha1.AgentLeaseLabel; the controller judges liveness by when it sees
// a renewal, so renewTime is informational and this node's clock may be off.
type LeaseKeeper struct {
	// Client reads and writes the Lease (a direct client: one object, no
	// cache needed).
	Client    client.Client
	Namespace string
	Node      string
	// Renew is the renewal period (v1alpha1.DefaultAgentLeaseRenew when 0).
	Renew time.Duration
	// Duration is written as leaseDurationSeconds
	// (v1alpha1.DefaultAgentLeaseDuration when 0).
	Duration time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log logr.Logger
}

// Start renews the Lease until ctx ends (a manager Runnable): once at once,
// then every Renew with up to 10 % jitter, so a fleet that booted together
// does not renew in lockstep. A failed renewal is retried at the next tick.
func (k *LeaseKeeper) Start(ctx context.Context) error {
	renew := k.Renew
	if renew <= 0 {
		renew = v1alpha1.DefaultAgentLeaseRenew
	}
	for {
		if err := k.RenewOnce(ctx); err != nil && ctx.Err() == nil {
			k.Log.Error(err, "renewing the agent lease", "namespace", k.Namespace, "lease", k.Node)
		}
		jitter := time.Duration(rand.Int64N(int64(renew)/10 + 1))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(renew - jitter):
		}
	}
}

// RenewOnce creates the Lease or moves its renewTime to now.
func (k *LeaseKeeper) RenewOnce(ctx context.Context) error {
	now := time.Now
	if k.Now != nil {
		now = k.Now
	}
	duration := k.Duration
	if duration <= 0 {
		duration = v1alpha1.DefaultAgentLeaseDuration
	}
	seconds := int32(duration / time.Second)
	t := metav1.NewMicroTime(now())
	l := &coordinationv1.Lease{}
	err := k.Client.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Node}, l)
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Node,
				Labels: map[string]string{v1alpha1.AgentLeaseLabel: k.Node}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &k.Node, LeaseDurationSeconds: &seconds,
				AcquireTime: &t, RenewTime: &t},
		}
		if err := k.Client.Create(ctx, l); err != nil {
			return fmt.Errorf("creating lease %s/%s: %w", k.Namespace, k.Node, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading lease %s/%s: %w", k.Namespace, k.Node, err)
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[v1alpha1.AgentLeaseLabel] = k.Node
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &k.Node, &seconds, &t
	// An update with the resourceVersion just read: a conflict means
	// another writer, and the next tick reads again.
	if err := k.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("renewing lease %s/%s: %w", k.Namespace, k.Node, err)
	}
	return nil
}
