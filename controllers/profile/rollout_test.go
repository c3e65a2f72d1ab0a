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

package profile_test

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/test/framework/envtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// pushLatencies writes probe samples for every vehicle on a revision, spread
// over the last minutes, as the agents' Loki shipping does.
func pushLatencies(t *testing.T, l *testenv.Loki, rev string, scale float64, seed int64, vehicles ...string) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	now := time.Now()
	for _, v := range vehicles {
		vals := latencies(rng, 2000, scale)
		entries := make([]testenv.LokiEntry, len(vals))
		for i, ms := range vals {
			entries[i] = testenv.LokiEntry{
				Time: now.Add(-5 * time.Minute).Add(time.Duration(i) * (5 * time.Minute / time.Duration(len(vals)))),
				Line: fmt.Sprintf(`{"latency_ms":%.3f,"peer":"xavier-b"}`, ms),
			}
		}
		l.Push(t, map[string]string{"job": "nettune-probe", "vehicle": v, "node": v + "-xavier-a", "revision": rev, "profile": "xavier-lan"}, entries)
	}
}

func newLokiFleet(t *testing.T) (*envtest.Fleet, *testenv.Loki) {
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, "")
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)
	return e, l
}

func TestLokiHealthyCanaryPromotedThroughEveryStep(t *testing.T) {
	e, l := newLokiFleet(t)
	r1, r2 := beginRollout(t, e, l, 30, 1.0, 2, nil)
	sawSteps := map[int32]bool{}
	final := e.WaitProfile("xavier-lan", 90*time.Second, "r2 stable", func(p *v1alpha1.NetTuningProfile) bool {
		if p.Status.CurrentRevision == r2 && p.Status.CurrentStep != nil {
			sawSteps[*p.Status.CurrentStep] = true
		}
		return p.Status.StableRevision == r2
	})
	if final.Status.Phase != v1alpha1.PhaseHealthy {
		t.Errorf("phase %s, want Healthy", final.Status.Phase)
	}
	e.AssertAllNodes(r2)
	if len(final.Status.CanaryVehicles) != 2 {
		t.Errorf("canaries %v", final.Status.CanaryVehicles)
	}
	hw := map[string]bool{}
	for _, c := range final.Status.CanaryVehicles {
		hw[map[bool]string{true: "orin", false: "xavier"}[c == "av-05" || c == "av-06"]] = true
	}
	if !hw["orin"] || !hw["xavier"] {
		t.Errorf("canaries %v do not cover both hardware models", final.Status.CanaryVehicles)
	}
	evs := strings.Join(e.Events("xavier-lan"), "\n")
	for _, want := range []string{"AnalysisSuccessful: analysis p9999-latency step 0", "AnalysisSuccessful: analysis p9999-latency step 2", "RolloutComplete: revision " + r2} {
		if !strings.Contains(evs, want) {
			t.Errorf("events lack %q:\n%s", want, evs)
		}
	}
	t.Logf("steps observed: %v\nevents:\n%s", sawSteps, evs)
	// Revisions are stored as ControllerRevisions.
	if out := kubectl(t, e, "get", "controllerrevisions", "-n", envtest.Namespace, "-o", "name"); !strings.Contains(out, r1) || !strings.Contains(out, r2) {
		t.Errorf("controllerrevisions %q lack %s and %s", out, r1, r2)
	}
}

