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
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nettune/nettune/api/v1alpha1"
)

// Liveness knows when each node's agent was last seen alive, by the
// controller's own clock: the moment the controller observed a renewal of
// the agent's Lease (v1alpha1.AgentLeaseLabel), never the renewTime the
// vehicle wrote, so a vehicle's clock may drift by any amount. A node whose
// agent has never renewed a Lease (an older agent) is judged by its status
// heartbeat instead.
//
// The controller does not watch the Leases: a watch delivers every renewal
// (125 a second at 5,000 nodes renewing every 40 s), and decoding them was
// most of an idle controller's CPU. It lists their metadata (List) every
// PollEvery instead, a third of the shortest tracked unreachableAfter (the
// agents' recommended renewal period): a Lease whose resourceVersion moved
// since the previous list was renewed, and counts as seen at that list. A
// renewal is therefore seen up to one period late, never early, and a node
// stops counting as seen one unreachableAfter after the list that last saw
// its Lease move.
//
// It keeps one timer for the whole fleet: it wakes at the next moment some
// node can turn Unreachable for some profile (its last sighting plus that
// profile's unreachableAfter), and only when a node really crossed that line
// does it wake the profiles. A renewal only moves deadlines later, so
// renewals never wake anything; a node whose renewals resume after a
// silence wakes the profiles at the list that sees it.
//
// After a controller restart every node counts as seen when its Lease is
// first listed: a node that died while no controller watched turns
// Unreachable one unreachableAfter later (as the node lifecycle controller
// treats kubelet leases). Until that first list succeeds Synced is false,
// and the profile reconciler judges no vehicle.
//
// Silence is counted only up to the moment the controller last knew the
// Leases as they are (its view): the last list that succeeded. Before the
// timer counts a node as crossing its unreachableAfter it lists the Leases
// when its view is older than that deadline. A list that fails counts no
// silence and is tried again every ProbeEvery. The API server the
// controller could not reach was out of reach of the agents too: from the
// view before the failed list to the next list that succeeds is a blind
// spell that counts for no node, whose silence resumes where it stood.
type Liveness struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Changes receives a profile to reconcile when a node it may select
	// turned Unreachable or came back.
	Changes chan event.GenericEvent
	// List lists every agent Lease's metadata from the API server: a
	// renewal moves the resourceVersion, which is all the timer reads; a
	// node whose Lease is not listed is judged by its status heartbeat.
	// Nil (unit tests, which call Observed) takes the view as current at
	// every moment.
	List func(ctx context.Context) ([]metav1.PartialObjectMetadata, error)
	// PollEvery is the period of the lists (a third of the shortest tracked
	// unreachableAfter when 0, or of the default unreachableAfter while no
	// profile is tracked; at least MinPoll).
	PollEvery time.Duration
	// ProbeEvery is how often List is tried again after it failed (2 s
	// when 0).
	ProbeEvery time.Duration

	mu       sync.Mutex
	nodes    map[string]sighting      // node -> when it was last seen
	after    map[string]time.Duration // profile -> its unreachableAfter
	view     time.Time                // when the Leases were last known as they are
	lastScan time.Time                // the view at the previous scan
	blind    time.Time                // the view when List began to fail: the blind spell's start (zero: none)
	synced   bool                     // a list succeeded
	lists    uint32                   // lists that succeeded (sighting.list)
	wake     chan struct{}
}

// sighting is what Liveness keeps of one node: one map entry per node, 56
// bytes with its key, since at 30,000 nodes every byte here is 30 KB.
type sighting struct {
	// at is when a renewal of its Lease was observed, or, for a node whose
	// agent keeps no Lease (lease false), its last status heartbeat read.
	at time.Time
	// version identifies the Lease's resourceVersion when last observed
	// (versionKey); only compared for equality.
	version uint64
	// list is the list that last showed the Lease (Liveness.lists).
	list  uint32
	lease bool
}

// versionKey is a resourceVersion as a sighting keeps it: the number it
// is (the API server's are decimal), or its FNV-64a hash when it is not a
// number. Only equality is read: a hash collision would count one renewal
// as none, and the next renewal moves it again.
func versionKey(v string) uint64 {
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return n
	}
	h := fnv.New64a()
	h.Write([]byte(v))
	return h.Sum64()
}

// MinPoll is the shortest period between two lists of the Leases.
const MinPoll = time.Second

// Synced reports whether the Leases were listed once (always true without
// List): before that, every node would be judged by its status heartbeat.
func (l *Liveness) Synced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.synced || l.List == nil
}

