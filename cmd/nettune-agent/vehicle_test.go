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
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nettune/nettune/internal/localcp"
)

// TestResolveVehicle reads the vehicle from the node's label on a real
// kube-apiserver, remembers it, and falls back to the remembered value when
// the API server is out of reach.
func TestResolveVehicle(t *testing.T) {
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{
		"av-007-xavier-a": {"nettune.io/vehicle": "av-007", "nettune.io/host": "xavier-a"},
		"bare":            nil,
	} {
		if err := cp.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	log := testr.New(t)
	state := t.TempDir()

	t.Setenv("KUBECONFIG", cp.Kubeconfig)
	if got := resolveVehicle(ctx, state, "av-007-xavier-a", "nettune.io/vehicle", 10*time.Second, log); got != "av-007" {
		t.Fatalf("vehicle %q, want av-007", got)
	}
	if raw, err := os.ReadFile(filepath.Join(state, vehicleFile)); err != nil || string(raw) != "av-007\n" {
		t.Fatalf("remembered %q, %v", raw, err)
	}
	if got := resolveVehicle(ctx, t.TempDir(), "bare", "nettune.io/vehicle", 10*time.Second, log); got != "" {
		t.Fatalf("node without the label: vehicle %q, want none", got)
	}
	// The host, the same way, remembered beside the vehicle.
	if got := resolveHost(ctx, state, "av-007-xavier-a", "nettune.io/host", 10*time.Second, log); got != "xavier-a" {
		t.Fatalf("host %q, want xavier-a", got)
	}
	if raw, err := os.ReadFile(filepath.Join(state, hostFile)); err != nil || string(raw) != "xavier-a\n" {
		t.Fatalf("remembered host %q, %v", raw, err)
	}

	// Offline: a kubeconfig whose server refuses connections.
	offline := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(offline, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", offline)
	if got := resolveVehicle(ctx, state, "av-007-xavier-a", "nettune.io/vehicle", 2*time.Second, log); got != "av-007" {
		t.Fatalf("offline with a remembered vehicle: %q, want av-007", got)
	}
	if got := resolveHost(ctx, state, "av-007-xavier-a", "nettune.io/host", 2*time.Second, log); got != "xavier-a" {
		t.Fatalf("offline with a remembered host: %q, want xavier-a", got)
	}
	if got := resolveVehicle(ctx, t.TempDir(), "av-007-xavier-a", "nettune.io/vehicle", 2*time.Second, log); got != "" {
		t.Fatalf("offline with nothing remembered: %q, want none", got)
	}
}
