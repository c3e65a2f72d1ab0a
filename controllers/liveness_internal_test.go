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
	"io"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nettune/nettune/api/v1alpha1"
)

// The timer's arithmetic on a fake clock: renewals never wake a profile, a
// node that stops renewing wakes each profile once when it crosses that
// profile's unreachableAfter, a node coming back after the shortest one says
// so, and a node without a Lease is timed by its status heartbeat.
func TestLivenessScan(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	now := t0
	l := NewLiveness()
	l.Now = func() time.Time { return now }
	l.lastScan = t0
	l.Track("short", 10*time.Second)
	l.Track("long", 30*time.Second)
	for _, n := range []string{"a", "b"} {
		if l.Renewed(n) {
			t.Fatalf("a first renewal of %s came back", n)
		}
	}
	if got, next := l.scan(now); len(got) != 0 || !next.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("scan at t0: %v next %s, want none and t0+10s", got, next)
	}
	// Both renew every 5 s for 20 s: nothing crosses, the next deadline
	// moves with the renewals.
	for range 4 {
		now = now.Add(5 * time.Second)
		l.Renewed("a")
		l.Renewed("b")
		if got, next := l.scan(now); len(got) != 0 || !next.Equal(now.Add(10*time.Second)) {
			t.Fatalf("scan at +%s: %v next %s", now.Sub(t0), got, next.Sub(t0))
		}
	}
	// b stops at t0+20s; a goes on.
	stopped := now
	var woke []string
	for now.Before(stopped.Add(35 * time.Second)) {
		now = now.Add(time.Second)
		l.Renewed("a")
		got, _ := l.scan(now)
		for _, p := range got {
			woke = append(woke, p+"@"+now.Sub(stopped).String())
		}
	}
	if len(woke) != 2 || woke[0] != "short@10s" || woke[1] != "long@30s" {
		t.Errorf("woken %v, want short@10s and long@30s", woke)
	}
	if seen := l.LastSeen("b", now); !seen.Equal(stopped) {
		t.Errorf("LastSeen(b) %s, want its last renewal %s (not the heartbeat given)", seen, stopped)
	}
	if !l.Renewed("b") {
		t.Errorf("b renewing after 35 s of silence did not come back")
	}

	// A node without a Lease: its heartbeat, remembered when read.
	beat := now.Add(-4 * time.Second)
	if seen := l.LastSeen("c", beat); !seen.Equal(beat) {
		t.Errorf("LastSeen(c) %s, want its heartbeat", seen)
	}
	if _, next := l.scan(now); !next.Equal(beat.Add(10 * time.Second)) {
		t.Errorf("next %s, want c's heartbeat + 10s", next.Sub(t0))
	}
	now = beat.Add(11 * time.Second)
	if got, _ := l.scan(now); len(got) != 1 || got[0] != "short" {
		t.Errorf("c silent past 10s: woke %v, want short", got)
	}
	l.Untrack("short")
	l.Forget("c")
	if _, next := l.scan(now); next.IsZero() || next.Before(now) {
		t.Errorf("after Untrack and Forget: next %s", next)
	}
}

// A node the timer learns of through a status heartbeat, or whose heartbeat
// moved, wakes the timer (its deadline may be the next one); a node with a Lease is never woken
// for by its status refresh, one without is after a gap.
func TestLivenessHeartbeatsAndPredicate(t *testing.T) {
	l := NewLiveness()
	now := time.Now()
	l.LastSeen("old-agent", now)
	select {
	case <-l.wake:
	default:
		t.Errorf("a new heartbeat-only node did not wake the timer")
	}
	l.LastSeen("old-agent", now)
	select {
	case <-l.wake:
		t.Errorf("a known node's same heartbeat woke the timer")
	default:
	}
	l.LastSeen("old-agent", now.Add(time.Second))
	select {
	case <-l.wake:
	default:
		t.Errorf("a newer heartbeat (the timer may have passed the old one's deadline) did not wake the timer")
	}
	l.Renewed("new-agent")
	if !l.HasLease("new-agent") || l.HasLease("old-agent") {
		t.Errorf("HasLease: new-agent %v old-agent %v", l.HasLease("new-agent"), l.HasLease("old-agent"))
	}

	refresh := func(name string, gap time.Duration) event.UpdateEvent {
		o := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
		o.Status.LastHeartbeatTime = &metav1.Time{Time: now}
		n := o.DeepCopy()
		n.Status.LastHeartbeatTime = &metav1.Time{Time: now.Add(gap)}
		return event.UpdateEvent{ObjectOld: o, ObjectNew: n}
	}
	pred := nntPredicate(l)
	if pred.Update(refresh("new-agent", 5*time.Minute)) {
		t.Errorf("a status refresh of a node with a Lease passed the predicate")
	}
	if !pred.Update(refresh("old-agent", 2*time.Minute)) {
		t.Errorf("a heartbeat resuming after 2m on a node without a Lease did not pass")
	}
	if pred.Update(refresh("old-agent", 30*time.Second)) {
		t.Errorf("a routine 30 s heartbeat passed the predicate")
	}
}