// pollEvery is the period of the lists.
func (l *Liveness) pollEvery() time.Duration {
	if l.PollEvery > 0 {
		return l.PollEvery
	}
	l.mu.Lock()
	shortest := l.shortestLocked()
	l.mu.Unlock()
	if shortest <= 0 {
		shortest = v1alpha1.DefaultUnreachableAfter
	}
	return max(shortest/3, MinPoll)
}

// New returns an empty Liveness.
func New() *Liveness {
	return &Liveness{
		Changes: make(chan event.GenericEvent, 64),
		nodes:   map[string]sighting{},
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

// viewLocked is the moment up to which silence is counted: now when there
// is no List (unit tests, which call Observed: every observation is current),
// else the view.
func (l *Liveness) viewLocked(now time.Time) time.Time {
	if l.List == nil || l.view.IsZero() || l.view.After(now) {
		return now
	}
	return l.view
}

// LastSeen is when node's agent was last seen: the last observed Lease
// renewal (moved later by the time since the view, which counts as no
// silence), or heartbeat when its agent keeps no Lease. Such a heartbeat is
// remembered for the timer; it is as recent as the last reconcile that read
// it, so the timer may wake a profile early, never late.
func (l *Liveness) LastSeen(node string, heartbeat time.Time) time.Time {
	l.mu.Lock()
	s, known := l.nodes[node]
	if known && s.lease {
		now := l.now()
		t := s.at.Add(now.Sub(l.viewLocked(now)))
		l.mu.Unlock()
		return t
	}
	moved := !heartbeat.IsZero() && (!known || heartbeat.After(s.at))
	if moved {
		l.nodes[node] = sighting{at: heartbeat}
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
	return l.nodes[node].lease
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

// Observed records node's Lease at resourceVersion version as a list showed
// it: the view is current, and a version not observed before is a renewal
// (observedLocked). It reports whether the node came back after a silence
// of at least the shortest tracked unreachableAfter.
func (l *Liveness) Observed(node, version string) (cameBack bool) {
	l.mu.Lock()
	now := l.now()
	l.view = now
	l.endSpellLocked(now)
	cameBack, nudge := l.observedLocked(node, version, now, 0)
	l.mu.Unlock()
	if nudge {
		l.nudge()
	}
	return cameBack
}

// observedLocked records node's Lease at version as seen by list number
// list (0 outside a list): a version not observed before is a renewal at
// now. It reports whether the node came back after a silence of at least
// the shortest tracked unreachableAfter (it was Unreachable for some
// profile), and whether the timer has a deadline to look at again.
func (l *Liveness) observedLocked(node, version string, now time.Time, list uint32) (cameBack, nudge bool) {
	s, known := l.nodes[node]
	key := versionKey(version)
	s.list = list
	if version != "" && known && s.lease && s.version == key {
		l.nodes[node] = s
		return false, false
	}
	if known && s.lease {
		// The silence up to the view, as LastSeen counts it.
		prev := s.at.Add(now.Sub(l.viewLocked(now)))
		shortest := l.shortestLocked()
		cameBack = shortest > 0 && now.Sub(prev) >= shortest
	}
	wasLease := known && s.lease
	s.at, s.version, s.lease = now, key, true
	l.nodes[node] = s
	// A deadline the timer has not seen, or one it passed already.
	return cameBack, !wasLease || cameBack
}

// probe lists the Leases from the API server: on success the view is
// current, the Leases whose version moved were renewed, and a node whose
// Lease is gone is judged by its status heartbeat again. It reports whether
// the list succeeded, and whether a node it shows renewed came back after a
// silence.
func (l *Liveness) probe(ctx context.Context) (ok, cameBack bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	leases, err := l.List(ctx)
	now := l.now()
	l.mu.Lock()
	if err != nil {
		began := l.blind.IsZero()
		if began {
			l.blind = l.viewLocked(now)
		}
		l.mu.Unlock()
		if began {
			livenessLog.Info("cannot read the agents' Leases: no vehicle's silence counts until they are read", "error", err.Error())
		}
		return false, false
	}
	l.view = now
	l.synced = true
	l.endSpellLocked(now)
	l.lists++
	if l.lists == 0 {
		l.lists = 1 // 0 is "outside a list"
	}
	list := l.lists
	nudge := false
	for i := range leases {
		node := leaseNode(&leases[i])
		if node == "" {
			continue
		}
		if s, ok := l.nodes[node]; ok && s.lease && s.list == list {
			continue // a second Lease for the node: the first one listed speaks for it
		}
		back, n := l.observedLocked(node, leases[i].ResourceVersion, now, list)
		cameBack, nudge = cameBack || back, nudge || n
	}
	for node, s := range l.nodes {
		if s.lease && s.list != list {
			// Its Lease is gone: judged by its status heartbeat again.
			delete(l.nodes, node)
		}
	}
	l.mu.Unlock()
	if nudge {
		l.nudge()
	}
	return true, cameBack
}

// probeTimeout bounds one list of the Leases (every page of it): 30,000
// Leases' metadata is 15 pages.
const probeTimeout = 30 * time.Second

// endSpellLocked ends a blind spell at now: every node's last sighting
// moves later by the spell's length, so its silence resumes where it stood.
func (l *Liveness) endSpellLocked(now time.Time) {
	if l.blind.IsZero() {
		return
	}
	spell := now.Sub(l.blind)
	livenessLog.Info("the agents' Leases are read again: the time they could not be read counts for no vehicle", "blindFor", spell.Round(time.Millisecond).String())
	for node, s := range l.nodes {
		if !s.lease {
			continue
		}
		if s.at = s.at.Add(spell); s.at.After(now) {
			s.at = now
		}
		l.nodes[node] = s
	}
	l.blind = time.Time{}
	if l.lastScan.Before(now) {
		l.lastScan = now
	}
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
// the previous scan (by the view), and the next moment one can: a moment
// already past when the view is older than a node's deadline (a list must
// make it current before that node counts as crossing).
func (l *Liveness) scan(now time.Time) (profiles []string, next time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	view := l.viewLocked(now)
	from := l.lastScan
	if view.After(from) {
		l.lastScan = view
	}
	for profile, after := range l.after {
		crossed := false
		// A node whose deadline at is past horizon has not crossed yet.
		check := func(at, horizon time.Time) {
			switch {
			case at.After(horizon):
				if next.IsZero() || at.Before(next) {
					next = at
				}
			case !crossed && at.After(from):
				crossed = true
			}
		}
		for _, s := range l.nodes {
			if s.lease {
				check(s.at.Add(after), view)
			} else {
				// A status heartbeat is the vehicle's own time, read from
				// the cache: judged on the controller's clock as before.
				check(s.at.Add(after), now)
			}
		}
		if crossed {
			profiles = append(profiles, profile)
		}
	}
	return profiles, next
}

// Start lists the Leases every pollEvery and runs the timer until ctx ends
// (a manager Runnable).
func (l *Liveness) Start(ctx context.Context) error {
	l.mu.Lock()
	l.lastScan = l.now()
	l.mu.Unlock()
	retry := l.ProbeEvery
	if retry <= 0 {
		retry = 2 * time.Second
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var listed time.Time // the last list (zero: none yet)
	listedOK := false
	// due is when the next list is: now before the first, retry after a
	// failed one, pollEvery (which a profile's Track may have shortened)
	// after a successful one.
	due := func() time.Time {
		switch {
		case listed.IsZero():
			return time.Time{}
		case !listedOK:
			return listed.Add(retry)
		}
		return listed.Add(l.pollEvery())
	}
	for {
		if l.List != nil && !l.now().Before(due()) {
			ok, cameBack := l.probe(ctx)
			if ctx.Err() != nil {
				return nil
			}
			if cameBack && !l.wakeAll(ctx) {
				return nil
			}
			listed, listedOK = l.now(), ok
		}
		profiles, next := l.scan(l.now())
		if !l.send(ctx, profiles) {
			return nil
		}
		now := l.now()
		wait := time.Hour
		if !next.IsZero() {
			// A second past the deadline: the vehicle is Unreachable by
			// then on the planner's clock too.
			wait = next.Sub(now) + time.Second
			if l.List != nil && !next.After(now) {
				// A deadline passed that the view is too old to judge:
				// list now, or once the failed list may be retried.
				if listedOK {
					listed = time.Time{}
					continue
				}
				wait = due().Sub(now)
			}
		}
		if l.List != nil {
			wait = min(wait, due().Sub(now))
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

// wakeAll sends every tracked profile to Changes (a node came back); false
// when ctx ended.
func (l *Liveness) wakeAll(ctx context.Context) bool {
	l.mu.Lock()
	profiles := slices.Collect(maps.Keys(l.after))
	l.mu.Unlock()
	return l.send(ctx, profiles)
}

// send sends each profile to Changes; false when ctx ended first.
func (l *Liveness) send(ctx context.Context, profiles []string) bool {
	for _, p := range profiles {
		select {
		case l.Changes <- event.GenericEvent{Object: &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: p}}}:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// leaseNode is the node an agent Lease speaks for: its AgentLeaseLabel (""
// for other Leases).
func leaseNode(o client.Object) string {
	return o.GetLabels()[v1alpha1.AgentLeaseLabel]
}

var livenessLog = ctrl.Log.WithName("liveness")
