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
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
)

// LeaseClient reads and writes Leases: Kube, or anything else speaking to
// an API server (node-agent/agent/crlease adapts a controller-runtime
// client). Errors are the API's (apierrors.IsNotFound, IsConflict).
type LeaseClient interface {
	GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error)
	CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
	UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error)
}

// LeaseKeeper renews the node's agent Lease: the agent's sign of life, so
// that its NodeNetTuning status is written only when its report changes.
// The Lease is named after the node, lives in Namespace and carries
// v1alpha1.AgentLeaseLabel; the controller judges liveness by when it sees
// a renewal, so renewTime is informational and this node's clock may be off.
type LeaseKeeper struct {
	// Client reads and writes the Lease (directly: one object, no cache
	// needed).
	Client    LeaseClient
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

	mu   sync.Mutex
	last *coordinationv1.Lease // the Lease as the last write returned it
}

// Start renews the Lease until ctx ends: once at once,
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
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(RenewalWait(renew)):
		}
	}
}

// RenewalWait is the wait before an agent's next renewal: the period less
// up to 10 % jitter.
func RenewalWait(renew time.Duration) time.Duration {
	return renew - time.Duration(rand.Int64N(int64(renew)/10+1))
}

// RenewOnce creates the Lease or moves its renewTime to now. Like the
// kubelet's node Lease, a renewal is one Update of the Lease as the previous
// write returned it; only the first renewal, and one after a conflict or a
// deleted Lease, reads it first.
func (k *LeaseKeeper) RenewOnce(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.last != nil {
		l := k.last.DeepCopy()
		k.stamp(l)
		written, err := k.Client.UpdateLease(ctx, l)
		if err == nil {
			k.last = written
			return nil
		}
		k.last = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("renewing lease %s/%s: %w", k.Namespace, k.Node, err)
		}
		// Someone else wrote or deleted it: read it again.
	}
	return k.readAndRenew(ctx)
}

// stamp sets what a renewal writes: the label, the holder, the duration
// and renewTime = now.
func (k *LeaseKeeper) stamp(l *coordinationv1.Lease) {
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
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[v1alpha1.AgentLeaseLabel] = k.Node
	holder := k.Node
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &holder, &seconds, &t
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
}

// readAndRenew reads the Lease, then creates or updates it.
func (k *LeaseKeeper) readAndRenew(ctx context.Context) error {
	l, err := k.Client.GetLease(ctx, k.Namespace, k.Node)
	switch {
	case apierrors.IsNotFound(err):
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Node}}
		k.stamp(l)
		written, err := k.Client.CreateLease(ctx, l)
		if err != nil {
			return fmt.Errorf("creating lease %s/%s: %w", k.Namespace, k.Node, err)
		}
		k.last = written
		return nil
	case err != nil:
		return fmt.Errorf("reading lease %s/%s: %w", k.Namespace, k.Node, err)
	}
	k.stamp(l)
	// An update with the resourceVersion just read: a conflict means
	// another writer, and the next tick reads again.
	written, err := k.Client.UpdateLease(ctx, l)
	if err != nil {
		return fmt.Errorf("renewing lease %s/%s: %w", k.Namespace, k.Node, err)
	}
	k.last = written
	return nil
}
