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

package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nettunev1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
)

// cp is one real etcd + kube-apiserver shared by the tests of this package.
var cp *localcp.ControlPlane

func TestMain(m *testing.M) {
	var err error
	cp, err = localcp.Start("")
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local control plane: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func samplesDir(t *testing.T) string {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "config", "samples")
}

// TestSamplesAreAccepted creates every manifest in config/samples.
func TestSamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(samplesDir(t), "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	demo, err := filepath.Glob(filepath.Join(samplesDir(t), "demo", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 || len(demo) < 3 {
		t.Fatalf("expected at least 6 samples and 3 demo stages, found %d and %d", len(files), len(demo))
	}
	for i, f := range append(files, demo...) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				t.Fatalf("parsing %s: %v", f, err)
			}
			u.SetName(fmt.Sprintf("sample-%d-%s", i, u.GetName()))
			if err := cp.Client.Create(context.Background(), u); err != nil {
				t.Fatalf("sample %s refused: %v", filepath.Base(f), err)
			}
			t.Cleanup(func() { _ = cp.Client.Delete(context.Background(), u) })
		})
	}
}

// TestDefaultsAreApplied checks the defaults the CRD fills in at admission.
func TestDefaultsAreApplied(t *testing.T) {
	ctx := context.Background()
	p := mustProfile(t, "defaults", `
defaults:
  cwnd: {value: 30}
  rtoMin: 10ms
rollout:
  canary: {count: 2}
  analyses:
  - name: lat
    provider: Loki
    query: q
    maxValue: "20"
  steps:
  - analysis: {name: lat}
`)
	if err := cp.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, p) })
	got := &nettunev1alpha1.NetTuningProfile{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if s.VehicleLabel != nettunev1alpha1.DefaultVehicleLabel || s.HostLabel != nettunev1alpha1.DefaultHostLabel || s.HardwareLabel != nettunev1alpha1.DefaultHardwareLabel {
		t.Errorf("label keys not defaulted: %q %q %q", s.VehicleLabel, s.HostLabel, s.HardwareLabel)
	}
	if s.Defaults.Cwnd.Lock == nil || !*s.Defaults.Cwnd.Lock {
		t.Errorf("cwnd.lock not defaulted to true: %v", s.Defaults.Cwnd.Lock)
	}
	if s.Defaults.RTOMin.Milliseconds() != 10 {
		t.Errorf("rtoMin = %v, want 10ms", s.Defaults.RTOMin.Duration)
	}
	a := s.Rollout.Analyses[0]
	if a.Interval.Duration.String() != "1m0s" || a.Window.Duration.String() != "5m0s" || *a.Measurements != 3 || *a.MinSamples != 100 || a.OnInconclusive != nettunev1alpha1.InconclusivePause {
		t.Errorf("analysis defaults wrong: %+v", a)
	}
	if *s.Rollout.RevisionHistoryLimit != 10 || s.Rollout.UnreachableAfter.Duration.String() != "2m0s" {
		t.Errorf("rollout defaults wrong: %+v", s.Rollout)
	}
}

