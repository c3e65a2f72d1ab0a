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

// Package fleet starts the whole product on one machine: a local
// kube-apiserver and etcd, Loki, Prometheus scraping the agents and the
// controller, the controller, and simulated vehicles — vehiclesim network
// namespaces whose hosts are registered as Nodes and each run a real
// nettune-agent (real netlink in the host's namespace, real probe traffic).
// The demo and the end-to-end tests run on it.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/pki"
	"github.com/nettune/nettune/internal/stack"
	"github.com/nettune/nettune/internal/vehiclesim"
)

// Namespace holds the controller's revisions.
const Namespace = "nettune-system"

// VehicleSpec is one simulated vehicle.
type VehicleSpec struct {
	Name     string
	Hardware string
	Hosts    []string
}

// Options configure a fleet.
type Options struct {
	// Dir holds the kubeconfig, the agents' state and every log.
	Dir string
	// Vehicles default to av-001..av-004, Xavier, hosts xavier-a..xavier-c.
	Vehicles []VehicleSpec
	// Topics are the agents' --probe-topic values (default planning:4096:50).
	Topics []string
	// Heartbeat is how often the agents renew their Leases, their sign of
	// life (default 5s); their status is written when it changes.
	Heartbeat time.Duration
	// Progress receives one line per stage.
	Progress io.Writer
	// ControlPlane, when set, is the cluster the fleet joins instead of
	// starting its own (a hub's spoke cluster, test/hub): its Client,
	// Config and Kubeconfig are used, and Close leaves it running.
	ControlPlane *localcp.ControlPlane
	// Loki, when set, is a Loki shared with other fleets (the fleet's
	// central Loki at a hub); Close leaves it running.
	Loki *stack.Loki
	// NoPrometheus starts no Prometheus (analyses then read Loki only).
	NoPrometheus bool
	// Ledger, when set, records what the fleet makes outside this process
	// as it makes it — its child processes, network namespaces and iptables
	// rules — so that ClearLedger can remove what a killed run left.
	Ledger *Ledger

	// Secure runs the observability stack as a user's is: Loki with
	// auth_enabled (multi-tenant) behind a TLS gateway with basic auth
	// (nginx, a CA made for the fleet) that allows each user its tenant
	// only, and Prometheus' API with TLS and basic auth (--web.config.file;
	// it still scrapes the agents and the controller over plain HTTP). The
	// agents push through the gateway with their own user (a shared
	// --loki-credentials-dir); the controller queries with the Secrets
	// LokiSecret and PrometheusSecret in Namespace (--loki-secret,
	// --prometheus-secret) and pushes its events with its user
	// (--loki-push-credentials-dir). f.Loki stays Loki's own address, with
	// the tenant, for tests' direct reads; Secrets lists every credential
	// value made, for tests to grep for.
	Secure bool
	// Tenant is a secure fleet's Loki tenant (default DefaultTenant).
	Tenant string
	// Gateway, with Secure and a shared Loki, is the gateway in front of
	// it, on which LokiUsers are users allowed Tenant; Close leaves it
	// running. A secure fleet with its own Loki starts its own gateway.
	Gateway *stack.Gateway
	// LokiUsers are the fleet's users on Gateway; nil with its own
	// gateway: made with random passwords.
	LokiUsers *LokiUsers
}

// DefaultVehicles is four Xavier vehicles of three hosts.
func DefaultVehicles(n int) []VehicleSpec {
	var out []VehicleSpec
	for i := 1; i <= n; i++ {
		out = append(out, VehicleSpec{Name: fmt.Sprintf("av-%03d", i), Hardware: "xavier", Hosts: []string{"xavier-a", "xavier-b", "xavier-c"}})
	}
	return out
}

