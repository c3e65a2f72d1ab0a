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
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/nettest"
)

// kubeconfigAs writes a kubeconfig that authenticates as the control
// plane's admin and acts as ic: what a pod's service-account token would
// present, without a kubelet to mint one.
func kubeconfigAs(t *testing.T, cp *localcp.ControlPlane, ic rest.ImpersonationConfig) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	auth := cfg.AuthInfos[ctx.AuthInfo].DeepCopy()
	auth.Impersonate = ic.UserName
	auth.ImpersonateGroups = ic.Groups
	auth.ImpersonateUserExtra = ic.Extra
	cfg.AuthInfos[ctx.AuthInfo] = auth
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs a product binary from bin/ until the test ends.
func start(t *testing.T, kubeconfig string, name string, args ...string) *nettest.SyncBuffer {
	t.Helper()
	bin := filepath.Join(root(t), "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: run 'make build' first", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out := &nettest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 40))
		}
	})
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestBinariesWithChartIdentities runs the real controller and agent with
// exactly the chart's permissions: the controller as its service account
// (its generated ClusterRole, and the Role in the release namespace for
// ControllerRevisions and the leader lease), and agents as theirs with the
// token bound to a node. A profile rolls out; the agent of node A applies
// it in a network namespace and reports; an agent started for node B but
// holding A's token is refused every status write.
func TestBinariesWithChartIdentities(t *testing.T) {
	nettest.RequireRoot(t)
	helmBin(t)
	cp := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	installChart(t, ctx, cp)
	admin := cp.Client

	const nodeA, nodeB = "av-001-xavier-a", "av-002-xavier-a"
	for _, n := range []struct{ name, vehicle string }{{nodeA, "av-001"}, {nodeB, "av-002"}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{
			v1alpha1.DefaultVehicleLabel: n.vehicle, v1alpha1.DefaultHostLabel: "xavier-a", v1alpha1.DefaultHardwareLabel: "xavier"}}}
		if err := admin.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
	}

	controllerLog := start(t, kubeconfigAs(t, cp, controllerIdentity()), "nettune-controller",
		"--namespace", namespace, "--leader-elect", "--leader-election-namespace", namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")

	const rmem = "4096 174762 5592405"
	profile := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: "chart-rmem"}, Spec: v1alpha1.NetTuningProfileSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "xavier"}},
		Sysctls:      []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_rmem", Value: rmem}},
	}}
	if err := admin.Create(ctx, profile); err != nil {
		t.Fatal(err)
	}

	// The controller, with its chart permissions only, renders both nodes.
	revisions := map[string]string{}
	nettest.WaitFor(t, 60*time.Second, func() error {
		for _, n := range []string{nodeA, nodeB} {
			o := &v1alpha1.NodeNetTuning{}
			if err := admin.Get(ctx, client.ObjectKey{Name: n}, o); err != nil {
				return err
			}
			if o.Spec.Revision == "" || len(o.Spec.Sysctls) != 1 {
				return fmt.Errorf("%s not rendered yet: %+v", n, o.Spec)
			}
			revisions[n] = o.Spec.Revision
		}
		return nil
	})
	lease := &coordinationv1.Lease{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "nettune-controller.nettune.io"}, lease); err != nil {
		t.Fatalf("leader lease in %s: %v", namespace, err)
	}
	t.Logf("controller as %s rendered %v; leader %s", controllerIdentity().UserName, revisions, *lease.Spec.HolderIdentity)

	// Agent A, token bound to A, tunes its namespace and reports.
	nsA, nsB := nettest.NewNetns(t, "ntc"), nettest.NewNetns(t, "ntc")
	stateA := t.TempDir()
	agentLog := start(t, kubeconfigAs(t, cp, agentIdentity(nodeA)), "nettune-agent", "run", "--node", nodeA, "--netns", nsA,
		"--state-dir", stateA, "--vehicle-from-node-label", v1alpha1.DefaultVehicleLabel,
		"--metrics-bind-address", "0", "--probe-port", "0", "--heartbeat", "2s")
	nettest.WaitFor(t, 60*time.Second, func() error {
		o := &v1alpha1.NodeNetTuning{}
		if err := admin.Get(ctx, client.ObjectKey{Name: nodeA}, o); err != nil {
			return err
		}
		if o.Status.AppliedRevision != revisions[nodeA] {
			return fmt.Errorf("%s reports %q, want %q", nodeA, o.Status.AppliedRevision, revisions[nodeA])
		}
		return nil
	})
	if got := strings.Join(strings.Fields(nettest.IP(t, "netns", "exec", nsA, "cat", "/proc/sys/net/ipv4/tcp_rmem")), " "); got != rmem {
		t.Fatalf("tcp_rmem in %s is %q, want %q", nsA, got, rmem)
	}
	if raw, err := os.ReadFile(filepath.Join(stateA, "vehicle")); err != nil || strings.TrimSpace(string(raw)) != "av-001" {
		t.Fatalf("agent A's vehicle from its Node: %q, %v", raw, err)
	}
	evs := &corev1.EventList{}
	if err := admin.List(ctx, evs, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == nodeA && e.Reason == "Applied" {
			applied++
		}
	}
	if applied == 0 {
		t.Errorf("agent A recorded no Applied event about %s", nodeA)
	}

	p := &v1alpha1.NetTuningProfile{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(profile), p); err != nil || p.Status.ObservedGeneration != p.Generation {
		t.Errorf("profile status not written by the controller: %+v, %v", p.Status, err)
	}
	for name, log := range map[string]*nettest.SyncBuffer{"controller": controllerLog, "agent A": agentLog} {
		if l := firstLine(log.String(), "forbidden"); l != "" {
			t.Errorf("%s was refused something it needs: %s", name, l)
		}
	}

	// A rogue agent: started for node B, holding A's token.
	rogue := start(t, kubeconfigAs(t, cp, agentIdentity(nodeA)), "nettune-agent", "run", "--node", nodeB, "--netns", nsB,
		"--state-dir", t.TempDir(), "--metrics-bind-address", "0", "--probe-port", "0", "--heartbeat", "2s")
	nettest.WaitFor(t, 60*time.Second, func() error {
		if !strings.Contains(rogue.String(), "nettune-agent on node "+nodeA+": UPDATE nodenettunings/status "+nodeB+" refused") {
			return fmt.Errorf("no refusal in the rogue agent's log yet")
		}
		return nil
	})
	o := &v1alpha1.NodeNetTuning{}
	if err := admin.Get(ctx, client.ObjectKey{Name: nodeB}, o); err != nil {
		t.Fatal(err)
	}
	if o.Status.AppliedRevision != "" || len(o.Status.Conditions) != 0 {
		t.Fatalf("%s's status was written by an agent holding %s's token: %+v", nodeB, nodeA, o.Status)
	}
	t.Logf("rogue agent refused: %s", firstLine(rogue.String(), "refused"))
}

func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			if len(l) > 300 {
				return l[:300] + "..."
			}
			return l
		}
	}
	return ""
}
