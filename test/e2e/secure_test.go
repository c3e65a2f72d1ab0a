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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/httpauth"
)

// testSecrets are credential values the tests made beside the fleet's (the
// wrong password of testBrokenSecret): TestNoCredentialLeaks greps for
// them too.
var testSecrets struct {
	mu     sync.Mutex
	values []string
}

func addTestSecret(values ...string) {
	testSecrets.mu.Lock()
	defer testSecrets.mu.Unlock()
	testSecrets.values = append(testSecrets.values, values...)
}

// conditionLogsShipped is the agent's NodeNetTuning condition about its
// push to Loki (node-agent/agent.ConditionLogsShipped).
const conditionLogsShipped = v1alpha1.ConditionLogsShipped

// logsShipped is "" when every node's LogsShipped condition is True, else
// what is not.
func logsShipped(t *testing.T) string {
	t.Helper()
	var bad []string
	ns := nodes(t)
	if len(ns) != 12 {
		return fmt.Sprintf("%d NodeNetTunings, want 12", len(ns))
	}
	for _, n := range ns {
		c := meta.FindStatusCondition(n.Status.Conditions, conditionLogsShipped)
		if c == nil || c.Status != metav1.ConditionTrue {
			bad = append(bad, fmt.Sprintf("%s: %+v", n.Name, c))
		}
	}
	return strings.Join(bad, "; ")
}

// prometheusForPlugin is the plugin's flags for the fleet's Prometheus: its
// address and, on a secure fleet, a credentials directory written from the
// controller's Secret (CA, basic auth), as a user would save it.
func prometheusForPlugin(t *testing.T) []string {
	t.Helper()
	args := []string{"--prometheus", f.Prometheus.URL}
	if !f.Secure() {
		return args
	}
	var sec corev1.Secret
	if err := f.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: fleet.Namespace, Name: fleet.PrometheusSecret}, &sec); err != nil {
		t.Fatalf("reading the Secret %s: %v", fleet.PrometheusSecret, err)
	}
	dir := t.TempDir()
	for k, v := range sec.Data {
		if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append(args, "--prometheus-credentials-dir", dir)
}

// credentialsAnalysis is a Loki analysis at the controller's default
// address (so with its Secret) that passes on this fleet whatever the
// tuning: the canary's p99 message latency under a minute, from at least
// 20 messages, every 5 s; one query error in a row is tolerated.
func credentialsAnalysis(name string, measurements int32) v1alpha1.AnalysisSpec {
	stream := `{job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}`
	return v1alpha1.AnalysisSpec{
		Name:                  name,
		Provider:              v1alpha1.ProviderLoki,
		Query:                 `quantile_over_time(0.99, ` + stream + ` | json | unwrap latency_ms [{{ .Window }}]) by ()`,
		SamplesQuery:          ptr(`sum(count_over_time(` + stream + ` [{{ .Window }}]))`),
		Interval:              &metav1.Duration{Duration: 5 * time.Second},
		Window:                &metav1.Duration{Duration: 30 * time.Second},
		Measurements:          ptr(measurements),
		MinSamples:            ptr(int64(20)),
		MaxValue:              ptr("60000"),
		FailureLimit:          ptr(int32(0)),
		ConsecutiveErrorLimit: ptr(int32(1)),
		InconclusiveLimit:     ptr(int32(3)),
		OnInconclusive:        v1alpha1.InconclusivePause,
	}
}

func analysisResult(p *v1alpha1.NetTuningProfile, name string) *v1alpha1.AnalysisResult {
	for i := range p.Status.Analysis {
		if p.Status.Analysis[i].Name == name {
			return &p.Status.Analysis[i]
		}
	}
	return nil
}

// setSecretPassword sets the password of the controller's Loki Secret,
// updating the same object (as `kubectl edit secret` would).
func setSecretPassword(t *testing.T, password string) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := &corev1.Secret{}
		if err := f.CP.Client.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: fleet.LokiSecret}, s); err != nil {
			return err
		}
		s.Data[httpauth.KeyPassword] = []byte(password)
		return f.CP.Client.Update(ctx, s)
	}); err != nil {
		t.Fatalf("updating Secret %s/%s: %v", fleet.Namespace, fleet.LokiSecret, err)
	}
}

