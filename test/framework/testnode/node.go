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

// Package testnode starts a real Kubernetes node on this machine: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler built from
// source into bin/ (make tools), and a kubelet with Debian's containerd,
// runc and CNI plugins. The kubelet and containerd run inside their own
// network namespace (the node's "host" network) joined to this machine by a
// veth pair: the kubelet refuses a loopback node IP. Only one node runs at a
// time: the names (network namespace, cgroup, veth) and addresses are fixed,
// and Start cleans up whatever a killed run left behind.
//
// It backs `make node` (hack/node) and the suite in test/node.
package testnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Fixed names and addresses of the node.
const (
	NodeName   = "nettune-node"
	NetNSName  = "nettune-node"
	NetNSPath  = "/run/netns/" + NetNSName
	HostVeth   = "ntnode0"
	NodeVeth   = "eth0"
	HostIP     = "10.247.0.1" // the API server, on this machine's side
	NodeIP     = "10.247.0.2" // the node's InternalIP, inside its namespace
	PodCIDR    = "10.249.0.0/24"
	ServiceIP  = "10.96.0.1" // the kubernetes Service
	APIPort    = 6443
	CgroupRoot = "/nettune-node"
	// PauseImage is the sandbox image containerd is configured with.
	PauseImage = "registry.k8s.io/pause:3.10"
)

// Options configure Start.
type Options struct {
	// Root is the repository root: binaries come from Root/bin.
	Root string
	// Dir holds all of the node's state; it is removed first and by Stop.
	Dir string
	// Logf reports progress (nil: silent).
	Logf func(format string, args ...any)
}

// Node is a running node with its control plane.
type Node struct {
	Options
	// Kubeconfig is an admin (system:masters) kubeconfig.
	Kubeconfig string
	Config     *rest.Config
	Clientset  kubernetes.Interface
	// Timings of the start, by phase.
	Timings []Timing

	pki   *nodePKI
	procs map[string]*proc
	order []string // start order; stopped in reverse
}

// Timing is how long one phase of Start took.
type Timing struct {
	Phase string
	Took  time.Duration
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func (n *Node) logf(format string, args ...any) {
	if n.Logf != nil {
		n.Logf(format, args...)
	}
}

func (n *Node) bin(name string) string { return filepath.Join(n.Root, "bin", name) }

// Path is a path inside the node's state directory.
func (n *Node) Path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// ContainerdSocket is the address of the node's containerd.
func (n *Node) ContainerdSocket() string { return n.Path("containerd", "containerd.sock") }

// MissingTools lists what the node needs and this machine lacks: binaries
// of bin/ (make tools) and Debian's (hack/deps.sh).
func MissingTools(root string) []string {
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "helm"} {
		if _, err := os.Stat(filepath.Join(root, "bin", b)); err != nil {
			missing = append(missing, "bin/"+b+" (make tools)")
		}
	}
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c+" (hack/deps.sh)")
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p)+" (containernetworking-plugins, hack/deps.sh)")
		}
	}
	return missing
}

// cniBinDir is where Debian's containernetworking-plugins installs.
const cniBinDir = "/usr/lib/cni"

// Start cleans up leftovers of an earlier node, then starts the network
// namespace, the control plane, containerd and the kubelet, and waits for
// the node to be Ready. On error, everything started is stopped again.
func Start(ctx context.Context, opts Options) (n *Node, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the node needs root (network namespaces, mounts, cgroups)")
	}
	if m := MissingTools(opts.Root); len(m) > 0 {
		return nil, fmt.Errorf("missing: %s", strings.Join(m, ", "))
	}
	n = &Node{Options: opts, procs: map[string]*proc{}}
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = fmt.Errorf("%w (and stopping: %v)", err, serr)
			}
		}
	}()
	phase := func(name string, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		n.Timings = append(n.Timings, Timing{name, time.Since(start)})
		n.logf("node: %s took %s", name, time.Since(start).Round(time.Millisecond))
		return nil
	}
	if err := phase("cleanup", func() error { return Cleanup(opts.Dir) }); err != nil {
		return nil, err
	}
	for _, d := range []string{"logs", "pki", "etcd", "containerd", "cni/net.d", "cni/ipam", "kubelet/root"} {
		if err := os.MkdirAll(n.Path(d), 0o700); err != nil {
			return n, err
		}
	}
	if err := phase("network namespace", n.setupNetwork); err != nil {
		return n, err
	}
	if err := phase("certificates", n.setupPKI); err != nil {
		return n, err
	}
	if err := phase("etcd and kube-apiserver", func() error { return n.startAPIServer(ctx) }); err != nil {
		return n, err
	}
	if err := phase("controller manager and scheduler", n.startControllers); err != nil {
		return n, err
	}
	if err := phase("containerd", func() error { return n.StartContainerd(ctx) }); err != nil {
		return n, err
	}
	if err := phase("kubelet, node Ready", func() error { return n.StartKubelet(ctx) }); err != nil {
		return n, err
	}
	// A workload needs the controller manager's controllers (the DaemonSet
	// and Deployment controllers create the pods), which start only after
	// each has its own service account client; on a loaded machine that
	// has been seen to take minutes, which a caller's wait for its pods
	// would otherwise count as its own.
	kcm := time.Now()
	err = phase("controller manager's controllers running", func() error { return n.controllersRunning(ctx) })
	if err != nil || time.Since(kcm) > 30*time.Second {
		for _, p := range n.logPauses("kube-controller-manager", 10*time.Second, 3) {
			n.logf("node: the controller manager's log paused %s", p)
		}
	}
	if err != nil {
		return n, err
	}
	return n, nil
}

