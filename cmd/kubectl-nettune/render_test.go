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
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenNow is the fixed "now" of the golden rendering.
var goldenNow = time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)

const (
	revCurrent = "xavier-lan-7c9d2e1f0a"
	revStable  = "xavier-lan-3a4b5c6d7e"
	revFailed  = "xavier-lan-0badc0ffee"
)

func testNode(name, vehicle, host, hardware string) corev1.Node {
	l := map[string]string{v1alpha1.DefaultHostLabel: host, v1alpha1.DefaultHardwareLabel: hardware}
	if vehicle != "" {
		l[v1alpha1.DefaultVehicleLabel] = vehicle
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
}

// nntReport describes what a node's agent reported.
type nntReport struct {
	verified bool          // applied and verified the current spec
	failed   string        // "", RolledBack or Degraded
	seenAgo  time.Duration // heartbeat age; <0: never
}

// testNNT is the NodeNetTuning of a node rendered with profile revision rev.
func testNNT(node, profile, rev string, r nntReport, now time.Time) v1alpha1.NodeNetTuning {
	const gen = 3
	nodeRev := "node-" + strings.TrimPrefix(rev, profile+"-")
	n := v1alpha1.NodeNetTuning{
		ObjectMeta: metav1.ObjectMeta{Name: node, Generation: gen},
		Spec: v1alpha1.NodeNetTuningSpec{
			Revision: nodeRev,
			Profiles: []v1alpha1.SourceProfile{{Name: profile, Revision: rev}},
		},
	}
	st := &n.Status
	st.ObservedGeneration = gen
	cond := func(t string, s metav1.ConditionStatus, reason string) {
		st.Conditions = append(st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour)),
		})
	}
	switch {
	case r.failed != "":
		st.AppliedRevision = "node-previous"
		cond(v1alpha1.ConditionVerified, metav1.ConditionFalse, "ProbeFailed")
		cond(r.failed, metav1.ConditionTrue, "ProbeFailed")
	case r.verified:
		st.AppliedRevision = nodeRev
		cond(v1alpha1.ConditionApplied, metav1.ConditionTrue, "Applied")
		cond(v1alpha1.ConditionVerified, metav1.ConditionTrue, "Verified")
	default:
		st.AppliedRevision = "node-previous"
		cond(v1alpha1.ConditionVerified, metav1.ConditionFalse, "Applying")
	}
	if r.seenAgo >= 0 {
		st.LastHeartbeatTime = ptr.To(metav1.NewTime(now.Add(-r.seenAgo)))
	}
	return n
}

