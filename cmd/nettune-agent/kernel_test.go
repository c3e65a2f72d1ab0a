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
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestAgentReportsKernelFeatures: `nettune-agent run` probes the kernel of
// the namespace it tunes at start-up, logs what it found, and reports it in
// its NodeNetTuning's status.kernel on a real kube-apiserver: the same as a
// probe the test makes of that namespace.
func TestAgentReportsKernelFeatures(t *testing.T) {
	nettest.RequireRoot(t)
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	bin := buildAgent(t)
	p := newPair(t)
	ns, err := netns.GetFromName(p.A)
	if err != nil {
		t.Fatal(err)
	}
	h, err := kernel.NewHandleAt(ns)
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	want, err := h.ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	node := "kf-" + nettest.RandHex(t, 4)
	if err := cp.Client.Create(ctx, &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: v1alpha1.NodeNetTuningSpec{Revision: "r1"}}); err != nil {
		t.Fatal(err)
	}
	env := append(agentEnv(t), "KUBECONFIG="+cp.Kubeconfig) // the last one counts
	a := startAgent(t, env, bin, "run", "--node", node, "--netns", p.A, "--state-dir", t.TempDir(),
		"--probe-port", "0", "--metrics-bind-address", "0", "--lease-renew", "0")

	var got *v1alpha1.KernelFeatures
	nettest.WaitFor(t, time.Minute, func() error {
		nnt := &v1alpha1.NodeNetTuning{}
		if err := cp.Client.Get(ctx, client.ObjectKey{Name: node}, nnt); err != nil {
			return err
		}
		if got = nnt.Status.Kernel; got == nil {
			return fmt.Errorf("no status.kernel yet (applied %q)", nnt.Status.AppliedRevision)
		}
		return nil
	})
	t.Logf("status.kernel: %+v", got)
	if got.Release != want.Release || got.Machine != want.Machine || !slices.Equal(got.TCPInfoCounters, want.TCPInfoCounters) ||
		!slices.Equal(got.CongestionControls, want.CongestionControls) || len(got.TCPInfoCounters) < 2 {
		t.Errorf("status.kernel %+v, the test's probe %+v", got, want)
	}

	// The start-up log line, with structured keys (read once the agent
	// has exited: its output is written meanwhile).
	pwStop(t, a)
	var logged map[string]any
	for _, l := range strings.Split(a.out.String(), "\n") {
		if strings.Contains(l, `"kernel features"`) {
			if err := json.Unmarshal([]byte(l), &logged); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
		}
	}
	if logged == nil || logged["release"] != want.Release || fmt.Sprint(logged["tcpInfoCounters"]) != fmt.Sprint(want.TCPInfoCounters) ||
		logged["tcpInfoBytes"] != float64(want.TCPInfoBytes) {
		t.Errorf("start-up log %v, want the probe %+v", logged, want)
	}
}
