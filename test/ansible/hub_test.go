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

package ansible

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nettune/nettune/test/framework/hubtest"
	"github.com/nettune/nettune/test/framework/nettest"
)

// hubCluster is the name the test cluster gets at the hub: one the hub has
// never seen, so only the play can have made its ManagedCluster.
const hubCluster = "ansible-depot-1"

// TestHubRegisterPlay runs hub-register.yml for one k3s cluster against a
// real Open Cluster Management hub (test/framework/hubtest: kube-apiserver,
// OCM's hub controllers with ManagedClusterAutoApproval for the bootstrap
// user, kube-controller-manager signing CSRs). The cluster is kine and a
// kube-apiserver, as a k3s server stores and serves it, with no agent; its
// server is a local host whose files are rooted in a directory of the test.
// The play's hub side creates the ManagedCluster (labels, lease duration,
// hubAcceptsClient); its server side installs bin/ocm, the bootstrap
// kubeconfig, OCM's spoke CRDs and namespace, and ocm-klusterlet.service.
// This machine does not run systemd, so the test starts the agent exactly as
// the unit's ExecStart says, and the hub shows the cluster joined through a
// CSR from the bootstrap user and Available. A second run changes nothing; a
// label changed at the hub is put back by the hub side alone (--tags hub).
func TestHubRegisterPlay(t *testing.T) {
	nettest.RequireRoot(t) // the role chowns to root
	tl := requireAnsible(t)
	missing := hubtest.MissingTools(tl.root)
	if _, err := os.Stat(filepath.Join(tl.root, "bin", "kubectl")); err != nil {
		missing = append(missing, "bin/kubectl")
	}
	if len(missing) > 0 {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("missing %s: run 'make tools'", strings.Join(missing, ", "))
		}
		t.Skipf("missing %s: run 'make tools' (NETTUNE_REQUIRE_TOOLS=1 makes this a failure)", strings.Join(missing, ", "))
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	kubectl := filepath.Join(tl.root, "bin", "kubectl")

	hub, err := hubtest.StartHubWithOptions(filepath.Join(dir, "hub"), hubtest.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Stop() })
	// The bootstrap kubeconfig, as the hub's operator hands it out (to the
	// vault): the user bound to OCM's bootstrap ClusterRole, whose CSRs the
	// hub approves by itself.
	bootUser, err := hub.ControlPlane.Env.AddUser(envtest.User{
		Name: hubtest.BootstrapUser, Groups: []string{"system:bootstrappers:managedcluster"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap, err := bootUser.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}

	cl := startBareCluster(t, tl.root, filepath.Join(dir, "cluster"))
	t.Logf("hub and cluster up in %s", time.Since(began).Round(time.Millisecond))

	listen, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "depot-server")
	inventory := filepath.Join(dir, "inventory.yml")
	writeFile(t, inventory, fmt.Sprintf(`all:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: %[1]s
  children:
    k3s_server:
      hosts:
        depot-server:
          test_root: %[2]s
          ocm_cluster_name: %[3]s
          ocm_cluster_labels:
            region: eu
            nettune.io/depot: north
          ocm_binary_src: %[4]s/bin/ocm
          ocm_spoke_crds_src: %[4]s/bin/crds/ocm/spoke
          ocm_agent_bin: "{{ test_root }}/usr/local/bin/ocm"
          ocm_config_dir: "{{ test_root }}/etc/ocm"
          ocm_hub_kubeconfig_dir: "{{ test_root }}/var/lib/ocm/hub-kubeconfig"
          ocm_manifests_dir: "{{ test_root }}/var/lib/ocm/manifests"
          ocm_klusterlet_systemd_dir: "{{ test_root }}/etc/systemd/system"
          ocm_cluster_kubeconfig: %[5]s
          ocm_kubectl: [%[6]s]
          ocm_cluster_wait_retries: 5
          ocm_cluster_wait_delay: 1
          ocm_agent_listen: 127.0.0.1:%[7]d
          ocm_status_sync_interval: 2s
          ocm_cluster_healthcheck_period: 10s
          ocm_leader_election_lease_duration: 30s
          ocm_leader_election_renew_deadline: 20s
          ocm_leader_election_retry_period: 4s
          ocm_lease_duration_seconds: 10
          ocm_hub_kubeconfig: %[8]s
          ocm_hub_kubectl: [%[6]s]
`, tl.python, root, hubCluster, tl.root, cl.kubeconfig, kubectl, listen, hub.Kubeconfig))
	vars := map[string]any{"ocm_bootstrap_kubeconfig": string(bootstrap)}
	wantLabels := map[string]string{"region": "eu", "nettune.io/depot": "north"}

	t.Run("without a bootstrap kubeconfig the play stops", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, map[string]any{}, "hub-register.yml")
		if r.exitErr == nil || r.Stats["depot-server"].Failures == 0 {
			t.Fatalf("want a failure without ocm_bootstrap_kubeconfig; got exit %v", r.exitErr)
		}
		if msgs := strings.Join(r.failureMessages(), "\n"); !strings.Contains(msgs, "ocm_bootstrap_kubeconfig") {
			t.Errorf("failure does not name ocm_bootstrap_kubeconfig: %s", msgs)
		}
		var mc clusterv1.ManagedCluster
		if err := hub.Client.Get(ctx, client.ObjectKey{Name: hubCluster}, &mc); !apierrors.IsNotFound(err) {
			t.Errorf("ManagedCluster %s at the hub after a failed check: %v", hubCluster, err)
		}
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("the play wrote to the server after a failed check (%v)", err)
		}
	})

	if !t.Run("first run", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, vars, "hub-register.yml")
		if r.exitErr != nil {
			t.Fatalf("hub-register.yml failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		if s := r.Stats["depot-server"]; s.Failures != 0 || s.Changed < 1 {
			t.Errorf("changed=%d failed=%d, want changed >= 1 and failed 0", s.Changed, s.Failures)
		}
		for _, task := range []string{"Create the ManagedCluster at the hub", "Install the ocm binary",
			"Write the bootstrap kubeconfig for the hub", "Apply the agent's namespace and CRDs to the cluster", "Install the klusterlet service"} {
			if res, ok := r.task("depot-server", task); !ok || !res.Changed {
				t.Errorf("task %q: ran %v, changed %v; want changed", task, ok, res.Changed)
			}
		}
		if res, ok := r.task("depot-server", "Enable and start the klusterlet"); !ok || !res.Skipped {
			t.Errorf("Enable and start the klusterlet: ran %v, skipped %v; want skipped without systemd", ok, res.Skipped)
		}
		checkManagedCluster(ctx, t, hub, wantLabels)
		var mc clusterv1.ManagedCluster
		if err := hub.Client.Get(ctx, client.ObjectKey{Name: hubCluster}, &mc); err == nil &&
			meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined) != nil {
			t.Errorf("ManagedCluster %s joined before any agent ran: %v", hubCluster, mc.Status.Conditions)
		}
		checkServerFiles(t, tl.root, root, bootstrap)
		// The agent's namespace and OCM's spoke CRDs are in the cluster.
		if err := cl.client.Get(ctx, client.ObjectKey{Name: hubtest.AgentNamespace}, &corev1.Namespace{}); err != nil {
			t.Errorf("namespace %s in the cluster: %v", hubtest.AgentNamespace, err)
		}
		for _, crd := range []string{"appliedmanifestworks.work.open-cluster-management.io", "clusterclaims.cluster.open-cluster-management.io"} {
			if err := cl.client.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
				t.Errorf("CRD %s in the cluster: %v", crd, err)
			}
		}
	}) {
		t.FailNow()
	}

	agentLog := filepath.Join(dir, "ocm-klusterlet.log")
	var agent *unitProcess
	if !t.Run("the agent as the unit starts it joins the hub", func(t *testing.T) {
		unit := filepath.Join(root, "etc", "systemd", "system", "ocm-klusterlet.service")
		argv := execStart(t, unit)
		if want := filepath.Join(root, "usr", "local", "bin", "ocm"); argv[0] != want || argv[1] != "agent" {
			t.Fatalf("ExecStart runs %q %q, want %s agent", argv[0], argv[1], want)
		}
		for _, flag := range []string{
			"--bootstrap-kubeconfig=" + filepath.Join(root, "etc", "ocm", "bootstrap-hub.kubeconfig"),
			"--spoke-cluster-name=" + hubCluster,
			"--kubeconfig=" + cl.kubeconfig,
			"--feature-gates=RawFeedbackJsonString=true",
			"--status-sync-interval=2s",
		} {
			if !slices.Contains(argv, flag) {
				t.Errorf("ExecStart lacks %s: %q", flag, argv)
			}
		}
		t.Logf("ExecStart of %s: %s", filepath.Base(unit), strings.Join(argv, " "))
		restartDelay := unitDuration(t, unit, "RestartSec")
		agent = startUnitProcess(t, argv, agentLog, restartDelay)
		start := time.Now()
		if err := waitManagedClusterJoined(ctx, hub, hubCluster); err != nil {
			t.Fatalf("%v (agent: %q)\nlast lines of %s:\n%s", err, agent.Exits(), agentLog, tailLines(agentLog, 30))
		}
		t.Logf("ManagedCluster %s accepted, joined and Available=True %s after the agent started",
			hubCluster, time.Since(start).Round(time.Millisecond))

		// It joined with the bootstrap kubeconfig the play wrote: its CSR was
		// made by the bootstrap user, and the hub approved it.
		var csrs certificatesv1.CertificateSigningRequestList
		if err := hub.Client.List(ctx, &csrs, client.MatchingLabels{"open-cluster-management.io/cluster-name": hubCluster}); err != nil {
			t.Fatal(err)
		}
		approved := 0
		for _, csr := range csrs.Items {
			if csr.Spec.Username != hubtest.BootstrapUser {
				t.Errorf("CSR %s made by %q, want the bootstrap user %s", csr.Name, csr.Spec.Username, hubtest.BootstrapUser)
			}
			for _, c := range csr.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue {
					approved++
					t.Logf("CSR %s by %s approved: %s", csr.Name, csr.Spec.Username, c.Message)
				}
			}
		}
		if approved == 0 {
			t.Errorf("no approved CSR of cluster %s at the hub (%d CSRs)", hubCluster, len(csrs.Items))
		}
		// The hub's certificate is in the directory the unit names.
		raw, err := os.ReadFile(filepath.Join(root, "var", "lib", "ocm", "hub-kubeconfig", "tls.crt"))
		if err != nil {
			t.Fatalf("the agent's hub certificate: %v", err)
		}
		block, _ := pem.Decode(raw)
		if block == nil {
			t.Fatalf("tls.crt is not PEM: %q", raw)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if prefix := "system:open-cluster-management:" + hubCluster + ":"; !strings.HasPrefix(cert.Subject.CommonName, prefix) {
			t.Errorf("the agent's hub certificate is for %q, want %s...", cert.Subject.CommonName, prefix)
		}
		checkManagedCluster(ctx, t, hub, wantLabels)
	}) {
		t.FailNow()
	}

	t.Run("second run changes nothing", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, vars, "hub-register.yml")
		if r.exitErr != nil {
			t.Fatalf("hub-register.yml failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		if s := r.Stats["depot-server"]; s.Failures != 0 || s.Changed != 0 {
			t.Errorf("changed=%d failed=%d, want 0 and 0: %s", s.Changed, s.Failures, changedTasks(r))
		}
		checkManagedCluster(ctx, t, hub, wantLabels)
		// Still Available. The test's lease (10 s: Unknown after 50 to 100 s
		// without a renewal) and leader election (30 s, 20 s, 4 s) are
		// shorter than OCM's, but long enough for a loaded machine: with a
		// 3 s lease and 15 s, 10 s, 2 s, a run beside a cold tool build and
		// another make test (load 12-16 on 2 cores) saw the agent's Lease at
		// the hub go stale for over 15 s, then the agent lose its lock on
		// its own API server. Should the agent exit, it is started again as
		// Restart=always does and waits at most one lease for its lock: the
		// wait covers that.
		wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
		defer wcancel()
		if err := hub.WaitClusterAvailable(wctx, hubCluster, "True"); err != nil {
			t.Errorf("after the second run: %v (agent: %q)\nlast lines of %s:\n%s", err, agent.Exits(), agentLog, tailLines(agentLog, 40))
		}
		t.Logf("the agent's exits, each followed by a restart as Restart=always does: %q", agent.Exits())
	})

	t.Run("a label changed at the hub is put back by the hub side alone", func(t *testing.T) {
		cmd := exec.Command(kubectl, "--kubeconfig", hub.Kubeconfig, "label", "--overwrite",
			"managedclusters.cluster.open-cluster-management.io", hubCluster, "region=us")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl label: %v: %s", err, out)
		}
		r := tl.runPlaybook(t, inventory, vars, "hub-register.yml", "--tags", "hub")
		if r.exitErr != nil {
			t.Fatalf("hub-register.yml --tags hub failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		if _, ok := r.task("depot-server", "Install the ocm binary"); ok {
			t.Errorf("--tags hub ran the server side")
		}
		if s := r.Stats["depot-server"]; s.Changed != 1 {
			t.Errorf("changed=%d, want 1 (the patch at the hub): %s", s.Changed, changedTasks(r))
		}
		if res, ok := r.task("depot-server", "Accept the ManagedCluster and set its labels and lease"); !ok || !res.Changed {
			t.Errorf("the patch at the hub: ran %v, changed %v; want changed", ok, res.Changed)
		}
		checkManagedCluster(ctx, t, hub, wantLabels)
	})
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}