// testBrokenSecret: the controller's Loki Secret gets a wrong password
// while a canary's analysis measures (the gateway answers 401). The
// rollout pauses (Paused, reason AnalysisUnavailable, naming the analysis
// and the 401) and, while the Secret is wrong, keeps measuring and never
// promotes, rolls back or goes beyond the canary. Once the same Secret is
// fixed the rollout goes on to Healthy by itself: no promote, no restart of
// the controller. The new revision keeps the stable window (cwnd 40), which
// the subtests after this one expect.
func testBrokenSecret(t *testing.T) {
	if !f.Secure() {
		t.Skip("the fleet is not secure: no Secret to break")
	}
	ctx := context.Background()
	const name = "credentials-check"
	const measurements = 6
	sec := &corev1.Secret{}
	if err := f.CP.Client.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: fleet.LokiSecret}, sec); err != nil {
		t.Fatal(err)
	}
	good := string(sec.Data[httpauth.KeyPassword])
	wrong, err := fleet.NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	addTestSecret(wrong, fleet.BasicAuth(string(sec.Data[httpauth.KeyUsername]), wrong))
	fixed := false
	defer func() {
		if !fixed {
			setSecretPassword(t, good)
		}
	}()
	stable := getProfile(t).Status.StableRevision
	pid := f.ControllerPID()
	if pid == 0 {
		t.Fatal("the controller is not running")
	}

	edit(t, func(p *v1alpha1.NetTuningProfile) {
		p.Spec.HostPairs = nil
		p.Spec.Defaults.Ssthresh = ptr(int32(25))
		p.Spec.Rollout.Canary = v1alpha1.CanarySpec{Count: ptr(int32(1))}
		p.Spec.Rollout.Steps = []v1alpha1.RolloutStep{
			{Analysis: &v1alpha1.AnalysisStep{Name: name}},
			{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}},
		}
		p.Spec.Rollout.Analyses = []v1alpha1.AnalysisSpec{credentialsAnalysis(name, measurements)}
	})
	began := time.Now()
	var rev string
	var canaries []string
	// guard fails the test at once if the rollout promotes, rolls back or
	// reaches a vehicle beyond the canary.
	guard := func(p *v1alpha1.NetTuningProfile, while string) {
		t.Helper()
		if p.Status.ObservedGeneration != p.Generation {
			return // the status of the spec before the edit
		}
		if p.Status.CurrentRevision != stable && p.Status.CurrentRevision != "" {
			rev, canaries = p.Status.CurrentRevision, p.Status.CanaryVehicles
		}
		if p.Status.StableRevision != stable {
			t.Fatalf("%s: the stable revision became %s (promoted)", while, p.Status.StableRevision)
		}
		stopOn(t, p, v1alpha1.PhaseRolledBack, while+": rolled back")
		if p.Status.CurrentStep != nil && *p.Status.CurrentStep > 0 {
			t.Fatalf("%s: the rollout went on to step %d", while, *p.Status.CurrentStep)
		}
		if rev == "" {
			return
		}
		for _, n := range nodes(t) {
			if fleetmodel.AssignedRevision(&n, profile) == rev && !contains(canaries, vehicleOf(n.Name)) {
				t.Fatalf("%s: %s was assigned %s, beyond the canaries %v", while, n.Name, rev, canaries)
			}
		}
	}
	var res *v1alpha1.AnalysisResult
	waitProfile(t, 3*time.Minute, "the canary's analysis "+name+" measuring successfully", func(p *v1alpha1.NetTuningProfile) bool {
		guard(p, "before the Secret was broken")
		res = analysisResult(p, name)
		return p.Status.ObservedGeneration == p.Generation && res != nil && res.Successful >= 1
	})
	if res.Successful >= measurements {
		t.Fatalf("the analysis had all its %d measurements before the Secret could be broken", measurements)
	}
	setSecretPassword(t, wrong)
	broken := time.Now()
	t.Logf("canary %v on %s, analysis %s with %d of %d measurements after %s; the Secret's password made wrong",
		canaries, rev, name, res.Successful, measurements, broken.Sub(began).Round(time.Millisecond))

	var cond *metav1.Condition
	p := waitProfile(t, 2*time.Minute, "Paused with reason "+v1alpha1.ReasonAnalysisUnavailable+" naming "+name+" and 401", func(p *v1alpha1.NetTuningProfile) bool {
		guard(p, "with the wrong password")
		cond = meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionPaused)
		return p.Status.Phase == v1alpha1.PhasePaused && cond != nil && cond.Status == metav1.ConditionTrue &&
			cond.Reason == v1alpha1.ReasonAnalysisUnavailable && strings.Contains(cond.Message, name) && strings.Contains(cond.Message, "401")
	})
	paused := time.Now()
	res = analysisResult(p, name)
	if res == nil || res.Phase != v1alpha1.AnalysisUnavailable {
		t.Errorf("analysis %+v, want phase %s", res, v1alpha1.AnalysisUnavailable)
	}
	t.Logf("Paused %s after the Secret broke: %s", paused.Sub(broken).Round(time.Millisecond), cond.Message)
	// It keeps measuring at the analysis' interval, paused, while the
	// Secret is wrong.
	errs := res.Errors
	waitProfile(t, 2*time.Minute, fmt.Sprintf("two more refused measurements (errors above %d) while paused", errs+1), func(p *v1alpha1.NetTuningProfile) bool {
		guard(p, "paused with the wrong password")
		if p.Status.Phase != v1alpha1.PhasePaused {
			t.Fatalf("with the wrong password the phase went from Paused to %s", p.Status.Phase)
		}
		r := analysisResult(p, name)
		return r != nil && r.Errors >= errs+2
	})

	setSecretPassword(t, good)
	fixed = true
	fixedAt := time.Now()
	p = waitProfile(t, 3*time.Minute, "Healthy on "+rev+" by itself once the Secret was fixed", func(p *v1alpha1.NetTuningProfile) bool {
		if p.Status.Phase == v1alpha1.PhaseRolledBack {
			stopOn(t, p, v1alpha1.PhaseRolledBack, "rolled back once the Secret was fixed")
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision == rev
	})
	if got := f.ControllerPID(); got != pid {
		t.Errorf("the controller's pid went from %d to %d: it restarted", pid, got)
	}
	if r := analysisResult(p, name); r != nil && r.Successful < measurements {
		t.Logf("analysis at the end: %+v", r)
	}
	waitFor(t, time.Minute, "every node verified "+rev, func() bool { return allVerified(t, rev) })
	t.Logf("Secret fixed -> Healthy on %s by itself in %s (controller pid %d throughout)", rev, time.Since(fixedAt).Round(time.Millisecond), pid)
}

