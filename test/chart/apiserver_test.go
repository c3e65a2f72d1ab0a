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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/nettest"
)

// Node-name binding of the agent's token, as the kubelet's projected
// service-account tokens carry it in the user extra.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

func startControlPlane(t *testing.T) *localcp.ControlPlane {
	t.Helper()
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") == "" && strings.Contains(err.Error(), "make tools") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	if err := apiextensionsv1.AddToScheme(cp.Scheme); err != nil {
		t.Fatal(err)
	}
	return cp
}

// warnings collects the API server's warning headers (deprecated APIs,
// unknown or duplicate fields).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// applier creates unstructured objects through the dynamic client.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	warn   *warnings
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	w := &warnings{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), warn: w}
}

func (a *applier) create(ctx context.Context, o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		if o.GetNamespace() == "" {
			return fmt.Errorf("%s %s has no namespace", o.GetKind(), o.GetName())
		}
		ri = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	} else if o.GetNamespace() != "" {
		return fmt.Errorf("cluster-scoped %s %s has a namespace", o.GetKind(), o.GetName())
	}
	_, err = ri.Create(ctx, o, opts)
	return err
}

func installCRD(t *testing.T, ctx context.Context, c client.Client, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") == "" {
			t.Skipf("%v: run 'make tools'", err)
		}
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	nettest.WaitFor(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established", crd.Name)
	})
}

// installChart validates every rendered manifest of every value set with a
// strict server-side dry run, then creates the "everything" set for real.
func installChart(t *testing.T, ctx context.Context, cp *localcp.ControlPlane) {
	t.Helper()
	installCRD(t, ctx, cp.Client, filepath.Join(root(t), "bin", "crds", "monitoring.coreos.com_servicemonitors.yaml"))
	if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, cp.Config)
	names := make([]string, 0, len(valueSets))
	for name := range valueSets {
		names = append(names, name)
	}
	slices.Sort(names)
	validated := 0
	rendered := map[string][]*unstructured.Unstructured{}
	for _, name := range names {
		rendered[name] = render(t, valueSets[name]...)
		for _, o := range rendered[name] {
			if o.GetKind() == "CustomResourceDefinition" {
				continue // installed by localcp from config/crd/bases, which the chart's equal
			}
			if err := a.create(ctx, o, true); err != nil {
				t.Errorf("values %q: the API server rejects %s %s: %v", name, o.GetKind(), o.GetName(), err)
			}
			validated++
		}
	}
	if w := a.warn.take(); len(w) > 0 {
		t.Errorf("the API server warned about the rendered manifests: %q", w)
	}
	t.Logf("%d rendered manifests of %d value sets validated by the API server (strict field validation, dry run)", validated, len(names))
	if t.Failed() {
		t.FailNow()
	}
	for _, o := range rendered["everything"] {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := a.create(ctx, o, false); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if w := a.warn.take(); len(w) > 0 {
		t.Errorf("the API server warned while installing: %q", w)
	}
}

// agentIdentity is the chart's agent service account as its pod's token
// presents it: bound to node (none when node is "").
func agentIdentity(node string) rest.ImpersonationConfig {
	ic := rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + release + "-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		ic.Extra = map[string][]string{
			nodeNameExtra:                                {node},
			"authentication.kubernetes.io/pod-name":      {release + "-agent-x7k2p"},
			"authentication.kubernetes.io/node-uid":      {"3f1e0c1a-0000-4000-8000-00000000000" + fmt.Sprint(len(node)%10)},
			"authentication.kubernetes.io/pod-uid":       {"9b2d4c6e-0000-4000-8000-000000000001"},
			"authentication.kubernetes.io/credential-id": {"JTI=6a1f0d2e"},
		}
	}
	return ic
}

func controllerIdentity() rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + release + "-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

