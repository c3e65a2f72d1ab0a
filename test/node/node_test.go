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

// Package node installs the chart on a real node (test/framework/testnode): a
// kubelet with containerd, runc and a bridge CNI starts the agent
// DaemonSet and the controller Deployment from images built from this tree,
// mounts the agent's hostPath state, runs its probes and enforces its
// security context; the agent tunes the node's own network namespace and
// reports with a kubelet-minted token. Then the node restarts with the API
// server unreachable and boots from the agent's last-known-good state.
//
// Needs root and the tools: bin/ (make tools) and Debian's containerd,
// runc and containernetworking-plugins (hack/deps.sh). Without them the
// test skips, unless NETTUNE_REQUIRE_TOOLS is set. NETTUNE_NODE_HELM_SET
// adds --set values to the install (e.g. agent.image.tag=missing, to see
// the test fail on a DaemonSet that cannot start).
package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/scheme"
	"github.com/nettune/nettune/test/framework/testnode"
)

const (
	namespace = "nettune-system"
	release   = "nettune"
	agentDS   = "nettune-agent"
	agentSA   = "nettune-agent"
	ctrlDep   = "nettune-controller"
	// The profile's route: created by the agent on the node's eth0.
	routeDst = "10.248.0.0/24"
	// A per-namespace sysctl the profile sets; the node's namespace
	// starts with the kernel default, and this machine's stays as it is.
	sysctlName  = "net.ipv4.tcp_notsent_lowat"
	sysctlValue = "131072"
	capNetAdmin = 12
)