// Fleet is a running stack.
type Fleet struct {
	Dir        string
	CP         *localcp.ControlPlane
	Loki       *stack.Loki
	Prometheus *stack.Prometheus
	// Gateway is the TLS and basic-auth gateway in front of Loki of a
	// secure fleet (Options.Secure); nil otherwise.
	Gateway *stack.Gateway
	// Vehicles by name.
	Vehicles map[string]*vehiclesim.Vehicle
	// ControllerMetrics is the controller's metrics address.
	ControllerMetrics string

	opts Options
	root string

	mu         sync.Mutex
	agents     map[string]*proc    // by node name
	agentPorts map[string]int      // metrics port by node name
	agentArgs  map[string][]string // extra arguments by node name
	controller *proc
	// rules are the iptables rules CutAPIServer inserted and not yet
	// removed (Close removes them), by their text.
	rules map[string][]string
	// sharedCP, sharedLoki and sharedGateway were handed in (Options):
	// Close leaves them.
	sharedCP, sharedLoki, sharedGateway bool
	// secure is what a secure fleet made (nil without Options.Secure);
	// ca signed its own gateway's and Prometheus' certificates.
	secure *secureState
	ca     *pki.CA
}

// NodeName is the Node of a vehicle's host.
func NodeName(vehicle, host string) string { return vehicle + "-" + host }

func (f *Fleet) progress(format string, args ...any) {
	if f.opts.Progress != nil {
		fmt.Fprintf(f.opts.Progress, format+"\n", args...)
	}
}

// Start brings the stack up; on error everything started is stopped.
func Start(ctx context.Context, o Options) (_ *Fleet, err error) {
	if len(o.Vehicles) == 0 {
		o.Vehicles = DefaultVehicles(4)
	}
	if len(o.Topics) == 0 {
		o.Topics = []string{"planning:4096:50"}
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 5 * time.Second
	}
	if err := checkSecureOptions(o); err != nil {
		return nil, err
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		return nil, err
	}
	for _, bin := range []string{"nettune-agent", "nettune-controller", "kubectl", "loki"} {
		if _, err := os.Stat(filepath.Join(root, "bin", bin)); err != nil {
			return nil, fmt.Errorf("bin/%s is missing: run `make tools build`", bin)
		}
	}
	for _, d := range []string{"logs", "gates"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	f := &Fleet{Dir: o.Dir, opts: o, root: root, Vehicles: map[string]*vehiclesim.Vehicle{},
		agents: map[string]*proc{}, agentPorts: map[string]int{}, agentArgs: map[string][]string{}, rules: map[string][]string{}}
	defer func() {
		if err != nil {
			_ = f.Close()
		}
	}()

	began := time.Now()
	if o.ControlPlane != nil {
		f.CP, f.sharedCP = o.ControlPlane, true
	} else {
		// etcd and kube-apiserver die with this process, as the other
		// services do (startProc, internal/stack).
		f.CP, err = localcp.StartWith(localcp.Options{StateDir: filepath.Join(o.Dir, "controlplane"), DieWithProcess: true})
		if err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
		if err := o.Ledger.Children(); err != nil {
			return nil, err
		}
		f.progress("    kube-apiserver and etcd up in %s (kubeconfig %s)", time.Since(began).Round(time.Millisecond), f.CP.Kubeconfig)
	}
	if err := f.CP.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s: %w", Namespace, err)
	}

	began = time.Now()
	if o.Secure {
		if err := f.startSecureLoki(); err != nil {
			return nil, err
		}
	} else if o.Loki != nil {
		f.Loki, f.sharedLoki = o.Loki, true
	} else if f.Loki, err = stack.RunLoki(filepath.Join(o.Dir, "loki")); err != nil {
		return nil, err
	} else if err := o.Ledger.Children(); err != nil {
		return nil, err
	}
	var nodes []string
	for _, v := range o.Vehicles {
		for _, h := range v.Hosts {
			nodes = append(nodes, NodeName(v.Name, h))
		}
	}
	ports, err := freePorts(len(nodes) + 1)
	if err != nil {
		return nil, err
	}
	var targets []string
	for i, n := range nodes {
		f.agentPorts[n] = ports[i]
		targets = append(targets, fmt.Sprintf("127.0.0.1:%d", ports[i]))
	}
	f.ControllerMetrics = fmt.Sprintf("127.0.0.1:%d", ports[len(nodes)])
	targets = append(targets, f.ControllerMetrics)
	if !o.NoPrometheus {
		popts := stack.PrometheusOptions{Targets: targets}
		if o.Secure {
			if popts, err = f.securePrometheusOptions(targets); err != nil {
				return nil, err
			}
		}
		if f.Prometheus, err = stack.RunPrometheusOpts(filepath.Join(o.Dir, "prometheus"), popts); err != nil {
			return nil, err
		}
		if err := o.Ledger.Children(); err != nil {
			return nil, err
		}
		f.progress("    Loki %s and Prometheus %s up in %s", f.LokiAddress(), f.Prometheus.URL, time.Since(began).Round(time.Millisecond))
	}
	if o.Secure {
		if err := f.createSecrets(ctx); err != nil {
			return nil, err
		}
		f.progress("    Loki (tenant %s) behind the TLS and basic-auth gateway %s; Secrets %s and %s in %s", f.secure.tenant, f.Gateway.URL, LokiSecret, PrometheusSecret, Namespace)
	}

	began = time.Now()
	for _, vs := range o.Vehicles {
		v, err := vehiclesim.New(ctx, vehiclesim.Options{Name: vs.Name, Hosts: vs.Hosts, Rate: LANRate})
		if err != nil {
			return nil, fmt.Errorf("vehicle %s: %w", vs.Name, err)
		}
		f.Vehicles[vs.Name] = v
		nss := []string{v.Switch}
		for _, h := range v.Hosts {
			nss = append(nss, h.Netns)
		}
		if err := o.Ledger.Netns(nss...); err != nil {
			return nil, err
		}
		for _, h := range v.Hosts {
			if err := f.registerNode(ctx, vs, h); err != nil {
				return nil, err
			}
		}
	}
	f.progress("    %d vehicles x %d hosts as network namespaces, registered as Nodes, in %s", len(o.Vehicles), len(o.Vehicles[0].Hosts), time.Since(began).Round(time.Millisecond))

	began = time.Now()
	for _, vs := range o.Vehicles {
		if err := f.StartAgents(vs.Name); err != nil {
			return nil, err
		}
	}
	if err := f.startController(); err != nil {
		return nil, err
	}
	f.progress("    %d nettune-agents and the controller started in %s (logs in %s)", len(nodes), time.Since(began).Round(time.Millisecond), filepath.Join(o.Dir, "logs"))
	return f, nil
}

