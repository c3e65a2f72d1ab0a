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

package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

const probeStream = `{job="nettune-probe", vehicle=~"{{ .Vehicles }}", revision="{{ .Revision }}"}`

// latency is a Loki analysis that passes on this fleet: the canary's p99
// message latency under a second, from at least 20 messages, every 5 s.
func latency(address string, measurements int32, on v1alpha1.InconclusivePolicy) v1alpha1.AnalysisSpec {
	a := v1alpha1.AnalysisSpec{
		Name:                  "latency",
		Provider:              v1alpha1.ProviderLoki,
		Query:                 `quantile_over_time(0.99, ` + probeStream + ` | json | unwrap latency_ms [{{ .Window }}]) by ()`,
		SamplesQuery:          ptr(`sum(count_over_time(` + probeStream + ` [{{ .Window }}]))`),
		Interval:              &metav1.Duration{Duration: 5 * time.Second},
		Window:                &metav1.Duration{Duration: 30 * time.Second},
		Measurements:          ptr(measurements),
		MinSamples:            ptr(int64(20)),
		MaxValue:              ptr("1000"),
		FailureLimit:          ptr(int32(0)),
		ConsecutiveErrorLimit: ptr(int32(2)),
		InconclusiveLimit:     ptr(int32(2)),
		OnInconclusive:        on,
	}
	if address != "" {
		a.Address = ptr(address)
	}
	return a
}

// judged: av-001 first, judged by a, then every vehicle.
func judged(a v1alpha1.AnalysisSpec) *v1alpha1.RolloutSpec {
	r := staged([]string{"av-001"}, v1alpha1.RolloutStep{Analysis: &v1alpha1.AnalysisStep{Name: a.Name}}, toFleet())
	r.Analyses = []v1alpha1.AnalysisSpec{a}
	return r
}

// result of the step's analysis in the profile's status.
func analysisOf(p *v1alpha1.NetTuningProfile, name string) *v1alpha1.AnalysisResult {
	for i := range p.Status.Analysis {
		if p.Status.Analysis[i].Name == name {
			return &p.Status.Analysis[i]
		}
	}
	return nil
}

// start puts revision 1 of a profile (ssthresh base) on every vehicle and
// returns it.
func start(t *testing.T, name string, base int32) string {
	t.Helper()
	remove(t, name)
	put(t, name, spec(base, allAtOnce()))
	r1 := healthy(t, name, 2*time.Minute)
	waitFor(t, time.Minute, "every node on "+r1, func() bool { return converged(t, name, r1, base) })
	return r1
}

