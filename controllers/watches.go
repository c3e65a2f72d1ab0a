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
	"time"

	"golang.org/x/time/rate"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nettune/nettune/api/v1alpha1"
)

// allProfiles enqueues every profile: a node or NodeNetTuning change can move
// any profile's rollout (vehicle membership, verification, conflicts).
func (r *ProfileReconciler) allProfiles() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		// Only the names are read: no deep copy of every profile (with
		// its status.assignments of every vehicle) per event.
		list := &v1alpha1.NetTuningProfileList{}
		if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
		return out
	})
}

// heartbeatGap is how long a NodeNetTuning may go without a heartbeat before
// a heartbeat alone is worth a reconcile (the vehicle may have come back).
const heartbeatGap = 60 * time.Second

// nntPredicate passes NodeNetTuning changes except routine heartbeats: a
// node with an agent Lease is never woken for by its status refresh (l
// times its liveness), one without is when its heartbeat resumes after
// heartbeatGap (it may have come back).
func nntPredicate(l *Liveness) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*v1alpha1.NodeNetTuning)
			n, ok2 := e.ObjectNew.(*v1alpha1.NodeNetTuning)
			if !ok1 || !ok2 {
				return true
			}
			if o.Generation != n.Generation {
				return true
			}
			os, ns := o.Status.DeepCopy(), n.Status.DeepCopy()
			os.LastHeartbeatTime, ns.LastHeartbeatTime = nil, nil
			if !apiequality.Semantic.DeepEqual(os, ns) {
				return true
			}
			if l != nil && l.HasLease(n.Name) {
				return false
			}
			if o.Status.LastHeartbeatTime == nil || n.Status.LastHeartbeatTime == nil {
				return o.Status.LastHeartbeatTime != n.Status.LastHeartbeatTime
			}
			return n.Status.LastHeartbeatTime.Sub(o.Status.LastHeartbeatTime.Time) > heartbeatGap
		},
	}
}

// retryLimiter spaces the retries of a failed reconcile from 5 ms, doubling,
// to at most 10 s; controller-runtime's default doubles to 1,000 s, so after
// an API server outage of two minutes a profile waited for its next retry
// long after the API server was back. The bucket (10 a second, bursts of
// 100) is the default's.
func retryLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, 10*time.Second),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
