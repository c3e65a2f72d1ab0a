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

package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestProfileWarnings: with the chart installed, the API server stores a
// risky but legal profile and warns about it (the chart's Warn policy), and
// a careful profile draws no warning.
func TestProfileWarnings(t *testing.T) {
	helmBin(t)
	cp := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	installChart(t, ctx, cp)

	cfg := rest.CopyConfig(cp.Config)
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	const rollout = `
rollout:
  canary: {count: 1}
  steps: [{pause: {}}]`
	cases := []struct {
		name, spec string
		want       []string // fragments, one per expected warning
	}{
		{"careful", `defaults: {rtoMin: 5ms, quickack: true}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {rtoMin: 10ms}}]
routes: [{name: depot, destination: 10.20.0.0/16, parameters: {rtoMin: 200ms}}]` + rollout, nil},
		{"rto-below-floor", `defaults: {rtoMin: 10ms}` + rollout,
			[]string{"spec.defaults.rtoMin 10ms is below the 40ms delayed-ACK floor"}},
		{"pair-quickack-off", `defaults: {rtoMin: 5ms, quickack: true}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {rtoMin: 5ms, quickack: false}}]` + rollout,
			[]string{"spec.hostPairs: xavier-a->xavier-b: rtoMin below the 40ms delayed-ACK floor"}},
		{"route-no-quickack", `routes: [{name: depot, destination: 10.20.0.0/16, parameters: {rtoMin: 8ms}}]` + rollout,
			[]string{"spec.routes: depot: rtoMin below"}},
		{"no-rollout", `defaults: {initcwnd: 10}`, []string{"spec.rollout is not set"}},
		{"cwnd-within-buffer", `switchBufferBytes: 131072
defaults: {cwnd: {value: 90}}
hostPairs: [{from: xavier-a, to: xavier-b}]
routes: [{name: depot, destination: 10.20.0.0/16, parameters: {cwnd: {value: 40}}}]` + rollout, nil},
		{"cwnd-no-buffer-named", `defaults: {cwnd: {value: 500}}` + rollout, nil},
		{"cwnd-beyond-buffer", `switchBufferBytes: 131072
defaults: {cwnd: {value: 120}}` + rollout,
			[]string{"spec.defaults.cwnd: 120 x MSS 1448 = 173760 bytes in flight exceeds the switch buffer of 131072 bytes"}},
		{"pair-inherits-deep-cwnd", `switchBufferBytes: 131072
defaults: {cwnd: {value: 30}}
hostPairs: [{from: xavier-b, to: xavier-a, parameters: {cwnd: {value: 100}}}, {from: xavier-c, to: xavier-a}]
routes: [{name: depot, destination: 10.20.0.0/16, parameters: {cwnd: {value: 95}}}]` + rollout,
			[]string{"spec.hostPairs: xavier-b->xavier-a cwnd 100 x MSS 1448", "spec.routes: depot cwnd 95 x MSS 1448"}},
		{"judge-can-decide", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  steps: [{analysis: {name: slow}}]
  analyses:
  - {name: slow, provider: Loki, interval: 10s, window: 90s, inconclusiveLimit: 15, judge: {slowQuery: s, totalQuery: t, intervalQuery: i, step: 5s}}`, nil},
		{"judge-never-decides", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  steps: [{analysis: {name: slow, with: [ranked, early]}}]
  analyses:
  - {name: slow, provider: Loki, interval: 10s, window: 20s, inconclusiveLimit: 15, judge: {slowQuery: s, totalQuery: t, intervalQuery: i, step: 5s}}
  - {name: ranked, provider: Loki, interval: 10s, window: 90s, inconclusiveLimit: 2, judge: {slowQuery: s, totalQuery: t, intervalQuery: i}}
  - {name: early, provider: Loki, interval: 5s, inconclusiveLimit: 1, judge: {slowQuery: s, totalQuery: t, step: 5s}}`,
			[]string{"spec.rollout.analyses: early (inconclusiveLimit x interval = 5s, judge.step 5s): every measurement before the analysis gives up is still collecting",
				"spec.rollout.analyses: slow (4 of judge.step 5s), ranked (3 of judge.step 5s): the window (at most window, and inconclusiveLimit x interval - judge.step by the last measurement) holds fewer than the 5 values"}},
		{"jumbo-mss", `switchBufferBytes: 131072
defaults: {cwnd: {value: 20}}
interfaces: [{name: lan0, mtu: 9000}]` + rollout,
			[]string{"spec.defaults.cwnd: 20 x MSS 8948 = 178960 bytes"}},
	}
	// The policy takes effect once the API server has compiled it: wait for
	// the first warning on a dry run.
	probe := profileFrom(t, "probe", `defaults: {initcwnd: 10}`)
	nettest.WaitFor(t, 30*time.Second, func() error {
		w.take()
		if err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll); err != nil {
			return err
		}
		if got := w.take(); len(got) == 0 {
			return fmt.Errorf("no warning yet")
		}
		return nil
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w.take()
			p := profileFrom(t, tc.name, tc.spec)
			if err := c.Create(ctx, p); err != nil {
				t.Fatalf("a legal profile was refused: %v", err)
			}
			got := w.take()
			if len(got) != len(tc.want) {
				t.Fatalf("warnings %q, want %d containing %q", got, len(tc.want), tc.want)
			}
			for i, frag := range tc.want {
				if !strings.Contains(got[i], frag) {
					t.Errorf("warning %q does not contain %q", got[i], frag)
				}
			}
			stored := &v1alpha1.NetTuningProfile{}
			if err := c.Get(ctx, client.ObjectKey{Name: tc.name}, stored); err != nil {
				t.Fatalf("the warned profile was not stored: %v", err)
			}
		})
	}
}

func profileFrom(t *testing.T, name, specYAML string) *v1alpha1.NetTuningProfile {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := yaml.UnmarshalStrict([]byte(specYAML), &p.Spec); err != nil {
		t.Fatalf("spec of %s: %v", name, err)
	}
	return p
}