// controllersRunning waits until the controller manager has started its
// controllers: the service account controller's "default" ServiceAccount
// and the root CA publisher's ConfigMap in the default namespace.
func (n *Node) controllersRunning(ctx context.Context) error {
	return n.waitFor(ctx, "the controller manager's controllers", 10*time.Minute, []string{"kube-controller-manager"}, func() error {
		if _, err := n.Clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := n.Clientset.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

// run runs a command to completion, returning its combined output in the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InNode runs a command in the node's network namespace (nsenter --net, not
// ip netns exec, which remounts /sys) and returns its output.
func InNode(name string, args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + NetNSPath, "--", name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in the node: %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// setupNetwork makes the node's network namespace with a veth pair to this
// machine, and the one DNAT rule that stands in for kube-proxy: the
// kubernetes Service (10.96.0.1:443) to the API server, for host-network
// pods (OUTPUT) and for pods on the bridge (PREROUTING).
func (n *Node) setupNetwork() error {
	steps := [][]string{
		{"ip", "netns", "add", NetNSName},
		{"ip", "link", "add", HostVeth, "type", "veth", "peer", "name", NodeVeth, "netns", NetNSName},
		{"ip", "addr", "add", HostIP + "/24", "dev", HostVeth},
		{"ip", "link", "set", HostVeth, "up"},
		{"ip", "-n", NetNSName, "addr", "add", NodeIP + "/24", "dev", NodeVeth},
		{"ip", "-n", NetNSName, "link", "set", NodeVeth, "up"},
		{"ip", "-n", NetNSName, "link", "set", "lo", "up"},
		{"ip", "-n", NetNSName, "route", "add", "default", "via", HostIP},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	if _, err := InNode("sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return err
	}
	dnat := []string{"-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", HostIP, APIPort)}
	for _, chain := range []string{"OUTPUT", "PREROUTING"} {
		if _, err := InNode("iptables", append([]string{"-w", "-t", "nat", "-A", chain}, dnat...)...); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) setupPKI() error {
	p, err := newNodePKI(n.Path("pki"))
	if err != nil {
		return err
	}
	n.pki = p
	server := fmt.Sprintf("https://%s:%d", HostIP, APIPort)
	issues := []struct {
		name, cn string
		orgs     []string
		hosts    []string
		ips      []net.IP
	}{
		{"apiserver", "kube-apiserver", nil,
			[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(HostIP), net.ParseIP(ServiceIP)}},
		{"admin", "nettune-admin", []string{"system:masters"}, nil, nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}, nil, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
	}
	for _, c := range issues {
		if err := p.issue(c.name, c.cn, c.orgs, c.hosts, c.ips); err != nil {
			return err
		}
	}
	for _, name := range []string{"admin", "kubelet", "controller-manager", "scheduler"} {
		if err := p.kubeconfig(n.Path(name+".kubeconfig"), server, name); err != nil {
			return err
		}
	}
	n.Kubeconfig = n.Path("admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", n.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the admin kubeconfig: %w", err)
	}
	n.Config = cfg
	n.Clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

// freePort asks the kernel for an unused TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts a long-running process; inNode runs it in the node's network
// namespace. Its output goes to logs/<name>.log.
func (n *Node) start(name string, inNode bool, path string, args ...string) error {
	log, err := os.OpenFile(n.Path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := append([]string{path}, args...)
	if inNode {
		argv = append([]string{"nsenter", "--net=" + NetNSPath, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.procs[name] = p
	n.order = append(n.order, name)
	return nil
}

// stop stops one process: SIGTERM, then SIGKILL after the grace period.
func (n *Node) stop(name string, grace time.Duration) {
	p := n.procs[name]
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	_ = p.log.Close()
	delete(n.procs, name)
	for i, o := range n.order {
		if o == name {
			n.order = append(n.order[:i], n.order[i+1:]...)
			break
		}
	}
}

// exited reports whether a process has exited, with its log's tail.
func (n *Node) exited(name string) error {
	p := n.procs[name]
	if p == nil {
		return fmt.Errorf("%s is not running", name)
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v\n%s", name, p.err, n.LogTail(name, 30))
	default:
		return nil
	}
}

// LogTail is the last lines of a process's log.
func (n *Node) LogTail(name string, lines int) string {
	b, err := os.ReadFile(n.Path("logs", name+".log"))
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitFor polls f every 250 ms until it returns nil, a process of watch
// exits, or the timeout passes.
func (n *Node) waitFor(ctx context.Context, what string, timeout time.Duration, watch []string, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		for _, w := range watch {
			if perr := n.exited(w); perr != nil {
				return fmt.Errorf("waiting for %s: %w", what, perr)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s (%s): %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (n *Node) startAPIServer(ctx context.Context) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", client)
	if err := n.start("etcd", false, n.bin("etcd"),
		"--data-dir="+n.Path("etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", peer),
		"--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return err
	}
	p := n.pki
	if err := n.start("kube-apiserver", false, n.bin("kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+HostIP, "--advertise-address="+HostIP, fmt.Sprintf("--secure-port=%d", APIPort),
		"--cert-dir="+n.Path("pki"),
		"--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--client-ca-file="+p.path("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
	); err != nil {
		return err
	}
	return n.waitFor(ctx, "the API server's /readyz", 3*time.Minute, []string{"etcd", "kube-apiserver"}, func() error {
		body, err := n.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

func (n *Node) startControllers() error {
	p := n.pki
	if err := n.start("kube-controller-manager", false, n.bin("kube-controller-manager"),
		"--kubeconfig="+n.Path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig="+n.Path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+n.Path("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--leader-elect=false",
		"--root-ca-file="+p.path("ca.crt"),
		"--service-account-private-key-file="+p.path("sa.key"),
		"--use-service-account-credentials=true",
		"--cluster-name=nettune-node",
	); err != nil {
		return err
	}
	return n.start("kube-scheduler", false, n.bin("kube-scheduler"),
		"--kubeconfig="+n.Path("scheduler.kubeconfig"),
		"--authentication-kubeconfig="+n.Path("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+n.Path("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--leader-elect=false",
	)
}

// containerdConfig: Debian's containerd 1.6 with its CRI plugin. The VM
// lacks CAP_SYS_RESOURCE, so OOM score adjustments are restricted; pod
// network namespaces are mounted under the state directory so that
// cleanup finds them.
const containerdConfig = `version = 2
root = "{{DIR}}/containerd/root"
state = "{{DIR}}/containerd/state"

[grpc]
  address = "{{DIR}}/containerd/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + PauseImage + `"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{DIR}}/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + cniBinDir + `"
    conf_dir = "{{DIR}}/cni/net.d"
`

// cniConfig: a bridge for the pods that are not on the host network, with
// masquerading so that they reach the API server on this machine.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "nettune-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{DIR}}/cni/ipam",
        "ranges": [[{"subnet": "` + PodCIDR + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// StartContainerd starts containerd in the node's network namespace and
// waits for its socket.
func (n *Node) StartContainerd(ctx context.Context) error {
	for path, tmpl := range map[string]string{
		n.Path("containerd", "config.toml"):           containerdConfig,
		n.Path("cni", "net.d", "10-nettune.conflist"): cniConfig,
	} {
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(tmpl, "{{DIR}}", n.Dir)), 0o644); err != nil {
			return err
		}
	}
	if err := n.start("containerd", true, "containerd", "--config", n.Path("containerd", "config.toml")); err != nil {
		return err
	}
	return n.waitFor(ctx, "containerd", time.Minute, []string{"containerd"}, func() error {
		_, err := n.Ctr("version")
		return err
	})
}

// Ctr runs ctr against the node's containerd, in the k8s.io namespace.
func (n *Node) Ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", n.ContainerdSocket(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// kubeletConfig: cgroups v1 without systemd (failCgroupV1: false, the
// cgroupfs driver, every pod under CgroupRoot); image garbage collection
// and disk eviction effectively off, so a busy or full test machine does not
// evict the node's pods or its locally built images.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ` + CgroupRoot + `
containerRuntimeEndpoint: unix://{{DIR}}/containerd/containerd.sock
address: ` + NodeIP + `
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {{DIR}}/pki/ca.crt
authorization:
  mode: AlwaysAllow
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
`

// StartKubelet makes the kubelet's cgroup root, starts the kubelet in the
// node's network namespace and waits for the Node to be Ready.
func (n *Node) StartKubelet(ctx context.Context) error {
	if err := makeCgroupRoot(); err != nil {
		return err
	}
	if err := os.WriteFile(n.Path("kubelet", "config.yaml"), []byte(strings.ReplaceAll(kubeletConfig, "{{DIR}}", n.Dir)), 0o644); err != nil {
		return err
	}
	if err := n.start("kubelet", true, n.bin("kubelet"),
		"--config="+n.Path("kubelet", "config.yaml"),
		"--kubeconfig="+n.Path("kubelet.kubeconfig"),
		"--root-dir="+n.Path("kubelet", "root"),
		"--cert-dir="+n.Path("kubelet", "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=1",
	); err != nil {
		return err
	}
	return n.waitFor(ctx, "node "+NodeName+" Ready", 3*time.Minute, []string{"kubelet", "containerd"}, func() error {
		return NodeReady(ctx, n.Clientset)
	})
}

// StopKubelet stops the kubelet.
func (n *Node) StopKubelet() { n.stop("kubelet", 30*time.Second) }

// StopRuntime stops containerd and kills every container of the node, as a
// reboot would: the pods' processes (by the kubelet's cgroups), the shims,
// then containerd; and unmounts the containers' root filesystems.
func (n *Node) StopRuntime() error {
	n.stop("containerd", 30*time.Second)
	var errs []error
	if err := killCgroup(CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	// The shims: started with -address <containerd's socket>.
	if err := killShims(n.ContainerdSocket()); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(n.Path("containerd")); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(n.Path("kubelet")); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Stop stops every process (in reverse order of start) and cleans up.
func (n *Node) Stop() error {
	if n == nil {
		return nil
	}
	for i := len(n.order) - 1; i >= 0; i-- {
		name := n.order[i]
		n.stop(name, 20*time.Second)
		if name == "containerd" {
			// The kubelet is stopped; kill the containers before the
			// control plane goes.
			_ = killCgroup(CgroupRoot)
		}
	}
	return Cleanup(n.Dir)
}

// LogWriter returns the log file of a process for appending, e.g. helm's.
func (n *Node) LogWriter(name string) (io.WriteCloser, error) {
	return os.OpenFile(n.Path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// logPauses returns the longest pauses (over least) between consecutive
// lines of a process's klog log, each with the line before and after it:
// what a slow start waited on.
func (n *Node) logPauses(name string, least time.Duration, most int) []string {
	b, err := os.ReadFile(n.Path("logs", name+".log"))
	if err != nil {
		return []string{err.Error()}
	}
	type pause struct {
		d            time.Duration
		before, next string
	}
	var pauses []pause
	var prev time.Time
	var prevLine string
	for _, line := range strings.Split(string(b), "\n") {
		// klog: "I1128 09:48:36.276931 ..."
		if len(line) < 21 || !strings.ContainsRune("IWEF", rune(line[0])) {
			continue
		}
		at, err := time.Parse("15:04:05.000000", line[6:21])
		if err != nil {
			continue
		}
		if !prev.IsZero() && at.Sub(prev) > least {
			pauses = append(pauses, pause{at.Sub(prev), prevLine, line})
		}
		prev, prevLine = at, line
	}
	sort.Slice(pauses, func(i, j int) bool { return pauses[i].d > pauses[j].d })
	var out []string
	for i, p := range pauses {
		if i == most {
			break
		}
		out = append(out, fmt.Sprintf("%s between\n  %s\n  %s", p.d.Round(time.Millisecond), p.before, p.next))
	}
	return out
}
