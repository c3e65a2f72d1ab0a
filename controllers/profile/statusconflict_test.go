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

package profile_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/fleetcache"
	"github.com/nettune/nettune/test/framework/envtest"
)

// TestStatusConflictAnnouncesOnce: when the status patch of a reconcile is
// refused (a 409 from the optimistic lock), the retry decides again; the
// events of the decision are recorded once, by the reconcile whose status was
// written, not by both.
func TestStatusConflictAnnouncesOnce(t *testing.T) {
	e := envtest.NewFleet(t)
	e.AddVehicles("xavier", "av-01", "av-02")
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.CP.Config), ctrl.Options{Scheme: e.CP.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: fleetcache.Options(envtest.Namespace)})
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int32
	c := refusingClient{Client: mgr.GetClient(), refuse: func(obj client.Object) error {
		if _, ok := obj.(*v1alpha1.NetTuningProfile); ok && refused.Load() < 3 {
			refused.Add(1)
			return apierrors.NewConflict(schema.GroupResource{Group: "nettune.io", Resource: "nettuningprofiles"}, obj.GetName(), errors.New("injected"))
		}
		return nil
	}}
	opts := controllers.Options{Client: c, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("nettune-controller"), Namespace: envtest.Namespace, SkipNameValidation: true}
	if err := controllers.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: v1alpha1.NetTuningProfileSpec{
		Defaults: &v1alpha1.TCPParameters{RTOMin: envtest.Dur(10 * time.Millisecond)}}}
	if err := e.Client.Create(e.Ctx, p); err != nil {
		t.Fatal(err)
	}
	e.WaitProfile("lan", 60*time.Second, "Healthy", func(p *v1alpha1.NetTuningProfile) bool { return p.Status.Phase == "Healthy" })
	if n := refused.Load(); n < 3 {
		t.Fatalf("%d status patches refused, want 3 (the injection did not happen)", n)
	}
	// Events are recorded asynchronously: wait for both, then see neither
	// recorded again for 2 s.
	countEvents := func() map[string]int {
		// The recorder folds a repeated event into one Event with a series
		// count: count occurrences, not objects.
		count := map[string]int{}
		list := &corev1.EventList{}
		if err := e.Client.List(e.Ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev.InvolvedObject.Name != "lan" || ev.InvolvedObject.Kind != "NetTuningProfile" || ev.InvolvedObject.UID != p.UID {
				continue
			}
			n := 1
			if ev.Series != nil && int(ev.Series.Count) > n {
				n = int(ev.Series.Count)
			}
			if int(ev.Count) > n {
				n = int(ev.Count)
			}
			count[ev.Reason] += n
		}
		return count
	}
	envtest.Eventually(t, 30*time.Second, "the RolloutStarted and RolloutComplete events", func() (bool, string) {
		count := countEvents()
		return count["RolloutStarted"] >= 1 && count["RolloutComplete"] >= 1, fmt.Sprintf("events by reason %v (%v)", count, e.Events("lan"))
	})
	envtest.Consistently(t, 2*time.Second, "RolloutStarted and RolloutComplete recorded once each", func() (bool, string) {
		count := countEvents()
		return count["RolloutStarted"] == 1 && count["RolloutComplete"] == 1,
			fmt.Sprintf("after 3 refused status patches, events by reason %v (%v); want RolloutStarted and RolloutComplete once each", count, e.Events("lan"))
	})
}

// refusingClient answers some status patches with refuse's error instead of
// sending them.
type refusingClient struct {
	client.Client
	refuse func(client.Object) error
}

func (c refusingClient) Status() client.SubResourceWriter {
	return refusingStatus{SubResourceWriter: c.Client.Status(), refuse: c.refuse}
}

type refusingStatus struct {
	client.SubResourceWriter
	refuse func(client.Object) error
}

func (s refusingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.refuse(obj); err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