// changedTasks lists the tasks a run reported changed, with their output.
func changedTasks(r *playResult) string {
	var b strings.Builder
	for _, p := range r.Plays {
		for _, tk := range p.Tasks {
			for h, res := range tk.Hosts {
				if res.Changed {
					fmt.Fprintf(&b, "\n%s: %s: %s", h, tk.Task.Name, strings.TrimSpace(res.Stdout))
				}
			}
		}
	}
	return b.String()
}

// checkManagedCluster checks the play's ManagedCluster at the hub: the
// labels, hubAcceptsClient and the lease duration.
func checkManagedCluster(ctx context.Context, t *testing.T, hub *hubtest.Hub, labels map[string]string) {
	t.Helper()
	var mc clusterv1.ManagedCluster
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: hubCluster}, &mc); err != nil {
		t.Errorf("ManagedCluster %s at the hub: %v", hubCluster, err)
		return
	}
	for k, v := range labels {
		if got := mc.Labels[k]; got != v {
			t.Errorf("ManagedCluster %s: label %s=%q, want %q", hubCluster, k, got, v)
		}
	}
	if !mc.Spec.HubAcceptsClient {
		t.Errorf("ManagedCluster %s: hubAcceptsClient false", hubCluster)
	}
	if mc.Spec.LeaseDurationSeconds != 10 {
		t.Errorf("ManagedCluster %s: leaseDurationSeconds %d, want 10 (the inventory's ocm_lease_duration_seconds)", hubCluster, mc.Spec.LeaseDurationSeconds)
	}
}

