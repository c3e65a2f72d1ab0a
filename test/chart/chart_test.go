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

// Package chart tests charts/nettune: helm lint and template, the values
// schema, the CRDs against config/crd, every rendered manifest against the
// schemas of a real kube-apiserver, and the chart's RBAC and admission policy
// by impersonating the agent's service account bound to one node or another.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nettune/nettune/internal/localcp"
)

const (
	release   = "nt"
	namespace = "nettune-system"
)

func root(t testing.TB) string {
	t.Helper()
	r, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// helmBin is bin/helm (make tools), or $HELM.
func helmBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		bin = filepath.Join(root(t), "bin", "helm")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("NETTUNE_REQUIRE_TOOLS") != "" {
			t.Fatalf("helm not found at %s: run 'make tools'", bin)
		}
		t.Skipf("helm not found at %s: run 'make tools'", bin)
	}
	return bin
}

func chartDir(t testing.TB) string { return filepath.Join(root(t), "charts", "nettune") }

// helm runs helm and returns stdout; err carries stderr.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	stdout, stderr, err := helmOut(t, args...)
	if err != nil {
		return stdout, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout, nil
}

// helmOut runs helm and returns stdout and stderr apart.
func helmOut(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// valueSets are the values the chart is linted, rendered and validated with:
// the defaults, and every optional part on.
var valueSets = map[string][]string{
	"defaults": nil,
	"everything": {
		"--set", "observability.lokiURL=http://loki.monitoring:3100",
		"--set", "observability.prometheusURL=http://prometheus-operated.monitoring:9090",
		"--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
		"--set", "grafana.datasource.enabled=true",
		"--set", "agent.nodeSelector.nettune\\.io/hardware=xavier",
		"--set", "controller.extraArgs={--zap-log-level=debug}",
		"--set", "agent.extraArgs={-v}",
		"--set", "imagePullSecrets={regcred}",
		"--set", "image.tag=0.1.0-rc1",
	},
	// A user's stack: TLS, a tenant and credentials from Secrets for the
	// controller's queries and push, the agents' push and Grafana.
	"authenticated": {
		"--set", "observability.lokiURL=https://loki-gateway.monitoring",
		"--set", "observability.lokiSecret=loki",
		"--set", "observability.prometheusURL=https://prometheus.monitoring:9090",
		"--set", "observability.prometheusSecret=prometheus",
		"--set", "observability.agentCredentials.secretName=nettune-agent-loki",
		"--set", "grafana.datasource.enabled=true",
		"--set", "grafana.datasource.auth.tenant=true",
		"--set", "grafana.datasource.auth.basicAuth=true",
		"--set", "grafana.datasource.auth.caCert=true",
	},
	"minimal": {
		"--set", "nodeIsolation.enabled=false",
		"--set", "profileWarnings.enabled=false",
		"--set", "grafana.dashboards.enabled=false",
		"--set", "agent.probeTopics=null",
		"--set", "controller.replicas=1",
		"--set", "controller.leaderElection.enabled=false",
	},
}

// render runs helm template and decodes every document.
func render(t testing.TB, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace, "--include-crds"}, extra...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t testing.TB, manifests string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding rendered manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("helm template rendered nothing")
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func TestHelmLint(t *testing.T) {
	for name, set := range valueSets {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, append([]string{"lint", "--strict", chartDir(t), "--namespace", namespace}, set...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint:\n%s", out)
			}
		})
	}
}

