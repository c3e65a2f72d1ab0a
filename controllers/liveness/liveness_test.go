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
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/nettune/nettune/api/v1alpha1"
)

// renew observes a renewal of node's Lease: a resourceVersion not seen
// before (the same as a list showing it moved).
func renew(l *Liveness, node string) bool {
	renewals++
	return l.Observed(node, strconv.Itoa(renewals))
}

var renewals int

// The timer's arithmetic on a fake clock: renewals never wake a profile, a
// node that stops renewing wakes each profile once when it crosses that
// profile's unreachableAfter, a node coming back after the shortest one says
// so, and a node without a Lease is timed by its status heartbeat.
func TestLivenessScan(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	now := t0
	l := New()
	l.Now = func() time.Time { return now }
	l.lastScan = t0
	l.Track("short", 10*time.Second)
	l.Track("long", 30*time.Second)
	for _, n := range []string{"a", "b"} {
		if renew(l, n) {
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
		renew(l, "a")
		renew(l, "b")
		if got, next := l.scan(now); len(got) != 0 || !next.Equal(now.Add(10*time.Second)) {
			t.Fatalf("scan at +%s: %v next %s", now.Sub(t0), got, next.Sub(t0))
		}
	}
	// b stops at t0+20s; a goes on.
	stopped := now
	var woke []string
	for now.Before(stopped.Add(35 * time.Second)) {
		now = now.Add(time.Second)
		renew(l, "a")
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
	if !renew(l, "b") {
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
	if _, next := l.scan(now); next.IsZero() || next.Before(now) {
		t.Errorf("after Untrack: next %s", next)
	}
}

// A node the timer learns of through a status heartbeat, or whose heartbeat
// moved, wakes the timer (its deadline may be the next one); a node with a Lease is never woken
// for by its status refresh, one without is after a gap.
func TestLivenessHeartbeatsAndPredicate(t *testing.T) {
	l := New()
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
	renew(l, "new-agent")
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
	pred := NodeNetTuningPredicate(l)
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

// Silence counts only up to the view: while the informer delivers nothing
// (its watch cut off) no node's silence grows, and a deadline the view is
// too old to judge needs a list of the Leases first: a failed list counts
// nothing, a successful one makes the view current, renews the Leases whose
// version moved, and the others resume their silence where it stood.
func TestLivenessView(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0
	lease := func(node, version string) metav1.PartialObjectMetadata {
		return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: version,
			Labels: map[string]string{v1alpha1.AgentLeaseLabel: node}}}
	}
	var listed []metav1.PartialObjectMetadata
	listErr := errors.New("connection refused")
	lists := 0
	l := New()
	l.Now = func() time.Time { return now }
	l.List = func(context.Context) ([]metav1.PartialObjectMetadata, error) { lists++; return listed, listErr }
	l.lastScan = t0
	l.Track("p", 10*time.Second)
	l.Observed("alive", "1")
	l.Observed("dead", "1")

	// The informer goes quiet at t0+5s (the last event); two minutes pass.
	now = t0.Add(5 * time.Second)
	l.Observed("alive", "1") // a relist: same version, no renewal
	now = t0.Add(2 * time.Minute)
	for _, n := range []string{"alive", "dead"} {
		if seen := l.LastSeen(n, time.Time{}); now.Sub(seen) != 5*time.Second {
			t.Errorf("informer quiet for 115 s: %s silent %s, want the 5 s it had at the last event", n, now.Sub(seen))
		}
	}
	got, next := l.scan(now)
	if len(got) != 0 {
		t.Fatalf("scan with a stale view woke %v", got)
	}
	if next.After(now) {
		t.Fatalf("next %s after now: the passed deadline t0+10s was not reported", next.Sub(t0))
	}
	// The API server still cut off: the list fails, nothing counts.
	if ok, _ := l.probe(context.Background()); ok {
		t.Fatalf("a failed list succeeded")
	}
	if got, _ := l.scan(now); len(got) != 0 {
		t.Fatalf("after a failed list: woke %v", got)
	}
	// Back: alive renewed meanwhile, dead did not.
	listed, listErr = []metav1.PartialObjectMetadata{lease("alive", "7"), lease("dead", "1")}, nil
	if ok, back := l.probe(context.Background()); !ok || back {
		t.Fatalf("a successful list: ok %v, came back %v (alive was silent 5 s of 10)", ok, back)
	}
	if seen := l.LastSeen("alive", time.Time{}); !seen.Equal(now) {
		t.Errorf("alive last seen %s before the list, want now", now.Sub(seen))
	}
	if seen := l.LastSeen("dead", time.Time{}); now.Sub(seen) != 5*time.Second {
		t.Errorf("dead silent %s after the list, want 5s", now.Sub(seen))
	}
	if got, _ := l.scan(now); len(got) != 0 {
		t.Errorf("the scan after the list woke %v: the quiet time counted as silence", got)
	}
	now = now.Add(6 * time.Second)
	l.Observed("alive", "8") // the informer delivers again
	if got, _ := l.scan(now); len(got) != 1 || got[0] != "p" {
		t.Errorf("dead 11 s silent counting the time before the cut: woke %v, want p", got)
	}
	if lists != 2 {
		t.Errorf("%d lists, want 2 (one failed, one after the API server was back)", lists)
	}

	// A quiet fleet whose agents all stopped while the API server works:
	// the list succeeds at once and shows them silent; nothing is forgiven.
	m := New()
	m.Now = func() time.Time { return now }
	m.List = func(context.Context) ([]metav1.PartialObjectMetadata, error) {
		return []metav1.PartialObjectMetadata{lease("a", "1")}, nil
	}
	m.lastScan = now
	m.Track("p", 10*time.Second)
	m.Observed("a", "1")
	now = now.Add(11 * time.Second)
	if got, next := m.scan(now); len(got) != 0 || next.After(now) {
		t.Fatalf("stale view: woke %v, next in %s; want nothing and a passed deadline", got, next.Sub(now))
	}
	if ok, _ := m.probe(context.Background()); !ok {
		t.Fatalf("list failed")
	}
	if got, _ := m.scan(now); len(got) != 1 || got[0] != "p" {
		t.Errorf("a stopped agent whose Lease a working API server shows unrenewed for 11 s: woke %v, want p", got)
	}
}

// The timer lists the Leases before counting a crossing its view cannot
// judge, again every ProbeEvery while the list fails, and wakes the profile
// once a list shows the node silent.
func TestLivenessTimerProbes(t *testing.T) {
	var mu sync.Mutex
	fail, renewed := true, false
	lists := 0
	l := New()
	l.ProbeEvery = 50 * time.Millisecond
	l.List = func(context.Context) ([]metav1.PartialObjectMetadata, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		if fail {
			return nil, errors.New("connection reset by peer")
		}
		lease := func(node, version string) metav1.PartialObjectMetadata {
			return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: version,
				Labels: map[string]string{v1alpha1.AgentLeaseLabel: node}}}
		}
		if renewed {
			// Renewing: a new version at every list.
			v := fmt.Sprint(lists)
			return []metav1.PartialObjectMetadata{lease("a", v), lease("b", v)}, nil
		}
		return []metav1.PartialObjectMetadata{lease("a", "1")}, nil
	}
	l.Track("p", 300*time.Millisecond)
	l.Observed("a", "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = l.Start(ctx) }()
	select {
	case e := <-l.Changes:
		t.Fatalf("woke %s while the Leases could not be read", e.Object.GetName())
	case <-time.After(2 * time.Second):
	}
	mu.Lock()
	failed := lists
	fail = false
	mu.Unlock()
	if failed < 5 {
		t.Errorf("%d lists in 700 ms of failing lists every 50 ms", failed)
	}
	select {
	case e := <-l.Changes:
		if e.Object.GetName() != "p" {
			t.Errorf("woke %s, want p", e.Object.GetName())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("a node silent past unreachableAfter by a successful list did not wake its profile")
	}
	// a renews, and so does a node b the informer delivered once; then the
	// informer is quiet. At b's deadline the timer lists the Leases: b was
	// renewed (no crossing) and a came back, which wakes the profile (the
	// informer delivering a's version later would not say so).
	mu.Lock()
	renewed = true
	mu.Unlock()
	l.Observed("b", "1")
	select {
	case e := <-l.Changes:
		if e.Object.GetName() != "p" {
			t.Errorf("woke %s, want p", e.Object.GetName())
		}
	case <-time.After(3 * time.Second):
		t.Fatalf("a node a list shows renewed after its silence did not wake its profile")
	}
}

// Without a Lease informer the timer lists the Leases every pollEvery (a
// third of the shortest unreachableAfter): Synced once the first list
// succeeded, a node whose Lease version moves stays reachable, one whose
// version stands still wakes its profile, a Lease that is no longer listed
// leaves its node to its status heartbeat, and the lists keep to their
// period.
func TestLivenessPolls(t *testing.T) {
	l := New()
	if got := l.pollEvery(); got != v1alpha1.DefaultUnreachableAfter/3 {
		t.Errorf("pollEvery with no profile %s, want a third of the default unreachableAfter", got)
	}
	l.Track("slow", time.Hour)
	l.Track("p", 900*time.Millisecond)
	if got := l.pollEvery(); got != MinPoll {
		t.Errorf("pollEvery for unreachableAfter 900ms %s, want the floor %s", got, MinPoll)
	}
	l.Untrack("p")
	l.Track("p", 1500*time.Millisecond)
	var mu sync.Mutex
	lists, listedB := 0, true
	l.List = func(context.Context) ([]metav1.PartialObjectMetadata, error) {
		mu.Lock()
		defer mu.Unlock()
		lists++
		lease := func(node, version string) metav1.PartialObjectMetadata {
			return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: node, ResourceVersion: version,
				Labels: map[string]string{v1alpha1.AgentLeaseLabel: node}}}
		}
		out := []metav1.PartialObjectMetadata{lease("alive", fmt.Sprint(lists)), lease("silent", "1")}
		if listedB {
			out = append(out, lease("gone", fmt.Sprint(lists)))
		}
		return out, nil
	}
	if l.Synced() {
		t.Fatalf("Synced before any list")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go func() { _ = l.Start(ctx) }()
	for !l.Synced() {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("not Synced 2 s after Start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !l.HasLease("alive") || !l.HasLease("gone") {
		t.Fatalf("the first list did not record the Leases")
	}
	select {
	case e := <-l.Changes:
		if e.Object.GetName() != "p" {
			t.Errorf("woke %s, want p", e.Object.GetName())
		}
		took := time.Since(start)
		// silent was first seen at the first list: due 1.5 s later (plus
		// the timer's second), not before.
		if took < 1500*time.Millisecond || took > 4*time.Second {
			t.Errorf("silent's profile woken %s after the first list, want 1.5 s to 4 s", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("a Lease whose version stood still did not wake its profile")
	}
	now := time.Now()
	if seen := l.LastSeen("alive", time.Time{}); now.Sub(seen) > time.Second {
		t.Errorf("alive, renewed at every list, last seen %s ago (lists every 500ms)", now.Sub(seen))
	}
	mu.Lock()
	listedB = false
	n := lists
	mu.Unlock()
	time.Sleep(1200 * time.Millisecond)
	if l.HasLease("gone") {
		t.Errorf("a Lease no longer listed still counts for its node")
	}
	mu.Lock()
	n = lists - n
	mu.Unlock()
	// Every 500 ms, and at most once more at a deadline the view could
	// not judge.
	if n < 1 || n > 4 {
		t.Errorf("%d lists in 1.2 s, want about 2 (every 500ms)", n)
	}
}

// BenchmarkLivenessHeap reports the bytes Liveness keeps per node of a
// 30,000-node fleet whose Leases a list showed, the node names and
// versions being the listed objects' own strings (as probe gets them).
func BenchmarkLivenessHeap(b *testing.B) {
	const n = 30000
	names := make([]string, n)
	versions := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("v%05d-h%d", i/5, i%5)
		versions[i] = strconv.Itoa(1000000 + i)
	}
	for b.Loop() {
		before := heapInUse()
		l := New()
		for i := range names {
			l.Observed(names[i], versions[i])
		}
		b.ReportMetric(float64(heapInUse()-before)/n, "bytes/node")
		runtime.KeepAlive(l)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
