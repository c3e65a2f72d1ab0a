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

// Package hub tests the Open Cluster Management harness
// (test/framework/hubtest) that nettune's hub mode is tested on: a hub and
// three spokes on kine join, ManifestWorks reach every spoke and their
// status feedback comes back, and a spoke whose API server stops goes
// Available=Unknown on the hub and catches up with the ManifestWork changed
// meanwhile when it returns.
//
// It needs bin/ocm, bin/kine, bin/crds/ocm and the control plane tools (make
// tools); without them it skips, unless NETTUNE_REQUIRE_TOOLS is set.
package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/hubtest"
)

const (
	workName = "nettune-probe"
	cmName   = "nettune-probe"
	cmNS     = "default"
)

// feedback is what the hub's ManifestWork reports for the ConfigMap.
type feedback struct {
	resourceVersion, x, data string
}

func TestOCM(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if m := hubtest.MissingTools(root); len(m) > 0 {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("missing %s: run 'make tools'", strings.Join(m, ", "))
		}
		t.Skipf("missing %s: run 'make tools' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(m, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	// The state and logs stay in .nettune/hub-test until the next run.
	dir := filepath.Join(root, ".nettune", "hub-test")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	hub, err := hubtest.StartHubWithOptions(dir, hubtest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the hub: %v", err)
	}
	names := []string{"vehicle-a", "vehicle-b", "vehicle-c"}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range append([]string{"ocm-hub", "hub-kube-controller-manager"}, agentsOf(names)...) {
				t.Logf("--- last lines of %s:\n%s", p, tail(hub.LogPath(p), 25))
			}
		}
		if err := hub.Stop(); err != nil {
			t.Errorf("stopping the hub: %v", err)
		}
	})
	t.Logf("TIMING hub up: %s (logs in %s)", time.Since(start).Round(time.Millisecond), filepath.Join(dir, "logs"))

	// Three spokes join, one after the other.
	spokes := map[string]*hubtest.Spoke{}
	for _, name := range names {
		begun := time.Now()
		s, err := hub.StartSpoke(name)
		if err != nil {
			t.Fatalf("starting spoke %s: %v", name, err)
		}
		spokes[name] = s
		t.Logf("TIMING join %s (kine, kube-apiserver, CRDs, agent, CSR, accepted, Available=True): %s", name, time.Since(begun).Round(time.Millisecond))
	}
	for _, name := range names {
		if st, err := hub.ClusterAvailable(ctx, name); err != nil || st != metav1.ConditionTrue {
			t.Fatalf("ManagedCluster %s: Available=%q (%v)", name, st, err)
		}
	}

	// A ManifestWork per cluster namespace: a ConfigMap with feedback rules.
	created := map[string]time.Time{}
	for _, name := range names {
		if err := hub.Client.Create(ctx, manifestWork(name, "1")); err != nil {
			t.Fatalf("creating ManifestWork in %s: %v", name, err)
		}
		created[name] = time.Now()
	}
	for _, name := range names {
		cm := waitConfigMap(ctx, t, spokes[name], "1")
		applied := time.Since(created[name])
		fb := waitFeedback(ctx, t, hub, name, func(f feedback) bool { return f.x == "1" && f.resourceVersion == cm.ResourceVersion })
		t.Logf("TIMING %s: ManifestWork created -> ConfigMap on the spoke %s, -> status feedback on the hub %s (resourceVersion %s, x %s, data %s)",
			name, applied.Round(time.Millisecond), time.Since(created[name]).Round(time.Millisecond), fb.resourceVersion, fb.x, fb.data)
		if fb.data != `{"x":"1"}` {
			t.Errorf("%s: raw JSON feedback of .data = %q, want {\"x\":\"1\"}", name, fb.data)
		}
		checkWorkConditions(ctx, t, hub, name)
	}

	// Feedback latency on a live spoke: change the ConfigMap on the spoke
	// itself (as its owner would); the work agent puts it back and the
	// feedback follows its resourceVersion.
	live := spokes["vehicle-a"]
	var cm corev1.ConfigMap
	if err := live.Client.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: cmName}, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{"touched": "yes"}
	if err := live.Client.Update(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	touched := time.Now()
	fb := waitFeedback(ctx, t, hub, "vehicle-a", func(f feedback) bool { return f.resourceVersion == cm.ResourceVersion })
	t.Logf("TIMING vehicle-a: ConfigMap changed on the spoke -> new resourceVersion %s in the hub's feedback: %s", fb.resourceVersion, time.Since(touched).Round(time.Millisecond))

	// vehicle-b goes silent: its API server stops.
	silent := spokes["vehicle-b"]
	renewed, err := hub.LeaseRenewTime(ctx, silent.Name)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := silent.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("vehicle-b: kube-apiserver stopped (Lease last renewed %s before)", stopped.Sub(renewed).Round(time.Millisecond))
	var sawFalse time.Duration
	if err := poll(ctx, 250*time.Millisecond, 3*time.Minute, func() error {
		st, err := hub.ClusterAvailable(ctx, silent.Name)
		if err != nil {
			return err
		}
		if st == metav1.ConditionFalse && sawFalse == 0 {
			sawFalse = time.Since(stopped)
			t.Logf("TIMING vehicle-b: Available=False (the agent's health check of its API server) %s after the stop", sawFalse.Round(time.Millisecond))
		}
		if st != metav1.ConditionUnknown {
			return fmt.Errorf("condition ManagedClusterConditionAvailable is %q", st)
		}
		return nil
	}); err != nil {
		t.Fatalf("vehicle-b never went Available=Unknown: %v", err)
	}
	renewed, _ = hub.LeaseRenewTime(ctx, silent.Name)
	t.Logf("TIMING vehicle-b: Available=Unknown %s after its API server stopped (Lease last renewed %s after the stop; agent restarts so far: %d)",
		time.Since(stopped).Round(time.Millisecond), renewed.Sub(stopped).Round(time.Millisecond), silent.AgentRestarts())
	for _, name := range []string{"vehicle-a", "vehicle-c"} {
		if st, _ := hub.ClusterAvailable(ctx, name); st != metav1.ConditionTrue {
			t.Errorf("%s: Available=%q while vehicle-b is silent, want True", name, st)
		}
	}

	// The hub changes vehicle-b's ManifestWork while it is silent.
	var mw workv1.ManifestWork
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: silent.Name, Name: workName}, &mw); err != nil {
		t.Fatal(err)
	}
	mw.Spec.Workload = manifestWork(silent.Name, "2").Spec.Workload
	if err := hub.Client.Update(ctx, &mw); err != nil {
		t.Fatal(err)
	}

	// It comes back and catches up.
	restarted := time.Now()
	if err := silent.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING vehicle-b: kube-apiserver restarted in %s", time.Since(restarted).Round(time.Millisecond))
	if err := hub.WaitClusterAvailable(ctx, silent.Name, metav1.ConditionTrue); err != nil {
		t.Fatal(err)
	}
	t.Logf("TIMING vehicle-b: Available=True again %s after its API server was started again", time.Since(restarted).Round(time.Millisecond))
	cm = *waitConfigMap(ctx, t, silent, "2")
	t.Logf("TIMING vehicle-b: the ManifestWork changed while silent reached the spoke %s after the restart", time.Since(restarted).Round(time.Millisecond))
	fb = waitFeedback(ctx, t, hub, silent.Name, func(f feedback) bool { return f.x == "2" && f.resourceVersion == cm.ResourceVersion })
	t.Logf("TIMING vehicle-b: its feedback (x %s, data %s) on the hub %s after the restart; agent restarts: %d",
		fb.x, fb.data, time.Since(restarted).Round(time.Millisecond), silent.AgentRestarts())
	checkWorkConditions(ctx, t, hub, silent.Name)
	for _, name := range names {
		if st, _ := hub.ClusterAvailable(ctx, name); st != metav1.ConditionTrue {
			t.Errorf("%s: Available=%q at the end, want True", name, st)
		}
	}
}

