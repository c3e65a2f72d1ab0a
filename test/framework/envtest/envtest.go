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

// Package envtest is the harness of the reconcilers' envtest suites under
// controllers/, as cluster-api's internal/test/envtest is of its
// controllers': each reconciler package's suite_test.go runs its tests
// with Run from TestMain, and they share one control plane per package
// (internal/localcp: etcd and kube-apiserver from bin/ with nettune's CRDs).
//
// The control plane is started by the first test that asks for it
// (ControlPlane, NewFleet), so a package's unit tests and `go test -list`
// start none, and stopped by Run after the last test. Every test finds it
// empty: when a test ends, after its own cleanups have stopped the
// controllers it started, what it made is deleted (the nettune objects,
// Nodes, Events, and the ControllerRevisions, Leases and Secrets of
// Namespace) and waited for. Its objects are cluster-scoped, so tests of
// one package run one at a time (none calls t.Parallel).
//
// Fleet is the rest of what the suites share: simulated vehicles and
// agents, the controller wired as the binary wires it (controllers.Setup),
// and the waits on a profile's status. Test-only: nothing of the product
// imports it.
package envtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
)

// Namespace is the controller's namespace: its ControllerRevisions, its
// leader election lease, the agents' Leases.
const Namespace = "nettune-system"

// ResetTimeout bounds the clean-up after each test.
const ResetTimeout = 2 * time.Minute

// suite is the package's control plane and who uses it.
var suite struct {
	mu      sync.Mutex
	running bool // inside Run
	cp      *localcp.ControlPlane
	user    string // the test using cp, "" when none
}

// Run runs a package's tests (m.Run) and then stops the control plane if
// a test started one; it returns the exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }
func Run(m *testing.M) int {
	suite.mu.Lock()
	suite.running = true
	suite.mu.Unlock()
	code := m.Run()
	suite.mu.Lock()
	defer suite.mu.Unlock()
	suite.running = false
	if suite.cp != nil {
		if err := suite.cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "envtest: stopping the control plane: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		suite.cp = nil
	}
	return code
}

// ControlPlane returns the package's control plane, empty of what earlier
// tests made, with Namespace; the first call starts it (a failure to start
// fails the test). When t ends, after the cleanups t registers later (the
// controllers it started, its agents), everything t made is deleted.
// Call it before starting anything that uses it.
func ControlPlane(t testing.TB) *localcp.ControlPlane {
	t.Helper()
	suite.mu.Lock()
	defer suite.mu.Unlock()
	if !suite.running {
		t.Fatal("envtest: no control plane outside envtest.Run: the package's TestMain must be func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }")
	}
	if suite.user != "" {
		t.Fatalf("envtest: the control plane is in use by %s: the tests of a package share it and must not run in parallel", suite.user)
	}
	if suite.cp == nil {
		began := time.Now()
		// DieWithProcess: a test binary killed (a go test -timeout, say)
		// takes its etcd and kube-apiserver with it.
		cp, err := localcp.StartWith(localcp.Options{DieWithProcess: true})
		if err != nil {
			t.Fatalf("envtest: starting the control plane: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil {
			_ = cp.Stop()
			t.Fatalf("envtest: creating namespace %s: %v", Namespace, err)
		}
		t.Logf("envtest: control plane started in %s", time.Since(began).Round(10*time.Millisecond))
		suite.cp = cp
	}
	cp := suite.cp
	suite.user = t.Name()
	t.Cleanup(func() { release(t, cp) })
	return cp
}

// release empties cp for the next test; a control plane it cannot empty
// is stopped, and the next test starts a new one.
func release(t testing.TB, cp *localcp.ControlPlane) {
	ctx, cancel := context.WithTimeout(context.Background(), ResetTimeout)
	defer cancel()
	err := Reset(ctx, cp.Client)
	suite.mu.Lock()
	defer suite.mu.Unlock()
	suite.user = ""
	if err != nil {
		t.Errorf("envtest: emptying the control plane after %s: %v; stopping it, the next test starts another", t.Name(), err)
		if err := cp.Stop(); err != nil {
			t.Errorf("envtest: stopping the control plane: %v", err)
		}
		if suite.cp == cp {
			suite.cp = nil
		}
	}
}

// resetKind is a kind Reset deletes: every object of list in namespace
// ("" for cluster-scoped kinds, or every namespace).
type resetKind struct {
	list      client.ObjectList
	namespace string
}

func resetKinds() []resetKind {
	return []resetKind{
		{&v1alpha1.NetTuningExperimentList{}, ""},
		{&v1alpha1.NetTuningProfileList{}, ""},
		{&v1alpha1.NodeNetTuningList{}, ""},
		{&corev1.NodeList{}, ""},
		{&appsv1.ControllerRevisionList{}, Namespace},
		{&coordinationv1.LeaseList{}, Namespace},
		{&corev1.SecretList{}, Namespace},
		{&corev1.EventList{}, ""},
	}
}

// Reset deletes what a test made, its finalizers removed first (the
// controllers that would act on them are stopped), and waits until it is
// gone: the NetTuningExperiments, NetTuningProfiles, NodeNetTunings,
// Nodes and Events, and the ControllerRevisions, Leases and Secrets of
// Namespace. The namespace itself stays (no namespace controller runs to
// finalize its deletion).
func Reset(ctx context.Context, c client.Client) error {
	for _, k := range resetKinds() {
		objs, err := list(ctx, c, k)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if len(obj.GetFinalizers()) > 0 {
				patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
				obj.SetFinalizers(nil)
				if err := c.Patch(ctx, obj, patch); err != nil && !apierrors.IsNotFound(err) {
					return fmt.Errorf("removing the finalizers of %s: %w", describe(obj), err)
				}
			}
			if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s: %w", describe(obj), err)
			}
		}
	}
	var left []string
	for {
		left = left[:0]
		for _, k := range resetKinds() {
			objs, err := list(ctx, c, k)
			if err != nil {
				return err
			}
			for _, obj := range objs {
				left = append(left, describe(obj))
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			slices.Sort(left)
			return fmt.Errorf("%d object(s) still there: %s", len(left), strings.Join(left, ", "))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func list(ctx context.Context, c client.Client, k resetKind) ([]client.Object, error) {
	l := k.list.DeepCopyObject().(client.ObjectList)
	var opts []client.ListOption
	if k.namespace != "" {
		opts = append(opts, client.InNamespace(k.namespace))
	}
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, fmt.Errorf("listing %T: %w", l, err)
	}
	items, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		out = append(out, item.(client.Object))
	}
	return out, nil
}

func describe(obj client.Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
	if ns := obj.GetNamespace(); ns != "" {
		return kind + " " + ns + "/" + obj.GetName()
	}
	return kind + " " + obj.GetName()
}
