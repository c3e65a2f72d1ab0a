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

package envtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestResetEmptiesTheControlPlane: what a test leaves (objects with
// finalizers no controller will remove, Events in two namespaces, the
// controller namespace's revisions, Leases and Secrets) is gone when the
// next test takes the control plane, the namespace itself kept.
func TestResetEmptiesTheControlPlane(t *testing.T) {
	var first string
	t.Run("leave", func(t *testing.T) {
		cp := ControlPlane(t)
		first = fmt.Sprintf("%p", cp)
		ctx, c := context.Background(), cp.Client
		fin := []string{"nettune.io/test-finalizer"}
		objs := []client.Object{
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "av-01-xavier-a", Finalizers: fin}},
			&v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "lan", Finalizers: fin},
				Spec: v1alpha1.NetTuningProfileSpec{Defaults: &v1alpha1.TCPParameters{RTOMin: Dur(10 * time.Millisecond)}}},
			&v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "av-01-xavier-a", Finalizers: fin}, Spec: v1alpha1.NodeNetTuningSpec{Revision: "lan-1"}},
			&appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "lan-1", Namespace: Namespace}, Data: runtime.RawExtension{Raw: []byte(`{}`)}},
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "av-01-xavier-a", Namespace: Namespace}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "loki", Namespace: Namespace}},
		}
		objs = append(objs,
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "lan.1", Namespace: "default"},
				InvolvedObject: corev1.ObjectReference{Kind: "NetTuningProfile", Name: "lan"}, Reason: "RolloutStarted"},
			&corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "lease.1", Namespace: Namespace},
				InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: Namespace, Name: "av-01-xavier-a"}, Reason: "Renewed"})
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", describe(o), err)
			}
		}
	})
	t.Run("find it empty", func(t *testing.T) {
		cp := ControlPlane(t)
		if got := fmt.Sprintf("%p", cp); got != first {
			t.Errorf("a second control plane (%s, first %s): the first was not emptied", got, first)
		}
		var left []string
		for _, k := range resetKinds() {
			objs, err := list(context.Background(), cp.Client, k)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				left = append(left, describe(o))
			}
		}
		if len(left) > 0 {
			t.Errorf("left from the previous test: %s", strings.Join(left, ", "))
		}
		if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: Namespace}, &corev1.Namespace{}); err != nil {
			t.Errorf("namespace %s: %v", Namespace, err)
		}
	})
}

// fakeT records what Eventually and Consistently report.
type fakeT struct {
	testing.TB
	fatal, errors []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = append(f.fatal, fmt.Sprintf(format, args...))
}
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestEventually(t *testing.T) {
	f := &fakeT{TB: t}
	n := 0
	Eventually(f, time.Minute, "three checks", func() (bool, string) { n++; return n == 3, fmt.Sprint(n) })
	if n != 3 || len(f.fatal) != 0 {
		t.Errorf("held at check %d, reported %q; want the third, none", n, f.fatal)
	}
	f = &fakeT{TB: t}
	began := time.Now()
	Eventually(f, 300*time.Millisecond, "never", func() (bool, string) { return false, "still not" })
	if took := time.Since(began); took < 300*time.Millisecond || took > 10*time.Second {
		t.Errorf("gave up after %s, want the 300ms deadline", took)
	}
	if len(f.fatal) != 1 || !strings.Contains(f.fatal[0], "waiting for never: still not") {
		t.Errorf("reported %q, want what was awaited and what was seen", f.fatal)
	}
}

func TestConsistently(t *testing.T) {
	f := &fakeT{TB: t}
	began := time.Now()
	if !Consistently(f, 300*time.Millisecond, "always", func() (bool, string) { return true, "" }) || len(f.errors) != 0 {
		t.Errorf("reported %q for a condition that held", f.errors)
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Errorf("checked for %s, want 300ms", took)
	}
	f = &fakeT{TB: t}
	n := 0
	if Consistently(f, time.Minute, "twice", func() (bool, string) { n++; return n < 3, fmt.Sprintf("check %d", n) }) {
		t.Error("held for a condition false at the third check")
	}
	if n != 3 || len(f.errors) != 1 || !strings.Contains(f.errors[0], "twice no longer held") || !strings.Contains(f.errors[0], "check 3") {
		t.Errorf("after %d checks reported %q", n, f.errors)
	}
}