func TestChartOnRealNode(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	required := os.Getenv("NETTUNE_REQUIRE_TOOLS") != ""
	if os.Geteuid() != 0 {
		if required {
			t.Fatal("the node needs root")
		}
		t.Skip("the node needs root")
	}
	if m := testnode.MissingTools(root); len(m) > 0 {
		if required {
			t.Fatalf("missing: %s", strings.Join(m, ", "))
		}
		t.Skipf("missing: %s", strings.Join(m, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	// The node.
	dir := filepath.Join(root, ".nettune", "node-test")
	start := time.Now()
	n, err := testnode.Start(ctx, testnode.Options{Root: root, Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the node: %v", err)
	}
	// The node's logs are kept when the test fails (or when asked), outside
	// the directory its cleanup removes.
	keep := filepath.Join(root, ".nettune", "node-test-logs")
	_ = os.RemoveAll(keep)
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("NETTUNE_NODE_KEEP_LOGS") != "" {
			for _, p := range []string{"kubelet", "containerd", "kube-controller-manager"} {
				t.Logf("--- last lines of %s's log:\n%s", p, n.LogTail(p, 25))
			}
			if err := os.CopyFS(keep, os.DirFS(n.Path("logs"))); err != nil {
				t.Logf("keeping the node's logs: %v", err)
			} else {
				t.Logf("the node's logs are kept in %s", keep)
			}
		}
		defer func() {
			// The failure again, last: a log tail of the node would
			// otherwise bury it.
			if failure != "" {
				t.Logf("failed: %s", failure)
			}
		}()
		stop := time.Now()
		if err := n.Stop(); err != nil {
			t.Errorf("stopping the node: %v", err)
		}
		t.Logf("node stopped and cleaned up in %s", time.Since(stop).Round(time.Millisecond))
		if _, err := os.Stat(testnode.NetNSPath); err == nil {
			t.Errorf("%s is left after cleanup", testnode.NetNSPath)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s is left after cleanup", dir)
		}
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/pids", testnode.CgroupRoot)); err == nil {
			t.Errorf("cgroup %s is left after cleanup", testnode.CgroupRoot)
		}
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), dir) {
			t.Errorf("mounts under %s are left after cleanup", dir)
		}
	})
	t.Logf("node Ready %s after start", time.Since(start).Round(time.Millisecond))
	build, imp, err := n.BuildImages(ctx)
	if err != nil {
		t.Fatalf("images: %v", err)
	}
	t.Logf("images built in %s, imported in %s", build.Round(time.Millisecond), imp.Round(time.Millisecond))

	cs := n.Clientset
	sch, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	// The API server's warnings (the chart's profile-warnings policy) go
	// to the test log.
	cfg := rest.CopyConfig(n.Config)
	cfg.WarningHandler = warnLog{t}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}

	// The chart, with the node labeled the way NOTES.txt says.
	node, err := cs.CoreV1().Nodes().Get(ctx, testnode.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels["nettune.io/vehicle"] = "node-1"
	node.Labels["nettune.io/host"] = "node-a"
	node.Labels["nettune.io/hardware"] = "nettune-node"
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "agent-state")
	helmArgs := []string{"install", release, filepath.Join(root, "charts", "nettune"),
		"--kubeconfig", n.Kubeconfig, "--namespace", namespace, "--create-namespace",
		"--set", "image.tag=" + testnode.ImageTag, "--set", "agent.stateDir=" + stateDir}
	if extra := os.Getenv("NETTUNE_NODE_HELM_SET"); extra != "" {
		helmArgs = append(helmArgs, "--set", extra)
	}
	installed := time.Now()
	if out, err := exec.CommandContext(ctx, filepath.Join(root, "bin", "helm"), helmArgs...).CombinedOutput(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(helmArgs, " "), err, out)
	}

	// 1. The DaemonSet and the Deployment Running and Ready.
	waitFor(t, ctx, "the agent DaemonSet and the controller Deployment Ready", 5*time.Minute, func() error {
		return workloadsReady(ctx, cs)
	}, func() string { return podReport(ctx, cs) })
	t.Logf("DaemonSet and Deployment Ready %s after helm install", time.Since(installed).Round(time.Millisecond))

	pod := agentPod(t, ctx, cs)
	pid := containerPID(t, n, pod)

	// 2. The agent's pod as the kubelet and runc made it.
	t.Run("SecurityContext", func(t *testing.T) {
		if !pod.Spec.HostNetwork {
			t.Error("the agent pod is not on the host network")
		}
		status := procStatus(t, pid)
		for _, f := range []string{"CapEff", "CapPrm", "CapBnd"} {
			v, err := strconv.ParseUint(status[f], 16, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", f, status[f], err)
			}
			if v != 1<<capNetAdmin {
				t.Errorf("%s of the agent process = %#x, want CAP_NET_ADMIN only (%#x)", f, v, uint64(1)<<capNetAdmin)
			}
		}
		if uid := strings.Fields(status["Uid"]); len(uid) == 0 || uid[1] != "0" {
			t.Errorf("agent's uid %q, want 0 (the chart's runAsUser)", status["Uid"])
		}
		if status["NoNewPrivs"] != "1" {
			t.Errorf("NoNewPrivs = %q, want 1 (allowPrivilegeEscalation: false)", status["NoNewPrivs"])
		}
		if status["Seccomp"] != "2" {
			t.Errorf("Seccomp = %q, want 2 (filter: RuntimeDefault)", status["Seccomp"])
		}
		// Its network namespace is the node's own.
		if a, b := inode(t, filepath.Join("/proc", strconv.Itoa(pid), "ns", "net")), inode(t, testnode.NetNSPath); a != b {
			t.Errorf("the agent's network namespace (inode %d) is not the node's (%d)", a, b)
		}
		mounts := procMounts(t, pid)
		if o, ok := mounts["/"]; !ok || !hasOpt(o, "ro") {
			t.Errorf("the agent's root filesystem is mounted %q, want read-only", o)
		}
		if o, ok := mounts["/var/lib/nettune"]; !ok || !hasOpt(o, "rw") {
			t.Errorf("the agent's state (hostPath) is mounted %q, want read-write", o)
		}
		if o, ok := mounts["/host/proc/sys/net"]; !ok || !hasOpt(o, "rw") {
			t.Errorf("/host/proc/sys/net is mounted %q, want read-write", o)
		}
	})

	// 3. A profile applied to the node's own network namespace, Verified.
	profile := &v1alpha1.NetTuningProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "node-test"},
		Spec: v1alpha1.NetTuningProfileSpec{
			NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{"nettune.io/hardware": "nettune-node"}},
			Routes: []v1alpha1.ProfileRoute{{
				Name: "lan", Destination: routeDst, Device: ptr.To(testnode.NodeVeth),
				Parameters: v1alpha1.TCPParameters{
					Initcwnd: ptr.To[int32](20),
					RTOMin:   &metav1.Duration{Duration: 10 * time.Millisecond},
					Quickack: ptr.To(true),
				},
			}},
			Sysctls: []v1alpha1.Sysctl{{Name: sysctlName, Value: sysctlValue}},
		},
	}
	hostSysctl := readSysctl(t, "")
	if err := c.Create(ctx, profile); err != nil {
		t.Fatalf("creating the profile: %v", err)
	}
	applied := time.Now()
	waitFor(t, ctx, "NodeNetTuning "+testnode.NodeName+" Verified", 3*time.Minute, func() error {
		return verified(ctx, c)
	}, func() string { return nntReport(ctx, c) })
	t.Logf("profile Verified on the node %s after it was created", time.Since(applied).Round(time.Millisecond))
	t.Run("AppliedToTheNode", func(t *testing.T) {
		checkTuned(t, "the agent's apply")
		if got := readSysctl(t, ""); got != hostSysctl {
			t.Errorf("this machine's %s changed from %q to %q: the agent must tune the node's namespace only", sysctlName, hostSysctl, got)
		}
		entries, err := os.ReadDir(stateDir)
		if err != nil || len(entries) == 0 {
			t.Errorf("the agent's hostPath state %s is empty (%v)", stateDir, err)
		}
		for _, e := range entries {
			t.Logf("state on the host: %s", e.Name())
		}
	})

	// 4. The token the kubelet minted for the agent carries the node, and
	// the chart's node-isolation policy holds the agent to it.
	t.Run("NodeBoundToken", func(t *testing.T) {
		token := agentToken(t, n, pod)
		cfg := rest.AnonymousClientConfig(n.Config)
		cfg.BearerToken = token
		cfg.WarningHandler = warnLog{t}
		acs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		review, err := acs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectReview with the agent's token: %v", err)
		}
		ui := review.Status.UserInfo
		if want := "system:serviceaccount:" + namespace + ":" + agentSA; ui.Username != want {
			t.Errorf("the token's user is %q, want %q", ui.Username, want)
		}
		if got := ui.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != testnode.NodeName {
			t.Errorf("the token's node-name extra is %q, want [%s]", got, testnode.NodeName)
		}
		// Another node's status: refused by the policy.
		other := &v1alpha1.NodeNetTuning{ObjectMeta: metav1.ObjectMeta{Name: "other-node"}, Spec: v1alpha1.NodeNetTuningSpec{Revision: "r1"}}
		if err := c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		ac, err := client.New(cfg, client.Options{Scheme: sch})
		if err != nil {
			t.Fatal(err)
		}
		other.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionVerified, Status: metav1.ConditionTrue, Reason: "Forged", LastTransitionTime: metav1.Now()}}
		err = ac.Status().Update(ctx, other)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may only update the status of NodeNetTuning "+testnode.NodeName) {
			t.Errorf("the agent's token updating another node's status: got %v, want the node-isolation policy's refusal", err)
		}
		// Its own: allowed (the agent's own status write is what made it Verified).
		own := &v1alpha1.NodeNetTuning{}
		if err := ac.Get(ctx, client.ObjectKey{Name: testnode.NodeName}, own); err != nil {
			t.Fatalf("reading its own NodeNetTuning with the agent's token: %v", err)
		}
		if err := ac.Status().Update(ctx, own); err != nil {
			t.Errorf("the agent's token updating its own status: %v", err)
		}
	})

	// 5. Probes: Ready (readiness), and no restart nor Unhealthy event over
	// more than the liveness probe's initial delay and two periods.
	t.Run("Probes", func(t *testing.T) {
		probe := pod.Spec.Containers[0].LivenessProbe
		if probe == nil || pod.Spec.Containers[0].ReadinessProbe == nil {
			t.Fatal("the agent has no liveness or readiness probe")
		}
		span := time.Duration(probe.InitialDelaySeconds+2*probe.PeriodSeconds) * time.Second
		waitFor(t, ctx, "the agent container running long enough for its liveness probe", span+time.Minute, func() error {
			p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			st := p.Status.ContainerStatuses[0]
			if st.RestartCount != 0 {
				return nil // checked below
			}
			if st.State.Running == nil || time.Since(st.State.Running.StartedAt.Time) < span {
				return fmt.Errorf("running since %v, want %s", st.State.Running, span)
			}
			return nil
		}, nil)
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st := p.Status.ContainerStatuses[0]; st.RestartCount != 0 || !st.Ready {
			t.Errorf("agent container: %d restarts, ready %v", st.RestartCount, st.Ready)
		}
		events, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Readiness may fail while a container starts (before it listens);
		// after the agent became Ready it may not, and a failed liveness
		// probe or a back-off never may.
		var ready time.Time
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready = cond.LastTransitionTime.Time
			}
		}
		for _, e := range events.Items {
			last := e.LastTimestamp.Time
			if last.IsZero() {
				last = e.EventTime.Time
			}
			if e.Reason == "BackOff" || strings.Contains(e.Message, "Liveness probe failed") ||
				(e.Reason == "Unhealthy" && e.InvolvedObject.Name == pod.Name && last.After(ready)) {
				t.Errorf("event %s on %s/%s at %s (agent Ready since %s): %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, last, ready, e.Message)
			}
		}
	})

	// 6. The boot path: the node goes down (kubelet and runtime stopped,
	// every container killed), its routes and sysctls are reset, and it
	// comes back with the API server unreachable: the boot service (the
	// agent binary of the image, `boot`, as the Ansible role's unit runs
	// it before k3s) restores the last-known-good tuning; then the API
	// server returns and the agent pod starts again.
	t.Run("BootFromLastKnownGood", func(t *testing.T) {
		if t.Failed() {
			return
		}
		n.StopKubelet()
		if err := n.StopRuntime(); err != nil {
			t.Fatalf("stopping the runtime: %v", err)
		}
		if _, err := testnode.InNode("ip", "route", "del", routeDst); err != nil {
			t.Fatal(err)
		}
		if _, err := testnode.InNode("sysctl", "-qw", sysctlName+"=4294967295"); err != nil {
			t.Fatal(err)
		}
		reject := []string{"-w", "-I", "OUTPUT", "-d", testnode.HostIP, "-p", "tcp", "--dport", strconv.Itoa(testnode.APIPort), "-j", "REJECT"}
		if _, err := testnode.InNode("iptables", reject...); err != nil {
			t.Fatal(err)
		}
		if _, err := testnode.InNode("bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/443", testnode.ServiceIP)); err == nil {
			t.Fatal("the API server is still reachable from the node")
		}
		if out, _ := testnode.InNode("ip", "route", "show", routeDst); strings.TrimSpace(out) != "" {
			t.Fatalf("the route was not reset: %s", out)
		}
		bootStart := time.Now()
		out, err := testnode.InNode(n.ImageBinary("nettune-agent"), "boot", "--state-dir", stateDir)
		if err != nil {
			t.Fatalf("boot: %v", err)
		}
		t.Logf("boot with the API server unreachable took %s: %s", time.Since(bootStart).Round(time.Millisecond), strings.TrimSpace(out))
		checkTuned(t, "boot")

		reject[1] = "-D"
		if _, err := testnode.InNode("iptables", reject...); err != nil {
			t.Fatal(err)
		}
		restart := time.Now()
		if err := n.StartContainerd(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.StartKubelet(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "the agent Ready again after the restart", 5*time.Minute, func() error {
			if err := workloadsReady(ctx, cs); err != nil {
				return err
			}
			p := agentPodOrNil(ctx, cs)
			if p == nil || p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].State.Running.StartedAt.After(bootStart) {
				return errors.New("the agent container has not started since the restart")
			}
			// The agent's Lease, renewed with its new token since the restart.
			lease, err := cs.CoordinationV1().Leases(namespace).Get(ctx, testnode.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(restart) {
				return fmt.Errorf("Lease %s last renewed %v, before the restart", lease.Name, lease.Spec.RenewTime)
			}
			return verified(ctx, c)
		}, func() string { return podReport(ctx, cs) })
		t.Logf("node, DaemonSet and agent Ready and Verified %s after containerd and the kubelet started again", time.Since(restart).Round(time.Millisecond))
		checkTuned(t, "the agent after the restart")
	})
}