func mustProfile(t *testing.T, name, specYAML string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{}
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		t.Fatalf("test spec YAML: %v", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nettune.io/v1alpha1",
		"kind":       "NetTuningProfile",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
	return u
}

const validRollout = `
rollout:
  canary: {count: 1}
  analyses:
  - {name: lat, provider: Loki, query: q, maxValue: "20"}
`

type invalidCase struct {
	name  string
	spec  string
	field string // the field path the error must name
	msg   string // a fragment of the message
}

var invalidProfiles = []invalidCase{
	{"rtoMin below 1ms", `defaults: {rtoMin: 500us}`, "spec.defaults.rtoMin", "between 1ms and 2s"},
	{"rtoMin above 2s", `defaults: {rtoMin: 3s}`, "spec.defaults.rtoMin", "between 1ms and 2s"},
	{"rtoMin not a duration", `defaults: {rtoMin: fast}`, "spec.defaults.rtoMin", "should match"},
	{"cwnd zero", `defaults: {cwnd: {value: 0}}`, "spec.defaults.cwnd.value", "greater than or equal to 1"},
	{"cwnd above 65535", `defaults: {cwnd: {value: 70000}}`, "spec.defaults.cwnd.value", "less than or equal to 65535"},
	{"cwnd without value", `defaults: {cwnd: {lock: true}}`, "spec.defaults.cwnd.value", "Required value"},
	{"initcwnd zero", `defaults: {initcwnd: 0}`, "spec.defaults.initcwnd", "greater than or equal to 1"},
	{"initrwnd above 65535", `defaults: {initrwnd: 65536}`, "spec.defaults.initrwnd", "less than or equal to 65535"},
	{"ssthresh negative", `defaults: {ssthresh: -1}`, "spec.defaults.ssthresh", "greater than or equal to 1"},
	{"initcwnd above cwnd", `defaults: {cwnd: {value: 30}, initcwnd: 40}`, "spec.defaults.initcwnd", "initcwnd must not exceed cwnd.value"},
	{"ssthresh above cwnd", `defaults: {cwnd: {value: 30}, ssthresh: 40}`, "spec.defaults.ssthresh", "ssthresh must not exceed cwnd.value"},
	{"host pair initcwnd above inherited cwnd", `
defaults: {cwnd: {value: 30}}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {initcwnd: 40}}]`, "spec.hostPairs", "initcwnd must not exceed the cwnd.value it inherits"},
	{"host pair initcwnd above own cwnd", `hostPairs: [{from: xavier-a, to: xavier-b, parameters: {cwnd: {value: 10}, initcwnd: 20}}]`, "spec.hostPairs[0].parameters.initcwnd", "initcwnd must not exceed cwnd.value"},
	{"route mtu below 576", `defaults: {mtu: 500}`, "spec.defaults.mtu", "greater than or equal to 576"},
	{"advmss too small", `defaults: {advmss: 10}`, "spec.defaults.advmss", "greater than or equal to 88"},
	{"interface mtu above 65535", `interfaces: [{name: eth0, mtu: 70000}]`, "spec.interfaces[0].mtu", "less than or equal to 65535"},
	{"interface name too long", `interfaces: [{name: averyveryverylongname, gro: false}]`, "spec.interfaces[0].name", "may not be more than 15"},
	{"duplicate interface", `interfaces: [{name: eth0, mtu: 1500}, {name: eth0, gro: false}]`, "spec.interfaces[1]", "Duplicate value"},
	{"unknown congestion control", `defaults: {congestionControl: turbo}`, "spec.defaults.congestionControl", "Unsupported value"},
	{"route prefix length 33", `routes: [{name: depot, destination: 10.0.0.0/33, parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "must be a CIDR"},
	{"route destination not a CIDR", `routes: [{name: depot, destination: depot.example, parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "must be a CIDR"},
	{"route source not an IP", `routes: [{name: depot, destination: 10.0.0.0/8, source: 10.0.0.x, parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "must be an IP address"},
	{"route source of other family", `routes: [{name: depot, destination: 10.0.0.0/8, source: "fd00::1", parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "same address family"},
	{"route without parameters", `routes: [{name: depot, destination: 10.0.0.0/8}]`, "spec.routes[0].parameters", "Required value"},
	{"duplicate route names", `routes: [{name: depot, destination: 10.0.0.0/8, parameters: {initcwnd: 10}}, {name: depot, destination: 10.1.0.0/16, parameters: {initcwnd: 10}}]`, "spec.routes[1]", "Duplicate value"},
	{"route device with a space", `routes: [{name: depot, destination: 10.0.0.0/8, device: "eth 0", parameters: {initcwnd: 10}}]`, "spec.routes[0].device", "should match"},
	{"duplicate host pair", `hostPairs: [{from: xavier-a, to: xavier-b}, {from: xavier-a, to: xavier-b}]`, "spec.hostPairs[1]", "Duplicate value"},
	{"host pair with invalid host", `hostPairs: [{from: Xavier_A, to: xavier-b}]`, "spec.hostPairs[0].from", "should match"},
	{"too many host pairs", "hostPairs: [" + manyHostPairs(65) + "]", "spec.hostPairs", "must have at most 64 items"},
	{"sysctl outside allow-list", `sysctls: [{name: kernel.panic, value: "1"}]`, "spec.sysctls[0].name", "not on the allow-list"},
	{"sysctl ip_forward refused", `sysctls: [{name: net.ipv4.ip_forward, value: "1"}]`, "spec.sysctls[0].name", "not on the allow-list"},
	{"sysctl value with shell characters", `sysctls: [{name: net.ipv4.tcp_rmem, value: "4096; reboot"}]`, "spec.sysctls[0].value", "should match"},
	{"duplicate sysctl", `sysctls: [{name: net.core.rmem_max, value: "1"}, {name: net.core.rmem_max, value: "2"}]`, "spec.sysctls[1]", "Duplicate value"},
	{"default_qdisc refused with what to do", `sysctls: [{name: net.core.default_qdisc, value: fq}]`, "spec.sysctls[0].name", "root qdisc at boot"},
	{"analysis address without a host", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses:
  - {name: lat, provider: Loki, address: "http://", query: q, maxValue: "20"}`, "spec.rollout.analyses[0].address", "must name a host"},
	{"empty spec", `priority: 1`, "spec", "must set at least one of"},
	{"priority above 1000", `priority: 5000
defaults: {initcwnd: 10}`, "spec.priority", "less than or equal to 1000"},
	{"vehicle label not a label key", `vehicleLabel: "bad label!"
defaults: {initcwnd: 10}`, "spec.vehicleLabel", "should match"},
	{"step with two actions", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{setVehicles: {percent: 50}, pause: {}}]`, "spec.rollout.steps[0]", "exactly one of setVehicles, pause or analysis"},
	{"step with no action", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{}]`, "spec.rollout.steps[0]", "exactly one of setVehicles, pause or analysis"},
	{"percent above 100", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{setVehicles: {percent: 101}}]`, "spec.rollout.steps[0].setVehicles.percent", "less than or equal to 100"},
	{"setVehicles count and percent", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{setVehicles: {percent: 10, count: 2}}]`, "spec.rollout.steps[0].setVehicles", "exactly one of count or percent"},
	{"pause duration not a duration", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{pause: {duration: forever}}]`, "spec.rollout.steps[0].pause.duration", "should match"},
	{"analysis step names unknown analysis", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{analysis: {name: nope}}]`, "spec.rollout.steps", "must name entries of analyses"},
	{"analysis step with names unknown analysis", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{analysis: {name: lat, with: [nope]}}]`, "spec.rollout.steps", "must name entries of analyses (name and with)"},
	{"analysis step with repeats its name", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{analysis: {name: lat, with: [lat]}}]`, "spec.rollout.steps[0].analysis.with", "with repeats the step's own analysis"},
	{"canary cohort empty", `defaults: {initcwnd: 10}
rollout: {canary: {}}`, "spec.rollout.canary", "exactly one of vehicles, selector or count"},
	{"canary vehicles empty list", `defaults: {initcwnd: 10}
rollout: {canary: {vehicles: []}}`, "spec.rollout.canary.vehicles", "at least 1 items"},
	{"canary by names and count", `defaults: {initcwnd: 10}
rollout: {canary: {vehicles: [av-001], count: 2}}`, "spec.rollout.canary", "exactly one of vehicles, selector or count"},
	{"canary count zero", `defaults: {initcwnd: 10}
rollout: {canary: {count: 0}}`, "spec.rollout.canary.count", "greater than or equal to 1"},
	{"maxUnavailable zero", `defaults: {initcwnd: 10}
rollout: {canary: {count: 1}, maxUnavailable: 0}`, "spec.rollout.maxUnavailable", "at least 1"},
	{"maxUnavailable above 100%", `defaults: {initcwnd: 10}
rollout: {canary: {count: 1}, maxUnavailable: "150%"}`, "spec.rollout.maxUnavailable", "percentage from 1% to 100%"},
	{"analysis provider unknown", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Datadog, query: q, maxValue: "20"}]`, "spec.rollout.analyses[0].provider", "Unsupported value"},
	{"analysis threshold not a number", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: twenty}]`, "spec.rollout.analyses[0].maxValue", "should match"},
	{"analysis without threshold", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q}]`, "spec.rollout.analyses[0].maxValue", "must set maxValue, maxBaselineFactor or both"},
	{"analysis address not http", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", address: "ftp://loki:3100"}]`, "spec.rollout.analyses[0].address", "http or https URL"},
	{"analysis address with a password", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", address: "https://admin:secret@loki:3100"}]`, "spec.rollout.analyses[0].address", "must not carry credentials (user:password@)"},
	{"analysis address with a user", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", address: "http://admin@loki:3100/"}]`, "spec.rollout.analyses[0].address", "name it in secretRef"},
	{"analysis secretRef without a name", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", secretRef: {name: "Loki_Creds"}}]`, "spec.rollout.analyses[0].secretRef.name", "should match"},
	{"analysis without query", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, maxValue: "1"}]`, "spec.rollout.analyses[0].query", "exactly one of query or judge"},
	{"analysis with query and judge", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", judge: {threshold: 100ms, slowQuery: s, totalQuery: t}}]`, "spec.rollout.analyses[0].query", "exactly one of query or judge"},
	{"judge with a query analysis' ceiling", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, maxValue: "1", judge: {threshold: 100ms, slowQuery: s, totalQuery: t}}]`, "spec.rollout.analyses[0].judge", "belong to query analyses"},
	{"judge without slowQuery", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 100ms, totalQuery: t}}]`, "spec.rollout.analyses[0].judge.slowQuery", "Required value"},
	{"judge confidence of one half", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 100ms, slowQuery: s, totalQuery: t, confidence: "0.5"}}]`, "spec.rollout.analyses[0].judge.confidence", "should match"},
	{"judge quantile of one", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 100ms, slowQuery: s, totalQuery: t, quantile: "1"}}]`, "spec.rollout.analyses[0].judge.quantile", "should match"},
	{"judge query uses a threshold it lacks", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {slowQuery: "x > {{ .ThresholdMs }}", totalQuery: t}}]`, "spec.rollout.analyses[0].judge.threshold", "threshold is required when a query uses .ThresholdMs or .ThresholdSeconds"},
	{"judge threshold not a duration", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: fast, slowQuery: s, totalQuery: t}}]`, "spec.rollout.analyses[0].judge.threshold", "should match"},
	{"judge maxIncrease above one", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 100ms, slowQuery: s, totalQuery: t, maxIncrease: "1.5"}}]`, "spec.rollout.analyses[0].judge.maxIncrease", "should match"},
	{"duplicate analysis names", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1"}, {name: lat, provider: Prometheus, query: q, maxValue: "1"}]`, "spec.rollout.analyses[1]", "Duplicate value"},
	{"revision history above 100", `defaults: {initcwnd: 10}
rollout: {canary: {count: 1}, revisionHistoryLimit: 500}`, "spec.rollout.revisionHistoryLimit", "less than or equal to 100"},

	// What the kernel itself refuses.
	{"host pair from a host to itself", `hostPairs: [{from: xavier-a, to: xavier-a, parameters: {initcwnd: 10}}]`, "spec.hostPairs[0].to", "from and to must differ"},
	{"route prefix with host bits set", `routes: [{name: depot, destination: 10.20.0.1/16, parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "host bits set"},
	{"IPv6 route prefix with host bits set", `routes: [{name: depot, destination: "fd00::1/64", parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "host bits set"},
	{"route source unspecified", `routes: [{name: depot, destination: 10.0.0.0/8, source: 0.0.0.0, parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "unicast address"},
	{"route source multicast", `routes: [{name: depot, destination: 10.0.0.0/8, source: 224.0.0.1, parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "unicast address"},
	{"route source loopback", `routes: [{name: depot, destination: 10.0.0.0/8, source: 127.0.0.1, parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "unicast address"},
	{"interface named ..", `interfaces: [{name: "..", mtu: 1500}]`, "spec.interfaces[0].name", "refuses the interface names"},
	{"route device named .", `routes: [{name: depot, destination: 10.0.0.0/8, device: ".", parameters: {initcwnd: 10}}]`, "spec.routes[0].device", "refuses the interface names"},
	// Label selectors as the controller parses them (metav1.LabelSelectorAsSelector).
	{"node selector with an unknown operator", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: nettune.io/hardware, operator: Has, values: [orin]}]}`, "spec.nodeSelector.matchExpressions[0].operator", "Unsupported value"},
	{"node selector In without values", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: nettune.io/hardware, operator: In}]}`, "spec.nodeSelector.matchExpressions[0].values", "need at least one value"},
	{"node selector Exists with values", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: nettune.io/hardware, operator: Exists, values: [orin]}]}`, "spec.nodeSelector.matchExpressions[0].values", "take no values"},
	{"node selector label value with a space", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {a: "b c"}}`, "spec.nodeSelector.matchLabels.a", "should match"},
	{"node selector label value of 64 characters", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {a: "` + strings.Repeat("v", 64) + `"}}`, "spec.nodeSelector.matchLabels.a", "may not be more than 63"},
	{"node selector label key with a space", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {"a b": c}}`, "spec.nodeSelector.matchLabels", `matchLabels key "a b" is not a label key`},
	{"node selector with a valid and an invalid label key", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {nettune.io/vehicle: av-001, "a b": c}}`, "spec.nodeSelector.matchLabels", `matchLabels key "a b" is not a label key`},
	{"node selector label key with an upper-case prefix", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {"Nettune.io/vehicle": av-001}}`, "spec.nodeSelector.matchLabels", `matchLabels key "Nettune.io/vehicle" is not a label key`},
	{"node selector label key with a prefix of 254 characters", `defaults: {initcwnd: 10}