// TestCRDsIdenticalToConfig: the chart installs exactly the CRDs of
// config/crd/bases (make generate copies them; make verify checks too).
func TestCRDsIdenticalToConfig(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(root(t), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	got, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if len(got) != len(want) {
		t.Fatalf("chart has %d CRD files, config/crd/bases %d", len(got), len(want))
	}
	for _, w := range want {
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join(chartDir(t), "crds", filepath.Base(w)))
		if err != nil {
			t.Fatalf("chart lacks %s: %v", filepath.Base(w), err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/nettune/crds/%s differs from config/crd/bases: run 'make generate'", filepath.Base(w))
		}
	}
	// And they are what helm renders with --include-crds.
	objs := render(t)
	for _, w := range want {
		raw, _ := os.ReadFile(w)
		var crd map[string]any
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		name := crd["metadata"].(map[string]any)["name"].(string)
		if find(objs, "CustomResourceDefinition", name) == nil {
			t.Errorf("helm template --include-crds lacks %s", name)
		}
	}
}

// TestRenderedShape checks what the issue asks of the workloads, on the
// rendered objects (the API server validates them in TestChartOnAPIServer).
func TestRenderedShape(t *testing.T) {
	objs := render(t, valueSets["everything"]...)

	dep := find(objs, "Deployment", release+"-controller")
	if dep == nil {
		t.Fatal("no controller Deployment")
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
		t.Errorf("controller replicas %v, want 2", r)
	}
	ctr := container(t, dep)
	args := strings.Join(stringSlice(ctr["args"]), " ")
	for _, want := range []string{"--leader-elect=true", "--loki-address=http://loki.monitoring:3100", "--prometheus-address=http://prometheus-operated.monitoring:9090", "--loki-push-url=http://loki.monitoring:3100"} {
		if !strings.Contains(args, want) {
			t.Errorf("controller args %q lack %s", args, want)
		}
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe"} {
		if ctr[probe] == nil {
			t.Errorf("controller has no %s", probe)
		}
	}
	if lim, _, _ := unstructured.NestedStringMap(ctr, "resources", "limits"); lim["memory"] == "" || lim["cpu"] == "" {
		t.Errorf("controller resource limits %v", lim)
	}

	ds := find(objs, "DaemonSet", release+"-agent")
	if ds == nil {
		t.Fatal("no agent DaemonSet")
	}
	spec := ds.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	if spec["hostNetwork"] != true {
		t.Error("agent is not on the host network")
	}
	if tol, _ := spec["tolerations"].([]any); len(tol) == 0 || tol[0].(map[string]any)["operator"] != "Exists" {
		t.Errorf("agent tolerations %v: it must run on every vehicle node", spec["tolerations"])
	}
	actr := container(t, ds)
	sc := actr["securityContext"].(map[string]any)
	if sc["privileged"] != false || sc["allowPrivilegeEscalation"] != false || sc["readOnlyRootFilesystem"] != true {
		t.Errorf("agent security context %v", sc)
	}
	caps := sc["capabilities"].(map[string]any)
	if fmt.Sprint(caps["drop"]) != "[ALL]" || fmt.Sprint(caps["add"]) != "[NET_ADMIN]" {
		t.Errorf("agent capabilities %v, want drop ALL add NET_ADMIN only", caps)
	}
	aargs := strings.Join(stringSlice(actr["args"]), " ")
	if a := stringSlice(actr["args"]); len(a) == 0 || a[0] != "run" {
		t.Errorf("agent args %q do not start with the run command", a)
	}
	for _, want := range []string{"--node=$(NODE_NAME)", "--sysctl-root=/host/proc/sys", "--state-dir=/var/lib/nettune", "--vehicle-from-node-label=nettune.io/vehicle", "--loki-url=http://loki.monitoring:3100", "--probe-topic=planning:16384:20"} {
		if !strings.Contains(aargs, want) {
			t.Errorf("agent args %q lack %s", aargs, want)
		}
	}
	hostPaths := map[string]string{}
	for _, v := range spec["volumes"].([]any) {
		v := v.(map[string]any)
		if hp, ok := v["hostPath"].(map[string]any); ok {
			hostPaths[v["name"].(string)] = hp["path"].(string)
		}
	}
	if hostPaths["state"] != "/var/lib/nettune" || hostPaths["proc-sys-net"] != "/proc/sys/net" {
		t.Errorf("agent hostPath volumes %v", hostPaths)
	}

	// Dashboards as ConfigMaps with the sidecar's label, and the datasource.
	dashboards := 0
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetLabels()["grafana_dashboard"] == "1" {
			dashboards++
			for k, v := range o.Object["data"].(map[string]any) {
				var d map[string]any
				if err := yaml.Unmarshal([]byte(v.(string)), &d); err != nil || d["uid"] == nil {
					t.Errorf("dashboard %s/%s is not dashboard JSON: %v", o.GetName(), k, err)
				}
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(chartDir(t), "dashboards", "*.json"))
	if len(files) < 2 || dashboards != len(files) {
		t.Errorf("%d dashboard ConfigMaps for %d dashboard files (want both Rollout health and Vehicle)", dashboards, len(files))
	}
	if ds := find(objs, "ConfigMap", release+"-datasource-loki"); ds == nil || ds.GetLabels()["grafana_datasource"] != "1" {
		t.Error("no Loki datasource ConfigMap with the sidecar's label")
	}
	if n := len(filter(objs, "ServiceMonitor")); n != 2 {
		t.Errorf("%d ServiceMonitors, want 2 (controller, agent)", n)
	}

	// Defaults: no ServiceMonitor (needs the Prometheus Operator's CRD), no
	// datasource; minimal: no policy, no dashboards.
	def := render(t)
	if len(filter(def, "ServiceMonitor")) != 0 || find(def, "ConfigMap", release+"-datasource-loki") != nil {
		t.Error("optional objects rendered by default")
	}
	if find(def, "ValidatingAdmissionPolicy", release+"-agent-own-node") == nil {
		t.Error("node isolation policy not rendered by default")
	}
	if find(def, "ValidatingAdmissionPolicy", release+"-profile-warnings") == nil || find(def, "ValidatingAdmissionPolicyBinding", release+"-profile-warnings") == nil {
		t.Error("profile warning policy not rendered by default")
	}
	if find(def, "PodDisruptionBudget", release+"-controller") == nil {
		t.Error("no PodDisruptionBudget for the 2 controller replicas")
	}
	minimal := render(t, valueSets["minimal"]...)
	if find(minimal, "ValidatingAdmissionPolicy", "") != nil || find(minimal, "ConfigMap", "") != nil {
		t.Error("minimal values still render the policy or dashboards")
	}
	if find(minimal, "PodDisruptionBudget", "") != nil {
		t.Error("a PodDisruptionBudget for a single controller replica would block node drains")
	}
}

// TestValuesSchemaRejects: bad values fail helm template, naming the field.
func TestValuesSchemaRejects(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"controller.replicas=0"}, "at '/controller/replicas': minimum"},
		{[]string{"controller.replicas=two"}, "at '/controller/replicas'"},
		{[]string{"controler.replicas=2"}, "'controler' not allowed"},
		{[]string{"agent.probeTopics={planning}"}, "at '/agent/probeTopics/0'"},
		{[]string{"agent.stateDir=var/lib/nettune"}, "at '/agent/stateDir'"},
		{[]string{"agent.heartbeat=30"}, "at '/agent/heartbeat'"},
		{[]string{"agent.probePort=70000"}, "at '/agent/probePort': maximum"},
		{[]string{"observability.lokiURL=loki:3100"}, "at '/observability/lokiURL'"},
		{[]string{"image.pullPolicy=Sometimes"}, "at '/image/pullPolicy'"},
		{[]string{"labels.vehicle=not a label"}, "at '/labels/vehicle'"},
		{[]string{"agent.updateStrategy.type=Recreate"}, "at '/agent/updateStrategy/type'"},
		{[]string{"metrics.serviceMonitor.enabled=yes"}, "at '/metrics/serviceMonitor/enabled'"},
		{[]string{"agent.lokiBufferMaxBytes=1024"}, "at '/agent/lokiBufferMaxBytes': minimum"},
		{[]string{"agent.resync=0s"}, "at '/agent/resync'"},
		{[]string{"agent.heartbeat=0ms"}, "at '/agent/heartbeat'"},
		{[]string{"agent.probeTopics={planning:4096:0}"}, "at '/agent/probeTopics/0'"},
		{[]string{"agent.probeTopics={" + strings.Repeat("x", 64) + ":1:1}"}, "at '/agent/probeTopics/0'"},
		{[]string{"agent.probeTopics={planning:999999999:1}"}, "at '/agent/probeTopics/0'"},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			args := []string{"template", release, chartDir(t), "--namespace", namespace}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			out, stderr, err := helmOut(t, args...)
			if err == nil {
				t.Fatalf("accepted; rendered %d bytes", len(out))
			}
			if !strings.Contains(stderr, "schema") || !strings.Contains(stderr, c.want) {
				t.Fatalf("error does not name the field (want %q):\n%s", c.want, stderr)
			}
		})
	}
	// A datasource without a Loki URL is refused by the template.
	if _, stderr, err := helmOut(t, "template", release, chartDir(t), "--set", "grafana.datasource.enabled=true"); err == nil || !strings.Contains(stderr, "needs observability.lokiURL") {
		t.Fatalf("datasource without lokiURL: %v", err)
	}
}