// leakSource is text of the product a credential must never appear in.
type leakSource struct {
	where string
	text  string
}

// TestNoCredentialLeaks greps for every credential value of the secure
// fleet (and those the tests made: a wrong password), raw and base64
// encoded, in every NetTuningProfile, NodeNetTuning and NetTuningExperiment
// (whole objects, status included), every Event of every namespace, the
// controller's and agents' logs, their /metrics, and what they shipped to
// Loki. It runs after the other tests (its file sorts last), so that the
// statuses, events and logs of their rollouts, rollbacks and refused
// measurements are there.
func TestNoCredentialLeaks(t *testing.T) {
	if !f.Secure() {
		t.Skip("the fleet is not secure: it has no credentials")
	}
	ctx := context.Background()
	testSecrets.mu.Lock()
	values := append(f.Secrets(), testSecrets.values...)
	testSecrets.mu.Unlock()
	type needle struct{ value, form string }
	var needles []needle
	for i, v := range values {
		needles = append(needles, needle{v, fmt.Sprintf("credential #%d", i+1)},
			needle{base64.StdEncoding.EncodeToString([]byte(v)), fmt.Sprintf("credential #%d base64-encoded", i+1)})
	}

	var sources []leakSource
	add := func(where string, obj any) {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, leakSource{where, string(b)})
	}
	var profiles v1alpha1.NetTuningProfileList
	var nnts v1alpha1.NodeNetTuningList
	var experiments v1alpha1.NetTuningExperimentList
	var events corev1.EventList
	for _, l := range []client.ObjectList{&profiles, &nnts, &experiments, &events} {
		if err := f.CP.Client.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range profiles.Items {
		add("NetTuningProfile "+p.Name, p)
	}
	for _, n := range nnts.Items {
		add("NodeNetTuning "+n.Name, n)
	}
	for _, x := range experiments.Items {
		add("NetTuningExperiment "+x.Name, x)
	}
	unavailable := 0
	for _, e := range events.Items {
		add(fmt.Sprintf("Event %s/%s (%s on %s %s)", e.Namespace, e.Name, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name), e)
		if e.Reason == v1alpha1.ReasonAnalysisUnavailable {
			unavailable++
		}
	}
	logs, err := filepath.Glob(filepath.Join(f.Dir, "logs", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, leakSource{"log " + path, string(b)})
	}
	metrics := map[string]string{"controller": f.ControllerMetrics}
	for vname, v := range f.Vehicles {
		for _, h := range v.Hosts {
			node := fleet.NodeName(vname, h.Name)
			metrics["agent "+node] = f.AgentMetrics(node)
		}
	}
	for who, addr := range metrics {
		body, err := httpGet(ctx, http.DefaultClient, "http://"+addr+"/metrics", nil)
		if err != nil {
			t.Errorf("%s's metrics: %v", who, err)
			continue
		}
		sources = append(sources, leakSource{who + "'s /metrics", body})
	}

	bytes := 0
	for _, s := range sources {
		bytes += len(s.text)
		for _, n := range needles {
			if i := strings.Index(s.text, n.value); i >= 0 {
				t.Errorf("%s found in %s: ...%s...", n.form, s.where, strings.ReplaceAll(excerpt(s.text, i, len(n.value)), n.value, "<"+n.form+">"))
			}
		}
	}

	// What the controller and the agents shipped to Loki, every stream of
	// the fleet's tenant: one query for all the values, then one per value
	// if any matched.
	var alts []string
	for _, n := range needles {
		alts = append(alts, regexp.QuoteMeta(n.value))
	}
	// A control: the same query finds what the controller shipped of the
	// profile's rollouts (when the other tests made some).
	if len(profiles.Items) == 0 {
		t.Logf("no profile: the control query of Loki is skipped")
	} else if shipped, err := lokiCount(ctx, regexp.QuoteMeta(profile)); err != nil || shipped == 0 {
		t.Errorf("Loki's tenant %s has %g line(s) naming %s (%v): the query for the credentials would find nothing either", f.Tenant(), shipped, profile, err)
	}
	lines, err := lokiCount(ctx, strings.Join(alts, "|"))
	if err != nil {
		t.Errorf("querying Loki for the credentials: %v", err)
	} else if lines > 0 {
		for _, n := range needles {
			if c, err := lokiCount(ctx, regexp.QuoteMeta(n.value)); err != nil || c > 0 {
				t.Errorf("%s found in %g line(s) shipped to Loki (%v)", n.form, c, err)
			}
		}
	}
	t.Logf("%d values (%d credentials, raw and base64) looked for in %d objects, events, logs and metrics endpoints (%d KB; %d AnalysisUnavailable events among them) and in Loki's tenant %s: %g line(s) matched",
		len(needles), len(values), len(sources), bytes/1024, unavailable, f.Tenant(), lines)
}