nodeSelector: {matchLabels: {"` + labelPrefix(254) + `/a": b}}`, "spec.nodeSelector.matchLabels", `matchLabels key "` + labelPrefix(254) + `/a" is not a label key`},
	{"node selector expression value with a space", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: nettune.io/vehicle, operator: In, values: [av-001, "av 002"]}]}`, "spec.nodeSelector.matchExpressions[0].values[1]", "should match"},
	{"node selector expression key with a space", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: "a b", operator: Exists}]}`, "spec.nodeSelector.matchExpressions[0].key", "should match"},
	{"node selector expression key with a prefix of 254 characters", `defaults: {initcwnd: 10}
nodeSelector: {matchExpressions: [{key: "` + labelPrefix(254) + `/a", operator: Exists}]}`, "spec.nodeSelector.matchExpressions[0].key", "prefix of a label key must be at most 253 characters"},
	{"canary selector NotIn without values", `defaults: {initcwnd: 10}
rollout: {canary: {selector: {matchExpressions: [{key: fleet, operator: NotIn, values: []}]}}}`, "spec.rollout.canary.selector.matchExpressions[0].values", "need at least one value"},
	{"canary selector label value with a space", `defaults: {initcwnd: 10}
rollout: {canary: {selector: {matchLabels: {a: "b c"}}}}`, "spec.rollout.canary.selector.matchLabels.a", "should match"},
	{"canary selector label key with a space", `defaults: {initcwnd: 10}