// TestControllerKilledMidAnalysis kills the controller (SIGKILL) while the
// canary's analysis is half done: the step and the measurements taken
// survive the restart, and the rollout completes.
func TestControllerKilledMidAnalysis(t *testing.T) {
	const name = "fault-controller"
	var outcome, conv string
	record(t, "controller killed (SIGKILL) in the middle of an analysis, restarted 5 s later",
		"hosts sampled throughout; the step and the analysis' successful-measurement count never go back after the restart; the rollout completes; every node verifies the new revision",
		func() (string, string) { return outcome, conv })
	r1 := start(t, name, 30)
	watchHosts(t)
	const want = 8
	put(t, name, spec(31, judged(latency("", want, v1alpha1.InconclusivePause))))
	var before int32
	p := waitProfile(t, name, 2*time.Minute, "3 successful measurements", func(p *v1alpha1.NetTuningProfile) bool {
		if a := analysisOf(p, "latency"); a != nil {
			before = a.Successful
		}
		return before >= 3
	})
	r2 := p.Status.CurrentRevision
	step := *p.Status.CurrentStep
	if err := f.KillController(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if err := f.StartController(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	t.Logf("controller killed at step %d with %d of %d measurements successful, restarted 5 s later", step, before, want)
	lowest, highest := before, int32(0)
	waitProfile(t, name, 3*time.Minute, "Healthy on the new revision", func(p *v1alpha1.NetTuningProfile) bool {
		if p.Status.CurrentRevision != r2 {
			t.Fatalf("the rollout moved to revision %s", p.Status.CurrentRevision)
		}
		if p.Status.CurrentStep != nil && *p.Status.CurrentStep < step {
			t.Fatalf("the rollout went back to step %d from %d", *p.Status.CurrentStep, step)
		}
		if a := analysisOf(p, "latency"); a != nil && a.Step == step {
			lowest, highest = min(lowest, a.Successful), max(highest, a.Successful)
		}
		return p.Status.Phase == v1alpha1.PhaseHealthy && p.Status.StableRevision == r2
	})
	if lowest < before {
		t.Errorf("the analysis' successful measurements went from %d back to %d after the restart", before, lowest)
	}
	if highest > want {
		t.Errorf("%d successful measurements counted, the analysis needs %d", highest, want)
	}
	waitFor(t, time.Minute, "every node on "+r2, func() bool { return converged(t, name, r2, 31) })
	_ = r1
	conv = round(time.Since(restarted)) + " after the restart"
	outcome = fmt.Sprintf("resumed at step %d with %d of %d measurements (lowest seen after the restart: %d); promoted", step, before, want, lowest)
}

// lokiProxy stands between the controller and Loki and misbehaves on demand.
type lokiProxy struct {
	*httptest.Server
	mode atomic.Value // string
}

func newLokiProxy(t *testing.T) *lokiProxy {
	u, err := url.Parse(f.Loki.URL)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(u)
	lp := &lokiProxy{}
	lp.mode.Store("pass")
	lp.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := float64(time.Now().UnixMilli()) / 1000
		switch lp.mode.Load().(string) {
		case "unreachable": // the connection dies without an answer
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
		case "html": // a proxy's error page with a 200
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body><h1>Welcome to nginx!</h1></body></html>")
		case "empty": // a vector with no series
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		case "nan": // the latency query's value is NaN (the sample count is real)
			if !strings.Contains(r.URL.Query().Get("query"), "quantile_over_time") {
				pass.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%.3f,"NaN"]}]}}`, now)
		default:
			pass.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(lp.Close)
	return lp
}

// TestLokiFaults runs the canary's analysis against a Loki that is
// unreachable, or answers HTML, an empty vector or NaN: never a promotion on
// missing data. An unreachable Loki says nothing of the canaries: the
// rollout pauses (the analysis Unavailable) past the error limit and goes
// on by itself once Loki answers. Otherwise the analysis' onInconclusive
// (Pause or Abort) is reached after exactly its error or inconclusive
// limit, and the fleet converges once the fault clears (promoted by hand
// from the pause; back on the stable revision after the abort).
func TestLokiFaults(t *testing.T) {
	cases := []struct {
		mode string
		on   v1alpha1.InconclusivePolicy
	}{
		{"unreachable", v1alpha1.InconclusivePause},
		{"html", v1alpha1.InconclusiveAbort},
		{"empty", v1alpha1.InconclusivePause},
		{"nan", v1alpha1.InconclusiveAbort},
	}
	for i, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			name := "fault-loki-" + c.mode
			base := int32(10 + 2*i)
			var outcome, conv string
			record(t, "Loki "+map[string]string{"unreachable": "unreachable (connections closed unanswered)", "html": "answering an HTML page (200)",
				"empty": "answering an empty vector", "nan": "answering NaN for the latency (the sample count real)"}[c.mode]+" during the canary's analysis (onInconclusive: "+string(c.on)+")",
				"hosts sampled throughout; no vehicle but the canary ever assigned the new revision; the stable revision unchanged; the analysis stops after its limit (errors or inconclusive measurements counted in its status); the fleet converges after the fault clears",
				func() (string, string) { return outcome, conv })
			r1 := start(t, name, base)
			watchHosts(t)
			proxy := newLokiProxy(t)
			proxy.mode.Store(c.mode)
			a := latency(proxy.URL, 3, c.on)
			put(t, name, spec(base+1, judged(a)))
			began := time.Now()
			var r2 string
			phase := v1alpha1.PhasePaused
			if c.on == v1alpha1.InconclusiveAbort {
				phase = v1alpha1.PhaseRolledBack
			}
			p := waitProfile(t, name, 3*time.Minute, phase, func(p *v1alpha1.NetTuningProfile) bool {
				if p.Status.CurrentRevision != r1 {
					r2 = p.Status.CurrentRevision
				}
				if p.Status.StableRevision != r1 {
					t.Fatalf("stable revision %s on a %s Loki: promoted on missing data", p.Status.StableRevision, c.mode)
				}
				for _, n := range nodes(t) {
					if rev := fleetmodel.AssignedRevision(&n, name); r2 != "" && rev == r2 && !strings.HasPrefix(n.Name, "av-001-") {
						t.Fatalf("%s was assigned %s on a %s Loki", n.Name, r2, c.mode)
					}
				}
				return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == phase
			})
			reached := time.Since(began)
			res := analysisOf(p, "latency")
			if res == nil {
				t.Fatalf("no analysis in the status")
			}
			if res.Successful != 0 {
				t.Errorf("%d successful measurements on a %s Loki", res.Successful, c.mode)
			}
			var counted string
			switch {
			case c.mode == "unreachable":
				// No answer says nothing of the canaries: the analysis
				// waits (Unavailable, measured again at each interval).
				counted = fmt.Sprintf("%d unanswered measurements", res.Errors)
				if res.Errors < *a.ConsecutiveErrorLimit+1 || res.Phase != v1alpha1.AnalysisUnavailable {
					t.Errorf("paused with %d errors, phase %s; want at least consecutiveErrorLimit+1 = %d, Unavailable", res.Errors, res.Phase, *a.ConsecutiveErrorLimit+1)
				}
				if cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionPaused); cond == nil || cond.Reason != v1alpha1.ReasonAnalysisUnavailable {
					t.Errorf("Paused condition %+v, want reason %s", cond, v1alpha1.ReasonAnalysisUnavailable)
				}
			case res.Errors > 0:
				counted = fmt.Sprintf("%d query errors", res.Errors)
				if res.Errors != *a.ConsecutiveErrorLimit+1 {
					t.Errorf("stopped after %d errors, want consecutiveErrorLimit+1 = %d", res.Errors, *a.ConsecutiveErrorLimit+1)
				}
			default:
				counted = fmt.Sprintf("%d inconclusive measurements", res.Inconclusive)
				if res.Inconclusive != *a.InconclusiveLimit+1 {
					t.Errorf("stopped after %d inconclusive measurements, want inconclusiveLimit+1 = %d", res.Inconclusive, *a.InconclusiveLimit+1)
				}
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, phase) // Paused, RolledBack: condition types too
			msg := ""
			if cond != nil {
				msg = cond.Message
			}
			t.Logf("%s after %s (%s): %s; analysis: %s", phase, round(reached), counted, msg, res.Message)

			proxy.mode.Store("pass")
			cleared := time.Now()
			switch {
			case c.mode == "unreachable":
				// It goes on by itself once Loki answers: no promote.
				if r := healthy(t, name, 3*time.Minute); r != r2 {
					t.Fatalf("stable %s once Loki answered, want %s", r, r2)
				}
				waitFor(t, time.Minute, "every node on "+r2, func() bool { return converged(t, name, r2, base+1) })
				outcome = fmt.Sprintf("Paused after %s (%s), no vehicle beyond the canary; went on by itself once Loki answered", round(reached), counted)
				conv = round(time.Since(cleared)) + " from Loki answering to every node on the new revision"
			case c.on == v1alpha1.InconclusivePause:
				if out, err := f.Plugin(context.Background(), "promote", name); err != nil {
					t.Fatal(err, out)
				}
				if r := healthy(t, name, 2*time.Minute); r != r2 {
					t.Fatalf("stable %s after promote, want %s", r, r2)
				}
				waitFor(t, time.Minute, "every node on "+r2, func() bool { return converged(t, name, r2, base+1) })
				outcome = fmt.Sprintf("Paused after %s (%s), no vehicle beyond the canary; promoted by hand once Loki answered", round(reached), counted)
				conv = round(time.Since(cleared)) + " after the promote"
			default:
				waitFor(t, time.Minute, "every node back on "+r1, func() bool { return converged(t, name, r1, base) })
				outcome = fmt.Sprintf("rolled back after %s (%s), no vehicle beyond the canary", round(reached), counted)
				conv = round(time.Since(began)) + " from the edit to every node back on the stable revision"
			}
		})
	}
}
