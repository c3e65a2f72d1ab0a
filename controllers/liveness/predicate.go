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
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nettune/nettune/api/v1alpha1"
)

// heartbeatGap is how long a NodeNetTuning may go without a heartbeat before
// a heartbeat alone is worth a reconcile (the vehicle may have come back).
const heartbeatGap = 60 * time.Second

// NodeNetTuningPredicate passes NodeNetTuning changes except routine
// heartbeats: a node with an agent Lease is never woken for by its status
// refresh (l times its liveness), one without is when its heartbeat resumes
// after heartbeatGap (it may have come back). l may be nil.
func NodeNetTuningPredicate(l *Liveness) predicate.Predicate {
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