// While the controller's watch of the Leases fails, no node's silence
// grows; a probe that lists the Leases ends the spell: a Lease whose
// version moved was renewed, one that did not resumes its silence where it
// stood. Without a probe the informer's next event ends it.
func TestLivenessBlind(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0
	lease := func(node, version string) coordinationv1.Lease {
		return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: version,
			Labels: map[string]string{v1alpha1.AgentLeaseLabel: node}}}
	}
	var listed []coordinationv1.Lease
	listErr := errors.New("connection refused")
	l := NewLiveness()
	l.Now = func() time.Time { return now }
	l.List = func(context.Context) ([]coordinationv1.Lease, error) { return listed, listErr }
	l.lastScan = t0
	l.Track("p", 10*time.Second)
	l.Observed("alive", "1")
	l.Observed("dead", "1")

	now = t0.Add(5 * time.Second)
	l.Blind()
	now = t0.Add(2 * time.Minute)
	if got, next := l.scan(now); len(got) != 0 || !next.IsZero() {
		t.Fatalf("blind: scan woke %v, next %s; want nothing", got, next)
	}
	for _, n := range []string{"alive", "dead"} {
		if seen := l.LastSeen(n, time.Time{}); now.Sub(seen) != 5*time.Second {
			t.Errorf("blind for 115 s: %s silent %s, want the 5 s it had when the watch failed", n, now.Sub(seen))
		}
	}
	// The API server still unreachable: the probe changes nothing.
	l.probe(context.Background())
	if blind, _ := l.IsBlind(); !blind {
		t.Fatalf("a failed probe ended the blind spell")
	}
	// Back: alive renewed meanwhile, dead did not.
	listed, listErr = []coordinationv1.Lease{lease("alive", "7"), lease("dead", "1")}, nil
	l.probe(context.Background())
	if blind, total := l.IsBlind(); blind || total != 115*time.Second {
		t.Fatalf("after a listed probe: blind %v for %s, want false after 115s", blind, total)
	}
	if seen := l.LastSeen("alive", time.Time{}); !seen.Equal(now) {
		t.Errorf("alive last seen %s before the probe, want now", now.Sub(seen))
	}
	if seen := l.LastSeen("dead", time.Time{}); now.Sub(seen) != 5*time.Second {
		t.Errorf("dead silent %s after the spell, want 5s", now.Sub(seen))
	}
	if got, _ := l.scan(now); len(got) != 0 {
		t.Errorf("the scan that ends the spell woke %v: the spell counted as silence", got)
	}
	now = now.Add(6 * time.Second)
	if got, _ := l.scan(now); len(got) != 1 || got[0] != "p" {
		t.Errorf("dead 11 s silent counting the time before the spell: woke %v, want p", got)
	}
	// The probe goes on until the informer delivers again.
	if !l.probing {
		t.Errorf("probing stopped before the informer delivered")
	}
	l.Observed("alive", "8")
	if l.probing {
		t.Errorf("probing goes on after the informer delivered")
	}

	// Without a probe, the informer's next event ends a spell.
	m := NewLiveness()
	m.Now = func() time.Time { return now }
	m.Observed("a", "1")
	m.Blind()
	now = now.Add(time.Minute)
	m.Observed("a", "2")
	if blind, total := m.IsBlind(); blind || total != time.Minute {
		t.Errorf("informer event: blind %v for %s, want false after 1m", blind, total)
	}
}

// Only a failed watch of the Leases blinds: a normal end of the watch, an
// expired resourceVersion or another type's failure does not.
func TestLivenessWatchErrorHandler(t *testing.T) {
	reflector := func(obj runtime.Object) *toolscache.Reflector {
		return toolscache.NewReflectorWithOptions(&toolscache.ListWatch{}, obj, toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), toolscache.ReflectorOptions{})
	}
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	for _, c := range []struct {
		name  string
		obj   runtime.Object
		err   error
		blind bool
	}{
		{"lease watch refused", &coordinationv1.Lease{}, refused, true},
		{"lease watch ended", &coordinationv1.Lease{}, io.EOF, false},
		{"lease version expired", &coordinationv1.Lease{}, apierrors.NewResourceExpired("too old"), false},
		{"node watch refused", &v1alpha1.NodeNetTuning{}, refused, false},
	} {
		l := NewLiveness()
		l.WatchErrorHandler(context.Background(), reflector(c.obj), c.err)
		if blind, _ := l.IsBlind(); blind != c.blind {
			t.Errorf("%s: blind %v, want %v", c.name, blind, c.blind)
		}
	}
}