func TestLokiRegressionRolledBack(t *testing.T) {
	e, l := newLokiFleet(t)
	// The canaries' messages are the baseline's, 30 % slower.
	r1, r2 := beginRollout(t, e, l, 60, 1.3, 1, nil)
	// Watch the NodeNetTunings go back to stable.
	var mu sync.Mutex
	var canaryBack time.Time
	flapped := false
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		sawCanary := false
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			revs := e.NodeRevisions("xavier-lan")
			onR2 := 0
			for _, r := range revs {
				if r == r2 {
					onR2++
				}
			}
			mu.Lock()
			if onR2 > 0 && !canaryBack.IsZero() {
				flapped = true
			}
			if onR2 > 0 {
				sawCanary = true
			} else if sawCanary && canaryBack.IsZero() {
				canaryBack = time.Now()
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	final := e.WaitProfile("xavier-lan", 90*time.Second, "rolled back", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack
	})

	if final.Status.FailedRevision != r2 || final.Status.StableRevision != r1 {
		t.Errorf("failed %s stable %s, want %s %s", final.Status.FailedRevision, final.Status.StableRevision, r2, r1)
	}
	e.AssertAllNodes(r1)
	c := meta.FindStatusCondition(final.Status.Conditions, v1alpha1.ConditionRolledBack)
	if c == nil || c.Reason != "AnalysisFailed" || !strings.Contains(c.Message, "baseline") || !strings.Contains(c.Message, "p9999-latency") {
		t.Errorf("RolledBack condition %+v: want reason AnalysisFailed naming the check, value and threshold", c)
	} else {
		t.Logf("RolledBack: %s", c.Message)
	}
	var res *v1alpha1.AnalysisResult
	for i := range final.Status.Analysis {
		res = &final.Status.Analysis[i]
	}
	if res == nil || res.Phase != v1alpha1.AnalysisFailed || res.CanaryValue == "" || res.BaselineValue == "" || res.Threshold == "" {
		t.Errorf("analysis result %+v: want Failed with canary, baseline and threshold values", res)
	}
	// Not retried: for a while, still every node on r1 (and the watch
	// above still running, to see a node go back to r2).
	envtest.Consistently(t, 3*time.Second, "every node on r1 and the profile RolledBack after the rollback", func() (bool, string) {
		revs := e.NodeRevisions("xavier-lan")
		p := e.Profile("xavier-lan")
		ok := len(revs) == 12 && p.Status.Phase == v1alpha1.PhaseRolledBack
		for _, r := range revs {
			ok = ok && r == r1
		}
		return ok, fmt.Sprintf("phase %s (want RolledBack), %d NodeNetTunings (want 12) rendering %v (want %s)", p.Status.Phase, len(revs), revs, r1)
	})
	close(stopWatch)
	<-watched

	lastQuery := e.LastQuery()
	mu.Lock()
	back := canaryBack
	if flapped {
		t.Errorf("a node went back to the failed revision %s after the rollback", r2)
	}
	mu.Unlock()
	if back.IsZero() {
		t.Errorf("never saw the canaries on %s and then back", r2)
	} else {
		t.Logf("decision time: last analysis query returned -> every NodeNetTuning back on stable: %s (<= 20 ms polling)", back.Sub(lastQuery).Round(time.Millisecond))
	}
}

func TestLokiTooFewSamplesPausesInconclusive(t *testing.T) {
	e, l := newLokiFleet(t)
	// The canaries have sent 2000 messages each: below minSamples.
	r1, r2 := beginRollout(t, e, l, 30, 1.0, 2, func(p *v1alpha1.NetTuningProfile) {
		p.Spec.Rollout.Analyses[0].MinSamples = envtest.Ptr(int64(1000000))
	})
	paused := e.WaitProfile("xavier-lan", 60*time.Second, "paused inconclusive", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.CurrentRevision == r2 && p.Status.Phase == v1alpha1.PhasePaused
	})
	c := meta.FindStatusCondition(paused.Status.Conditions, v1alpha1.ConditionPaused)
	if c == nil || c.Reason != "AnalysisInconclusive" {
		t.Errorf("Paused condition %+v, want AnalysisInconclusive", c)
	}
	if len(paused.Status.Analysis) == 0 || paused.Status.Analysis[0].Phase != v1alpha1.AnalysisInconclusive ||
		!strings.Contains(paused.Status.Analysis[0].Message, "samples") {
		t.Errorf("analysis %+v, want Inconclusive for too few samples", paused.Status.Analysis)
	}
	if paused.Status.StableRevision != r1 || paused.Status.Vehicles.Updated != 2 {
		t.Errorf("paused at stable %s with %d updated, want %s and the 2 canaries", paused.Status.StableRevision, paused.Status.Vehicles.Updated, r1)
	}
	// Still paused a little later: Inconclusive never promotes by itself.
	envtest.Consistently(t, 2*time.Second, "paused on the 2 canaries", func() (bool, string) {
		p := e.Profile("xavier-lan")
		return p.Status.Phase == v1alpha1.PhasePaused && p.Status.Vehicles.Updated == 2, fmt.Sprintf("phase %s updated %d", p.Status.Phase, p.Status.Vehicles.Updated)
	})
}

