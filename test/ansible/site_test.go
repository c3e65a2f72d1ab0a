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
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/nettest"
)

// siteHost is one compute unit of the test vehicle.
type siteHost struct {
	name, host, hardware, addr, mgmt string // addr: vehicle LAN; mgmt: what the server reaches (ansible_host)
}

// TestSitePlay runs site.yml for a vehicle of two compute units, each a
// local host whose root is a directory of the test, against a real
// kube-apiserver standing in for the k3s server: the agent binary, state
// directory and boot service are installed, config.yaml is what the k3s
// agent needs, the Nodes get nettune's labels and annotations, a second run
// changes nothing, and labels changed by hand are put back. k3s itself cannot
// be downloaded here: testdata/fake-k3s-install.sh stands in for its install
// script (given as k3s_install_script_src), to show the role runs it with the
// right variables once and not again; and no service is started, as this
// machine does not run systemd.
func TestSitePlay(t *testing.T) {
	nettest.RequireRoot(t) // the roles chown to root
	tl := requireAnsible(t)
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		if _, err := os.Stat(filepath.Join(tl.root, "bin", b)); err != nil {
			t.Skipf("bin/%s missing: run 'make tools' first", b)
		}
	}
	agent := agentBinary(t)
	cp, err := localcp.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kubectl := filepath.Join(tl.root, "bin", "kubectl")
	kc := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}

	hosts := []siteHost{
		{"av-901-xavier-a", "xavier-a", "xavier", "192.168.77.11", "10.20.9.11"},
		{"av-901-orin-a", "orin-a", "orin", "192.168.77.12", "10.20.9.12"},
	}
	// The Nodes as a k3s agent registers them (before this project's labels
	// are right: xavier-a carries a stale host label).
	for _, h := range hosts {
		labels := map[string]string{"kubernetes.io/hostname": h.name}
		if h.host == "xavier-a" {
			labels["nettune.io/host"] = "xavier-old"
		}
		node, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": h.name, "labels": labels},
		})
		cmd := exec.Command(kubectl, "--kubeconfig", cp.Kubeconfig, "create", "-f", "-")
		cmd.Stdin = bytes.NewReader(node)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("creating Node %s: %v: %s", h.name, err, out)
		}
	}

	dir := t.TempDir()
	fakeInstall, err := filepath.Abs(filepath.Join("testdata", "fake-k3s-install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	var inv strings.Builder
	fmt.Fprintf(&inv, `all:
  vars:
    ansible_connection: local
    ansible_become: false
    ansible_python_interpreter: %s
  children:
    k3s_server:
      hosts:
        depot-server: {}
    vehicles:
      vars:
        k3s_server_url: https://k3s.fleet.invalid:6443
        k3s_install_script_src: %s
        k3s_install_script_dest: "{{ test_root }}/usr/local/share/k3s/install.sh"
        k3s_binary: "{{ test_root }}/usr/local/bin/k3s"
        k3s_install_env:
          INSTALL_K3S_BIN_DIR: "{{ test_root }}/usr/local/bin"
          NETTUNE_TEST_INSTALL_LOG: "{{ test_root }}/k3s-install.log"
        nettune_agent_binary_src: %s
        node_labels_kubectl: [%s]
        node_labels_kubeconfig: %s
        node_labels_wait_retries: 5
        node_labels_wait_delay: 1
        test_root: "%s/{{ inventory_hostname }}"
        k3s_config_dir: "{{ test_root }}/etc/rancher/k3s"
        nettune_agent_bin: "{{ test_root }}/usr/local/bin/nettune-agent"
        nettune_state_dir: "{{ test_root }}/var/lib/nettune"
        nettune_agent_systemd_dir: "{{ test_root }}/etc/systemd/system"
      children:
        av_901:
          vars:
            nettune_vehicle: av-901
          hosts:
`, tl.python, fakeInstall, agent, kubectl, cp.Kubeconfig, dir)
	for _, h := range hosts {
		fmt.Fprintf(&inv, `            %s:
              ansible_host: %s
              nettune_host: %s
              nettune_hardware: %s
              nettune_lan_address: %s
              nettune_lan_device: eth0
`, h.name, h.mgmt, h.host, h.hardware, h.addr)
	}
	inventory := filepath.Join(dir, "inventory.yml")
	writeFile(t, inventory, inv.String())
	const token = "K10nettunetest::server:0123456789abcdef"
	vars := map[string]any{"k3s_token": token}

	t.Run("without a join token the play stops", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, map[string]any{}, "site.yml", "--limit", hosts[0].name)
		if r.exitErr == nil || r.Stats[hosts[0].name].Failures == 0 {
			t.Fatalf("want a failure without k3s_token; got exit %v", r.exitErr)
		}
		if msgs := strings.Join(r.failureMessages(), "\n"); !strings.Contains(msgs, "k3s_token") {
			t.Errorf("failure does not name k3s_token: %s", msgs)
		}
	})

	t.Run("check mode on a fresh vehicle writes nothing", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, vars, "site.yml", "--check")
		if r.exitErr != nil {
			t.Fatalf("site.yml --check failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		for _, h := range hosts {
			if s := r.Stats[h.name]; s.Changed < 1 {
				t.Errorf("%s: --check reports changed=%d on a fresh vehicle, want >= 1", h.name, s.Changed)
			}
			if _, err := os.Stat(filepath.Join(dir, h.name)); !os.IsNotExist(err) {
				t.Errorf("%s: --check wrote to the host (%v)", h.name, err)
			}
		}
	})

	if !t.Run("first run", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, vars, "site.yml")
		if r.exitErr != nil {
			t.Fatalf("site.yml failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		for _, h := range hosts {
			if s := r.Stats[h.name]; s.Failures != 0 || s.Changed < 1 {
				t.Errorf("%s: changed=%d failed=%d, want changed >= 1 and failed 0", h.name, s.Changed, s.Failures)
			}
			checkHostFiles(t, dir, h, agent, token)
			checkInstalls(t, dir, h, 1)
			checkNode(t, kc(t, "get", "node", h.name, "-o", "json"), h)
		}
	}) {
		t.FailNow()
	}

	t.Run("second run changes nothing", func(t *testing.T) {
		r := tl.runPlaybook(t, inventory, vars, "site.yml")
		if r.exitErr != nil {
			t.Fatalf("site.yml failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		for _, h := range hosts {
			if s := r.Stats[h.name]; s.Failures != 0 || s.Changed != 0 {
				t.Errorf("%s: changed=%d failed=%d, want 0 and 0", h.name, s.Changed, s.Failures)
			}
			checkInstalls(t, dir, h, 1)
		}
	})

	t.Run("labels and annotations changed by hand are put back", func(t *testing.T) {
		h := hosts[0]
		kc(t, "label", "--overwrite", "node", h.name, "nettune.io/vehicle=av-999")
		kc(t, "annotate", "--overwrite", "node", h.name, "nettune.io/lan-address=192.168.77.99")
		r := tl.runPlaybook(t, inventory, vars, "site.yml")
		if r.exitErr != nil {
			t.Fatalf("site.yml failed: %v: %s", r.exitErr, strings.Join(r.failureMessages(), "\n"))
		}
		if s := r.Stats[h.name]; s.Changed != 2 {
			t.Errorf("%s: changed=%d, want 2 (label and annotate)", h.name, s.Changed)
		}
		if s := r.Stats[hosts[1].name]; s.Changed != 0 {
			t.Errorf("%s: changed=%d, want 0", hosts[1].name, s.Changed)
		}
		checkNode(t, kc(t, "get", "node", h.name, "-o", "json"), h)
	})
}

