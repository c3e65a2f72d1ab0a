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

package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/node-agent/lokipush"
	"github.com/nettune/nettune/test/framework/testenv"
)

// The application's own traffic, as the autonomy stack would send it: a
// planner on xavier-a receives 16 KB frames at 40 Hz from xavier-b and
// xavier-c over TCP and logs one JSON line per frame to Loki under
// {app="planner", vehicle, host, peer} — nothing of nettune: no revision,
// no profile. The probe's topic has the same shape (fleet.DemoTopics), so
// the demo's bad edit harms these frames as it harms the probe's.
const (
	appFrame  = 16384
	appRate   = 40
	appPeer   = "xavier-a"
	appRedial = 10 * time.Second // a new connection now and then, as a restarted node would make
)

var appSenders = []string{"xavier-b", "xavier-c"}

// appEmitter runs the planner's traffic on every vehicle until stop.
type appEmitter struct {
	shipper *lokipush.Shipper
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []string
	frames  int
}

func startAppEmitter(t *testing.T) *appEmitter {
	t.Helper()
	var client *http.Client
	if dir := f.AgentCredentialsDir(); dir != "" {
		client = httpauth.DirClient(dir, false, 10*time.Second)
	}
	sh, err := lokipush.New(lokipush.Options{URL: f.LokiAddress(), Dir: t.TempDir(), Client: client, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &appEmitter{shipper: sh, cancel: cancel}
	e.wg.Add(1)
	go func() { defer e.wg.Done(); _ = sh.Run(ctx) }()
	for name, v := range f.Vehicles {
		recv := v.Host(appPeer)
		var ln net.Listener
		if err := recv.Do(func() (err error) {
			ln, err = net.Listen("tcp", net.JoinHostPort(recv.Addr.String(), "0"))
			return err
		}); err != nil {
			cancel()
			t.Fatalf("planner on %s %s: %v", name, appPeer, err)
		}
		go func() { <-ctx.Done(); ln.Close() }()
		e.wg.Add(1)
		go func() { defer e.wg.Done(); e.serve(ctx, name, ln) }()
		for _, h := range appSenders {
			e.wg.Add(1)
			go func() { defer e.wg.Done(); e.send(ctx, name, h, ln.Addr().String()) }()
		}
	}
	t.Cleanup(e.stop)
	return e
}

func (e *appEmitter) stop() {
	e.cancel()
	e.wg.Wait()
}

func (e *appEmitter) fail(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) < 10 {
		e.errs = append(e.errs, fmt.Sprintf(format, args...))
	}
}

// serve receives frames: each starts with its sender's host index and the
// instant it was due, so its latency includes any wait to be sent.
func (e *appEmitter) serve(ctx context.Context, vehicle string, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			<-ctx.Done()
			conn.Close()
		}()
		go func() {
			buf := make([]byte, appFrame)
			for {
				if _, err := io.ReadFull(conn, buf); err != nil {
					conn.Close()
					return
				}
				now := time.Now()
				sender := appSenders[int(buf[0])%len(appSenders)]
				due := time.Unix(0, int64(binary.BigEndian.Uint64(buf[1:9])))
				ms := float64(now.Sub(due).Microseconds()) / 1000
				e.shipper.Add(map[string]string{"app": "planner", "vehicle": vehicle, "host": sender, "peer": appPeer}, now,
					`{"topic":"/planning/trajectory","latency_ms":`+strconv.FormatFloat(ms, 'f', 3, 64)+`}`)
				e.mu.Lock()
				e.frames++
				e.mu.Unlock()
			}
		}()
	}
}

// send sends a frame every 1/appRate from host of vehicle, due on a fixed
// schedule: a frame that waits behind a stalled one is as late as it is.
func (e *appEmitter) send(ctx context.Context, vehicle, host, addr string) {
	h := f.Vehicles[vehicle].Host(host)
	idx := byte(0)
	for i, s := range appSenders {
		if s == host {
			idx = byte(i)
		}
	}
	frame := make([]byte, appFrame)
	frame[0] = idx
	period := time.Second / appRate
	next := time.Now()
	for ctx.Err() == nil {
		var conn net.Conn
		if err := h.Do(func() (err error) {
			d := net.Dialer{Timeout: 5 * time.Second}
			conn, err = d.DialContext(ctx, "tcp", addr)
			return err
		}); err != nil {
			if ctx.Err() == nil {
				e.fail("%s %s: dial %s: %v", vehicle, host, addr, err)
				time.Sleep(period)
			}
			continue
		}
		until := time.Now().Add(appRedial)
		for ctx.Err() == nil && time.Now().Before(until) {
			if wait := time.Until(next); wait > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
			}
			binary.BigEndian.PutUint64(frame[1:9], uint64(next.UnixNano()))
			next = next.Add(period)
			if _, err := conn.Write(frame); err != nil {
				if ctx.Err() == nil {
					e.fail("%s %s: write: %v", vehicle, host, err)
				}
				break
			}
		}
		conn.Close()
	}
}