func TestPrometheusRegressionRolledBack(t *testing.T) {
	// The agents' latency histograms, scraped by a real Prometheus: every
	// scrape sees more messages; canaries on r2 are 30 % slower.
	reg := prometheus.NewRegistry()
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "nettune_probe_latency_seconds", Buckets: prometheus.ExponentialBucketsRange(0.001, 0.2, 40),
	}, []string{"vehicle", "revision"})
	reg.MustRegister(hist)
	var mu sync.Mutex
	revs := map[string]float64{}
	rng := rand.New(rand.NewSource(7))
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for rev, scale := range revs {
			for _, v := range envtest.AllVehicles() {
				for _, ms := range latencies(rng, 300, scale) {
					hist.WithLabelValues(v, rev).Observe(ms / 1000)
				}
			}
		}
		mu.Unlock()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	defer target.Close()
	prom := testenv.StartPrometheus(t, strings.TrimPrefix(target.URL, "http://"))

	e := envtest.StartFleet(t, "", prom.URL)
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)
	query := `1000 * histogram_quantile(0.9999, sum by (le) (rate(nettune_probe_latency_seconds_bucket{vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}[{{ .Window }}])))`
	count := `sum(increase(nettune_probe_latency_seconds_count{vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}[{{ .Window }}]))`
	p := envtest.LanProfile(40, v1alpha1.ProviderPrometheus, query, count)
	p.Spec.Rollout.Analyses[0].Window = envtest.Dur(15 * time.Second)
	p.Spec.Rollout.Analyses[0].MaxValue = nil // histogram buckets are coarse at the tail: relative check only
	r1 := e.Settle(p)
	p2 := p.DeepCopy()
	envtest.SetCwnd(p2, 60)
	r2 := revision.Name(p2)
	mu.Lock()
	revs[r1], revs[r2] = 1.0, 1.3
	mu.Unlock()
	prom.WaitForQuery(t, fmt.Sprintf(`sum(increase(nettune_probe_latency_seconds_count{revision=%q}[15s]))`, r2), 60*time.Second)

	e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		envtest.SetCwnd(p, 60)
		p.Spec.Rollout = p2.Spec.Rollout
	})
	final := e.WaitProfile("xavier-lan", 90*time.Second, "rolled back", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack
	})
	c := meta.FindStatusCondition(final.Status.Conditions, v1alpha1.ConditionRolledBack)
	if c == nil || c.Reason != "AnalysisFailed" {
		t.Fatalf("RolledBack condition %+v, want AnalysisFailed", c)
	}
	t.Logf("RolledBack: %s", c.Message)
	e.AssertAllNodes(r1)
}

