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

package hub

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/internal/fleet"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/stack"
	"github.com/nettune/nettune/test/framework/hubtest"
	"github.com/nettune/nettune/test/framework/testenv"
)

// cluster is one spoke of the rollout test with its vehicles.
type cluster struct {
	name  string
	spoke *hubtest.Spoke
	fleet *fleet.Fleet
}

const profileName = "xavier-lan"

// TestHubRollout: a hub, three spoke clusters (kine, kube-apiserver, OCM
// agent, a nettune controller and two netns vehicles of three hosts with
// real agents each) and one central Loki. A profile applied at the hub goes
// to every vehicle of the three clusters; the demo's good edit goes canary
// first across two clusters, judged on the central Loki, then to all three,
// while the cluster without a canary is silent (its API server stopped): its
// vehicles turn Unreachable, never Failed, and catch up when it returns; a
// third revision goes one vehicle at a time while nettune's controller in
// one cluster is killed (the cluster stays Available; its report stops):
// its vehicles turn Unreachable with the cluster named, the others take
// the revision within maxUnavailable, and they catch up once it is started
// again; the demo's bad edit is rolled back in every cluster; a bad profile
// is refused at the hub's admission and no work changes.
//
// The central Loki is multi-tenant (auth_enabled) behind a TLS gateway with
// basic auth (nginx, a CA made by the test): each cluster's agents and
// controller push with their own users into the cluster's tenant (its
// name), and the hub's controller queries all three tenants at once
// ("depot-a|depot-b|depot-c") with a Secret in its namespace. No
// credential appears in the hub's or the clusters' objects or logs.
func TestHubRollout(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	missing := hubtest.MissingTools(root)
	for _, b := range []string{"nettune-agent", "nettune-controller", "loki"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			missing = append(missing, "bin/"+b)
		}
	}
	if len(missing) > 0 {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("missing %s: run 'make tools build'", strings.Join(missing, ", "))
		}
		t.Skipf("missing %s: run 'make tools build' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(missing, ", "))
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dir := filepath.Join(root, ".nettune", "hub-rollout")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	h, err := hubtest.StartHubWithOptions(dir, hubtest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the hub: %v", err)
	}
	t.Cleanup(func() {
		if err := h.Stop(); err != nil {
			t.Errorf("stopping the hub: %v", err)
		}
	})
	names := []string{"depot-a", "depot-b", "depot-c"}
	loki, err := stack.RunLokiOpts(filepath.Join(dir, "loki"), stack.LokiOptions{Auth: true, Tenant: strings.Join(names, "|")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loki.Close() })
	// The gateway's users: per cluster its agents and its controller, each
	// allowed the cluster's tenant only; the hub's controller, all three.
	users := map[string]fleet.LokiUsers{}
	var gatewayUsers []testenv.GatewayUser
	var secrets []string
	for _, name := range names {
		u, err := fleet.NewLokiUsers(name, name+"-")
		if err != nil {
			t.Fatal(err)
		}
		users[name] = u
		gatewayUsers = append(gatewayUsers, u.Agents, u.Controller)
	}
	hubPassword, err := fleet.NewPassword()
	if err != nil {
		t.Fatal(err)
	}
	hubUser := testenv.GatewayUser{Name: "nettune-hub", Password: hubPassword, Tenants: names}
	gatewayUsers = append(gatewayUsers, hubUser)
	secrets = append(secrets, hubPassword, fleet.BasicAuth(hubUser.Name, hubPassword))
	gw := testenv.StartGateway(t, testenv.GatewayOptions{Upstream: loki.URL, Users: gatewayUsers})

	var clusters []*cluster
	for i, name := range names {
		s, err := h.StartSpoke(name)
		if err != nil {
			t.Fatalf("spoke %s: %v", name, err)
		}
		var vs []fleet.VehicleSpec
		for j := 1; j <= 2; j++ {
			vs = append(vs, fleet.VehicleSpec{Name: fmt.Sprintf("av-%d%02d", i+1, j), Hardware: "xavier", Hosts: []string{"xavier-a", "xavier-b", "xavier-c"}})
		}
		u := users[name]
		f, err := fleet.Start(ctx, fleet.Options{Dir: filepath.Join(dir, name), Vehicles: vs, Loki: loki, NoPrometheus: true,
			Secure: true, Tenant: name, Gateway: gw.Gateway, LokiUsers: &u,
			ControlPlane: &localcp.ControlPlane{Config: s.Config, Client: s.Client, Kubeconfig: s.Kubeconfig, Scheme: h.Scheme}})
		if err != nil {
			t.Fatalf("vehicles of %s: %v", name, err)
		}
		c := &cluster{name: name, spoke: s, fleet: f}
		t.Cleanup(func() { _ = c.fleet.Close() })
		secrets = append(secrets, f.Secrets()...)
		// The demo's loss scenarios (incast and foreign UDP bursts into
		// xavier-a), which make the bad edit's regression.
		stop := f.StartTraffic(ctx)
		t.Cleanup(stop)
		clusters = append(clusters, c)
	}
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.Namespace}}); err != nil {
		t.Fatal(err)
	}
	// The hub's query credentials: every cluster's tenant, joined by "|".
	if err := h.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hubLokiSecret, Namespace: fleet.Namespace}, Data: map[string][]byte{
		httpauth.KeyTenant: []byte(strings.Join(names, "|")), httpauth.KeyUsername: []byte(hubUser.Name),
		httpauth.KeyPassword: []byte(hubPassword), httpauth.KeyCA: gw.CAPEM,
	}}); err != nil {
		t.Fatal(err)
	}
	stopHub := startHubController(t, root, dir, h, gw.URL)
	t.Cleanup(stopHub)
	t.Logf("TIMING hub, Loki behind the gateway, 3 clusters of 2 vehicles (18 agents) and the hub's controller up in %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- hub controller log:\n%s", tailFile(filepath.Join(dir, "logs", "hub-controller.log"), 60))
			out, _ := exec.Command(filepath.Join(root, "bin", "kubectl"), "--kubeconfig", h.Kubeconfig, "get", "ntp,manifestwork", "-A", "-o", "yaml").CombinedOutput()
			t.Logf("--- hub objects:\n%s", out)
			for _, c := range clusters {
				t.Logf("--- cluster %s:\n%s", c.name, c.fleet.Evidence(context.Background()))
			}
		}
	})

	// v1 at the hub, no rollout: every vehicle of every cluster.
	v1 := sample(t, root, "01-xavier-lan-v1.yaml")
	apply(t, ctx, h, v1)
	r1 := waitHealthy(t, h, 4*time.Minute, "v1")
	waitEveryVehicle(t, clusters, r1, 3*time.Minute)
	t.Logf("v1 (%s) on every vehicle of the 3 clusters", r1)
	// Each cluster's agents pushed through the gateway into its own tenant.
	for _, c := range clusters {
		var vehicles []string
		for v := range c.fleet.Vehicles {
			vehicles = append(vehicles, v)
		}
		testenv.Loki{Loki: loki}.WithTenant(c.name).WaitForCount(t, `{job="nettune-probe", vehicle=~"`+strings.Join(vehicles, "|")+`"}`, 1, 2*time.Minute)
	}

	// v2, the demo's good edit: canaries in two clusters first.
	v2 := sample(t, root, "02-xavier-lan-v2.yaml")
	applied := time.Now()
	apply(t, ctx, h, v2)
	var p *v1alpha1.NetTuningProfile
	waitFor(t, 3*time.Minute, "v2's canaries verified", func() bool {
		p = get(t, h)
		return p.Status.CurrentRevision != r1 && len(p.Status.CanaryVehicles) == 2 && p.Status.CurrentStep != nil && *p.Status.CurrentStep == 0 &&
			verifiedOn(clusters, p.Status.CurrentRevision) == 2
	})
	r2 := p.Status.CurrentRevision
	canaryClusters := map[string]bool{}
	for _, v := range p.Status.CanaryVehicles {
		canaryClusters[clusterOfVehicle(clusters, v)] = true
	}
	if len(canaryClusters) != 2 {
		t.Fatalf("canaries %v in clusters %v: want two clusters", p.Status.CanaryVehicles, canaryClusters)
	}
	if n := onRevision(clusters, r1); n != 4 {
		t.Errorf("while the canaries are judged: %d vehicles on v1, want the other 4", n)
	}
	t.Logf("TIMING v2 canaries %v (clusters %v) verified %s after the apply", p.Status.CanaryVehicles, keys(canaryClusters), time.Since(applied).Round(time.Second))

	// The cluster without a canary goes silent while the canaries are judged.
	var silent *cluster
	for _, c := range clusters {
		if !canaryClusters[c.name] {
			silent = c
		}
	}
	if err := silent.spoke.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	waitFor(t, 4*time.Minute, silent.name+"'s vehicles Unreachable at the hub", func() bool {
		p = get(t, h)
		return p.Status.Vehicles.Unreachable == 2
	})
	if p.Status.Vehicles.Failed != 0 || p.Status.Phase == v1alpha1.PhaseRolledBack {
		t.Errorf("a silent cluster: phase %s, %d failed; want its vehicles Unreachable, never Failed", p.Status.Phase, p.Status.Vehicles.Failed)
	}
	t.Logf("TIMING %s silent: its 2 vehicles Unreachable at the hub %s after its API server stopped", silent.name, time.Since(stopped).Round(time.Second))
	waitFor(t, 6*time.Minute, "v2 promoted to the reachable vehicles", func() bool {
		p = get(t, h)
		return p.Status.CurrentStep != nil && *p.Status.CurrentStep >= 1 && verifiedOn(reachable(clusters, silent), r2) == 4
	})
	t.Logf("TIMING v2 on the 4 vehicles of the reachable clusters %s after the apply", time.Since(applied).Round(time.Second))
	if err := silent.spoke.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	waitEveryVehicle(t, clusters, r2, 5*time.Minute)
	t.Logf("TIMING %s caught up with v2 %s after its API server returned", silent.name, time.Since(returned).Round(time.Second))
	waitHealthy(t, h, 3*time.Minute, "v2")

	// v3, one vehicle at a time: nettune's controller in one cluster is
	// killed as the rollout begins. The cluster stays Available, but its
	// report stops: its vehicles turn Unreachable at the hub, never Failed,
	// with the cluster named, while the other clusters' vehicles take v3
	// within maxUnavailable; restarted, the controller's next report moves
	// them on.
	r3 := deadControllerStep(t, ctx, h, clusters, v2)

	// The demo's bad edit: rolled back in every cluster.
	bad := sample(t, root, "03-xavier-lan-bad.yaml")
	badApplied := time.Now()
	apply(t, ctx, h, bad)
	p = waitProfile(t, h, 8*time.Minute, "the bad edit rolled back", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.Phase == v1alpha1.PhaseRolledBack && p.Status.StableRevision == r3
	})
	t.Logf("TIMING bad edit %s rolled back %s after its apply: %s", p.Status.FailedRevision, time.Since(badApplied).Round(time.Second), rolledBackMessage(p))
	waitEveryVehicle(t, clusters, r3, 3*time.Minute)

	// A bad profile is refused at the hub with the field named; no work changes.
	before := workVersions(t, h)
	broken := bad.DeepCopy()
	broken.Spec.Defaults.Cwnd.Value = 0
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error { return h.Client.Update(ctx, withVersion(t, h, broken)) })
	if err == nil || !strings.Contains(err.Error(), "spec.defaults.cwnd.value") {
		t.Errorf("a cwnd of 0 at the hub: %v, want a refusal naming spec.defaults.cwnd.value", err)
	}
	time.Sleep(5 * time.Second)
	if after := workVersions(t, h); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("works changed after a refused profile: %v, then %v", before, after)
	}
	assertNoLeaks(t, h, dir, clusters, secrets)
}

