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
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/experiment"
	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/controllers/liveness"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/controllers/profile"
)

// Options configures the reconcilers Setup registers, as the controller
// binary runs them.
type Options struct {
	Client client.Client
	// APIReader reads the profiles past the cache (mgr.GetAPIReader()) and
	// lists the agents' Leases; the Client reads the profiles when nil,
	// and the agents are then judged by their status heartbeats.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// Namespace holds the ControllerRevisions and the agents' Leases.
	Namespace string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Backends says where analyses query and with which credentials
	// (analysis.HTTPQueriers with a 30 s timeout when it has no Queriers;
	// Secrets read through APIReader in Namespace when it has none).
	Backends analysis.Backends
	// EventLog, when set, also receives every rollout and experiment event
	// as a JSON line.
	EventLog eventlog.Log
	// ProfileWorkers is the number of profiles reconciled at once (4 when
	// 0).
	ProfileWorkers int
	// RenderWorkers is the number of nodes rendered at once
	// (noderender.DefaultWorkers when 0).
	RenderWorkers int
	// SkipNameValidation lets tests start several managers in one process.
	SkipNameValidation bool
	// WorkStatusSync is, at a hub, the work agents' --status-sync-interval
	// (hub.DefaultWorkStatusSync when 0).
	WorkStatusSync time.Duration
	// WorkWriters is, at a hub, how many ManifestWorks a reconcile writes
	// at once (hub.DefaultWorkWriters when 0).
	WorkWriters int
	// AddOnGate, at a hub, places profiles only where nettune's OCM add-on
	// is available at a compatible version (nil: everywhere).
	AddOnGate *hub.AddOnGate
}

// Setup registers the three reconcilers and what they share: the profile
// reconciler, the node renderer that renders its decisions (its findings
// reach the profiles through one noderender.Reports) and the experiment
// reconciler, with one liveness.Liveness timing the agents.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Backends = o.backends()
	reports := noderender.NewReports()
	live := liveness.New()
	live.Now = o.Now
	p := &profile.Reconciler{Client: o.Client, APIReader: o.APIReader, Scheme: o.Scheme, Recorder: o.Recorder,
		Namespace: o.Namespace, Now: o.Now, Backends: o.Backends,
		EventLog: o.EventLog, Reports: reports, Liveness: live, MaxConcurrentReconciles: o.ProfileWorkers, SkipNameValidation: o.SkipNameValidation}
	if err := p.SetupWithManager(mgr); err != nil {
		return err
	}
	n := &noderender.Reconciler{Client: o.Client, Scheme: o.Scheme, Recorder: o.Recorder, Namespace: o.Namespace,
		Reports: reports, MaxConcurrentReconciles: o.RenderWorkers, SkipNameValidation: o.SkipNameValidation}
	if err := n.SetupWithManager(mgr); err != nil {
		return err
	}
	x := &experiment.Reconciler{Client: o.Client, Recorder: o.Recorder, Now: o.Now, Backends: o.Backends,
		EventLog: o.EventLog, SkipNameValidation: o.SkipNameValidation}
	return x.SetupWithManager(mgr)
}

// SetupHub registers the hub's reconciler instead of a cluster's three:
// profiles applied at the hub are rolled out across the vehicles of the
// managed clusters they select (docs/hub.md). clusterNamespace is
// nettune's namespace in every managed cluster.
func SetupHub(mgr ctrl.Manager, o Options, clusterNamespace string) error {
	h := &hub.Reconciler{Client: o.Client, APIReader: o.APIReader, Scheme: o.Scheme, Recorder: o.Recorder,
		Namespace: o.Namespace, ClusterNamespace: clusterNamespace, Now: o.Now, Backends: o.backends(), EventLog: o.EventLog, SkipNameValidation: o.SkipNameValidation,
		WorkStatusSync: o.WorkStatusSync, WorkWriters: o.WorkWriters, AddOn: o.AddOnGate}
	return h.SetupWithManager(mgr)
}

// backends is o.Backends with its defaults: HTTP clients with a 30 s
// timeout, and the Secrets of o.Namespace read past the cache (the
// controller watches no Secrets: a rotated one is read at the next
// measurement, and reading needs only get on Secrets in its namespace).
func (o Options) backends() analysis.Backends {
	b := o.Backends.WithDefaults()
	if b.Namespace == "" {
		b.Namespace = o.Namespace
	}
	if b.Secrets == nil {
		reader := o.APIReader
		if reader == nil {
			reader = o.Client
		}
		ns := b.Namespace
		b.Secrets = func(ctx context.Context, name string) (map[string][]byte, error) {
			var s corev1.Secret
			if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
				if apierrors.IsNotFound(err) {
					return nil, errors.New("not found")
				}
				return nil, err
			}
			return s.Data, nil
		}
	}
	return b
}
