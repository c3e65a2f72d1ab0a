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

package analysis

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/testenv"
)

// TestAnalysisOnAnAuthenticatedLoki measures one analysis against a real
// Loki with auth_enabled (Loki's default) behind a real TLS gateway with
// basic auth and per-user tenants (nginx, a CA made by the test), with the
// credentials read from a Secret's data at each measurement: the right
// credentials measure; a wrong password, a tenant the user may not name, no
// tenant, an untrusted CA, the gateway down, a 429 and a Secret missing or
// lacking a key are each Unavailable (never Error, Failed or Successful),
// naming the analysis and what the backend answered; a rotated Secret is
// used at the next measurement; no message carries a credential.
func TestAnalysisOnAnAuthenticatedLoki(t *testing.T) {
	loki := testenv.StartLokiOpts(t, testenv.LokiOptions{Auth: true, Tenant: "fleet"})
	const password, newPassword = "judge-Pa55-word", "judge-N3w-word"
	gw := testenv.StartGateway(t, testenv.GatewayOptions{Upstream: loki.URL, Users: []testenv.GatewayUser{
		{Name: "judge", Password: password, Tenants: []string{"fleet"}},
	}})

	now := time.Now()
	for _, v := range []string{"av-001", "av-002"} {
		entries := make([]testenv.LokiEntry, 200)
		for i := range entries {
			entries[i] = testenv.LokiEntry{Time: now.Add(-2*time.Minute + time.Duration(i)*100*time.Millisecond), Line: fmt.Sprintf(`{"latency_ms": %d}`, 5+i%7)}
		}
		loki.Push(t, map[string]string{"job": "planner", "vehicle": v}, entries)
	}
	loki.WaitForCount(t, `{job="planner"}`, 400, time.Minute)
	// Another tenant's lines, which the judge must not see.
	loki.WithTenant("other").Push(t, map[string]string{"job": "planner", "vehicle": "av-001"}, []testenv.LokiEntry{{Time: now.Add(-time.Minute), Line: `{"latency_ms": 900}`}})

	interval, window := metav1Duration(time.Second), metav1Duration(5*time.Minute)
	samples := `sum(count_over_time({job="planner", vehicle=~"{{ .Vehicles }}"} [{{ .Window }}]))`
	spec := &v1alpha1.AnalysisSpec{Name: "planner-latency", Provider: v1alpha1.ProviderLoki,
		Query:        `max(max_over_time({job="planner", vehicle=~"{{ .Vehicles }}"} | json | unwrap latency_ms [{{ .Window }}]) by ())`,
		SamplesQuery: &samples, MaxValue: ptrString("20"), MinSamples: ptrInt64(100), Interval: interval, Window: window,
		SecretRef: &v1alpha1.SecretReference{Name: "loki"}}
	ca := string(gw.CAPEM)
	secret := map[string]string{"tenant": "fleet", "username": "judge", "password": password, "ca.crt": ca}
	present := true
	b := Backends{LokiAddress: gw.URL, Namespace: "nettune-system", Secrets: func(_ context.Context, name string) (map[string][]byte, error) {
		if name != "loki" || !present {
			return nil, fmt.Errorf("not found")
		}
		out := map[string][]byte{}
		for k, v := range secret {
			out[k] = []byte(v)
		}
		return out, nil
	}}
	canary := Cohort{Vehicles: []string{"av-001"}}
	baseline := Cohort{Vehicles: []string{"av-002"}}
	measure := func() Measurement {
		q, err := b.QuerierFor(context.Background(), spec, "address")
		if err != nil {
			return ErrorMeasurement(time.Now(), err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return Measure(ctx, q, "p", spec, canary, baseline, time.Now())
	}
	var messages []string
	expect := func(name string, verdict Verdict, mention ...string) {
		t.Helper()
		m := measure()
		messages = append(messages, m.Message)
		t.Logf("%s: %s %s", name, m.Verdict, m.Message)
		if m.Verdict != verdict {
			t.Fatalf("%s: verdict %s (%s), want %s", name, m.Verdict, m.Message, verdict)
		}
		for _, s := range mention {
			if !strings.Contains(m.Message, s) {
				t.Fatalf("%s: message %q does not say %q", name, m.Message, s)
			}
		}
	}

	expect("right credentials", VerdictPass)
	if m := measure(); m.Canary == nil || *m.Canary != 11 {
		t.Fatalf("canary max %v, want 11 (the other tenant's 900 must not count)", m.Canary)
	}
	secret["password"] = "wrong-password"
	expect("wrong password", VerdictUnavailable, "HTTP 401")
	secret["password"] = password
	secret["tenant"] = "other"
	expect("a tenant the user may not name", VerdictUnavailable, "HTTP 403")
	delete(secret, "tenant")
	expect("no tenant", VerdictUnavailable, "HTTP 40")
	secret["tenant"] = "fleet"
	delete(secret, "ca.crt")
	expect("untrusted CA", VerdictUnavailable, "certificate")
	secret["ca.crt"] = ca
	delete(secret, "password")
	expect("Secret lacking a key", VerdictUnavailable, "analysis planner-latency", `Secret nettune-system/loki: key "password" is missing`)
	secret["password"] = password
	present = false
	expect("Secret missing", VerdictUnavailable, "analysis planner-latency", "Secret nettune-system/loki: not found")
	present = true
	gw.SetMode(t, "429")
	expect("rate limited", VerdictUnavailable, "HTTP 429")
	gw.SetMode(t, "")
	gw.Stop(t)
	expect("gateway down", VerdictUnavailable, "connection refused")
	gw.Start(t)
	expect("gateway back", VerdictPass)

	// Rotation: the gateway takes only the new password; the Secret
	// follows; the next measurement uses it, with no restart of anything.
	gw.SetPassword(t, "judge", newPassword)
	expect("password rotated at the gateway only", VerdictUnavailable, "HTTP 401")
	secret["password"] = newPassword
	began := time.Now()
	expect("Secret rotated", VerdictPass)
	t.Logf("the first measurement after the rotation took %s", time.Since(began).Round(time.Millisecond))

	for _, msg := range messages {
		for _, v := range []string{password, newPassword, "wrong-password", basicOf("judge", password), basicOf("judge", newPassword)} {
			if strings.Contains(msg, v) {
				t.Errorf("a message shows a credential: %q", msg)
			}
		}
	}
}

func metav1Duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func basicOf(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// TestApplicationLatencyCountsFromVerification judges on an application's
// own latency — one JSON line per message in Loki, labeled with the
// vehicle and nothing of nettune — on a real Loki: a canary vehicle is
// measured only once the whole window is after it verified the revision,
// so its slow messages from before the change never count.
func TestApplicationLatencyCountsFromVerification(t *testing.T) {
	loki := testenv.StartLoki(t)
	now := time.Now()
	verified := now.Add(-2 * time.Minute)
	push := func(vehicle string, from, to time.Time, latency int) {
		var entries []testenv.LokiEntry
		for ts := from; ts.Before(to); ts = ts.Add(200 * time.Millisecond) {
			entries = append(entries, testenv.LokiEntry{Time: ts, Line: fmt.Sprintf(`{"topic": "/planning/trajectory", "latency_ms": %d}`, latency)})
		}
		loki.Push(t, map[string]string{"app": "planner", "vehicle": vehicle}, entries)
	}
	// av-001 (canary): 40 ms before it verified the new revision, 6 ms after.
	push("av-001", now.Add(-6*time.Minute), verified, 40)
	push("av-001", verified, now, 6)
	// av-002 (baseline): 7 ms throughout.
	push("av-002", now.Add(-6*time.Minute), now, 7)
	loki.WaitForCount(t, `{app="planner"}`, 2*6*60*5-10, time.Minute)

	samples := `sum(count_over_time({app="planner", vehicle=~"{{ .Vehicles }}"} [{{ .Window }}]))`
	spec := &v1alpha1.AnalysisSpec{Name: "planner-latency", Provider: v1alpha1.ProviderLoki,
		Query:        `max(max_over_time({app="planner", vehicle=~"{{ .Vehicles }}"} | json | unwrap latency_ms [{{ .Window }}]) by ())`,
		SamplesQuery: &samples, MaxValue: ptrString("20"), MinSamples: ptrInt64(100), Window: metav1Duration(time.Minute)}
	q := NewLoki(loki.URL, nil)
	measure := func(window time.Duration, canaryVerified time.Time) Measurement {
		s := spec.DeepCopy()
		s.Window = metav1Duration(window)
		at := map[string]time.Time{"av-001": canaryVerified, "av-002": now.Add(-time.Hour)}
		m := Measure(context.Background(), q, "p", s, Cohort{Vehicles: []string{"av-001"}, Revision: "r2", VerifiedAt: at},
			Cohort{Vehicles: []string{"av-002"}, Revision: "r1", VerifiedAt: at}, now)
		t.Logf("window %s, canary verified %s ago: %s %s", window, now.Sub(canaryVerified).Round(time.Second), m.Verdict, m.Message)
		return m
	}
	if m := measure(time.Minute, verified); m.Verdict != VerdictPass || m.Canary == nil || *m.Canary != 6 {
		t.Fatalf("window after the verification: %s canary %v, want Pass at 6 ms (only messages after the change)", m.Verdict, m.Canary)
	}
	if m := measure(5*time.Minute, verified); m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "av-001 (verified ") {
		t.Fatalf("window reaching before the verification: %s %q, want Inconclusive naming av-001 (counting it would count its 40 ms from before)", m.Verdict, m.Message)
	}
	if m := measure(time.Minute, time.Time{}); m.Verdict != VerdictInconclusive || !strings.Contains(m.Message, "av-001 (not verified)") {
		t.Fatalf("canary not verified: %s %q, want Inconclusive", m.Verdict, m.Message)
	}
	// Without the cut (no verification times known) the 40 ms would count:
	// the data really holds what the cut keeps out.
	s := spec.DeepCopy()
	s.Window = metav1Duration(5 * time.Minute)
	if m := Measure(context.Background(), q, "p", s, Cohort{Vehicles: []string{"av-001"}, Revision: "r2"}, Cohort{Vehicles: []string{"av-002"}, Revision: "r1"}, now); m.Verdict != VerdictFail {
		t.Fatalf("without verification times: %s %q, want Fail on the 40 ms from before the change", m.Verdict, m.Message)
	}
}
