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
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Liveness knows when each node's agent was last seen alive, by the
// controller's own clock: the moment the controller observed a renewal of
// the agent's Lease (v1alpha1.AgentLeaseLabel), never the renewTime the
// vehicle wrote, so a vehicle's clock may drift by any amount. A node whose
// agent has never renewed a Lease (an older agent) is judged by its status
// heartbeat instead.
//
// It keeps one timer for the whole fleet: it wakes at the next moment some
// node can turn Unreachable for some profile (its last renewal plus that
// profile's unreachableAfter), and only when a node really crossed that line
// does it wake the profiles. A renewal only moves deadlines later, so
// renewals never wake anything; a node whose renewals resume after a
// silence wakes the profiles at once.
//
// After a controller restart every node counts as seen when its Lease is
// first listed: a node that died while no controller watched turns
// Unreachable one unreachableAfter later (as the node lifecycle controller
// treats kubelet leases).
type Liveness struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Changes receives a profile to reconcile when a node it may select
	// turned Unreachable or came back.
	Changes chan event.GenericEvent

	mu       sync.Mutex
	seen     map[string]time.Time     // node -> when a renewal was observed
	beats    map[string]time.Time     // node without a Lease -> its last status heartbeat read
	after    map[string]time.Duration // profile -> its unreachableAfter
	lastScan time.Time
	wake     chan struct{}
}

// NewLiveness returns an empty Liveness.
func NewLiveness() *Liveness {
	return &Liveness{
		Changes: make(chan event.GenericEvent, 64),
		seen:    map[string]time.Time{},
		beats:   map[string]time.Time{},
		after:   map[string]time.Duration{},
		wake:    make(chan struct{}, 1),
	}
}

func (l *Liveness) now() time.Time {
	if l.Now == nil {
		return time.Now()
	}
	return l.Now()
}

// LastSeen is when node's agent was last seen: the last observed Lease
// renewal, or heartbeat when its agent keeps no Lease. Such a heartbeat is
// remembered for the timer; it is as recent as the last reconcile that read
// it, so the timer may wake a profile early, never late.
func (l *Liveness) LastSeen(node string, heartbeat time.Time) time.Time {
	l.mu.Lock()
	if t, ok := l.seen[node]; ok {
		l.mu.Unlock()
		return t
	}
	prev, known := l.beats[node]
	moved := !heartbeat.IsZero() && (!known || heartbeat.After(prev))
	if moved {
		l.beats[node] = heartbeat
	}
	l.mu.Unlock()
	if moved {
		// A new node, or one whose deadline the timer may have passed
		// already (it scanned the heartbeat a reconcile had last read):
		// its deadline may be the next one.
		l.nudge()
	}
	return heartbeat
}

// HasLease reports whether node's agent renews a Lease.
func (l *Liveness) HasLease(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.seen[node]
	return ok
}

// Track records a profile's unreachableAfter (on every reconcile of it).
func (l *Liveness) Track(profile string, after time.Duration) {
	l.mu.Lock()
	old, ok := l.after[profile]
	l.after[profile] = after
	l.mu.Unlock()
	if !ok || old != after {
		l.nudge()
	}
}

// Untrack forgets a deleted profile.
func (l *Liveness) Untrack(profile string) {
	l.mu.Lock()
	delete(l.after, profile)
	l.mu.Unlock()
}

// Renewed records that node's Lease was observed renewed now. It reports
// whether the node had been silent for at least the shortest tracked
// unreachableAfter (it was Unreachable for some profile and came back).
func (l *Liveness) Renewed(node string) (cameBack bool) {
	now := l.now()
	l.mu.Lock()
	prev, known := l.seen[node]
	l.seen[node] = now
	delete(l.beats, node)
	shortest := l.shortestLocked()
	l.mu.Unlock()
	cameBack = known && shortest > 0 && now.Sub(prev) >= shortest
	if !known || cameBack {
		// A deadline the timer has not seen, or one it passed already.
		l.nudge()
	}
	return cameBack
}

// Forget drops a node whose Lease was deleted: it is judged by its status
// heartbeat again.
func (l *Liveness) Forget(node string) {
	l.mu.Lock()
	delete(l.seen, node)
	l.mu.Unlock()
}

func (l *Liveness) shortestLocked() time.Duration {
	var d time.Duration
	for _, a := range l.after {
		if d == 0 || a < d {
			d = a
		}
	}
	return d
}

func (l *Liveness) nudge() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// scan returns the profiles for which some node turned Unreachable since
// the previous scan, and the next moment one can.
func (l *Liveness) scan(now time.Time) (profiles []string, next time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := l.lastScan
	l.lastScan = now
	for profile, after := range l.after {
		crossed := false
		check := func(seen time.Time) {
			at := seen.Add(after)
			switch {
			case at.After(now):
				if next.IsZero() || at.Before(next) {
					next = at
				}
			case !crossed && at.After(from):
				crossed = true
			}
		}
		for _, seen := range l.seen {
			check(seen)
		}
		for _, beat := range l.beats {
			check(beat)
		}
		if crossed {
			profiles = append(profiles, profile)
		}
	}
	return profiles, next
}

// Start runs the timer until ctx ends (a manager Runnable).
func (l *Liveness) Start(ctx context.Context) error {
	l.mu.Lock()
	l.lastScan = l.now()
	l.mu.Unlock()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		profiles, next := l.scan(l.now())
		for _, p := range profiles {
			select {
			case l.Changes <- event.GenericEvent{Object: &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: p}}}:
			case <-ctx.Done():
				return nil
			}
		}
		wait := time.Hour
		if !next.IsZero() {
			// A second past the deadline: the vehicle is Unreachable by
			// then on the planner's clock too.
			wait = next.Sub(l.now()) + time.Second
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-l.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// leaseNode is the node an agent Lease speaks for ("" for other Leases).
func leaseNode(o client.Object) string {
	return o.GetLabels()[v1alpha1.AgentLeaseLabel]
}

// leaseHandler feeds Lease events into l and wakes every profile when a
// node comes back after a silence; routine renewals enqueue nothing.
func (r *ProfileReconciler) leaseHandler(l *Liveness) handler.EventHandler {
	all := r.allProfiles()
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if node := leaseNode(e.Object); node != "" {
				l.Renewed(node)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			node := leaseNode(e.ObjectNew)
			o, ok1 := e.ObjectOld.(*coordinationv1.Lease)
			n, ok2 := e.ObjectNew.(*coordinationv1.Lease)
			if node == "" || !ok1 || !ok2 || o.ResourceVersion == n.ResourceVersion {
				return
			}
			if l.Renewed(node) {
				all.Generic(ctx, event.GenericEvent{Object: n}, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if node := leaseNode(e.Object); node != "" {
				l.Forget(node)
			}
		},
	}
}
