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
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultLeaseInterval is how often Lease renews: OCM's add-on lease
// controller counts a Lease renewed for 5 minutes by default (5 times its
// 60 s lease duration).
const DefaultLeaseInterval = 60 * time.Second

// Lease renews the add-on's Lease (named after the add-on, in the install
// namespace) while the cluster's nettune controller runs: OCM's
// registration agent reads it and sets the hub's ManagedClusterAddOn
// Available (its default health check, HealthCheckModeLease). It is a
// manager Runnable that runs on every replica, leader or not: the add-on is
// available while any replica runs.
type Lease struct {
	Client    client.Client
	Name      string
	Namespace string
	// Interval between renewals (DefaultLeaseInterval when 0).
	Interval time.Duration
}

// NeedLeaderElection: every replica renews.
func (l *Lease) NeedLeaderElection() bool { return false }

// Start renews the Lease until ctx ends.
func (l *Lease) Start(ctx context.Context) error {
	every := l.Interval
	if every <= 0 {
		every = DefaultLeaseInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := l.Renew(ctx); err != nil {
			log.FromContext(ctx).Error(err, "add-on lease", "namespace", l.Namespace, "name", l.Name)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Renew creates the Lease or moves its renewTime to now.
func (l *Lease) Renew(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{}
	err := l.Client.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name, Namespace: l.Namespace},
			Spec: coordinationv1.LeaseSpec{RenewTime: &now}}
		if err := l.Client.Create(ctx, lease); err != nil {
			return fmt.Errorf("create Lease %s/%s: %w", l.Namespace, l.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	lease.Spec.RenewTime = &now
	if err := l.Client.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return nil
}