// appJudge is the demo's judge, slow-messages, over the planner's lines
// instead of the probe's: the same threshold, confidence and tolerances;
// queries that know nothing of nettune's revisions (the controller counts
// each vehicle from when it verified its revision).
func appJudge(t *testing.T) v1alpha1.AnalysisSpec {
	t.Helper()
	judge, _ := demoAnalyses(t)
	a := *judge.DeepCopy()
	a.Name = "planner-slow-messages"
	probe := `{job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}`
	app := `{app="planner", vehicle=~"{{ .Vehicles }}"}`
	replace := func(q string) string {
		if !strings.Contains(q, probe) {
			t.Fatalf("the demo's judge query no longer reads %s: %s", probe, q)
		}
		return strings.ReplaceAll(q, probe, app)
	}
	a.Judge.SlowQuery = replace(a.Judge.SlowQuery)
	a.Judge.TotalQuery = replace(a.Judge.TotalQuery)
	if a.Judge.IntervalQuery != nil {
		a.Judge.IntervalQuery = ptr(replace(*a.Judge.IntervalQuery))
	}
	return a
}

// TestApplicationLatencyJudgesTheBadEdit: the demo's bad edit (a window of
// one segment, rto_min near a second, on the pairs into xavier-a), judged
// only on the application's own latency — a second emitter that knows
// nothing of nettune — is rolled back by the controller, the planner's
// analysis deciding it, and only the canaries ever had it.
func TestApplicationLatencyJudgesTheBadEdit(t *testing.T) {
	defer evidence(t)
	waitProfile(t, 3*time.Minute, "a settled profile to edit (Healthy, or rolled back to its stable revision)", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.StableRevision != "" &&
			(p.Status.Phase == v1alpha1.PhaseHealthy || p.Status.Phase == v1alpha1.PhaseRolledBack)
	})
	stable := getProfile(t).Status.StableRevision
	e := startAppEmitter(t)
	// Five seconds of every sender's frames reached Loki through the gateway.
	testenv.Loki{Loki: f.Loki}.WaitForCount(t, `{app="planner"}`, len(f.Vehicles)*len(appSenders)*appRate*5, 2*time.Minute)

	w := watchFleet(t)
	judge := appJudge(t)
	edit(t, func(p *v1alpha1.NetTuningProfile) {
		// The demo's bad edit with rto_min 900ms: another revision than the
		// one TestE2E rolled back (a rolled-back revision is not retried).
		bad := v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 1, Lock: ptr(true)}, Initcwnd: ptr(int32(1)), Ssthresh: ptr(int32(1)),
			RTOMin: &metav1.Duration{Duration: 900 * time.Millisecond}}
		p.Spec.HostPairs = []v1alpha1.HostPair{{From: "*", To: appPeer, Parameters: &bad}}
		p.Spec.Rollout = &v1alpha1.RolloutSpec{
			Canary:         v1alpha1.CanarySpec{Count: ptr(int32(2))},
			MaxUnavailable: ptr(intstr.FromInt32(2)),
			FailureBudget:  ptr(intstr.FromInt32(0)),
			Steps:          []v1alpha1.RolloutStep{{Analysis: &v1alpha1.AnalysisStep{Name: judge.Name}}, {SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}}},
			Analyses:       []v1alpha1.AnalysisSpec{judge},
		}
	})
	var bad string
	var canaries []string
	p := waitProfile(t, 6*time.Minute, "the bad edit rolled back on the planner's latency", func(p *v1alpha1.NetTuningProfile) bool {
		if p.Status.CurrentRevision != stable {
			bad, canaries = p.Status.CurrentRevision, p.Status.CanaryVehicles
		}
		stopOn(t, p, v1alpha1.PhasePaused, "the bad edit's rollout paused instead of rolling back")
		if p.Status.StableRevision != stable {
			t.Fatalf("the bad edit became stable (%s): promoted on the planner's latency", p.Status.StableRevision)
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseRolledBack
	})
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRolledBack)
	if c == nil || c.Reason != v1alpha1.ReasonAnalysisFailed || !strings.Contains(c.Message, judge.Name) {
		t.Fatalf("RolledBack condition %+v: want %s naming %s", c, v1alpha1.ReasonAnalysisFailed, judge.Name)
	}
	t.Logf("RolledBack: %s", c.Message)
	waitFor(t, time.Minute, "every node back on "+stable, func() bool { return allVerified(t, stable) })
	w.close()
	if got := w.vehicles(bad); strings.Join(got, ",") != strings.Join(canaries, ",") {
		t.Errorf("vehicles that received the bad revision: %v, want only the canaries %v", got, canaries)
	}
	e.stop()
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Logf("the planner received %d frames", e.frames)
	if len(e.errs) > 0 {
		t.Logf("the planner's senders met (they redial): %s", strings.Join(e.errs, "; "))
	}
	if e.frames == 0 {
		t.Fatal("the planner received no frame")
	}
}