// checkServerFiles checks what the play installed under the server's root.
func checkServerFiles(t *testing.T, repo, root string, bootstrap []byte) {
	t.Helper()
	mode := func(p string) os.FileMode {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%v", err)
			return 0
		}
		return st.Mode()
	}
	if m := mode("usr/local/bin/ocm"); m.Perm() != 0o755 {
		t.Errorf("ocm mode %v, want 0755", m)
	}
	want, _ := os.ReadFile(filepath.Join(repo, "bin", "ocm"))
	if got, _ := os.ReadFile(filepath.Join(root, "usr/local/bin/ocm")); !bytes.Equal(got, want) {
		t.Errorf("installed ocm differs from bin/ocm")
	}
	if m := mode("etc/ocm/bootstrap-hub.kubeconfig"); m.Perm() != 0o600 {
		t.Errorf("bootstrap kubeconfig mode %v, want 0600 (a credential)", m)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/ocm/bootstrap-hub.kubeconfig")); !bytes.Equal(got, bootstrap) {
		t.Errorf("bootstrap kubeconfig on the server differs from the one given")
	}
	if m := mode("var/lib/ocm/hub-kubeconfig"); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("hub kubeconfig directory mode %v, want a 0700 directory", m)
	}
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/ocm-klusterlet.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Type=simple", "Restart=always", "After=network-online.target k3s.service", "WantedBy=multi-user.target"} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("ocm-klusterlet.service lacks %q:\n%s", line, unit)
		}
	}
}