// deadControllerStep rolls v3 (v2 with initrwnd 24, every vehicle in one
// step, one at a time) out while nettune's controller in one cluster is
// killed, and returns v3's revision once every vehicle verified it after
// the controller was started again.
func deadControllerStep(t *testing.T, ctx context.Context, h *hubtest.Hub, clusters []*cluster, v2 *v1alpha1.NetTuningProfile) string {
	t.Helper()
	v3 := v2.DeepCopy()
	v3.Spec.Defaults.Initrwnd = ptrTo(int32(24))
	one := intstr.FromInt32(1)
	v3.Spec.Rollout = &v1alpha1.RolloutSpec{MaxUnavailable: &one, Canary: v1alpha1.CanarySpec{Count: ptrTo(int32(1))},
		Steps:            []v1alpha1.RolloutStep{{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptrTo(int32(100))}}},
		UnreachableAfter: v2.Spec.Rollout.UnreachableAfter, UnreachableTimeout: v2.Spec.Rollout.UnreachableTimeout}
	dead := clusters[0]
	others := reachable(clusters, dead)
	prev := get(t, h).Status.StableRevision
	applied := time.Now()
	apply(t, ctx, h, v3)
	p := waitProfile(t, h, time.Minute, "v3 planned at the hub", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentRevision != prev
	})
	r3 := p.Status.CurrentRevision
	if err := dead.fleet.KillController(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// maxUnavailable 1: at most one vehicle of the other clusters is on v3
	// and not yet verified at any time.
	inflight := 0
	watchInflight := func() {
		if n := onRevision(others, r3) - verifiedOn(others, r3); n > inflight {
			inflight = n
		}
	}
	var msg string
	waitFor(t, 2*time.Minute, dead.name+"'s vehicles Unreachable at the hub, the cluster named", func() bool {
		watchInflight()
		p = get(t, h)
		for _, c := range p.Status.Clusters {
			if c.Name == dead.name && !c.Reachable && strings.Contains(c.Message, "nettune's controller in cluster "+dead.name) {
				msg = c.Message
			}
		}
		return msg != "" && p.Status.Vehicles.Unreachable == 2
	})
	if p.Status.Vehicles.Failed != 0 || p.Status.Phase == v1alpha1.PhaseRolledBack {
		t.Errorf("a cluster whose controller stopped: phase %s, %d failed; want its vehicles Unreachable, never Failed", p.Status.Phase, p.Status.Vehicles.Failed)
	}
	t.Logf("TIMING %s's controller killed: its 2 vehicles Unreachable at the hub %s after the kill: %q", dead.name, time.Since(killed).Round(time.Second), msg)
	waitFor(t, 3*time.Minute, "v3 verified on the 4 vehicles of the other clusters", func() bool {
		watchInflight()
		return verifiedOn(others, r3) == 4
	})
	if inflight > 1 {
		t.Errorf("up to %d vehicles of the other clusters on v3 and not verified at once, want at most maxUnavailable 1", inflight)
	}
	if n := verifiedOn([]*cluster{dead}, r3); n != 0 {
		t.Errorf("%d vehicles of %s verified v3 while its controller was down", n, dead.name)
	}
	if ev := hubEvent(t, h, "ClusterControllerSilent", dead.name); ev == "" {
		t.Errorf("no ClusterControllerSilent event naming %s", dead.name)
	} else {
		t.Logf("event: %s", ev)
	}
	t.Logf("TIMING v3 on the 4 vehicles of the other clusters %s after the apply (at most %d in flight)", time.Since(applied).Round(time.Second), inflight)
	if err := dead.fleet.StartController(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	waitEveryVehicle(t, clusters, r3, 3*time.Minute)
	t.Logf("TIMING %s caught up with v3 %s after its controller was started again", dead.name, time.Since(restarted).Round(time.Second))
	waitHealthy(t, h, 2*time.Minute, "v3")
	if hubEvent(t, h, "ClusterControllerReturned", dead.name) == "" {
		t.Errorf("no ClusterControllerReturned event naming %s", dead.name)
	}
	return r3
}

// hubEvent is the message of an event of the hub with reason that names
// cluster ("" when none).
func hubEvent(t *testing.T, h *hubtest.Hub, reason, cluster string) string {
	t.Helper()
	list := &corev1.EventList{}
	if err := h.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == reason && strings.Contains(e.Message, "cluster "+cluster+" ") {
			return e.Message
		}
	}
	return ""
}