// excerpt is up to 60 characters either side of text[i:i+n].
func excerpt(text string, i, n int) string {
	from, to := max(0, i-60), min(len(text), i+n+60)
	return text[from:to]
}

// lokiCount is how many lines of the last 24 h, in every stream of the
// fleet's tenant, match the regular expression re (read from Loki itself,
// not through the gateway).
func lokiCount(ctx context.Context, re string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	q := fmt.Sprintf(`sum(count_over_time({job=~".+"} |~ %s [24h]))`, strconv.Quote(re))
	u := f.Loki.URL + "/loki/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(time.Now().UnixNano(), 10)}}.Encode()
	body, err := httpGet(ctx, http.DefaultClient, u, http.Header{"X-Scope-Orgid": {f.Loki.Tenant}})
	if err != nil {
		return 0, err
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Value [2]json.RawMessage `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		return 0, fmt.Errorf("Loki answered %.300q (%v)", body, err)
	}
	var sum float64
	for _, s := range r.Data.Result {
		var v string
		if err := json.Unmarshal(s.Value[1], &v); err != nil {
			return 0, err
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// httpGet is the body of a 200 answer to GET u.
func httpGet(ctx context.Context, c *http.Client, u string, h http.Header) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: HTTP %d: %.300s", u, resp.StatusCode, b)
	}
	return string(b), nil
}
