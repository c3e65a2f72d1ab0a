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

package noderender_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/test/framework/envtest"
)

// TestRenderWorkers: Setup gives the node renderer Options.RenderWorkers
// workers, noderender.DefaultWorkers when 0, as the started controller reports
// in controller_runtime_max_concurrent_reconciles.
func TestRenderWorkers(t *testing.T) {
	cp := envtest.ControlPlane(t)
	ctx := context.Background()
	for _, tc := range []struct{ set, want int }{{7, 7}, {0, noderender.DefaultWorkers}} {
		mgr, err := ctrl.NewManager(rest.CopyConfig(cp.Config), ctrl.Options{Scheme: cp.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
		if err != nil {
			t.Fatal(err)
		}
		opts := controllers.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
			Recorder: mgr.GetEventRecorder("nettune-controller"), Namespace: envtest.Namespace, SkipNameValidation: true, RenderWorkers: tc.set}
		if err := controllers.Setup(mgr, opts); err != nil {
			t.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := mgr.Start(mctx); err != nil && mctx.Err() == nil {
				t.Errorf("manager: %v", err)
			}
		}()
		got := -1.0
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got = renderWorkerGauge(t); got == float64(tc.want) {
				break
			}
		}
		cancel()
		<-done
		if got != float64(tc.want) {
			t.Errorf("RenderWorkers %d: the renderer runs %v workers, want %d", tc.set, got, tc.want)
		}
	}
}

// renderWorkerGauge reads controller_runtime_max_concurrent_reconciles of
// the noderenderer controller (-1 when absent).
func renderWorkerGauge(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_max_concurrent_reconciles" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "noderenderer" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