func (f *Fleet) registerNode(ctx context.Context, vs VehicleSpec, h *vehiclesim.Host) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: NodeName(vs.Name, h.Name),
		Labels: map[string]string{
			v1alpha1.DefaultVehicleLabel: vs.Name, v1alpha1.DefaultHostLabel: h.Name, v1alpha1.DefaultHardwareLabel: vs.Hardware,
		},
		Annotations: map[string]string{v1alpha1.LANAddressAnnotation: h.Addr.String(), v1alpha1.LANDeviceAnnotation: h.Dev},
	}}
	if err := f.CP.Client.Create(ctx, n); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

func (f *Fleet) bin(name string) string { return filepath.Join(f.root, "bin", name) }

// StartAgents starts a vehicle's agents (again).
func (f *Fleet) StartAgents(vehicle string) error {
	v := f.Vehicles[vehicle]
	if v == nil {
		return fmt.Errorf("no vehicle %s", vehicle)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range v.Hosts {
		node := NodeName(vehicle, h.Name)
		if p := f.agents[node]; p != nil && p.running() {
			continue
		}
		args := []string{"run", "--node", node, "--netns", h.Netns, "--vehicle", vehicle, "--host", h.Name,
			"--state-dir", f.AgentStateDir(node),
			"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", f.agentPorts[node]),
			"--lease-renew", f.opts.Heartbeat.String(), "--lease-namespace", Namespace, "--resync", "10s",
			"--loki-url", f.LokiAddress()}
		if f.secure != nil {
			args = append(args, "--loki-credentials-dir", f.secure.agentsDir)
		}
		// Every vehicle has an apply gate, open (parked) until SetGate
		// says otherwise; its hosts' agents read the same file.
		gate := f.GatePath(vehicle)
		if _, err := os.Stat(gate); os.IsNotExist(err) {
			if err := writeGate(gate, "open parked"); err != nil {
				return err
			}
		}
		args = append(args, "--apply-gate-file", gate)
		for _, t := range f.opts.Topics {
			args = append(args, "--probe-topic", t)
		}
		args = append(args, f.agentArgs[node]...)
		p, err := startProc(f.bin("nettune-agent"), args, f.env(), filepath.Join(f.Dir, "logs", "agent-"+node+".log"))
		if err != nil {
			return fmt.Errorf("agent %s: %w", node, err)
		}
		f.agents[node] = p
		if err := f.opts.Ledger.Process(p.cmd.Process.Pid, "nettune-agent "+node); err != nil {
			return err
		}
	}
	return nil
}

