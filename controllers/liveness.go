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
	"io"
	"reflect"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
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
//
// Time the controller cannot see does not count either: when its watch of
// the Leases fails (the API server down or cut off), the controller is
// blind, not the agents silent. From the watch's error until the Leases are
// listed again (by the informer, or by Liveness itself every ProbeEvery
// while blind, so as not to wait out the informer's back-off of up to a
// minute) no node's silence grows; then a Lease whose resourceVersion moved
// was renewed meanwhile (seen now), and one that did not move resumes its
// silence where it stood when the watch failed.
type Liveness struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Changes receives a profile to reconcile when a node it may select
	// turned Unreachable or came back.
	Changes chan event.GenericEvent
	// List lists the agents' Leases from the API server (not the cache);
	// while blind it is tried every ProbeEvery. Nil waits for the informer.
	List func(ctx context.Context) ([]coordinationv1.Lease, error)
	// ProbeEvery is how often List is tried while blind (2 s when 0).
	ProbeEvery time.Duration

	mu         sync.Mutex
	seen       map[string]time.Time     // node -> when a renewal was observed
	versions   map[string]string        // node -> its Lease's resourceVersion when observed
	beats      map[string]time.Time     // node without a Lease -> its last status heartbeat read
	after      map[string]time.Duration // profile -> its unreachableAfter
	blindSince time.Time                // when the Lease watch failed; zero when it works
	blindTotal time.Duration            // every blind spell ended so far, for the report
	probing    bool                     // List is tried until the informer delivers after a spell
	lastScan   time.Time
	wake       chan struct{}
}

// NewLiveness returns an empty Liveness.
func NewLiveness() *Liveness {
	return &Liveness{
		Changes:  make(chan event.GenericEvent, 64),
		seen:     map[string]time.Time{},
		versions: map[string]string{},
		beats:    map[string]time.Time{},
		after:    map[string]time.Duration{},
		wake:     make(chan struct{}, 1),
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
		if !l.blindSince.IsZero() {
			// The silence stands where it stood when the watch failed.
			now := l.now()
			t = earlier(t.Add(now.Sub(l.blindSince)), now)
		}
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

// Observed records node's Lease at resourceVersion version as the informer
// delivered it: a version not seen before is a renewal (Renewed), the same
// one again is not. It reports what Renewed reports.
func (l *Liveness) Observed(node, version string) (cameBack bool) {
	return l.observe(node, version, false)
}

func (l *Liveness) observe(node, version string, probed bool) (cameBack bool) {
	l.mu.Lock()
	if !probed {
		switch {
		case l.List == nil:
			// No probe: the informer's first event ends a blind spell.
			l.sightLocked(l.now())
		case l.blindSince.IsZero():
			// The probe ended the spell and the informer delivers
			// again: it has caught up.
			l.probing = false
		}
	}
	if version != "" && l.versions[node] == version {
		l.mu.Unlock()
		return false
	}
	l.versions[node] = version
	l.mu.Unlock()
	return l.Renewed(node)
}

// Blind records that the controller's watch of the Leases failed now: until
// the Leases are seen again no node's silence grows.
func (l *Liveness) Blind() {
	now := l.now()
	l.mu.Lock()
	if l.blindSince.IsZero() {
		l.blindSince = now
	}
	l.probing = true
	l.mu.Unlock()
	l.nudge()
}

// IsBlind reports whether the watch of the Leases failed and the Leases
// have not been seen since, and how long blind spells have lasted so far.
func (l *Liveness) IsBlind() (blind bool, total time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	total = l.blindTotal
	if !l.blindSince.IsZero() {
		total += l.now().Sub(l.blindSince)
	}
	return !l.blindSince.IsZero(), total
}

// sightLocked ends a blind spell at now: every node's last sighting moves
// later by the spell's length, so its silence resumes where it stood.
func (l *Liveness) sightLocked(now time.Time) {
	if l.blindSince.IsZero() {
		return
	}
	spell := now.Sub(l.blindSince)
	for node, t := range l.seen {
		l.seen[node] = earlier(t.Add(spell), now)
	}
	l.blindTotal += spell
	l.blindSince = time.Time{}
	// The scan must not count the spell as crossings.
	l.lastScan = now
	l.nudge()
}

// probe lists the Leases from the API server: a list ends a blind spell,
// and its renewals count until the informer delivers again (its back-off
// after an outage reaches a minute).
func (l *Liveness) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leases, err := l.List(ctx)
	if err != nil {
		return
	}
	l.mu.Lock()
	l.sightLocked(l.now())
	l.mu.Unlock()
	for i := range leases {
		if node := leaseNode(&leases[i]); node != "" {
			l.observe(node, leases[i].ResourceVersion, true)
		}
	}
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
	delete(l.versions, node)
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
	if !l.blindSince.IsZero() {
		// Blind: nobody's silence grows, so nobody crosses.
		return nil, time.Time{}
	}
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
		l.mu.Lock()
		probing := l.probing && l.List != nil
		l.mu.Unlock()
		if probing {
			l.probe(ctx)
			every := l.ProbeEvery
			if every <= 0 {
				every = 2 * time.Second
			}
			wait = min(wait, every)
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
				l.Observed(node, e.Object.GetResourceVersion())
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			node := leaseNode(e.ObjectNew)
			if node == "" || e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
				return
			}
			if l.Observed(node, e.ObjectNew.GetResourceVersion()) {
				all.Generic(ctx, event.GenericEvent{Object: e.ObjectNew}, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if node := leaseNode(e.Object); node != "" {
				l.Forget(node)
			}
		},
	}
}

// WatchErrorHandler makes l blind when the informer's watch of the agents'
// Leases fails (a connection refused, reset or timed out: the API server
// cannot be seen), after client-go's own handling (its log line). A watch
// that ended normally or whose resourceVersion expired is relisted at once
// and blinds nothing.
func (l *Liveness) WatchErrorHandler(ctx context.Context, r *toolscache.Reflector, err error) {
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
	if r.TypeDescription() != leaseType || err == io.EOF || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	l.Blind()
}

// leaseType is how client-go's reflector names the Lease informer's type.
var leaseType = reflect.TypeOf(&coordinationv1.Lease{}).String()

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