rollout: {canary: {selector: {matchLabels: {"a b": c}}}}`, "spec.rollout.canary.selector.matchLabels", `matchLabels key "a b" is not a label key`},
	{"canary selector expression value with a space", `defaults: {initcwnd: 10}
rollout: {canary: {selector: {matchExpressions: [{key: fleet, operator: NotIn, values: ["b c"]}]}}}`, "spec.rollout.canary.selector.matchExpressions[0].values[0]", "should match"},
	{"cluster selector label value with a space", `defaults: {initcwnd: 10}
clusterSelector: {matchLabels: {region: "eu west"}}`, "spec.clusterSelector.matchLabels.region", "should match"},
	{"cluster selector label key with a space", `defaults: {initcwnd: 10}
clusterSelector: {matchLabels: {"a b": c}}`, "spec.clusterSelector.matchLabels", `matchLabels key "a b" is not a label key`},
	{"cluster selector In without values", `defaults: {initcwnd: 10}
clusterSelector: {matchExpressions: [{key: region, operator: In}]}`, "spec.clusterSelector.matchExpressions[0].values", "need at least one value"},
	{"cluster selector DoesNotExist with values", `defaults: {initcwnd: 10}
clusterSelector: {matchExpressions: [{key: region, operator: DoesNotExist, values: [eu]}]}`, "spec.clusterSelector.matchExpressions[0].values", "take no values"},
	{"cluster selector expression value with a space", `defaults: {initcwnd: 10}