func TestConflictingProfiles(t *testing.T) {
	e := envtest.StartFleet(t, "", "")
	e.AddVehicles("xavier", "av-01", "av-02")
	mk := func(name string, prio int32, value string) *v1alpha1.NetTuningProfile {
		return &v1alpha1.NetTuningProfile{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.NetTuningProfileSpec{
				Priority: prio,
				Sysctls:  []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_no_metrics_save", Value: value}},
				Defaults: &v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 30}},
			},
		}
	}
	a, b := mk("lan-a", 10, "1"), mk("lan-b", 10, "0")
	b.Spec.Defaults = nil
	for _, p := range []*v1alpha1.NetTuningProfile{a, b} {
		if err := e.Client.Create(e.Ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"lan-a", "lan-b"} {
		p := e.WaitProfile(name, 30*time.Second, "Conflict condition", func(p *v1alpha1.NetTuningProfile) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionConflict)
			return c != nil && c.Status == "True"
		})
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionConflict)
		if !strings.Contains(c.Message, "net.ipv4.tcp_no_metrics_save") {
			t.Errorf("%s: conflict message %q does not name the sysctl", name, c.Message)
		}
	}
	nnt := &v1alpha1.NodeNetTuning{}
	if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: "av-01-xavier-a"}, nnt); err != nil {
		t.Fatal(err)
	}
	if len(nnt.Spec.Sysctls) != 0 || len(nnt.Spec.Routes) == 0 || len(nnt.Spec.Profiles) != 2 {
		t.Errorf("node spec: sysctls %v routes %d profiles %v; want the clashing sysctl dropped, lan-a's route kept, both profiles listed",
			nnt.Spec.Sysctls, len(nnt.Spec.Routes), nnt.Spec.Profiles)
	}
	// Raise one priority: it wins and the conflict clears.
	e.Edit("lan-b", func(p *v1alpha1.NetTuningProfile) { p.Spec.Priority = 20 })
	e.WaitProfile("lan-a", 30*time.Second, "conflict cleared", func(p *v1alpha1.NetTuningProfile) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionConflict)
		return c != nil && c.Status == "False"
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: "av-01-xavier-a"}, nnt); err != nil {
			t.Fatal(err)
		}
		if len(nnt.Spec.Sysctls) == 1 && nnt.Spec.Sysctls[0].Value == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("higher-priority lan-b's sysctl not rendered: %v", nnt.Spec.Sysctls)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Deleting a profile removes its items from every node.
	if err := e.Client.Delete(e.Ctx, a); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if err := e.Client.Get(e.Ctx, client.ObjectKey{Name: "av-01-xavier-a"}, nnt); err != nil {
			t.Fatal(err)
		}
		if len(nnt.Spec.Routes) == 0 && len(nnt.Spec.Profiles) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted lan-a still rendered: routes %d profiles %v", len(nnt.Spec.Routes), nnt.Spec.Profiles)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// beginRollout settles r1 (cwnd 40) on the fleet, writes probe samples for
// r1 (baseline) and for r2 (cwnd newCwnd, latencies scaled by scale), then
// edits the profile to r2 with its rollout; mutate adjusts the edit.
func beginRollout(t *testing.T, e *envtest.Fleet, l *testenv.Loki, newCwnd int32, scale float64, seed int64,
	mutate func(*v1alpha1.NetTuningProfile)) (r1, r2 string) {
	t.Helper()
	p := envtest.LanProfile(40, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	r1 = e.Settle(p)
	p2 := p.DeepCopy()
	envtest.SetCwnd(p2, newCwnd)
	r2 = revision.Name(p2)
	pushLatencies(t, l, r1, 1.0, 1, envtest.AllVehicles()...)
	pushLatencies(t, l, r2, scale, seed, envtest.AllVehicles()...)
	l.WaitForCount(t, `sum(count_over_time({job="nettune-probe"}[1h]))`, 24000, 60*time.Second)
	e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		envtest.SetCwnd(p, newCwnd)
		p.Spec.Rollout = p2.Spec.Rollout
		if mutate != nil {
			mutate(p)
		}
	})
	return r1, r2
}