// VehicleVerified says whether every host of vehicle has its
// NodeNetTuning rendered with rev of profile and its agent verified it.
func (f *Fleet) VehicleVerified(ctx context.Context, vehicle, profile, rev string) (bool, error) {
	v := f.Vehicles[vehicle]
	if v == nil {
		return false, fmt.Errorf("no vehicle %s", vehicle)
	}
	for _, h := range v.Hosts {
		nnt := &v1alpha1.NodeNetTuning{}
		if err := f.CP.Client.Get(ctx, client.ObjectKey{Name: NodeName(vehicle, h.Name)}, nnt); err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		if ok, _, _ := fleetmodel.NodeReport(nnt); !ok || fleetmodel.AssignedRevision(nnt, profile) != rev {
			return false, nil
		}
	}
	return true, nil
}

// GatePath is the vehicle's apply gate file, which its agents read
// (--apply-gate-file).
func (f *Fleet) GatePath(vehicle string) string { return filepath.Join(f.Dir, "gates", vehicle) }

// SetGate writes the vehicle's apply gate as its autonomy stack would:
// "open", or "closed <reason>" (e.g. "closed driving").
func (f *Fleet) SetGate(vehicle, content string) error {
	if f.Vehicles[vehicle] == nil {
		return fmt.Errorf("no vehicle %s", vehicle)
	}
	return writeGate(f.GatePath(vehicle), content)
}

// writeGate replaces a gate file atomically: a reader sees the old
// content or the new, never half of it.
func writeGate(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// StopAgents kills a vehicle's agents, as if the vehicle went offline.
func (f *Fleet) StopAgents(vehicle string) error {
	v := f.Vehicles[vehicle]
	if v == nil {
		return fmt.Errorf("no vehicle %s", vehicle)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range v.Hosts {
		if p := f.agents[NodeName(vehicle, h.Name)]; p != nil {
			p.stop()
		}
	}
	return nil
}

// StopAgent stops one host's agent (SIGTERM, then SIGKILL after 5 s);
// StartAgents starts it again.
func (f *Fleet) StopAgent(node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.agents[node]
	if p == nil {
		return fmt.Errorf("no agent %s", node)
	}
	p.stop()
	return nil
}

// AgentStateDir is the state directory of a host's agent.
func (f *Fleet) AgentStateDir(node string) string { return filepath.Join(f.Dir, "agents", node) }

// AgentMetrics is the metrics address (host:port) of a host's agent.
func (f *Fleet) AgentMetrics(node string) string {
	return fmt.Sprintf("127.0.0.1:%d", f.agentPorts[node])
}

// SetAgentArgs gives a host's agent extra arguments from its next start on.
func (f *Fleet) SetAgentArgs(node string, args ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agentArgs[node] = args
}

// KillController kills the controller with SIGKILL, as a node failure would:
// no shutdown, no last status write.
func (f *Fleet) KillController() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.controller == nil || !f.controller.running() {
		return errors.New("the controller is not running")
	}
	f.controller.kill()
	return nil
}

// StartController starts the controller again after KillController.
func (f *Fleet) StartController() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.controller != nil && f.controller.running() {
		return errors.New("the controller is running")
	}
	return f.startController()
}

// APIServerAddress is the kube-apiserver's host:port.
func (f *Fleet) APIServerAddress() (string, error) {
	u, err := url.Parse(f.CP.Config.Host)
	if err != nil {
		return "", err
	}
	if u.Port() == "" {
		return "", fmt.Errorf("API server address %q has no port", f.CP.Config.Host)
	}
	return u.Host, nil
}