// checkTuned checks the profile's route and sysctl in the node's namespace.
func checkTuned(t *testing.T, by string) {
	t.Helper()
	out, err := testnode.InNode("ip", "route", "show", routeDst)
	if err != nil {
		t.Fatal(err)
	}
	// rto_min is locked (the kernel takes it only locked; ip prints "rto_min lock 10ms").
	for _, want := range []string{`dev ` + testnode.NodeVeth + ` `, ` rto_min (lock )?10ms\b`, ` initcwnd 20\b`, ` quickack 1\b`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("after %s, the node's route %s is %q, want %q in it", by, routeDst, strings.TrimSpace(out), want)
		}
	}
	if got := readSysctl(t, testnode.NetNSPath); got != sysctlValue {
		t.Errorf("after %s, the node's %s = %q, want %s", by, sysctlName, got, sysctlValue)
	}
}

func readSysctl(t *testing.T, netns string) string {
	t.Helper()
	var out string
	var err error
	if netns == "" {
		var b []byte
		b, err = exec.Command("sysctl", "-n", sysctlName).CombinedOutput()
		out = string(b)
	} else {
		out, err = testnode.InNode("sysctl", "-n", sysctlName)
	}
	if err != nil {
		t.Fatalf("sysctl %s: %v: %s", sysctlName, err, out)
	}
	return strings.TrimSpace(out)
}