// TestGuardBesideAnalysisRollsBack: an analysis step's with (a Prometheus
// guard on D-SACKs) is measured beside its Loki latency analysis on the same
// reconciles; the latency is healthy, the guard fails, and the rollout is
// rolled back naming the guard, with both results in the status.
func TestGuardBesideAnalysisRollsBack(t *testing.T) {
	reg := prometheus.NewRegistry()
	dsack := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nettune_tcp_dsack_dups_total"}, []string{"vehicle", "revision"})
	reg.MustRegister(dsack)
	var mu sync.Mutex
	perScrape := map[string]float64{} // revision -> D-SACKs per vehicle per scrape
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for rev, n := range perScrape {
			for _, v := range envtest.AllVehicles() {
				dsack.WithLabelValues(v, rev).Add(n)
			}
		}
		mu.Unlock()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	defer target.Close()
	prom := testenv.StartPrometheus(t, strings.TrimPrefix(target.URL, "http://"))
	l := testenv.StartLoki(t)
	e := envtest.StartFleet(t, l.URL, prom.URL)
	e.AddVehicles("xavier", envtest.XavierVehicles...)
	e.AddVehicles("orin", envtest.OrinVehicles...)

	guard := v1alpha1.AnalysisSpec{
		Name: "dsack-guard", Provider: v1alpha1.ProviderPrometheus,
		Query:    `max(increase(nettune_tcp_dsack_dups_total{vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}[{{ .Window }}]))`,
		Interval: envtest.Dur(time.Second), Window: envtest.Dur(15 * time.Second), Measurements: envtest.Ptr(int32(1)),
		MaxValue: envtest.Ptr("100"), FailureLimit: envtest.Ptr(int32(0)), InconclusiveLimit: envtest.Ptr(int32(0)), OnInconclusive: v1alpha1.InconclusivePause,
	}
	p := envtest.LanProfile(40, v1alpha1.ProviderLoki, envtest.LokiQuery, envtest.LokiCount)
	r1 := e.Settle(p)
	p2 := p.DeepCopy()
	envtest.SetCwnd(p2, 30)
	r2 := revision.Name(p2)
	// Healthy latencies on both revisions; r2's vehicles see 50 D-SACKs a
	// second (750 over the guard's window, above its 100), r1's none.
	pushLatencies(t, l, r1, 1.0, 1, envtest.AllVehicles()...)
	pushLatencies(t, l, r2, 1.0, 2, envtest.AllVehicles()...)
	l.WaitForCount(t, `sum(count_over_time({job="nettune-probe"}[1h]))`, 24000, 60*time.Second)
	mu.Lock()
	perScrape[r1], perScrape[r2] = 0, 50
	mu.Unlock()
	prom.WaitForQuery(t, fmt.Sprintf(`sum(increase(nettune_tcp_dsack_dups_total{revision=%q}[15s])) > 1000`, r2), 60*time.Second)

	e.Edit("xavier-lan", func(p *v1alpha1.NetTuningProfile) {
		envtest.SetCwnd(p, 30)
		p.Spec.Rollout = p2.Spec.Rollout.DeepCopy()
		p.Spec.Rollout.Analyses = append(p.Spec.Rollout.Analyses, guard)
		for i := range p.Spec.Rollout.Steps {
			if a := p.Spec.Rollout.Steps[i].Analysis; a != nil {
				a.With = []string{guard.Name}
			}
		}
	})
	final := e.WaitProfile("xavier-lan", 90*time.Second, "rolled back", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack
	})
	c := meta.FindStatusCondition(final.Status.Conditions, v1alpha1.ConditionRolledBack)
	if c == nil || c.Reason != "AnalysisFailed" || !strings.Contains(c.Message, "analysis dsack-guard at step 0 failed") {
		t.Fatalf("RolledBack condition %+v, want AnalysisFailed naming dsack-guard", c)
	}
	t.Logf("RolledBack: %s", c.Message)
	if final.Status.FailedRevision != r2 || final.Status.StableRevision != r1 {
		t.Errorf("failed %s stable %s, want %s %s", final.Status.FailedRevision, final.Status.StableRevision, r2, r1)
	}
	phases := map[string]string{}
	for _, a := range final.Status.Analysis {
		if a.Step == 0 {
			phases[a.Name] = a.Phase
		}
	}
	// The latency analysis was measured beside the guard (it needs two
	// measurements; it may have passed or still be running when the guard
	// failed), the guard failed.
	if phases["dsack-guard"] != v1alpha1.AnalysisFailed || phases["p9999-latency"] == "" {
		t.Errorf("step 0 results %v, want dsack-guard Failed and p9999-latency measured", phases)
	}
	e.AssertAllNodes(r1)
}