// CutAPIServer makes the API server unreachable, as if it were down: an
// iptables rule answers every packet to its port, of new and established
// connections, with a TCP reset (so every client sees "connection refused"
// or "connection reset", from the agents, the controller, kubectl and the
// caller alike). etcd and the API server keep running. The returned function
// removes the rule; it is safe to call twice, and Close removes a rule still
// in place. The rule carries the comment "nettune-fleet pid <pid>" and is
// recorded in the ledger (Options.Ledger) before it is inserted.
func (f *Fleet) CutAPIServer() (restore func() error, err error) {
	addr, err := f.APIServerAddress()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	rule := []string{"OUTPUT", "-p", "tcp", "-d", host, "--dport", port,
		"-m", "comment", "--comment", fmt.Sprintf("nettune-fleet pid %d", os.Getpid()),
		"-j", "REJECT", "--reject-with", "tcp-reset"}
	if err := f.opts.Ledger.IptablesRule(rule); err != nil {
		return nil, err
	}
	if err := iptables(append([]string{"-I"}, rule...)...); err != nil {
		return nil, err
	}
	key := strings.Join(rule, " ")
	f.mu.Lock()
	f.rules[key] = rule
	f.mu.Unlock()
	var once sync.Once
	var restoreErr error
	return func() error {
		once.Do(func() { restoreErr = f.removeRule(key) })
		return restoreErr
	}, nil
}

// removeRule deletes a rule CutAPIServer inserted, if still in place.
func (f *Fleet) removeRule(key string) error {
	f.mu.Lock()
	rule, ok := f.rules[key]
	delete(f.rules, key)
	f.mu.Unlock()
	if !ok {
		return nil
	}
	return iptables(append([]string{"-D"}, rule...)...)
}

func (f *Fleet) env() []string {
	return append(os.Environ(), "KUBECONFIG="+f.CP.Kubeconfig)
}

func (f *Fleet) startController() error {
	args := []string{"--namespace", Namespace, "--loki-address", f.LokiAddress(),
		"--metrics-bind-address", f.ControllerMetrics, "--health-probe-bind-address", "0",
		// Rollout events to Loki as {job="nettune-controller", profile}.
		"--loki-push-url", f.LokiAddress(), "--loki-buffer-dir", filepath.Join(f.Dir, "controller", "loki-buffer")}
	if f.secure != nil {
		args = append(args, "--loki-secret", LokiSecret, "--loki-push-credentials-dir", f.secure.pushDir)
	}
	if f.Prometheus != nil {
		args = append(args, "--prometheus-address", f.Prometheus.URL)
		if f.secure != nil {
			args = append(args, "--prometheus-secret", PrometheusSecret)
		}
	}
	p, err := startProc(f.bin("nettune-controller"), args, f.env(), filepath.Join(f.Dir, "logs", "controller.log"))
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	f.controller = p
	return f.opts.Ledger.Process(p.cmd.Process.Pid, "nettune-controller")
}