// failure is what the last failed wait found; the cleanup repeats it
// after the node's logs.
var failure string

// stuck is an error waiting cannot cure: a container that cannot start.
type stuck struct{ error }

func waitFor(t *testing.T, ctx context.Context, what string, timeout time.Duration, f func() error, report func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		var s stuck
		if errors.As(err, &s) || time.Now().After(deadline) || ctx.Err() != nil {
			msg := fmt.Sprintf("waiting %s for %s: %v", timeout, what, err)
			if report != nil {
				msg += "\n" + report()
			}
			failure = msg
			t.Fatal(msg)
		}
		time.Sleep(time.Second)
	}
}

// Waiting reasons of a container that will not start without a change:
// the kubelet only backs off and retries.
var stuckReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true, "InvalidImageName": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

func workloadsReady(ctx context.Context, cs kubernetes.Interface) error {
	if err := testnode.NodeReady(ctx, cs); err != nil {
		return err
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && stuckReasons[w.Reason] {
				return stuck{fmt.Errorf("pod %s cannot start: container %s: %s: %s", p.Name, st.Name, w.Reason, w.Message)}
			}
		}
	}
	ds, err := cs.AppsV1().DaemonSets(namespace).Get(ctx, agentDS, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s := ds.Status; s.DesiredNumberScheduled != 1 || s.NumberReady != 1 || s.UpdatedNumberScheduled != 1 || s.ObservedGeneration != ds.Generation {
		return fmt.Errorf("DaemonSet %s: desired %d, ready %d, updated %d", agentDS, s.DesiredNumberScheduled, s.NumberReady, s.UpdatedNumberScheduled)
	}
	dep, err := cs.AppsV1().Deployments(namespace).Get(ctx, ctrlDep, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !available(dep) || dep.Status.ReadyReplicas != *dep.Spec.Replicas {
		return fmt.Errorf("Deployment %s: %d of %d ready", ctrlDep, dep.Status.ReadyReplicas, *dep.Spec.Replicas)
	}
	return nil
}

func available(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podReport says why pods are not ready: phase, container states, events.
func podReport(ctx context.Context, cs kubernetes.Interface) string {
	var b strings.Builder
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s", p.Name, p.Status.Phase)
		for _, s := range p.Status.ContainerStatuses {
			switch {
			case s.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting: %s: %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			case s.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s terminated: %s (exit %d)", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode)
			default:
				fmt.Fprintf(&b, "; %s running, ready %v, %d restarts", s.Name, s.Ready, s.RestartCount)
			}
		}
		b.WriteString("\n")
	}
	events, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				fmt.Fprintf(&b, "event %s %s/%s: %s (x%d)\n", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message, e.Count)
			}
		}
	}
	return b.String()
}