func clientAs(t *testing.T, cp *localcp.ControlPlane, ic rest.ImpersonationConfig) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = ic
	c, err := client.New(cfg, client.Options{Scheme: cp.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Outcomes of a request.
const (
	allowed  = "allowed"
	byRBAC   = "refused by RBAC"
	byPolicy = "refused by the admission policy"
)

func outcome(err error) string {
	switch {
	case err == nil:
		return allowed
	// Refused by one of the policy's validations, with its own message;
	// an expression that fails to evaluate also denies (failurePolicy
	// Fail) but says "resulted in error" and is a defect of the policy.
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") &&
		strings.Contains(err.Error(), "denied request: nettune-agent") && !strings.Contains(err.Error(), "resulted in error"):
		return byPolicy
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), " cannot "):
		return byRBAC
	default:
		return "error: " + err.Error()
	}
}

func nnt(name, rev string) *v1alpha1.NodeNetTuning {
	return &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.NodeNetTuningSpec{Revision: rev}}
}

// TestChartOnAPIServer installs the chart on a real kube-apiserver (every
// manifest strictly validated first) and checks its RBAC and admission
// policy verb by verb, impersonating the agent's service account with its
// token bound to node A, to node B, and to no node.
func TestChartOnAPIServer(t *testing.T) {
	helmBin(t)
	cp := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	installChart(t, ctx, cp)

	const nodeA, nodeB = "av-100-xavier-a", "av-200-xavier-a"
	admin := cp.Client
	for _, n := range []string{nodeA, nodeB} {
		if err := admin.Create(ctx, nnt(n, "r1")); err != nil {
			t.Fatal(err)
		}
	}
	profile := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"},
		Spec: v1alpha1.NetTuningProfileSpec{Sysctls: []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_rmem", Value: "4096 131072 6291456"}}}}
	if err := admin.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}

	agentA := clientAs(t, cp, agentIdentity(nodeA))
	agentB := clientAs(t, cp, agentIdentity(nodeB))
	unbound := clientAs(t, cp, agentIdentity(""))

	get := func(c client.Client, name string) *v1alpha1.NodeNetTuning {
		t.Helper()
		o := &v1alpha1.NodeNetTuning{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return o
	}
	statusUpdate := func(c client.Client, name, applied string, opts ...client.SubResourceUpdateOption) error {
		o := get(admin, name)
		o.Status.AppliedRevision = applied
		return c.Status().Update(ctx, o, opts...)
	}
	statusPatch := func(c client.Client, name, applied string) error {
		o := get(admin, name)
		base := o.DeepCopy()
		o.Status.AppliedRevision = applied
		return c.Status().Patch(ctx, o, client.MergeFrom(base))
	}
	event := func(c client.Client, regarding string) error {
		return c.Create(ctx, &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{GenerateName: regarding + "-", Namespace: metav1.NamespaceDefault},
			EventTime:           metav1.NowMicro(),
			ReportingController: "nettune.io/agent", ReportingInstance: "nettune-agent", Action: "Apply", Reason: "Applied", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeNetTuning", Name: regarding},
			Note:      "revision r1 applied and verified",
		})
	}

	// The policy takes effect once the API server has compiled it.
	nettest.WaitFor(t, 30*time.Second, func() error {
		if got := outcome(statusUpdate(agentA, nodeB, "x", client.DryRunAll)); got != byPolicy {
			return fmt.Errorf("agent A updating B's status (dry run): %s", got)
		}
		return nil
	})

	cases := []struct {
		name string
		do   func() error
		want string
	}{
		// Its own node.
		{"A: get own NodeNetTuning", func() error { return agentA.Get(ctx, client.ObjectKey{Name: nodeA}, &v1alpha1.NodeNetTuning{}) }, allowed},
		{"A: update own status", func() error { return statusUpdate(agentA, nodeA, "r1") }, allowed},
		{"A: patch own status", func() error { return statusPatch(agentA, nodeA, "r1") }, allowed},
		{"A: record an event about own NodeNetTuning", func() error { return event(agentA, nodeA) }, allowed},
		{"A: update own spec", func() error { o := get(admin, nodeA); o.Spec.Revision = "evil"; return agentA.Update(ctx, o) }, byRBAC},
		{"A: patch own spec", func() error {
			o := get(admin, nodeA)
			b := o.DeepCopy()
			o.Spec.Revision = "evil"
			return agentA.Patch(ctx, o, client.MergeFrom(b))
		}, byRBAC},
		{"A: delete own NodeNetTuning", func() error { return agentA.Delete(ctx, nnt(nodeA, "")) }, byRBAC},
		// Another node.
		{"A: update B's status", func() error { return statusUpdate(agentA, nodeB, "evil") }, byPolicy},
		{"A: patch B's status", func() error { return statusPatch(agentA, nodeB, "evil") }, byPolicy},
		{"A: record an event about B", func() error { return event(agentA, nodeB) }, byPolicy},
		{"A: create a NodeNetTuning", func() error { return agentA.Create(ctx, nnt("av-300-xavier-a", "r1")) }, byRBAC},
		{"A: delete B's NodeNetTuning", func() error { return agentA.Delete(ctx, nnt(nodeB, "")) }, byRBAC},
		// Profiles.
		{"A: create a profile", func() error {
			return agentA.Create(ctx, &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "evil"}, Spec: profile.Spec})
		}, byRBAC},
		{"A: update a profile", func() error {
			p := &v1alpha1.NetTuningProfile{}
			if err := admin.Get(ctx, client.ObjectKey{Name: profile.Name}, p); err != nil {
				return err
			}
			p.Spec.Priority = 99
			return agentA.Update(ctx, p)
		}, byRBAC},
		{"A: update a profile's status", func() error {
			p := &v1alpha1.NetTuningProfile{}
			if err := admin.Get(ctx, client.ObjectKey{Name: profile.Name}, p); err != nil {
				return err
			}
			p.Status.ObservedGeneration = 99
			return agentA.Status().Update(ctx, p)
		}, byRBAC},
		{"A: delete a profile", func() error { return agentA.Delete(ctx, profile.DeepCopy()) }, byRBAC},
		{"A: read a profile", func() error {
			return agentA.Get(ctx, client.ObjectKey{Name: profile.Name}, &v1alpha1.NetTuningProfile{})
		}, byRBAC},
		// Nothing else.
		{"A: list secrets", func() error { return agentA.List(ctx, &corev1.SecretList{}, client.InNamespace(namespace)) }, byRBAC},
		{"A: label its Node", func() error {
			return agentA.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeA}}, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`)))
		}, byRBAC},
		// Node B's agent, the other way round.
		{"B: update own status", func() error { return statusUpdate(agentB, nodeB, "r1") }, allowed},
		{"B: update A's status", func() error { return statusUpdate(agentB, nodeA, "evil") }, byPolicy},
		// A token without the node binding (e.g. a legacy secret token).
		{"unbound: update A's status", func() error { return statusUpdate(unbound, nodeA, "r1") }, byPolicy},
		{"unbound: record an event", func() error { return event(unbound, nodeA) }, byPolicy},
		// The controller's service account renders NodeNetTunings; the
		// policy does not apply to it.
		{"controller: create a NodeNetTuning", func() error { return clientAs(t, cp, controllerIdentity()).Create(ctx, nnt("av-300-xavier-a", "r1")) }, allowed},
		{"controller: update a NodeNetTuning's status", func() error { return statusUpdate(clientAs(t, cp, controllerIdentity()), nodeA, "r1") }, byRBAC},
	}
	for _, c := range cases {
		err := c.do()
		got := outcome(err)
		if got != c.want {
			t.Errorf("%-46s %s, want %s", c.name, got, c.want)
			continue
		}
		msg := ""
		if err != nil {
			msg = err.Error()
			if len(msg) > 160 {
				msg = msg[:160] + "..."
			}
		}
		t.Logf("%-46s %-32s %s", c.name, got, msg)
	}

	// What a refusal says, and that nothing was changed by any of them.
	err := statusUpdate(agentA, nodeB, "evil")
	if err == nil || !strings.Contains(err.Error(), "nettune-agent on node "+nodeA) || !strings.Contains(err.Error(), "NodeNetTuning "+nodeA) {
		t.Errorf("refusal does not name the node and what it may update: %v", err)
	}
	err = statusUpdate(unbound, nodeA, "r1")
	if err == nil || !strings.Contains(err.Error(), "not bound to a node") {
		t.Errorf("unbound refusal: %v", err)
	}
	if o := get(admin, nodeB); o.Status.AppliedRevision != "r1" || o.Spec.Revision != "r1" {
		t.Errorf("B after the refused writes: spec %q status %q, want r1/r1 (set by B itself)", o.Spec.Revision, o.Status.AppliedRevision)
	}
	if o := get(admin, nodeA); o.Spec.Revision != "r1" {
		t.Errorf("A's spec changed to %q", o.Spec.Revision)
	}

	// With RBAC widened by mistake (a cluster admin's extra binding), the
	// policy still holds the agent to its own status: every other write to
	// NodeNetTunings is refused by the policy itself.
	wide := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "too-wide"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"nodenettunings", "nodenettunings/status", "nettuningprofiles"},
		Verbs: []string{"create", "update", "patch", "delete"}}}}
	wideBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "too-wide"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: wide.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: release + "-agent", Namespace: namespace}}}
	for _, o := range []client.Object{wide, wideBinding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	nettest.WaitFor(t, 30*time.Second, func() error {
		o := get(admin, nodeA)
		o.Spec.Revision = "evil"
		if got := outcome(agentA.Update(ctx, o, client.DryRunAll)); got != byPolicy {
			return fmt.Errorf("agent A updating its own spec with RBAC widened: %s", got)
		}
		return nil
	})
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"A: update own spec", func() error { o := get(admin, nodeA); o.Spec.Revision = "evil"; return agentA.Update(ctx, o) }},
		{"A: create a NodeNetTuning", func() error { return agentA.Create(ctx, nnt("av-400-xavier-a", "r1")) }},
		{"A: delete own NodeNetTuning", func() error { return agentA.Delete(ctx, nnt(nodeA, "")) }},
		{"A: update a profile", func() error {
			p := &v1alpha1.NetTuningProfile{}
			if err := admin.Get(ctx, client.ObjectKey{Name: profile.Name}, p); err != nil {
				return err
			}
			p.Spec.Priority = 99
			return agentA.Update(ctx, p)
		}},
		{"A: update own status", func() error { return statusUpdate(agentA, nodeA, "r1") }},
	} {
		got := outcome(c.do())
		want := byPolicy
		if c.name == "A: update own status" {
			want = allowed
		}
		if got != want {
			t.Errorf("RBAC widened: %-36s %s, want %s", c.name, got, want)
		} else {
			t.Logf("RBAC widened: %-36s %s", c.name, got)
		}
	}
	for _, o := range []client.Object{wideBinding, wide} {
		if err := admin.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// The policy is what stops A: without its binding, the same write of
	// B's status goes through (RBAC cannot tell nodes apart).
	binding := &unstructured.Unstructured{}
	binding.SetAPIVersion("admissionregistration.k8s.io/v1")
	binding.SetKind("ValidatingAdmissionPolicyBinding")
	binding.SetName(release + "-agent-own-node")
	if err := admin.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	nettest.WaitFor(t, 30*time.Second, func() error {
		if got := outcome(statusUpdate(agentA, nodeB, "x", client.DryRunAll)); got != allowed {
			return fmt.Errorf("without the binding, agent A updating B's status: %s", got)
		}
		return nil
	})
	t.Logf("without the policy binding, agent A may write B's status: the policy is the guard")
}