clusterSelector: {matchExpressions: [{key: region, operator: In, values: ["eu west"]}]}`, "spec.clusterSelector.matchExpressions[0].values[0]", "should match"},
	{"placement and cluster selector", `defaults: {initcwnd: 10}
placement: {namespace: fleet, name: depots}
clusterSelector: {}`, "spec.placement", "placement and clusterSelector exclude each other"},
	{"placement and hub assignment", `defaults: {initcwnd: 10}
placement: {namespace: fleet, name: depots}
hubAssignment: {stable: p-1}`, "spec.hubAssignment", "placement (read at a hub) and hubAssignment"},
	{"placement namespace not a name", `defaults: {initcwnd: 10}
placement: {namespace: Fleet, name: depots}`, "spec.placement.namespace", "should match"},
	{"placement without a name", `defaults: {initcwnd: 10}
placement: {namespace: fleet}`, "spec.placement.name", "Required value"},
	// Durations that must be positive.
	{"unreachableAfter zero", `defaults: {initcwnd: 10}
rollout: {canary: {count: 1}, unreachableAfter: 0s}`, "spec.rollout.unreachableAfter", "must be a positive duration"},
	{"unreachableTimeout zero", `defaults: {initcwnd: 10}
rollout: {canary: {count: 1}, unreachableTimeout: 0m}`, "spec.rollout.unreachableTimeout", "must be a positive duration"},
	{"pause of zero", `defaults: {initcwnd: 10}` + validRollout + `  steps: [{pause: {duration: 0s}}]`, "spec.rollout.steps[0].pause.duration", "must be a positive duration"},
	{"analysis interval zero", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: q, maxValue: "1", interval: 0s}]`, "spec.rollout.analyses[0].interval", "must be a positive duration"},
	{"judge threshold zero", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 0ms, slowQuery: s, totalQuery: t}}]`, "spec.rollout.analyses[0].judge.threshold", "must be a positive duration"},
	// Query templates with the fields the renderer gives them.
	{"query template with an unknown field", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: 'max(x{vehicle=~"{{ .Vehicle }}"})', maxValue: "20"}]`, "spec.rollout.analyses[0].query", "every {{ }} action of the template must be one of"},
	{"query template calling a function", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: 'max(x{vehicle=~"{{ printf "%s" .Vehicles }}"})', maxValue: "20"}]`, "spec.rollout.analyses[0].query", "every {{ }} action of the template must be one of"},
	{"query template with an unclosed action", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: 'max(x{vehicle=~"{{ .Vehicles"})', maxValue: "20"}]`, "spec.rollout.analyses[0].query", "every {{ }} action of the template must be one of"},
	{"samples query with a judge-only field", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, query: 'max(x)', samplesQuery: 'sum(x[{{ .Step }}])', maxValue: "20"}]`, "spec.rollout.analyses[0].samplesQuery", "every {{ }} action of the template must be one of"},
	{"judge slow query with a pipeline", `defaults: {initcwnd: 10}