// unitDuration returns a [Service] time setting of a unit in seconds
// (RestartSec=5).
func unitDuration(t *testing.T, unit, key string) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			d, err := time.ParseDuration(v + "s")
			if err != nil {
				t.Fatalf("%s=%s in %s: %v", key, v, unit, err)
			}
			return d
		}
	}
	t.Fatalf("no %s= in %s", key, unit)
	return 0
}

// execStart returns the command line of a unit's ExecStart= (continuation
// lines joined, split at whitespace as systemd does for arguments without
// quotes; the test fails on quotes or specifiers it would have to interpret).
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	in := false
	for _, l := range strings.Split(string(raw), "\n") {
		if !in {
			if !strings.HasPrefix(l, "ExecStart=") {
				continue
			}
			in, l = true, strings.TrimPrefix(l, "ExecStart=")
		}
		if strings.HasSuffix(l, "\\") {
			line += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		line += l
		break
	}
	if strings.ContainsAny(line, `"'%$`) {
		t.Fatalf("ExecStart has quotes, specifiers or variables this test does not interpret: %s", line)
	}
	argv := strings.Fields(line)
	if len(argv) < 2 {
		t.Fatalf("no ExecStart in %s:\n%s", unit, raw)
	}
	return argv
}

// unitProcess runs a unit's ExecStart as systemd would with Restart=always:
// started again RestartSec after each exit, until the test ends.
type unitProcess struct {
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	exits   []string
	stopped bool
}