// Kubectl runs bin/kubectl against the fleet's control plane.
func (f *Fleet) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.bin("kubectl"), append([]string{"--kubeconfig", f.CP.Kubeconfig}, args...)...)
	cmd.Dir = f.root
	var out []byte
	err := DieWithProcess(cmd, func() (err error) { out, err = cmd.CombinedOutput(); return err })
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Plugin runs bin/kubectl-nettune against the fleet's control plane.
func (f *Fleet) Plugin(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, f.bin("kubectl-nettune"), append(args, "--kubeconfig", f.CP.Kubeconfig)...)
	var out []byte
	err := DieWithProcess(cmd, func() (err error) { out, err = cmd.CombinedOutput(); return err })
	if err != nil {
		return string(out), fmt.Errorf("kubectl nettune %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Routes is `ip route` inside a host.
func (f *Fleet) Routes(vehicle, host string) (string, error) {
	v := f.Vehicles[vehicle]
	if v == nil || v.Host(host) == nil {
		return "", fmt.Errorf("no host %s/%s", vehicle, host)
	}
	out, err := exec.Command("ip", "-n", v.Host(host).Netns, "route", "show").CombinedOutput()
	return string(out), err
}

// Evidence is what a failing test prints: the controller's and agents' log
// tails, the objects as YAML, and every host's routes.
func (f *Fleet) Evidence(ctx context.Context) string {
	var b strings.Builder
	if f.controller != nil {
		fmt.Fprintf(&b, "=== controller log (last 60 lines)\n%s\n", tailFile(f.controller.logPath, 60))
	}
	f.mu.Lock()
	var nodes []string
	for n := range f.agents {
		nodes = append(nodes, n)
	}
	f.mu.Unlock()
	sort.Strings(nodes)
	for _, n := range nodes {
		fmt.Fprintf(&b, "=== agent %s log (last 15 lines)\n%s\n", n, tailFile(f.agents[n].logPath, 15))
	}
	if f.Gateway != nil {
		fmt.Fprintf(&b, "=== gateway access log (last 20 lines)\n%s\n", f.Gateway.AccessLog(20))
	}
	if f.CP != nil {
		out, _ := f.Kubectl(ctx, "get", "ntp,nnt", "-o", "yaml")
		fmt.Fprintf(&b, "=== kubectl get ntp,nnt -o yaml\n%s\n", out)
	}
	var names []string
	for n := range f.Vehicles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, h := range f.Vehicles[n].Hosts {
			out, _ := f.Routes(n, h.Name)
			fmt.Fprintf(&b, "=== ip route in %s/%s\n%s\n", n, h.Name, out)
		}
	}
	return b.String()
}

// Close stops everything and removes every namespace and every iptables
// rule CutAPIServer left in place; safe to call twice.
func (f *Fleet) Close() error {
	var errs []error
	f.mu.Lock()
	var rules []string
	for key := range f.rules {
		rules = append(rules, key)
	}
	f.mu.Unlock()
	for _, key := range rules {
		errs = append(errs, f.removeRule(key))
	}
	f.mu.Lock()
	if f.controller != nil {
		f.controller.stop()
	}
	for _, p := range f.agents {
		p.stop()
	}
	f.mu.Unlock()
	for _, v := range f.Vehicles {
		errs = append(errs, v.Close())
	}
	if f.Prometheus != nil {
		errs = append(errs, f.Prometheus.Close())
	}
	if f.Gateway != nil && !f.sharedGateway {
		errs = append(errs, f.Gateway.Close())
	}
	if f.Loki != nil && !f.sharedLoki {
		errs = append(errs, f.Loki.Close())
	}
	if f.CP != nil && !f.sharedCP {
		errs = append(errs, f.CP.Stop())
		f.CP = nil
	}
	return errors.Join(errs...)
}

// DieWithProcess runs do, which starts cmd and waits for it, so that cmd is
// killed if this process dies first, even by kill -9: cmd gets Pdeathsig
// SIGKILL, and do runs on an OS thread locked until it returns, since the
// kernel sends the signal when the thread that forked the child ends (and
// Go ends threads of its own accord otherwise). The thread ends with do.
func DieWithProcess(cmd *exec.Cmd, do func() error) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after do
		// has waited for the child.
		runtime.LockOSThread()
		errc <- do()
	}()
	return <-errc
}

// proc is a child process in its own process group, logging to a file.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	once    sync.Once
}

func startProc(bin string, args, env []string, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "--- %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig fires when the OS thread that started the child exits, not
	// the process: start and wait on one locked thread that lives as long as
	// the child, so the child dies with this process and only then.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	if err := <-started; err != nil {
		logf.Close()
		return nil, err
	}
	return p, nil
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the group and waits for the process to end.
func (p *proc) kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

// stop sends SIGTERM to the group, then SIGKILL after 5 s.
func (p *proc) stop() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		p, _ := strconv.Atoi(port)
		out = append(out, p)
	}
	return out, nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// DemoTopics is the probe topic of the demo and the e2e tests: a 16 KB
// message (a planning trajectory or an object list) 40 times a second from
// every host to every peer: 12 full frames, so a loss at its tail strands
// it on the retransmission timer; 40 a second so that a pair of one canary
// vehicle gathers the ~1000 messages the demo judge's Pass needs (x2 + 0.5
// points at 99 %) in under a minute; small enough that twelve hosts' topics leave the machine's two
// cores room to forward them.
var DemoTopics = []string{"planning:16384:40"}