func container(t testing.TB, o *unstructured.Unstructured) map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s %s has %d containers", o.GetKind(), o.GetName(), len(cs))
	}
	return cs[0].(map[string]any)
}

func stringSlice(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func filter(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestRenderedArgsParse hands the rendered arguments of the controller and
// the agent to the real binaries' flag parsing (with -h, so nothing runs):
// a flag the binary does not know, or a value it refuses, would crash-loop
// every pod.
func TestRenderedArgsParse(t *testing.T) {
	for name, set := range valueSets {
		objs := render(t, set...)
		for _, w := range []struct{ kind, name, bin string }{
			{"Deployment", release + "-controller", "nettune-controller"},
			{"DaemonSet", release + "-agent", "nettune-agent"},
		} {
			o := find(objs, w.kind, w.name)
			if o == nil {
				t.Fatalf("values %q: no %s %s", name, w.kind, w.name)
			}
			args := stringSlice(container(t, o)["args"])
			bin := filepath.Join(root(t), "bin", w.bin)
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("%v: run 'make build'", err)
			}
			out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
			if !strings.Contains(string(out), "Usage of") {
				t.Fatalf("values %q: %s %q -h printed no usage:\n%s", name, w.bin, args, out)
			}
			for _, bad := range []string{"flag provided but not defined", "invalid value", "unknown command"} {
				if strings.Contains(string(out), bad) {
					t.Errorf("values %q: %s refuses its rendered arguments %q: %s", name, w.bin, args, firstLine(string(out), bad))
				}
			}
		}
	}
	// The check itself: an argument the controller does not know is caught.
	out, _ := exec.Command(filepath.Join(root(t), "bin", "nettune-controller"), "-v", "-h").CombinedOutput()
	if !strings.Contains(string(out), "flag provided but not defined") {
		t.Fatalf("an unknown flag went unnoticed: %s", out)
	}
}