// startUnitProcess starts argv as the unit's service would run it, logging
// to logPath, restarts it restartDelay after it exits (Restart=always), and
// stops it (SIGTERM, then SIGKILL) when the test ends.
func startUnitProcess(t *testing.T, argv []string, logPath string, restartDelay time.Duration) *unitProcess {
	t.Helper()
	u := &unitProcess{}
	var start func() error
	start = func() error {
		logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = logFile.Close()
			return err
		}
		done := make(chan struct{})
		u.cmd, u.done = cmd, done
		began := time.Now()
		go func() {
			err := cmd.Wait()
			_ = logFile.Close()
			u.mu.Lock()
			defer u.mu.Unlock()
			close(done)
			if u.stopped {
				return
			}
			u.exits = append(u.exits, fmt.Sprintf("exited after %s: %v", time.Since(began).Round(time.Millisecond), err))
			time.AfterFunc(restartDelay, func() {
				u.mu.Lock()
				defer u.mu.Unlock()
				if !u.stopped {
					_ = start()
				}
			})
		}()
		return nil
	}
	u.mu.Lock()
	err := start()
	u.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		u.mu.Lock()
		u.stopped = true
		cmd, done := u.cmd, u.done
		u.mu.Unlock()
		stopGroup(cmd, done, 15*time.Second)
	})
	return u
}

// Exits lists the process's exits so far.
func (u *unitProcess) Exits() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.exits)
}