// goldenFleet is a profile mid-rollout over six vehicles of two hardware
// models: two canaries (verified), a third updated vehicle whose node rolled
// the revision back (failed), an unreachable baseline vehicle, a verified
// baseline vehicle and an excluded vehicle; the current step is an analysis
// with one result.
func goldenFleet() (*v1alpha1.NetTuningProfile, []corev1.Node, []v1alpha1.NodeNetTuning) {
	now := goldenNow
	p := &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{
			Name: "xavier-lan", Generation: 4,
			Annotations: map[string]string{
				v1alpha1.ExcludeAnnotation: "av-006",
				v1alpha1.PromoteAnnotation: "xavier-lan-7c9d2e1f0a@2",
			},
		},
		Spec: v1alpha1.NetTuningProfileSpec{
			NodeSelector: &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{
				Key: v1alpha1.DefaultHardwareLabel, Operator: metav1.LabelSelectorOpIn, Values: []v1alpha1.LabelValue{"xavier", "orin"},
			}}},
			Defaults: &v1alpha1.TCPParameters{Initcwnd: ptr.To[int32](25)},
			Rollout: &v1alpha1.RolloutSpec{
				Canary: v1alpha1.CanarySpec{Count: ptr.To[int32](2)},
				Steps: []v1alpha1.RolloutStep{
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr.To[int32](50)}},
					{Pause: &v1alpha1.PauseStep{}},
					{Analysis: &v1alpha1.AnalysisStep{Name: "p9999-latency"}},
					{Pause: &v1alpha1.PauseStep{Duration: &metav1.Duration{Duration: 30 * time.Minute}}},
					{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr.To[int32](100)}},
				},
				FailureBudget: ptr.To(intstr.FromInt32(1)),
			},
		},
		Status: v1alpha1.NetTuningProfileStatus{
			ObservedGeneration: 4,
			CurrentRevision:    revCurrent,
			StableRevision:     revStable,
			FailedRevision:     revFailed,
			CurrentStep:        ptr.To[int32](3),
			StepStarted:        ptr.To(metav1.NewTime(now.Add(-4*time.Minute - 12*time.Second))),
			Phase:              "Progressing",
			Vehicles:           v1alpha1.VehicleCounts{Total: 5, Updated: 3, Verified: 2, Unreachable: 1, Failed: 1},
			CanaryVehicles:     []string{"av-001", "av-002"},
			Analysis: []v1alpha1.AnalysisResult{{
				Name: "p9999-latency", Step: 3, Phase: "Running",
				CanaryValue: "18.4", BaselineValue: "19.7", Threshold: "20",
				Successful: 1, Inconclusive: 1,
				Message:      "canary 18.4 <= min(20, 19.7 x 1.10 + 1); 1 of 3 measurements passed",
				LastMeasured: ptr.To(metav1.NewTime(now.Add(-40 * time.Second))),
			}, {
				Name: "slow-messages", Step: 3, Phase: "Running", Verdict: "Inconclusive",
				CanaryValue: "1.2", BaselineValue: "0.4", Threshold: "1.4", Inconclusive: 2,
				Pair: "host=xavier-b,peer=xavier-a", Effect: "0.008", Probability: "0.72", Confidence: "0.998333",
				CanarySamples: ptr.To[int64](500), BaselineSamples: ptr.To[int64](1500),
				Pairs: []v1alpha1.PairVerdict{
					{Pair: "host=xavier-b,peer=xavier-a", Verdict: "Inconclusive", CanarySlow: 6, CanaryTotal: 500, BaselineSlow: 6, BaselineTotal: 1500, Probability: "0.72", RankP: "0.04"},
					{Pair: "host=xavier-a,peer=xavier-b", Verdict: "Pass", CanarySlow: 0, CanaryTotal: 498, BaselineSlow: 1, BaselineTotal: 1497, Probability: "0.0011"},
				},
				Message:      "0/1 measurements successful (0 failed, 2 inconclusive, 0 consecutive errors); latest measurement Inconclusive",
				LastMeasured: ptr.To(metav1.NewTime(now.Add(-5 * time.Second))),
			}},
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "RolloutInProgress", Message: "revision xavier-lan-7c9d2e1f0a step 3/6"},
				{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "RolloutInProgress", Message: "revision xavier-lan-7c9d2e1f0a step 3/6"},
				{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionFalse, Reason: "RolloutInProgress"},
				{Type: v1alpha1.ConditionPaused, Status: metav1.ConditionFalse, Reason: "NotPaused"},
				{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "SamePriority", Message: "sysctl net.ipv4.tcp_rmem is also set by log-upload-wan at priority 0 on 2 node(s); applied from neither"},
			},
		},
	}
	var nodes []corev1.Node
	var nnts []v1alpha1.NodeNetTuning
	add := func(vehicle, hw, rev string, a, b nntReport) {
		for i, r := range []nntReport{a, b} {
			host := hw + "-" + string(rune('a'+i))
			name := vehicle + "-" + host
			nodes = append(nodes, testNode(name, vehicle, host, hw))
			nnts = append(nnts, testNNT(name, p.Name, rev, r, now))
		}
	}
	ok := nntReport{verified: true, seenAgo: 12 * time.Second}
	add("av-001", "xavier", revCurrent, ok, nntReport{verified: true, seenAgo: 31 * time.Second})
	add("av-002", "orin", revCurrent, ok, ok)
	add("av-003", "xavier", revCurrent, ok, nntReport{failed: v1alpha1.ConditionRolledBack, seenAgo: 8 * time.Second})
	add("av-004", "orin", revStable, nntReport{verified: true, seenAgo: 17 * time.Minute}, nntReport{verified: true, seenAgo: 16 * time.Minute})
	add("av-005", "xavier", revStable, ok, ok)
	add("av-006", "orin", revStable, ok, ok)
	// A selected node without a vehicle label, and a node the selector leaves out.
	nodes = append(nodes, testNode("depot-gw", "", "gw", "xavier"), testNode("build-01", "av-009", "x86-a", "x86"))
	return p, nodes, nnts
}

