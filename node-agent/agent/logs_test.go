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
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/lokipush"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestLogsShippedCondition: each push outcome becomes the condition's
// status and reason, the message names the answer and the lines on disk.
func TestLogsShippedCondition(t *testing.T) {
	t.Parallel()
	if _, ok := logsShippedCondition(lokipush.PushHealth{}); ok {
		t.Error("a condition before the first push")
	}
	for _, tc := range []struct {
		h      lokipush.PushHealth
		status metav1.ConditionStatus
		want   []string
	}{
		{lokipush.PushHealth{OK: true, Code: "204", Reason: lokipush.ReasonShipped}, metav1.ConditionTrue, []string{"accepted"}},
		{lokipush.PushHealth{OK: true, Code: "204", Reason: lokipush.ReasonShipped, Buffered: 12}, metav1.ConditionTrue, []string{"12 line(s)"}},
		{lokipush.PushHealth{Code: "401", Reason: lokipush.ReasonUnauthorized, Message: "HTTP 401 Unauthorized", Buffered: 21}, metav1.ConditionFalse, []string{"HTTP 401 Unauthorized", "21 line(s) wait on disk"}},
		{lokipush.PushHealth{Code: "403", Reason: lokipush.ReasonForbidden, Message: "HTTP 403 Forbidden", Buffered: 1}, metav1.ConditionFalse, []string{"HTTP 403", "1 line(s)"}},
		{lokipush.PushHealth{Code: "429", Reason: lokipush.ReasonRateLimited, Message: "HTTP 429 Too Many Requests"}, metav1.ConditionFalse, []string{"429"}},
		{lokipush.PushHealth{Code: "503", Reason: lokipush.ReasonServerError, Message: "HTTP 503 Service Unavailable"}, metav1.ConditionFalse, []string{"503"}},
		{lokipush.PushHealth{Code: "network", Reason: lokipush.ReasonUnreachable, Message: "dial tcp: connection refused"}, metav1.ConditionFalse, []string{"connection refused"}},
		{lokipush.PushHealth{Code: "credentials", Reason: lokipush.ReasonCredentialsInvalid, Message: `credentials: directory /etc/nettune/loki: key "password" is missing`}, metav1.ConditionFalse, []string{`"password" is missing`}},
		{lokipush.PushHealth{Code: "400", Reason: lokipush.ReasonRejected, Message: "HTTP 400 Bad Request: too new"}, metav1.ConditionFalse, []string{"refused the content", "too new"}},
	} {
		c, ok := logsShippedCondition(tc.h)
		if !ok || c.Type != ConditionLogsShipped || c.Status != tc.status || c.Reason != tc.h.Reason {
			t.Errorf("%+v: condition %+v (%t), want %s/%s", tc.h, c, ok, tc.status, tc.h.Reason)
		}
		for _, w := range tc.want {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%+v: message %q lacks %q", tc.h, c.Message, w)
			}
		}
	}
	c, _ := logsShippedCondition(lokipush.PushHealth{Reason: lokipush.ReasonUnreachable, Message: strings.Repeat("x", 5000)})
	if len(c.Message) > maxLogsMessage {
		t.Errorf("message of %d bytes", len(c.Message))
	}
}

// TestStatusEqualLogsShipped: a LogsShipped condition whose message alone
// changed (more lines on disk) is no reason to write; a new reason or
// status is.
func TestStatusEqualLogsShipped(t *testing.T) {
	t.Parallel()
	build := func(h lokipush.PushHealth) v1alpha1.NodeNetTuningStatus {
		var st v1alpha1.NodeNetTuningStatus
		c, _ := logsShippedCondition(h)
		meta.SetStatusCondition(&st.Conditions, c)
		return st
	}
	unauth := lokipush.PushHealth{Code: "401", Reason: lokipush.ReasonUnauthorized, Message: "HTTP 401 Unauthorized", Buffered: 21}
	more := unauth
	more.Buffered = 42
	forbidden := unauth
	forbidden.Code, forbidden.Reason, forbidden.Message = "403", lokipush.ReasonForbidden, "HTTP 403 Forbidden"
	ok := lokipush.PushHealth{OK: true, Code: "204", Reason: lokipush.ReasonShipped}
	if !statusEqual(build(unauth), build(more)) {
		t.Error("a new count of lines on disk counts as a status change")
	}
	if statusEqual(build(unauth), build(forbidden)) {
		t.Error("a new reason does not count as a status change")
	}
	if statusEqual(build(unauth), build(ok)) {
		t.Error("a new status does not count as a status change")
	}
	// Other conditions' messages still count.
	a, b := build(ok), build(ok)
	meta.SetStatusCondition(&a.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "Repaired", Message: "1"})
	meta.SetStatusCondition(&b.Conditions, metav1.Condition{Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionFalse, Reason: "Repaired", Message: "2"})
	if statusEqual(a, b) {
		t.Error("a Drifted message change does not count")
	}
}