rollout:
  canary: {count: 1}
  analyses: [{name: lat, provider: Loki, judge: {threshold: 200ms, slowQuery: 'sum(x{revision="{{ .Revision | html }}"})', totalQuery: t}}]`, "spec.rollout.analyses[0].judge.slowQuery", "every {{ }} action of the template must be one of"},
	// Every inherited TCP parameter against what it inherits.
	{"host pair ssthresh above inherited cwnd", `
defaults: {cwnd: {value: 30}}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {ssthresh: 40}}]`, "spec.hostPairs", "ssthresh must not exceed the cwnd.value it inherits"},
	{"host pair cwnd below inherited ssthresh", `
defaults: {ssthresh: 20}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {cwnd: {value: 10}}}]`, "spec.hostPairs", "must not be below the ssthresh it inherits"},
	{"host pair cwnd below inherited initcwnd", `
defaults: {initcwnd: 20}
hostPairs: [{from: xavier-a, to: xavier-b, parameters: {cwnd: {value: 10}}}]`, "spec.hostPairs", "must not be below the initcwnd it inherits"},
	{"maintenance window of zero duration", `rollout: {canary: {count: 1}, apply: {maintenanceWindows: [{schedule: "0 22 * * *", duration: 0s}]}}`,
		"spec.rollout.apply.maintenanceWindows[0].duration", "must be a duration above 0 and at most 168h"},
	{"maintenance window longer than a week", `rollout: {canary: {count: 1}, apply: {maintenanceWindows: [{schedule: "@daily", duration: 200h}]}}`,
		"spec.rollout.apply.maintenanceWindows[0].duration", "must be a duration above 0 and at most 168h"},
	{"maintenance window with four cron fields", `rollout: {canary: {count: 1}, apply: {maintenanceWindows: [{schedule: "0 22 * *", duration: 1h}]}}`,
		"spec.rollout.apply.maintenanceWindows[0].schedule", "must be five cron fields"},
	{"maintenance window with an unknown descriptor", `rollout: {canary: {count: 1}, apply: {maintenanceWindows: [{schedule: "@sometimes", duration: 1h}]}}`,
		"spec.rollout.apply.maintenanceWindows[0].schedule", "must be five cron fields"},
	{"maintenance window time zone not a zone name", `rollout: {canary: {count: 1}, apply: {maintenanceWindows: [{schedule: "0 22 * * *", duration: 1h, timeZone: "UTC+8 hours"}]}}`,
		"spec.rollout.apply.maintenanceWindows[0].timeZone", "should match"},
	{"unknown gate mode", `rollout: {canary: {count: 1}, apply: {gate: Sometimes}}`, "spec.rollout.apply.gate", "Unsupported value"},
	{"deferredTimeout zero", `rollout: {canary: {count: 1}, apply: {deferredTimeout: 0s}}`, "spec.rollout.apply.deferredTimeout", "must be a positive duration"},
}

// labelPrefix is a DNS subdomain of n characters: labels of 62 characters
// joined by dots.
func labelPrefix(n int) string {
	s := strings.Repeat(strings.Repeat("p", 62)+".", n/63) + strings.Repeat("p", n%63)
	if n%63 == 0 { // end with a letter, not a dot
		s = s[:n-1] + "p"
	}
	return s
}

func manyHostPairs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("{from: h%d, to: h%d}", i, i+1)
	}
	return strings.Join(parts, ", ")
}

// TestInvalidProfilesAreRefused submits each malformed profile to the real
// kube-apiserver and checks it is refused with a message naming the field.
func TestInvalidProfilesAreRefused(t *testing.T) {
	if len(invalidProfiles) < 25 {
		t.Fatalf("the table must hold at least 25 cases, has %d", len(invalidProfiles))
	}
	ctx := context.Background()
	for i, tc := range invalidProfiles {
		t.Run(tc.name, func(t *testing.T) {
			p := mustProfile(t, fmt.Sprintf("invalid-%d", i), tc.spec)
			err := cp.Client.Create(ctx, p)
			if err == nil {
				_ = cp.Client.Delete(ctx, p)
				t.Fatalf("profile was accepted, want refusal naming %s", tc.field)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			assertNamesField(t, err, tc.field, tc.msg)
		})
	}
	// Nothing refused was stored.
	list := &nettunev1alpha1.NetTuningProfileList{}
	if err := cp.Client.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, "invalid-") {
			t.Errorf("refused profile %s was stored", p.Name)
		}
	}
}

// assertNamesField checks the error carries a cause for field (exactly) whose
// message contains msg, and that the error text names the field too.
func assertNamesField(t *testing.T, err error, field, msg string) {
	t.Helper()
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("error carries no details: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			if !strings.Contains(err.Error(), field) {
				t.Fatalf("error text does not name %s: %v", field, err)
			}
			return
		}
	}
	t.Fatalf("no cause for field %q with message containing %q; got:\n%v", field, msg, err)
}

var invalidNodeTunings = []invalidCase{
	{"empty revision", `revision: ""`, "spec.revision", "at least 1 chars"},
	{"route destination not a CIDR", `