func ptrTo[T any](v T) *T { return &v }

// hubLokiSecret is the hub controller's --loki-secret.
const hubLokiSecret = "nettune-loki"

// assertNoLeaks greps for every credential (raw and base64-encoded) in the
// hub's profiles and ManifestWorks and every Event there, the hub
// controller's log, and each cluster's NodeNetTunings, Events and logs.
func assertNoLeaks(t *testing.T, h *hubtest.Hub, dir string, clusters []*cluster, secrets []string) {
	t.Helper()
	ctx := context.Background()
	sources := map[string]string{}
	dump := func(where string, c client.Client, lists ...client.ObjectList) {
		for _, l := range lists {
			if err := c.List(ctx, l); err != nil {
				t.Errorf("%s: listing %T: %v", where, l, err)
				continue
			}
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			sources[fmt.Sprintf("%s %T", where, l)] = string(b)
		}
	}
	dump("hub", h.Client, &v1alpha1.NetTuningProfileList{}, &workv1.ManifestWorkList{}, &corev1.EventList{})
	logs := []string{filepath.Join(dir, "logs", "hub-controller.log")}
	for _, c := range clusters {
		dump("cluster "+c.name, c.spoke.Client, &v1alpha1.NodeNetTuningList{}, &corev1.EventList{})
		more, _ := filepath.Glob(filepath.Join(c.fleet.Dir, "logs", "*"))
		logs = append(logs, more...)
	}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			continue
		}
		sources["log "+path] = string(b)
	}
	size := 0
	for where, text := range sources {
		size += len(text)
		for i, v := range secrets {
			for form, needle := range map[string]string{"": v, " base64-encoded": base64.StdEncoding.EncodeToString([]byte(v))} {
				if strings.Contains(text, needle) {
					t.Errorf("credential #%d%s found in %s", i+1, form, where)
				}
			}
		}
	}
	t.Logf("%d credentials (raw and base64) looked for in %d sources (%d KB): the hub's and clusters' objects, events and logs", len(secrets), len(sources), size/1024)
}