// checkHostFiles checks what site.yml installed under the host's root.
func checkHostFiles(t *testing.T, dir string, h siteHost, agent, token string) {
	t.Helper()
	root := filepath.Join(dir, h.name)
	mode := func(p string) os.FileMode {
		st, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%s: %v", h.name, err)
			return 0
		}
		return st.Mode()
	}
	if m := mode("usr/local/bin/nettune-agent"); m.Perm() != 0o755 {
		t.Errorf("%s: nettune-agent mode %v, want 0755", h.name, m)
	}
	if m := mode("var/lib/nettune"); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("%s: state directory mode %v, want a 0700 directory", h.name, m)
	}
	if m := mode("etc/rancher/k3s/config.yaml"); m.Perm() != 0o600 {
		t.Errorf("%s: config.yaml mode %v, want 0600 (it holds the token)", h.name, m)
	}
	want, _ := os.ReadFile(agent)
	if got, _ := os.ReadFile(filepath.Join(root, "usr/local/bin/nettune-agent")); !bytes.Equal(got, want) {
		t.Errorf("%s: installed nettune-agent differs from the source binary", h.name)
	}

	raw, err := os.ReadFile(filepath.Join(root, "etc/rancher/k3s/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: config.yaml: %v\n%s", h.name, err, raw)
	}
	wantCfg := map[string]any{
		"server":    "https://k3s.fleet.invalid:6443",
		"token":     token,
		"node-name": h.name,
		"node-ip":   h.mgmt,
		"node-label": []any{
			"nettune.io/vehicle=av-901",
			"nettune.io/host=" + h.host,
			"nettune.io/hardware=" + h.hardware,
		},
	}
	if !reflect.DeepEqual(cfg, wantCfg) {
		t.Errorf("%s: config.yaml is\n%s\nwant %v", h.name, raw, wantCfg)
	}

	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system/nettune-agent-boot.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Type=oneshot",
		"RemainAfterExit=yes",
		fmt.Sprintf("ExecStart=%s/usr/local/bin/nettune-agent boot --state-dir %s/var/lib/nettune", root, root),
		"After=network-online.target",
		"Wants=network-online.target",
		"Before=k3s-agent.service k3s.service",
		"WantedBy=multi-user.target",
	} {
		if !strings.Contains(string(unit), "\n"+line+"\n") {
			t.Errorf("%s: boot service lacks %q:\n%s", h.name, line, unit)
		}
	}
}

