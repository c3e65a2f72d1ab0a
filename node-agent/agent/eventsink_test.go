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

package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nettune/nettune/test/framework/nettest"
)

// evRecord is one EventSink call.
type evRecord struct{ kind, revision, message string }

// evRecorder is an EventSink keeping every event.
type evRecorder struct {
	mu     sync.Mutex
	events []evRecord
}

func (r *evRecorder) Event(kind, revision, message string) {
	r.mu.Lock()
	r.events = append(r.events, evRecord{kind, revision, message})
	r.mu.Unlock()
}

// wait returns the first event of kind about revision.
func (r *evRecorder) wait(t *testing.T, kind, revision string) evRecord {
	t.Helper()
	var found evRecord
	rtEventually(t, fmt.Sprintf("a %s event about %s", kind, revision), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events {
			if e.kind == kind && e.revision == revision {
				found = e
				return nil
			}
		}
		return fmt.Errorf("events so far: %+v", r.events)
	})
	return found
}

// TestAgentSendsEventsToEventSink: with the reconciler in a manager against
// a real API server (as in reconciler_test.go), its EventSink hears of a
// committed apply (applied, then verified), a refused spec, an apply rolled
// back by a failed probe, and a drift repair by the drift watcher wired as
// runAgent wires it.
func TestAgentSendsEventsToEventSink(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, "ev-node-"+nettest.RandHex(t, 4))
	rec := &evRecorder{}
	a.rec.Events = rec
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", rtCwndFirst))
	a.rtStart(t)

	applied := rec.wait(t, EventApplied, "r1")
	verified := rec.wait(t, EventVerified, "r1")
	if !strings.Contains(applied.message, "r1 applied") || !strings.Contains(verified.message, "1 item(s) read back as desired") {
		t.Errorf("applied %q / verified %q", applied.message, verified.message)
	}
	rec.mu.Lock()
	if len(rec.events) < 2 || rec.events[0].kind != EventApplied || rec.events[1].kind != EventVerified {
		t.Errorf("events %+v, want applied then verified first", rec.events)
	}
	rec.mu.Unlock()

	bad := h.rtSpec("r2-bad", 50)
	bad.Routes[0].Device = rtMissing
	rtUpdateSpec(t, cp.Client, a.node, bad)
	if e := rec.wait(t, EventRefused, "r2-bad"); !strings.Contains(e.message, rtMissing) {
		t.Errorf("refused event %q does not name %s", e.message, rtMissing)
	}

	broken := h.rtSpec("r3-unreachable-peer", 35)
	broken.Peers[0].ProbePort = 1 // nothing listens there: the connect probe fails
	rtUpdateSpec(t, cp.Client, a.node, broken)
	if e := rec.wait(t, EventReverted, "r3-unreachable-peer"); !strings.Contains(e.message, `rolled back to "r1"`) || !strings.Contains(e.message, "probe failed") {
		t.Errorf("reverted event %q", e.message)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.engine.WatchDrift(ctx, 200*time.Millisecond, 20*time.Millisecond, a.rec.DriftRepaired)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	nettest.IP(t, "-n", h.nsA, "route", "change", h.addrB+"/32", "dev", rtDevA) // metrics gone
	if e := rec.wait(t, EventDriftRepaired, "r1"); e.message != "1 item(s) re-tuned after drift" {
		t.Errorf("drift event %q", e.message)
	}
	rtAssertKernelRoute(t, h, rtCwndFirst)
}