// sample reads a demo profile, without its Prometheus analysis (the hub's
// judge reads the central Loki only), for every managed cluster, with
// vehicles Unreachable after 20 s and waited for 40 s at most.
func sample(t *testing.T, root, file string) *v1alpha1.NetTuningProfile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "config", "samples", "demo", file))
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.NetTuningProfile{}
	if err := yaml.Unmarshal(raw, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.ClusterSelector = &v1alpha1.LabelSelector{}
	if r := p.Spec.Rollout; r != nil {
		var keep []v1alpha1.AnalysisSpec
		for _, a := range r.Analyses {
			if a.Provider != v1alpha1.ProviderPrometheus {
				keep = append(keep, a)
			}
		}
		r.Analyses = keep
		for i := range r.Steps {
			if a := r.Steps[i].Analysis; a != nil {
				a.With = nil
			}
		}
		r.UnreachableAfter = &metav1.Duration{Duration: 20 * time.Second}
		r.UnreachableTimeout = &metav1.Duration{Duration: 40 * time.Second}
	}
	return p
}

// apply creates p at the hub, or replaces the spec of the profile there.
// The hub's controller writes the profile's status (and so its
// resourceVersion) at any time, every heartbeat included: an update that
// lost that race is made again on the profile as it is now, as kubectl
// apply would.
func apply(t *testing.T, ctx context.Context, h *hubtest.Hub, p *v1alpha1.NetTuningProfile) {
	t.Helper()
	created := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &v1alpha1.NetTuningProfile{}
		if err := h.Client.Get(ctx, client.ObjectKey{Name: p.Name}, cur); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			created = true
			return h.Client.Create(ctx, p.DeepCopy())
		}
		cur.Spec = p.Spec
		return h.Client.Update(ctx, cur)
	})
	if err != nil {
		verb := "updating"
		if created {
			verb = "creating"
		}
		t.Fatalf("%s %s at the hub: %v", verb, p.Name, err)
	}
}

