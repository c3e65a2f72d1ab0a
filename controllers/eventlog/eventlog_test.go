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

package eventlog_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/eventlog"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/node-agent/lokipush"
	"github.com/nettune/nettune/test/framework/envtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// memLog keeps the lines of a eventlog.Log.
type memLog struct {
	mu    sync.Mutex
	lines []memLine
}

type memLine struct {
	labels map[string]string
	at     time.Time
	raw    string
	line   eventlog.RolloutLine
}

func (m *memLog) Add(labels map[string]string, at time.Time, line string) {
	l := memLine{labels: maps.Clone(labels), at: at, raw: line}
	if err := json.Unmarshal([]byte(line), &l.line); err != nil {
		l.line.Event = "UNPARSABLE " + err.Error()
	}
	m.mu.Lock()
	m.lines = append(m.lines, l)
	m.mu.Unlock()
}

func (m *memLog) all() []memLine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.lines)
}

// teeLog writes to every log.
type teeLog []eventlog.Log

func (t teeLog) Add(labels map[string]string, at time.Time, line string) {
	for _, l := range t {
		l.Add(labels, at, line)
	}
}

// startControllerWithLog runs one controller replica with an event log.
func startControllerWithLog(e *envtest.Fleet, log eventlog.Log) {
	t := e.T()
	t.Helper()
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.CP.Config), ctrl.Options{Scheme: e.CP.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	opts := controllers.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("nettune-controller"),
		Namespace: envtest.Namespace, SkipNameValidation: true, EventLog: log,
	}
	if err := controllers.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestRolloutEventsLogged: every rollout event the controller records as a
// Kubernetes Event is also written to its EventLog as a JSON line in the
// stream {job="nettune-controller", profile}, carrying the revisions, phase,
// step and, for a rollback, the reason; through a real lokipush.Shipper the
// lines are queryable in a real Loki.
func TestRolloutEventsLogged(t *testing.T) {
	l := testenv.StartLoki(t)
	e := envtest.NewFleet(t)
	e.AddVehicles("xavier", "av-001", "av-002", "av-003", "av-004")

	shipper, err := lokipush.New(lokipush.Options{URL: l.URL, Dir: t.TempDir(), BatchWait: 100 * time.Millisecond, Log: envtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	shipCtx, stopShip := context.WithCancel(context.Background())
	shipped := make(chan struct{})
	go func() { defer close(shipped); _ = shipper.Run(shipCtx) }()
	t.Cleanup(func() { stopShip(); <-shipped })
	mem := &memLog{}
	startControllerWithLog(e, teeLog{mem, shipper})

	// r1 on every vehicle at once, then r2 canary first, then r3, which
	// every agent rolls back: the failure budget (0) rolls the rollout back.
	p := envtest.LanProfile(40, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	r1 := e.Settle(p)
	rollout := &v1alpha1.RolloutSpec{
		Canary: v1alpha1.CanarySpec{Count: envtest.Ptr(int32(1))},
		Steps:  []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: envtest.Ptr(int32(50))}}},
	}
	r2 := e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) { envtest.SetCwnd(p, 30); p.Spec.Rollout = rollout })
	e.WaitProfile("xavier-lan", time.Minute, "r2 stable", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.StableRevision == r2 && p.Status.Phase == v1alpha1.PhaseHealthy
	})
	bad := e.Profile("xavier-lan")
	envtest.SetCwnd(bad, 20)
	r3 := revision.Name(bad)
	e.FailRevision(r3)
	if got := e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) { envtest.SetCwnd(p, 20) }); got != r3 {
		t.Fatalf("revision %s, want %s", got, r3)
	}
	e.WaitProfile("xavier-lan", time.Minute, "r3 rolled back", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack && p.Status.FailedRevision == r3
	})

	// The controller announces after its status patch is written: the
	// rollback's line follows the status the wait above saw.
	lines := mem.all()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); lines = mem.all() {
		if slices.ContainsFunc(lines, func(l memLine) bool { return l.line.Event == "RolledBack" && l.line.Revision == r3 }) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	byEvent := map[string][]eventlog.RolloutLine{}
	for _, l := range lines {
		if want := map[string]string{"job": "nettune-controller", "profile": "xavier-lan"}; !maps.Equal(l.labels, want) {
			t.Errorf("line %s has labels %v, want %v", l.raw, l.labels, want)
		}
		if l.at.IsZero() || time.Since(l.at) > 5*time.Minute {
			t.Errorf("line %s has time %s", l.raw, l.at)
		}
		byEvent[l.line.Event] = append(byEvent[l.line.Event], l.line)
	}
	find := func(event, revision string) *eventlog.RolloutLine {
		for i, l := range byEvent[event] {
			if l.Revision == revision {
				return &byEvent[event][i]
			}
		}
		t.Errorf("no %s line for %s among %d lines", event, revision, len(lines))
		return nil
	}
	if l := find("RolloutStarted", r2); l != nil && (l.Type != "Normal" || l.Stable != r1 || l.Phase != v1alpha1.PhaseProgressing || !strings.Contains(l.Message, "canary")) {
		t.Errorf("RolloutStarted %+v", *l)
	}
	if l := find("StepAdvanced", r2); l != nil && (l.Step == nil || l.Stable != r1) {
		t.Errorf("StepAdvanced %+v", *l)
	}
	find("RolloutComplete", r1)
	if l := find("RolloutComplete", r2); l != nil && (l.Stable != r2 || l.Phase != v1alpha1.PhaseHealthy) {
		t.Errorf("RolloutComplete %+v", *l)
	}
	if l := find("RolledBack", r3); l != nil && (l.Type != "Warning" || l.Reason != "FailureBudgetExceeded" || l.Failed != r3 ||
		l.Stable != r2 || l.Phase != v1alpha1.PhaseRolledBack || !strings.Contains(l.Message, r2)) {
		t.Errorf("RolledBack %+v", *l)
	}

	// The same events as the Kubernetes Events of the profile (those of
	// the rollout: analyses and deletion are recorded elsewhere).
	logged := map[string]bool{}
	for _, l := range lines {
		logged[l.line.Event+": "+l.line.Message] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		recorded := map[string]bool{}
		for _, ev := range e.Events("xavier-lan") {
			if !strings.HasPrefix(ev, "Analysis") {
				recorded[ev] = true
			}
		}
		if maps.Equal(recorded, logged) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("Kubernetes Events:\n%s\nlogged:\n%s", sortedKeys(recorded), sortedKeys(logged))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Shipped: the rollback and both completions are in Loki.
	l.WaitForCount(t, `{job="nettune-controller", profile="xavier-lan"} | json | event="RolledBack" | reason="FailureBudgetExceeded" | failed="`+r3+`"`, 1, 30*time.Second)
	l.WaitForCount(t, `{job="nettune-controller", profile="xavier-lan"} | json | event="RolloutComplete"`, 2, 30*time.Second)
	l.WaitForCount(t, `{job="nettune-controller", profile="xavier-lan"}`, len(lines), 30*time.Second)
}

func sortedKeys(m map[string]bool) string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return strings.Join(keys, "\n")
}