func agentPodOrNil(ctx context.Context, cs kubernetes.Interface) *corev1.Pod {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
	if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
		return nil
	}
	return &pods.Items[0]
}

func agentPod(t *testing.T, ctx context.Context, cs kubernetes.Interface) *corev1.Pod {
	t.Helper()
	p := agentPodOrNil(ctx, cs)
	if p == nil {
		t.Fatalf("not one agent pod with one container:\n%s", podReport(ctx, cs))
	}
	if p.Spec.NodeName != testnode.NodeName {
		t.Fatalf("the agent pod runs on %q", p.Spec.NodeName)
	}
	return p
}

// containerPID is the host PID of the agent container's process, from
// containerd.
func containerPID(t *testing.T, n *testnode.Node, pod *corev1.Pod) int {
	t.Helper()
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := n.Ctr("tasks", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("container %s of the agent pod is not a running task:\n%s", id, out)
	return 0
}

func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// procMounts maps the mount points a process sees to their options.
func procMounts(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 6 {
			m[f[4]] = f[5]
		}
	}
	return m
}

func hasOpt(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// agentToken reads the service-account token the kubelet wrote into the
// agent pod's projected volume on the node.
func agentToken(t *testing.T, n *testnode.Node, pod *corev1.Pod) string {
	t.Helper()
	matches, err := filepath.Glob(n.Path("kubelet", "root", "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "*", "token"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("the agent's token in the kubelet's pod directory: %v %v", matches, err)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func verified(ctx context.Context, c client.Client) error {
	nnt := &v1alpha1.NodeNetTuning{}
	if err := c.Get(ctx, client.ObjectKey{Name: testnode.NodeName}, nnt); err != nil {
		return err
	}
	for _, cond := range nnt.Status.Conditions {
		if cond.Type == v1alpha1.ConditionVerified {
			if cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == nnt.Generation {
				return nil
			}
			return fmt.Errorf("Verified=%s: %s: %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	return errors.New("no Verified condition yet")
}

func nntReport(ctx context.Context, c client.Client) string {
	nnt := &v1alpha1.NodeNetTuning{}
	if err := c.Get(ctx, client.ObjectKey{Name: testnode.NodeName}, nnt); err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "NodeNetTuning %s: spec revision %q, %d routes\n", nnt.Name, nnt.Spec.Revision, len(nnt.Spec.Routes))
	for _, cond := range nnt.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return b.String()
}

type warnLog struct{ t *testing.T }

func (w warnLog) HandleWarningHeader(code int, agent, text string) {
	w.t.Logf("API server warning: %s", text)
}