func withVersion(t *testing.T, h *hubtest.Hub, p *v1alpha1.NetTuningProfile) *v1alpha1.NetTuningProfile {
	t.Helper()
	cur := get(t, h)
	cur.Spec = p.Spec
	return cur
}

func get(t *testing.T, h *hubtest.Hub) *v1alpha1.NetTuningProfile {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{}
	if err := h.Client.Get(context.Background(), client.ObjectKey{Name: profileName}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Second)
	}
}

func waitProfile(t *testing.T, h *hubtest.Hub, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	t.Helper()
	var p *v1alpha1.NetTuningProfile
	waitFor(t, timeout, what, func() bool {
		p = get(t, h)
		return cond(p)
	})
	return p
}

// waitHealthy waits for the hub profile to be Healthy on its current spec.
func waitHealthy(t *testing.T, h *hubtest.Hub, timeout time.Duration, what string) string {
	t.Helper()
	p := waitProfile(t, h, timeout, what+" Healthy at the hub", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy &&
			p.Status.StableRevision != "" && p.Status.StableRevision == p.Status.CurrentRevision && p.Status.Vehicles.Verified == 6
	})
	return p.Status.StableRevision
}

// nodes are a cluster's NodeNetTunings (nil when its API server is down).
func nodes(c *cluster) []v1alpha1.NodeNetTuning {
	list := &v1alpha1.NodeNetTuningList{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.spoke.Client.List(ctx, list); err != nil {
		return nil
	}
	return list.Items
}

// vehicleStates: per vehicle of the clusters, the revision of the profile
// every node of it verified ("" when any node has not).
func vehicleStates(cs []*cluster) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		byVehicle := map[string][]v1alpha1.NodeNetTuning{}
		for _, n := range nodes(c) {
			v := strings.Join(strings.Split(n.Name, "-")[:2], "-")
			byVehicle[v] = append(byVehicle[v], n)
		}
		for v, ns := range byVehicle {
			rev := fleetmodel.AssignedRevision(&ns[0], profileName)
			for i := range ns {
				ok, _, _ := fleetmodel.NodeReport(&ns[i])
				if !ok || fleetmodel.AssignedRevision(&ns[i], profileName) != rev || len(ns) != 3 {
					rev = ""
				}
			}
			out[v] = rev
		}
	}
	return out
}