revision: r1
routes: [{destination: 192.168.10.300/32, parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "must be a CIDR"},
	{"route rtoMin out of range", `
revision: r1
routes: [{destination: 192.168.10.3/32, parameters: {rtoMin: 5s}}]`, "spec.routes[0].parameters.rtoMin", "between 1ms and 2s"},
	{"peer address not an IP", `
revision: r1
peers: [{host: xavier-b, address: xavier-b.local}]`, "spec.peers[0].address", "must be an IP address"},
	{"duplicate route destination", `
revision: r1
routes: [{destination: 192.168.10.3/32, parameters: {initcwnd: 10}}, {destination: 192.168.10.3/32, parameters: {initcwnd: 12}}]`, "spec.routes", "two routes have the same destination"},
	{"duplicate sysctl", `
revision: r1
sysctls: [{name: net.core.rmem_max, value: "1"}, {name: net.core.rmem_max, value: "2"}]`, "spec.sysctls", "two sysctls have the same name"},
	{"duplicate interface", `
revision: r1
interfaces: [{name: eth0, mtu: 1500}, {name: eth0, gro: false}]`, "spec.interfaces", "two interfaces have the same name"},
	{"duplicate peer", `
revision: r1
peers: [{host: xavier-b, address: 192.168.10.3}, {host: xavier-b, address: 192.168.10.4}]`, "spec.peers", "two peers have the same host"},
	{"duplicate profile", `
revision: r1
profiles: [{name: p, revision: p-1}, {name: p, revision: p-2}]`, "spec.profiles", "two profiles have the same name"},
	{"sysctl outside allow-list", `
revision: r1
sysctls: [{name: vm.swappiness, value: "1"}]`, "spec.sysctls[0].name", "not on the allow-list"},
	{"route destination with host bits set", `
revision: r1
routes: [{destination: 192.168.10.3/24, parameters: {initcwnd: 10}}]`, "spec.routes[0].destination", "host bits set"},
	{"route source multicast", `
revision: r1
routes: [{destination: 192.168.10.3/32, source: 239.1.1.1, parameters: {initcwnd: 10}}]`, "spec.routes[0].source", "unicast address"},
	{"route device named ..", `
revision: r1
routes: [{destination: 192.168.10.3/32, device: "..", parameters: {initcwnd: 10}}]`, "spec.routes[0].device", "refuses the interface names"},
	{"peer address unspecified", `
revision: r1
peers: [{host: xavier-b, address: 0.0.0.0}]`, "spec.peers[0].address", "unicast address"},
}