// LANRate is the line rate of the simulated vehicles' switch ports and NICs:
// the field's 1 Gbit/s switch slowed five times, so that a 2-core machine
// running the whole fleet (and other work) still pushes more than a port can
// drain and its 128 KB buffer really overflows. At 1 Gbit/s the machine, not
// the switch, was the bottleneck under load and no frame was ever dropped.
const LANRate = "200mbit"

// Traffic of StartTraffic (DemoTraffic).
const (
	// IncastBytes is what each other host writes into the first host per
	// TCP incast round, every IncastEvery.
	IncastBytes = 64 << 10
	IncastEvery = 100 * time.Millisecond
	// FloodBytes is what each other host sends to the first host per foreign
	// UDP round, all at once, every FloodEvery.
	FloodBytes = 1 << 20
	FloodEvery = 250 * time.Millisecond
)

// StartTraffic runs the field's loss scenarios in every vehicle until the
// returned stop is called:
//
//   - TCP incast: the other hosts write IncastBytes each into the first host
//     (xavier-a) at the same instant, every IncastEvery (the field report's
//     incast; with the shipped clamps it no longer overflows the port);
//   - foreign UDP: the other hosts send FloodBytes each of UDP to the first
//     host at the same instant, every FloodEvery (lidar point clouds and a
//     log upload): twice the port's rate for about 40 ms, so the port drops
//     about half of what arrives then, whatever the TCP tuning is. A topic
//     message caught in it loses segments and their retransmissions; how
//     long it waits is then up to the retransmission timer (rto_min).
func (f *Fleet) StartTraffic(ctx context.Context) (stop func()) {
	return f.StartTrafficWith(ctx, DemoTraffic)
}

// Traffic sizes the loss scenarios of StartTrafficWith: every vehicle's
// other hosts write IncastBytes each of TCP into the first host every
// IncastEvery, and FloodBytes each of UDP every FloodEvery (0 bytes: none).
type Traffic struct {
	IncastBytes int
	IncastEvery time.Duration
	// IncastReconnect, when set, closes the incast's connections and opens
	// new ones this often (as an application that connects per transfer
	// would): a socket takes its route's cwnd clamp when it connects, so a
	// changed clamp reaches a long-lived connection only when it reconnects
	// (rto_min and initcwnd are read from the route as the socket runs).
	IncastReconnect time.Duration
	FloodBytes      int
	FloodEvery      time.Duration
}

// DemoTraffic is StartTraffic's.
var DemoTraffic = Traffic{IncastBytes: IncastBytes, IncastEvery: IncastEvery, FloodBytes: FloodBytes, FloodEvery: FloodEvery}

// StartTrafficWith is StartTraffic with other sizes.
func (f *Fleet) StartTrafficWith(ctx context.Context, t Traffic) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// keep runs a scenario until ctx ends: it returns when ctx ends, and an
	// error (a host restarting) is retried a second later.
	keep := func(run func() error) {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := run(); err != nil && ctx.Err() == nil {
					time.Sleep(time.Second)
				}
			}
		})
	}
	for _, v := range f.Vehicles {
		if len(v.Hosts) < 2 {
			continue
		}
		if t.IncastBytes > 0 {
			keep(func() error {
				if t.IncastReconnect <= 0 {
					_, err := vehiclesim.Burst(ctx, v.Hosts[1:], v.Hosts[0], t.IncastBytes, t.IncastEvery)
					return err
				}
				rctx, cancel := context.WithTimeout(ctx, t.IncastReconnect)
				defer cancel()
				_, err := vehiclesim.Burst(rctx, v.Hosts[1:], v.Hosts[0], t.IncastBytes, t.IncastEvery)
				if rctx.Err() != nil && ctx.Err() == nil {
					return nil // its time to reconnect, not a failure
				}
				return err
			})
		}
		if t.FloodBytes > 0 {
			keep(func() error {
				_, err := vehiclesim.ForeignIncast(ctx, v.Hosts[1:], v.Hosts[0], t.FloodBytes, t.FloodEvery)
				return err
			})
		}
	}
	return func() { cancel(); wg.Wait() }
}