// manifestWork is the ManifestWork for cluster namespace ns: ConfigMap
// default/nettune-probe with data x, and feedback rules for its
// resourceVersion, .data.x and .data (raw JSON).
func manifestWork(ns, x string) *workv1.ManifestWork {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cmNS, Name: cmName},
		Data:       map[string]string{"x": x},
	}
	raw, err := json.Marshal(cm)
	if err != nil {
		panic(err)
	}
	return &workv1.ManifestWork{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: workName},
		Spec: workv1.ManifestWorkSpec{
			Workload: workv1.ManifestsTemplate{Manifests: []workv1.Manifest{{RawExtension: runtime.RawExtension{Raw: raw}}}},
			ManifestConfigs: []workv1.ManifestConfigOption{{
				ResourceIdentifier: workv1.ResourceIdentifier{Resource: "configmaps", Namespace: cmNS, Name: cmName},
				FeedbackRules: []workv1.FeedbackRule{{
					Type: workv1.JSONPathsType,
					JsonPaths: []workv1.JsonPath{
						{Name: "resourceVersion", Path: ".metadata.resourceVersion"},
						{Name: "x", Path: ".data.x"},
						{Name: "data", Path: ".data"},
					},
				}},
			}},
		},
	}
}

// waitConfigMap waits until the spoke has the ConfigMap with data x.
func waitConfigMap(ctx context.Context, t *testing.T, s *hubtest.Spoke, x string) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	if err := poll(ctx, 100*time.Millisecond, 3*time.Minute, func() error {
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: cmNS, Name: cmName}, &cm); err != nil {
			return err
		}
		if cm.Data["x"] != x {
			return fmt.Errorf("x=%q", cm.Data["x"])
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: ConfigMap %s/%s with x=%s: %v", s.Name, cmNS, cmName, x, err)
	}
	return &cm
}