// TestInvalidNodeNetTuningsAreRefused holds the rendered per-node objects to
// the same rules, so nothing the agent could not apply is ever stored.
func TestInvalidNodeNetTuningsAreRefused(t *testing.T) {
	ctx := context.Background()
	for i, tc := range invalidNodeTunings {
		t.Run(tc.name, func(t *testing.T) {
			spec := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "nettune.io/v1alpha1", "kind": "NodeNetTuning",
				"metadata": map[string]any{"name": fmt.Sprintf("invalid-node-%d", i)},
				"spec":     spec,
			}}
			err := cp.Client.Create(ctx, u)
			if err == nil {
				_ = cp.Client.Delete(ctx, u)
				t.Fatalf("accepted, want refusal naming %s", tc.field)
			}
			assertNamesField(t, err, tc.field, tc.msg)
		})
	}
}

// TestNodeNetTuningConditionsOnePerType: the agent's report may carry each
// condition type once (the list is atomic, so the API server no longer
// keys it by type; a rule does): a report with distinct types is stored,
// one with a type twice is refused and changes nothing.
func TestNodeNetTuningConditionsOnePerType(t *testing.T) {
	ctx := context.Background()
	nnt := &nettunev1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "conditions-once"},
		Spec: nettunev1alpha1.NodeNetTuningSpec{Revision: "r1",
			Routes: []nettunev1alpha1.NodeRoute{{Destination: "192.168.10.3/32"}, {Destination: "192.168.10.4/32"}},
			Peers:  []nettunev1alpha1.Peer{{Host: "b", Address: "192.168.10.3"}, {Host: "c", Address: "192.168.10.4"}}}}
	if err := cp.Client.Create(ctx, nnt); err != nil {
		t.Fatalf("a spec with distinct routes and peers refused: %v", err)
	}
	t.Cleanup(func() { _ = cp.Client.Delete(ctx, nnt) })
	now := metav1.Now()
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: typ, LastTransitionTime: now, ObservedGeneration: 1}
	}
	nnt.Status.Conditions = []metav1.Condition{cond(nettunev1alpha1.ConditionApplied), cond(nettunev1alpha1.ConditionVerified)}
	if err := cp.Client.Status().Update(ctx, nnt); err != nil {
		t.Fatalf("a report with distinct condition types refused: %v", err)
	}
	nnt.Status.Conditions = append(nnt.Status.Conditions, cond(nettunev1alpha1.ConditionVerified))
	err := cp.Client.Status().Update(ctx, nnt)
	if err == nil {
		t.Fatal("a report with Verified twice was stored")
	}
	assertNamesField(t, err, "status.conditions", "two conditions have the same type")
	stored := &nettunev1alpha1.NodeNetTuning{}
	if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(nnt), stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Status.Conditions) != 2 {
		t.Errorf("stored %d conditions after the refused report, want the 2 before it", len(stored.Status.Conditions))
	}
}
