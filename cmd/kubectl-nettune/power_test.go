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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/test/framework/testenv"
)

// demoProfile reads the demo's v2 profile (a Loki judge and a Prometheus
// guard).
func demoProfile(t *testing.T) *v1alpha1.NetTuningProfile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "demo", "02-xavier-lan-v2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.NetTuningProfile{}
	if err := yaml.UnmarshalStrict(raw, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// goldenPowerDoc is the report on the demo's judge with the rates of the
// detection benchmark: 36.8 messages a second per vehicle and pair, one
// pair (xavier-b -> xavier-a, the incast's) at a 0.02 % baseline share, the
// others at 0.01 %, and one pair at 5 a second.
func goldenPowerDoc(t *testing.T) powerDoc {
	t.Helper()
	p := demoProfile(t)
	spec := &p.Spec.Rollout.Analyses[0]
	cfg, err := analysis.JudgeConfigFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	perVehicle := map[string]float64{}
	var rates []analysis.PairRate
	for _, pr := range []struct {
		pair   string
		rate   float64
		shareB float64
	}{
		{"host=xavier-a,peer=xavier-b", 36.8, 0.0001},
		{"host=xavier-a,peer=xavier-c", 5, 0.0001},
		{"host=xavier-b,peer=xavier-a", 36.8, 0.0002},
	} {
		perVehicle[pr.pair] = pr.rate
		rates = append(rates, analysis.PairRate{Pair: pr.pair, CanaryRate: 2 * pr.rate, BaselineRate: 2 * pr.rate, BaselineShare: pr.shareB})
	}
	detect := &analysis.Regression{Share: 0.036}
	s := analysis.ScheduleFor(spec)
	res, err := analysis.Power(analysis.PowerInput{Config: cfg, Schedule: s, Pairs: rates, Detect: detect})
	if err != nil {
		t.Fatal(err)
	}
	return powerDoc{Profile: "xavier-lan", StableRevision: "xavier-lan-982cc13e75", Over: "30m0s", At: metav1.NewTime(goldenNow),
		Vehicles: 4, Canary: 2, Baseline: 2, Power: analysis.DefaultPower, Detect: detect.String(),
		Analyses: []powerAnalysis{
			powerAnalysisOf(powerAnalysis{Name: spec.Name, Provider: string(spec.Provider)}, s, res, perVehicle),
			{Name: "p999-latency", Provider: "Loki", Skipped: "not a judge analysis (query): its power is not computed"},
		}}
}

func TestPowerGolden(t *testing.T) {
	doc := goldenPowerDoc(t)
	var b bytes.Buffer
	renderPower(&b, doc)
	golden := filepath.Join("testdata", "power.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", golden, err)
	}
	if b.String() != string(want) {
		t.Errorf("renderPower output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, b.String(), want)
	}
	// The document form carries the same figures.
	var j bytes.Buffer
	if err := printDoc(&j, "json", doc); err != nil {
		t.Fatal(err)
	}
	var back powerDoc
	if err := json.Unmarshal(j.Bytes(), &back); err != nil {
		t.Fatalf("the json document does not read back: %v\n%s", err, j.String())
	}
	a := back.Analyses[0]
	if a.Pairs != 3 || a.MinSamples != 1000 || len(a.HostPairs) != 3 || a.HostPairs[2].MinSamplesAt != "20s" || a.HostPairs[2].DetectAt != "30s" {
		t.Errorf("json document: %+v", a)
	}
	// The pair at 5 a second never passes either, so neither does the
	// analysis: a canary without a regression would stop the rollout.
	if a.PassStep != "never" || a.HostPairs[0].PassAt != "20s" || a.HostPairs[1].PassAt != "never" || a.HostPairs[0].PassProbability == nil {
		t.Errorf("json document: pass at %q, pairs' %q and %q", a.PassStep, a.HostPairs[0].PassAt, a.HostPairs[1].PassAt)
	}
	if len(a.Problems) != 1 || !strings.Contains(a.Problems[0], "host=xavier-a,peer=xavier-c (canary 900, baseline 900)") {
		t.Errorf("the pair at 5 a second never collects 1000 messages in 90 s: problems %q", a.Problems)
	}
}

// TestPowerAgainstLoki runs the command against a real API server and a
// real Loki holding the stable revision's probe lines.
func TestPowerAgainstLoki(t *testing.T) {
	p := startPlugin(t)
	loki := testenv.StartLoki(t)
	ctx := context.Background()

	prof := demoProfile(t)
	if err := p.c.Create(ctx, prof); err != nil {
		t.Fatal(err)
	}
	const stable = "xavier-lan-982cc13e75"
	p.setStatus(prof.Name, func(st *v1alpha1.NetTuningProfileStatus) {
		st.CurrentRevision, st.StableRevision = stable, stable
	})
	vehicles := []string{"av-001", "av-002", "av-003", "av-004"}
	hosts := []string{"xavier-a", "xavier-b"}
	for _, v := range vehicles {
		for _, h := range hosts {
			n := testNode(v+"-"+h, v, h, "xavier")
			if err := p.c.Create(ctx, &n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 600 messages per vehicle and pair in the last minute (10 a second),
	// 6 of them slow on xavier-b -> xavier-a (1 %), none on the other pair.
	end := time.Now().Add(-2 * time.Second)
	for i, v := range vehicles {
		for _, pair := range [][2]string{{"xavier-a", "xavier-b"}, {"xavier-b", "xavier-a"}} {
			slow := 0
			if pair[0] == "xavier-b" {
				slow = 6
			}
			entries := make([]testenv.LokiEntry, 600)
			for k := range entries {
				ms := 5.0
				if k < slow {
					ms = 450
				}
				entries[k] = testenv.LokiEntry{Time: end.Add(-50*time.Second + time.Duration(k)*50*time.Second/600 + time.Duration(i)*time.Microsecond),
					Line: fmt.Sprintf(`{"latency_ms":%g,"topic":"planning","seq":%d,"size":16384}`, ms, k)}
			}
			loki.Push(t, map[string]string{"job": "nettune-probe", "vehicle": v, "node": v + "-" + pair[0],
				"host": pair[0], "peer": pair[1], "profile": prof.Name, "revision": stable}, entries)
		}
	}
	loki.WaitForCount(t, `sum(count_over_time({job="nettune-probe"}[5m]))`, 4800, time.Minute)

	out := p.ok("power", prof.Name, "--loki", loki.URL, "--over", "1m", "--detect", "5%")
	for _, want := range []string{
		"Profile xavier-lan: the stable revision " + stable + " over the 1m0s before ",
		"4 vehicles: canary 2, baseline 2",
		"Analysis slow-messages (Loki): 2 pairs, each judged at confidence 0.995; minSamples 1000 per cohort and pair",
		// 10 a second per vehicle, 20 per cohort: 1000 in 50 s, at the
		// measurement at 1m0s (window 55 s: 1100).
		"host=xavier-b,peer=xavier-a  10.0",
		"1%",
		"1m0s",
		"1800/1800",
		"Analysis spurious-retransmissions (Prometheus): analysis spurious-retransmissions: no Prometheus address",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
	js := p.ok("power", prof.Name, "--loki", loki.URL, "--over", "1m", "-o", "json")
	var doc powerDoc
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js)
	}
	a := doc.Analyses[0]
	if len(a.HostPairs) != 2 || a.HostPairs[1].Pair != "host=xavier-b,peer=xavier-a" || a.HostPairs[1].BaselineShare != 0.01 ||
		a.HostPairs[1].PerVehicle != 10 || a.HostPairs[1].MinSamplesAt != "1m0s" {
		t.Errorf("-o json: %+v", a)
	}
	if r := p.run("power", prof.Name, "--loki", loki.URL, "--detect", "1x"); r.code != exitUsage || !strings.Contains(r.stderr, "--detect: regression \"1x\": a ratio to the baseline's slow share must be a number > 1") {
		t.Errorf("--detect 1x: exit %d, %s", r.code, r.stderr)
	}
}