func verifiedOn(cs []*cluster, rev string) int {
	n := 0
	for _, r := range vehicleStates(cs) {
		if r == rev {
			n++
		}
	}
	return n
}

func onRevision(cs []*cluster, rev string) int {
	n := 0
	for _, c := range cs {
		seen := map[string]bool{}
		for _, nt := range nodes(c) {
			v := strings.Join(strings.Split(nt.Name, "-")[:2], "-")
			if fleetmodel.AssignedRevision(&nt, profileName) == rev && !seen[v] {
				seen[v] = true
				n++
			}
		}
	}
	return n
}

// waitEveryVehicle waits until all 6 vehicles verified rev in their
// clusters (each agent verified it in its kernel).
func waitEveryVehicle(t *testing.T, cs []*cluster, rev string, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "every vehicle of the 3 clusters verified "+rev, func() bool { return verifiedOn(cs, rev) == 6 })
}

func reachable(cs []*cluster, silent *cluster) []*cluster {
	var out []*cluster
	for _, c := range cs {
		if c != silent {
			out = append(out, c)
		}
	}
	return out
}

func clusterOfVehicle(cs []*cluster, vehicle string) string {
	for _, c := range cs {
		if _, ok := c.fleet.Vehicles[vehicle]; ok {
			return c.name
		}
	}
	return ""
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func rolledBackMessage(p *v1alpha1.NetTuningProfile) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionRolledBack {
			return c.Message
		}
	}
	return ""
}

// workVersions are the generations of the hub's ManifestWorks (their spec).
func workVersions(t *testing.T, h *hubtest.Hub) map[string]string {
	t.Helper()
	list := &workv1.ManifestWorkList{}
	if err := h.Client.List(context.Background(), list, client.MatchingLabels{hub.ManagedByLabel: hub.ManagedBy}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, w := range list.Items {
		out[w.Namespace+"/"+w.Name] = fmt.Sprint(w.Generation)
	}
	return out
}

// startHubController runs bin/nettune-controller --hub against the hub.
// It queries Loki at lokiAddress (the gateway) with the Secret hubLokiSecret.
func startHubController(t *testing.T, root, dir string, h *hubtest.Hub, lokiAddress string) func() {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "logs", "hub-controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "nettune-controller"), "--hub", "--namespace", fleet.Namespace,
		"--cluster-namespace", fleet.Namespace, "--loki-address", lokiAddress, "--loki-secret", hubLokiSecret,
		// The harness's work agents sync every 2 s (hubtest.Options).
		"--work-status-sync-interval", "2s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logf.Close()
		})
	}
}

func tailFile(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