// stopGroup sends SIGTERM to a process group started with Setpgid and
// SIGKILL after grace.
func stopGroup(cmd *exec.Cmd, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// waitManagedClusterJoined waits until the hub shows the ManagedCluster
// accepted, joined and available.
func waitManagedClusterJoined(ctx context.Context, hub *hubtest.Hub, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	want := []string{clusterv1.ManagedClusterConditionHubAccepted, clusterv1.ManagedClusterConditionJoined, clusterv1.ManagedClusterConditionAvailable}
	var last []string
	for {
		var mc clusterv1.ManagedCluster
		err := hub.Client.Get(ctx, client.ObjectKey{Name: name}, &mc)
		last = last[:0]
		for _, c := range want {
			if err != nil || !meta.IsStatusConditionTrue(mc.Status.Conditions, c) {
				last = append(last, c)
			}
		}
		if len(last) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ManagedCluster %s: not True: %s (%v)", name, strings.Join(last, ", "), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// bareCluster is a k3s server's API as the play sees it: kine on SQLite and
// a kube-apiserver on it (as test/framework/hubtest starts a spoke), with no
// agent.
type bareCluster struct {
	kubeconfig string
	client     client.Client
}

// startBareCluster starts kine and a kube-apiserver in dir and stops them
// when the test ends.
func startBareCluster(t *testing.T, repo, dir string) *bareCluster {
	t.Helper()
	for _, d := range []string{filepath.Join(dir, "kine"), filepath.Join(dir, "apiserver")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	port, err := freeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	kineAddr := fmt.Sprintf("127.0.0.1:%d", port)
	kineLog, err := os.Create(filepath.Join(dir, "kine.log"))
	if err != nil {
		t.Fatal(err)
	}
	kine := exec.Command(filepath.Join(repo, "bin", "kine"),
		"--listen-address="+kineAddr,
		"--endpoint=sqlite://"+filepath.Join(dir, "kine", "state.db")+"?_journal_mode=WAL&cache=shared&_busy_timeout=30000&_txlock=immediate",
		"--metrics-bind-address=0")
	kine.Stdout, kine.Stderr = kineLog, kineLog
	kine.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := kine.Start(); err != nil {
		t.Fatal(err)
	}
	kineDone := make(chan struct{})
	go func() { _ = kine.Wait(); _ = kineLog.Close(); close(kineDone) }()
	t.Cleanup(func() { stopGroup(kine, kineDone, 10*time.Second) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", kineAddr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-kineDone:
			t.Fatalf("kine exited:\n%s", tailLines(filepath.Join(dir, "kine.log"), 20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kine not listening on %s after 30 s: %v", kineAddr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	apiLog, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		t.Fatal(err)
	}
	api := &envtest.APIServer{
		EtcdURL:      &url.URL{Scheme: "http", Host: kineAddr},
		Path:         filepath.Join(repo, "bin", "kube-apiserver"),
		CertDir:      filepath.Join(dir, "apiserver"),
		StartTimeout: 2 * time.Minute,
		StopTimeout:  30 * time.Second,
		Out:          apiLog,
		Err:          apiLog,
	}
	if err := api.Start(); err != nil {
		t.Fatalf("starting the cluster's kube-apiserver: %v\n%s", err, tailLines(apiLog.Name(), 20))
	}
	t.Cleanup(func() { _ = api.Stop(); _ = apiLog.Close() })
	admin, err := api.AddUser(envtest.User{Name: "k3s-admin", Groups: []string{"system:masters"}},
		&rest.Config{Host: api.SecureServing.URL("https", "").String(), TLSClientConfig: rest.TLSClientConfig{CAData: api.CA}})
	if err != nil {
		t.Fatal(err)
	}
	kcfg := clientcmdapi.NewConfig()
	kcfg.Clusters["k3s"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kcfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertData, ClientKeyData: admin.KeyData}
	kcfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "k3s", AuthInfo: "admin"}
	kcfg.CurrentContext = "default"
	kc, err := clientcmd.Write(*kcfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := &bareCluster{kubeconfig: filepath.Join(dir, "k3s.yaml")}
	if err := os.WriteFile(cl.kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if cl.client, err = client.New(admin, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return cl
}

// freeTCPPort asks the kernel for an unused TCP port on 127.0.0.1.
func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailLines returns the last n lines of a file.
func tailLines(path string, n int) string {
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