func TestRenderGolden(t *testing.T) {
	p, nodes, nnts := goldenFleet()
	var b bytes.Buffer
	Render(&b, p, nodes, nnts, goldenNow)
	golden := filepath.Join("testdata", "status.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", golden, err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("Render output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, b.String(), want)
	}
}

// TestRenderGoldenHub: a hub profile with a Placement lists its clusters
// with their decision group and rollout status.
func TestRenderGoldenHub(t *testing.T) {
	p, _, _ := goldenFleet()
	p.Spec.Placement = &v1alpha1.PlacementRef{Namespace: "fleet", Name: "depots"}
	p.Status.Clusters = []v1alpha1.ClusterStatus{
		{Name: "depot-a", DecisionGroup: 0, RolloutStatus: v1alpha1.ClusterSucceeded, Vehicles: 2, Verified: 2, Reachable: true},
		{Name: "depot-b", DecisionGroup: 1, RolloutStatus: v1alpha1.ClusterProgressing, Vehicles: 2, Verified: 1, Reachable: true},
		{Name: "depot-c", DecisionGroup: 1, RolloutStatus: v1alpha1.ClusterToApply, Vehicles: 2, Reachable: false,
			Message: "not Available (ManagedClusterLeaseUpdateStopped: Registration agent stopped updating its lease.)"},
	}
	var b bytes.Buffer
	Render(&b, p, nil, nil, goldenNow)
	golden := filepath.Join("testdata", "hub-status.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading %s (run with -update to create it): %v", golden, err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("Render output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", golden, b.String(), want)
	}
}

// TestRenderIsPure renders twice and with reordered inputs: same output.
func TestRenderIsPure(t *testing.T) {
	p, nodes, nnts := goldenFleet()
	var a, b bytes.Buffer
	Render(&a, p, nodes, nnts, goldenNow)
	for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
		nodes[i], nodes[j] = nodes[j], nodes[i]
	}
	for i, j := 0, len(nnts)-1; i < j; i, j = i+1, j-1 {
		nnts[i], nnts[j] = nnts[j], nnts[i]
	}
	Render(&b, p, nodes, nnts, goldenNow)
	if a.String() != b.String() {
		t.Errorf("output depends on input order:\n%s\n---\n%s", a.String(), b.String())
	}
}

func TestVehicleRows(t *testing.T) {
	now := goldenNow
	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.NetTuningProfileSpec{
		Rollout: &v1alpha1.RolloutSpec{UnreachableAfter: &metav1.Duration{Duration: time.Minute}},
	}}
	ok := nntReport{verified: true, seenAgo: time.Second}
	nodes := []corev1.Node{
		testNode("m-a", "mixed", "a", "orin"), testNode("m-b", "mixed", "b", "xavier"),
		testNode("n-a", "none", "a", "orin"),
		testNode("u-a", "updating", "a", "orin"), testNode("u-b", "updating", "b", "orin"),
		testNode("s-a", "stale", "a", "orin"),
		testNode("d-a", "degraded", "a", "orin"),
		testNode("h-a", "half-never", "a", "orin"), testNode("h-b", "half-never", "b", "orin"),
	}
	nnts := []v1alpha1.NodeNetTuning{
		testNNT("m-a", "lan", "lan-1", ok, now), testNNT("m-b", "lan", "lan-2", ok, now),
		testNNT("u-a", "lan", "lan-2", ok, now), testNNT("u-b", "lan", "lan-2", nntReport{seenAgo: time.Second}, now),
		testNNT("s-a", "lan", "lan-1", nntReport{verified: true, seenAgo: time.Minute}, now),
		testNNT("d-a", "lan", "lan-1", nntReport{failed: v1alpha1.ConditionDegraded, seenAgo: time.Second}, now),
		testNNT("h-a", "lan", "lan-1", ok, now), testNNT("h-b", "lan", "lan-1", nntReport{verified: true, seenAgo: -1}, now),
	}
	// A Verified condition of an older generation does not count.
	stale := testNNT("x", "lan", "lan-1", ok, now)
	stale.Generation = 4
	stale.Status.ObservedGeneration = 4
	if v, _, _ := fleetmodel.NodeReport(&stale); v {
		t.Errorf("a Verified condition observed at an older generation counts as verified")
	}

	rows, unlabelled, err := vehicleRows(p, nodes, nnts, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(unlabelled) != 0 {
		t.Errorf("unlabelled = %v", unlabelled)
	}
	type row struct{ name, hw, rev, nodes, state string }
	var got []row
	for _, r := range rows {
		got = append(got, row{r.Name, r.Hardware, r.Revision, strings.Join([]string{strconv.Itoa(r.Verified), strconv.Itoa(r.Nodes)}, "/"), r.State})
	}
	want := []row{
		{"degraded", "orin", "lan-1", "0/1", stateFailed},
		{"half-never", "orin", "lan-1", "2/2", stateUnreachable},
		{"mixed", "orin+xavier", "mixed", "2/2", stateVerified},
		{"none", "orin", "-", "0/1", stateUnreachable},
		{"stale", "orin", "lan-1", "1/1", stateUnreachable},
		{"updating", "orin", "lan-2", "1/2", stateUpdating},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %v\nwant %v", got, want)
	}
}

