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

// Package crlease lets a controller-runtime client renew agent Leases with
// the agent's own LeaseKeeper (tests and benchmarks that simulate agents).
// The agent itself speaks to the API server through agent.Kube and does
// not link controller-runtime.
package crlease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/node-agent/agent"
)

// Client is an agent.LeaseClient over a controller-runtime client.
type Client struct{ C client.Client }

var _ agent.LeaseClient = Client{}

// GetLease reads a Lease.
func (c Client) GetLease(ctx context.Context, namespace, name string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	if err := c.C.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
		return nil, err
	}
	return l, nil
}

// CreateLease creates a Lease.
func (c Client) CreateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	if err := c.C.Create(ctx, l); err != nil {
		return nil, err
	}
	return l, nil
}

// UpdateLease replaces a Lease, with its resourceVersion.
func (c Client) UpdateLease(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	if err := c.C.Update(ctx, l); err != nil {
		return nil, err
	}
	return l, nil
}