// checkInstalls checks that the k3s install script ran n times, for the
// agent at the pinned version.
func checkInstalls(t *testing.T, dir string, h siteHost, n int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, h.name, "k3s-install.log"))
	if err != nil {
		t.Errorf("%s: the k3s install script did not run: %v", h.name, err)
		return
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != n {
		t.Errorf("%s: the k3s install script ran %d times, want %d:\n%s", h.name, len(lines), n, raw)
	}
	for _, l := range lines {
		if l != "INSTALL_K3S_VERSION=v1.33.5+k3s1 INSTALL_K3S_EXEC=agent" {
			t.Errorf("%s: the k3s install script ran with %q, want the pinned version as an agent", h.name, l)
		}
	}
}

// checkNode checks nettune's labels and annotations on the Node's JSON.
func checkNode(t *testing.T, nodeJSON string, h siteHost) {
	t.Helper()
	var node struct {
		Metadata struct {
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(nodeJSON), &node); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"nettune.io/vehicle":  "av-901",
		"nettune.io/host":     h.host,
		"nettune.io/hardware": h.hardware,
	}
	for k, v := range want {
		if got := node.Metadata.Labels[k]; got != v {
			t.Errorf("Node %s: label %s=%q, want %q", h.name, k, got, v)
		}
	}
	if got := node.Metadata.Labels["kubernetes.io/hostname"]; got != h.name {
		t.Errorf("Node %s: label kubernetes.io/hostname=%q lost, want it kept", h.name, got)
	}
	wantAnn := map[string]string{"nettune.io/lan-address": h.addr, "nettune.io/lan-device": "eth0"}
	for k, v := range wantAnn {
		if got := node.Metadata.Annotations[k]; got != v {
			t.Errorf("Node %s: annotation %s=%q, want %q", h.name, k, got, v)
		}
	}
}