func TestStepMarkers(t *testing.T) {
	p, _, _ := goldenFleet()
	marks := func(p *v1alpha1.NetTuningProfile) string {
		var b bytes.Buffer
		renderSteps(&b, p, goldenNow)
		var m []string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "  [") {
				m = append(m, l[2:5])
			}
		}
		return strings.Join(m, "")
	}
	if got, want := marks(p), "[x][x][x][>][ ][ ][ ]"; got != want {
		t.Errorf("in progress: %s, want %s", got, want)
	}
	rb := p.DeepCopy()
	rb.Status.Phase = "RolledBack"
	rb.Status.FailedRevision = rb.Status.CurrentRevision
	if got, want := marks(rb), "[x][x][x][!][ ][ ][ ]"; got != want {
		t.Errorf("rolled back: %s, want %s", got, want)
	}
	done := p.DeepCopy()
	done.Status.StableRevision = done.Status.CurrentRevision
	done.Status.CurrentStep = ptr.To[int32](6)
	done.Status.Phase = "Healthy"
	if got, want := marks(done), "[x][x][x][x][x][x][x]"; got != want {
		t.Errorf("stable: %s, want %s", got, want)
	}
}

// TestCommandLine checks what needs no API server: kubectl's standard
// flags on every command, usage errors (exit 2) naming what is wrong, and
// shell completion scripts.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  []string // in stdout
		err  []string // in stderr
	}{
		{[]string{"status", "--help"}, exitOK, []string{"kubectl nettune status PROFILE", "-w, --watch", "-o, --output string", "--as string", "--server string", "--request-timeout string", "--kubeconfig string", "-n, --namespace string"}, nil},
		{[]string{"status", "a", "b"}, exitUsage, nil, []string{"kubectl nettune status: expected PROFILE, got 2 argument(s): a b"}},
		{[]string{"status", "a", "-o", "xml"}, exitUsage, nil, []string{`unknown output format "xml"`}},
		{[]string{"revisions", "a", "-o", "wide"}, exitUsage, nil, []string{`unknown output format "wide"`}},
		{[]string{"exclude", "a"}, exitUsage, nil, []string{"expected PROFILE VEHICLE..., got 1 argument(s): a"}},
		{[]string{"status", "a", "--frobnicate"}, exitUsage, nil, []string{"unknown flag: --frobnicate"}},
		{[]string{"completion", "bash"}, exitOK, []string{"__start_kubectl-nettune"}, nil},
		{[]string{"completion", "zsh"}, exitOK, []string{"#compdef kubectl-nettune"}, nil},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d\nstdout: %s\nstderr: %s", tc.args, code, tc.code, out.String(), errb.String())
		}
		for _, w := range tc.out {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%q: stdout lacks %q:\n%s", tc.args, w, out.String())
			}
		}
		for _, w := range tc.err {
			if !strings.Contains(errb.String(), w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, errb.String())
			}
		}
	}
}

func TestMergeRevision(t *testing.T) {
	rollout := &v1alpha1.RolloutSpec{Canary: v1alpha1.CanarySpec{Count: ptr.To[int32](2)}, Paused: true}
	// A stored content never has a rollout; one that did is replaced.
	spec, err := mergeRevision([]byte(`{"priority":5,"defaults":{"initcwnd":30},"rollout":{"canary":{"count":9}}}`), rollout)
	if err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.NetTuningProfileSpec{Priority: 5, Defaults: &v1alpha1.TCPParameters{Initcwnd: ptr.To[int32](30)}, Rollout: rollout}
	if !reflect.DeepEqual(*spec, want) {
		t.Errorf("merged %+v, want %+v", *spec, want)
	}
	if _, err := mergeRevision([]byte(`not json`), nil); err == nil {
		t.Error("bad content decoded")
	}
}