// rtFakeLogs is a LogShipper whose health the test sets.
type rtFakeLogs struct {
	mu sync.Mutex
	h  lokipush.PushHealth
}

func (f *rtFakeLogs) Health() lokipush.PushHealth {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h
}

func (f *rtFakeLogs) set(h lokipush.PushHealth) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h = h
}

// TestAgentReportsLogsShipped: the agent's NodeNetTuning carries the
// LogsShipped condition of its Loki push, through a real API server: absent
// before the first push, False with the reason and the lines on disk while
// Loki refuses, True once it accepts; a new count of lines alone writes
// nothing.
func TestAgentReportsLogsShipped(t *testing.T) {
	nettest.RequireRoot(t)
	t.Parallel()
	cp := rtControlPlane(t)
	h := rtNewHost(t)
	a := rtNewAgent(t, cp, h, "rt-node-"+nettest.RandHex(t, 4))
	logs := &rtFakeLogs{}
	a.rec.Logs = logs
	rtCreate(t, cp.Client, a.node, h.rtSpec("r1", rtCwndFirst))
	a.rtStart(t)
	nnt := rtWaitStatus(t, cp.Client, a.node)
	rtAssertApplied(t, a, nnt, rtCwndFirst)
	if c := meta.FindStatusCondition(nnt.Status.Conditions, ConditionLogsShipped); c != nil {
		t.Errorf("a LogsShipped condition before the first push: %+v", c)
	}

	waitLogs := func(status metav1.ConditionStatus, reason string, msg ...string) *metav1.Condition {
		t.Helper()
		var c *metav1.Condition
		rtEventually(t, "LogsShipped "+string(status)+"/"+reason, func() error {
			got := rtGet(t, cp.Client, a.node)
			c = meta.FindStatusCondition(got.Status.Conditions, ConditionLogsShipped)
			if c == nil || c.Status != status || c.Reason != reason {
				return fmt.Errorf("LogsShipped %+v", c)
			}
			for _, m := range msg {
				if !strings.Contains(c.Message, m) {
					return fmt.Errorf("message %q lacks %q", c.Message, m)
				}
			}
			if c.ObservedGeneration != got.Generation {
				return fmt.Errorf("observedGeneration %d, generation %d", c.ObservedGeneration, got.Generation)
			}
			return nil
		})
		return c
	}

	now := time.Now()
	logs.set(lokipush.PushHealth{Code: "401", Reason: lokipush.ReasonUnauthorized, Message: "HTTP 401 Unauthorized", Since: now, At: now, Buffered: 21})
	waitLogs(metav1.ConditionFalse, lokipush.ReasonUnauthorized, "HTTP 401 Unauthorized", "21 line(s) wait on disk")
	// The other conditions are untouched.
	rtAssertApplied(t, a, rtGet(t, cp.Client, a.node), rtCwndFirst)

	// More lines on disk, same reason: not written on every resync.
	logs.set(lokipush.PushHealth{Code: "401", Reason: lokipush.ReasonUnauthorized, Message: "HTTP 401 Unauthorized", Since: now, At: time.Now(), Buffered: 42})
	rtAssertNoWrites(t, a)

	logs.set(lokipush.PushHealth{Code: "credentials", Reason: lokipush.ReasonCredentialsInvalid, Message: `credentials: directory /etc/nettune/loki: key "password" is missing`, Buffered: 42})
	waitLogs(metav1.ConditionFalse, lokipush.ReasonCredentialsInvalid, `key "password" is missing`, "42 line(s)")

	logs.set(lokipush.PushHealth{OK: true, Code: "204", Reason: lokipush.ReasonShipped, Since: time.Now(), At: time.Now()})
	waitLogs(metav1.ConditionTrue, lokipush.ReasonShipped, "accepted")
	rtAssertNoWrites(t, a)
}
