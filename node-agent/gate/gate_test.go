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

package gate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
)

func TestFileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gate")
	f := &File{Path: path}
	cases := []struct {
		content    *string
		state      v1alpha1.GateState
		reasonPart string
	}{
		{nil, v1alpha1.GateClosed, "no gate file"},
		{new("open\n"), v1alpha1.GateOpen, ""},
		{new("closed driving autonomously\n"), v1alpha1.GateClosed, "driving autonomously"},
		{new("CLOSED"), v1alpha1.GateClosed, "closed by the vehicle"},
		{new("maybe later"), v1alpha1.GateClosed, "neither open nor closed"},
		{new(""), v1alpha1.GateClosed, "neither open nor closed"},
		{new("Open parked at depot 3\nignored second line"), v1alpha1.GateOpen, "parked at depot 3"},
	}
	for _, c := range cases {
		if c.content == nil {
			_ = os.Remove(path)
		} else if err := os.WriteFile(path, []byte(*c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		s := f.Read()
		if s.State != c.state || !strings.Contains(s.Reason, c.reasonPart) || s.Since.IsZero() {
			t.Errorf("gate file %v: %+v, want %s with reason containing %q and a since", c.content, s, c.state, c.reasonPart)
		}
	}
}

func TestWatchSeesChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(path, []byte("closed driving"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan State, 4)
	go (&File{Path: path}).Watch(ctx, 20*time.Millisecond, func(s State) { seen <- s })
	next := func(what string) State {
		select {
		case s := <-seen:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("waited 10s for the watcher to report %s", what)
			return State{}
		}
	}
	if s := next("the first read"); s.State != v1alpha1.GateClosed || s.Reason != "driving" {
		t.Fatalf("first state %+v, want closed (driving)", s)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("open"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if s := next("the gate opening"); s.State != v1alpha1.GateOpen {
		t.Fatalf("after writing open: %+v", s)
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	open := State{State: v1alpha1.GateOpen}
	closed := State{State: v1alpha1.GateClosed, Reason: "driving", Since: now.Add(-time.Minute)}
	night := []v1alpha1.ProfileWindows{{Profile: "p", Windows: []v1alpha1.MaintenanceWindow{{Schedule: "0 22 * * *", Duration: metav1.Duration{Duration: 4 * time.Hour}, TimeZone: "UTC"}}}}
	noon := []v1alpha1.ProfileWindows{{Profile: "q", Windows: []v1alpha1.MaintenanceWindow{{Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "UTC"}}}}
	bad := []v1alpha1.ProfileWindows{{Profile: "r", Windows: []v1alpha1.MaintenanceWindow{{Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, TimeZone: "Nowhere/Atlantis"}}}}
	cases := []struct {
		name    string
		p       *v1alpha1.NodeApplyPolicy
		g       State
		allowed bool
		reason  string
		msg     string
	}{
		{"no policy, no gate", nil, NotConfigured, true, ReasonAllowed, ""},
		{"no policy, gate closed", nil, closed, false, ReasonGateClosed, "apply gate closed since 2026-11-28T11:59:00Z: driving"},
		{"no policy, gate open", nil, open, true, ReasonAllowed, ""},
		{"required, none", &v1alpha1.NodeApplyPolicy{Gate: v1alpha1.ApplyGateRequired}, NotConfigured, false, ReasonGateNotConfigured, "requires an apply gate"},
		{"ignored, closed", &v1alpha1.NodeApplyPolicy{Gate: v1alpha1.ApplyGateIgnored}, closed, true, ReasonAllowed, ""},
		{"immediate, closed", &v1alpha1.NodeApplyPolicy{Immediate: "rollback of profile p", Windows: night}, closed, true, ReasonImmediate, "rollback of profile p"},
		{"outside window", &v1alpha1.NodeApplyPolicy{Windows: night}, open, false, ReasonOutsideWindow, "next opens 2026-11-28T22:00:00Z"},
		{"inside window", &v1alpha1.NodeApplyPolicy{Windows: noon}, open, true, ReasonAllowed, ""},
		{"every profile's window", &v1alpha1.NodeApplyPolicy{Windows: append(append([]v1alpha1.ProfileWindows{}, noon...), night...)}, open, false, ReasonOutsideWindow, "profile p"},
		{"gate and window both", &v1alpha1.NodeApplyPolicy{Windows: night}, closed, false, ReasonGateClosed, "no maintenance window of profile p"},
		{"window unknown here", &v1alpha1.NodeApplyPolicy{Windows: bad}, open, false, ReasonWindowInvalid, "profile r: maintenanceWindows[0].timeZone \"Nowhere/Atlantis\""},
	}
	for _, c := range cases {
		d := Decide(c.p, c.g, now, time.UTC)
		if d.Allowed != c.allowed || d.Reason != c.reason || !strings.Contains(d.Message, c.msg) {
			t.Errorf("%s: %+v, want allowed=%t reason=%s message containing %q", c.name, d, c.allowed, c.reason, c.msg)
		}
	}
}