// waitFeedback waits until the hub's ManifestWork reports feedback ok takes.
func waitFeedback(ctx context.Context, t *testing.T, hub *hubtest.Hub, ns string, ok func(feedback) bool) feedback {
	t.Helper()
	var last feedback
	if err := poll(ctx, 100*time.Millisecond, 3*time.Minute, func() error {
		var mw workv1.ManifestWork
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workName}, &mw); err != nil {
			return err
		}
		last = feedback{}
		for _, m := range mw.Status.ResourceStatus.Manifests {
			for _, v := range m.StatusFeedbacks.Values {
				switch {
				case v.Name == "resourceVersion" && v.Value.Type == workv1.String && v.Value.String != nil:
					last.resourceVersion = *v.Value.String
				case v.Name == "x" && v.Value.Type == workv1.String && v.Value.String != nil:
					last.x = *v.Value.String
				case v.Name == "data" && v.Value.Type == workv1.JsonRaw && v.Value.JsonRaw != nil:
					last.data = *v.Value.JsonRaw
				}
			}
		}
		if !ok(last) {
			return fmt.Errorf("feedback %+v", last)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: status feedback: %v", ns, err)
	}
	return last
}

// checkWorkConditions checks the ManifestWork is Applied and Available and
// its feedback synced.
func checkWorkConditions(ctx context.Context, t *testing.T, hub *hubtest.Hub, ns string) {
	t.Helper()
	if err := poll(ctx, 100*time.Millisecond, time.Minute, func() error {
		var mw workv1.ManifestWork
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workName}, &mw); err != nil {
			return err
		}
		for _, c := range []string{workv1.WorkApplied, workv1.WorkAvailable} {
			if !meta.IsStatusConditionTrue(mw.Status.Conditions, c) {
				return fmt.Errorf("condition %s of the ManifestWork is not True: %+v", c, mw.Status.Conditions)
			}
		}
		for _, m := range mw.Status.ResourceStatus.Manifests {
			if !meta.IsStatusConditionTrue(m.Conditions, "StatusFeedbackSynced") {
				return fmt.Errorf("manifest condition StatusFeedbackSynced not True: %+v", m.Conditions)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("%s: %v", ns, err)
	}
}

func poll(ctx context.Context, interval, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

func agentsOf(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, n+"-agent")
	}
	return out
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
