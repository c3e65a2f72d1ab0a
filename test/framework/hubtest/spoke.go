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

package hubtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nettune/nettune/internal/procfs"
)

// Spoke is a managed cluster: kine on SQLite, a kube-apiserver on it and an
// OCM klusterlet agent registered to the hub.
type Spoke struct {
	// Name is the ManagedCluster's name and the hub namespace its
	// ManifestWorks go in.
	Name string
	// Dir holds kine's SQLite database, the API server's certificates, the
	// kubeconfigs and the agent's hub credentials.
	Dir string
	// Kubeconfig is the path of the spoke's admin kubeconfig.
	Kubeconfig string
	// Config and Client are the spoke's admin (system:masters) connection,
	// with the same scheme as the hub's Client. They fail while the API
	// server is stopped.
	Config *rest.Config
	Client client.Client

	hub       *Hub
	kineAddr  string
	kine      *proc
	agent     *proc
	agentArgs []string

	mu        sync.Mutex
	apiServer *envtest.APIServer
	apiLog    *os.File
	apiUp     bool
}

// StartSpoke starts a spoke named name (a DNS label: it is the hub namespace
// of its ManifestWorks) and returns once the hub shows its ManagedCluster
// accepted, joined and Available=True. The ManagedCluster is created on the
// hub first with spec.leaseDurationSeconds from Options and hubAcceptsClient
// false; OCM's hub accepts it (feature gate ManagedClusterAutoApproval) and
// approves its CSR (--auto-approved-csr-users).
func (h *Hub) StartSpoke(name string) (s *Spoke, err error) {
	h.mu.Lock()
	if _, dup := h.spokes[name]; dup {
		h.mu.Unlock()
		return nil, fmt.Errorf("spoke %s already started", name)
	}
	s = &Spoke{Name: name, Dir: filepath.Join(h.Dir, "spokes", name), hub: h}
	h.spokes[name] = s
	h.mu.Unlock()
	defer func() {
		if err != nil {
			_ = s.Stop()
			h.mu.Lock()
			delete(h.spokes, name)
			h.mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.StartTimeout)
	defer cancel()
	for _, d := range []string{s.Dir, s.path("kine"), s.path("apiserver"), s.path("hub-kubeconfig")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	start := time.Now()

	// kine: the etcd API on SQLite, k3s's default datastore and its DSN.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.kineAddr = fmt.Sprintf("127.0.0.1:%d", port)
	if s.kine, err = startProc(name+"-kine", h.bin("kine"), []string{
		"--listen-address=" + s.kineAddr,
		"--endpoint=sqlite://" + s.path("kine", "state.db") + "?_journal_mode=WAL&cache=shared&_busy_timeout=30000&_txlock=immediate",
		"--metrics-bind-address=0",
	}, h.logPath(name+"-kine"), false); err != nil {
		return nil, err
	}
	if err := poll(ctx, 100*time.Millisecond, func() error {
		if err := s.kine.exitErr(); err != nil {
			return stopPolling{err}
		}
		c, err := net.DialTimeout("tcp", s.kineAddr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		return nil, fmt.Errorf("waiting for kine: %w", err)
	}

	// kube-apiserver on kine, its certificates kept in Dir across restarts.
	s.apiServer = &envtest.APIServer{
		EtcdURL:      &url.URL{Scheme: "http", Host: s.kineAddr},
		Path:         h.bin("kube-apiserver"),
		CertDir:      s.path("apiserver"),
		StartTimeout: h.opts.StartTimeout,
		StopTimeout:  30 * time.Second,
	}
	if err := s.StartAPIServer(); err != nil {
		return nil, err
	}
	admin, err := s.apiServer.AddUser(envtest.User{Name: "nettune-admin", Groups: []string{"system:masters"}},
		&rest.Config{Host: s.apiServer.SecureServing.URL("https", "").String(), TLSClientConfig: rest.TLSClientConfig{CAData: s.apiServer.CA}})
	if err != nil {
		return nil, fmt.Errorf("adding the spoke's admin user: %w", err)
	}
	s.Config = admin
	kc, err := kubeconfigFor(admin)
	if err != nil {
		return nil, err
	}
	s.Kubeconfig = s.path("kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	if s.Client, err = client.New(admin, client.Options{Scheme: h.Scheme}); err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(admin, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(h.root, "config", "crd", "bases"), filepath.Join(h.root, "bin", "crds", "ocm", "spoke")},
		ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing CRDs on spoke %s: %w", name, err)
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AgentNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	h.opts.Logf("spoke %s: kine and kube-apiserver up, CRDs installed in %s", name, time.Since(start).Round(time.Millisecond))

	// The ManagedCluster, with the short lease, before the agent creates it.
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       clusterv1.ManagedClusterSpec{LeaseDurationSeconds: h.opts.LeaseDurationSeconds},
	}
	if err := h.Client.Create(ctx, mc); err != nil {
		return nil, fmt.Errorf("creating ManagedCluster %s: %w", name, err)
	}

	bootstrap := s.path("bootstrap-hub.kubeconfig")
	if err := os.WriteFile(bootstrap, h.bootstrap, 0o600); err != nil {
		return nil, err
	}
	listen, err := freePort()
	if err != nil {
		return nil, err
	}
	le := h.opts.AgentLeaderElection
	s.agentArgs = []string{
		"agent",
		"--kubeconfig=" + s.Kubeconfig,
		"--namespace=" + AgentNamespace,
		fmt.Sprintf("--listen=127.0.0.1:%d", listen),
		"--spoke-cluster-name=" + name,
		"--bootstrap-kubeconfig=" + bootstrap,
		"--hub-kubeconfig-dir=" + s.path("hub-kubeconfig"),
		"--workload-source-config=" + s.path("hub-kubeconfig", "kubeconfig"),
		"--cluster-healthcheck-period=" + h.opts.ClusterHealthCheckPeriod.String(),
		"--status-sync-interval=" + h.opts.StatusSyncInterval.String(),
		"--feature-gates=RawFeedbackJsonString=true",
		"--leader-election-lease-duration=" + le[0].String(),
		"--leader-election-renew-deadline=" + le[1].String(),
		"--leader-election-retry-period=" + le[2].String(),
	}
	if h.opts.AddOnLeaseSyncInterval > 0 {
		s.agentArgs = append(s.agentArgs, "--addon-lease-sync-interval="+h.opts.AddOnLeaseSyncInterval.String())
	}
	if h.opts.AddOnLeaseDurationSeconds > 0 {
		s.agentArgs = append(s.agentArgs, fmt.Sprintf("--addon-lease-duration-seconds=%d", h.opts.AddOnLeaseDurationSeconds))
	}
	if err := s.StartAgent(); err != nil {
		return nil, err
	}
	if err := h.waitJoined(ctx, name); err != nil {
		return nil, fmt.Errorf("%w\nlast lines of %s:\n%s", err, h.logPath(name+"-agent"), tailFile(h.logPath(name+"-agent"), 20))
	}
	h.opts.Logf("spoke %s: joined the hub, Available=True, %s after its start", name, time.Since(start).Round(time.Millisecond))
	return s, nil
}

func (h *Hub) bin(name string) string { return filepath.Join(h.root, "bin", name) }

func (s *Spoke) path(elem ...string) string {
	return filepath.Join(append([]string{s.Dir}, elem...)...)
}

// waitJoined waits for HubAcceptedManagedCluster, ManagedClusterJoined and
// ManagedClusterConditionAvailable to be True.
func (h *Hub) waitJoined(ctx context.Context, name string) error {
	var missing []string
	err := poll(ctx, 250*time.Millisecond, func() error {
		var mc clusterv1.ManagedCluster
		if err := h.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err != nil {
			return err
		}
		missing = missing[:0]
		for _, c := range []string{clusterv1.ManagedClusterConditionHubAccepted, clusterv1.ManagedClusterConditionJoined, clusterv1.ManagedClusterConditionAvailable} {
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, c) {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not yet True: %s", strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ManagedCluster %s to join: %w", name, err)
	}
	return nil
}

// StopAPIServer stops the spoke's kube-apiserver (SIGTERM), keeping kine and
// its data. The agent keeps running: it reports Available=False from its
// health check while it still holds its lock, then loses its leader lease on
// the stopped API server, exits, and is started again every few seconds
// without getting anywhere; the hub, no longer seeing the Lease renewed, sets
// Available=Unknown (docs/hub-harness.md has the timings).
func (s *Spoke) StopAPIServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.apiUp {
		return nil
	}
	s.apiUp = false
	// Down at once, as a crashed or powered-off server is: SIGKILL. A
	// SIGTERM lets kube-apiserver drain for longer than the 30 s envtest
	// waits when a controller and agents hold watches on it (seen in
	// test/hub); envtest then finds the process gone.
	killAPIServer(s.path("apiserver"))
	err := s.apiServer.Stop()
	if s.apiLog != nil {
		_ = s.apiLog.Close()
		s.apiLog = nil
	}
	if err != nil {
		return fmt.Errorf("stopping spoke %s's kube-apiserver: %w", s.Name, err)
	}
	return nil
}

// StartAPIServer starts the spoke's kube-apiserver (again) on the same port,
// certificates and kine data, and returns once it is healthy.
func (s *Spoke) StartAPIServer() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apiUp {
		return nil
	}
	f, err := os.OpenFile(s.hub.logPath(s.Name+"-kube-apiserver"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== %s: starting kube-apiserver\n", time.Now().Format(time.RFC3339Nano))
	s.apiServer.Out, s.apiServer.Err = f, f
	if err := s.apiServer.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting spoke %s's kube-apiserver: %w\n%s", s.Name, err, tailFile(s.hub.logPath(s.Name+"-kube-apiserver"), 20))
	}
	s.apiLog, s.apiUp = f, true
	return nil
}

// APIServerURL is the spoke API server's address (the same across restarts).
func (s *Spoke) APIServerURL() string {
	return s.apiServer.SecureServing.URL("https", "").String()
}

// StopAgent stops the klusterlet agent (SIGTERM; it is not started again
// until StartAgent).
func (s *Spoke) StopAgent() {
	s.mu.Lock()
	a := s.agent
	s.agent = nil
	s.mu.Unlock()
	a.stop(15 * time.Second)
}

// StartAgent starts the klusterlet agent (`ocm agent`: registration and work
// in one process), started again whenever it exits, until StopAgent or Stop.
func (s *Spoke) StartAgent() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agent != nil {
		return nil
	}
	a, err := startProc(s.Name+"-agent", s.hub.bin("ocm"), s.agentArgs, s.hub.logPath(s.Name+"-agent"), true)
	if err != nil {
		return err
	}
	s.agent = a
	return nil
}

// AgentRestarts is how many times the agent was started again after it
// exited.
func (s *Spoke) AgentRestarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agent == nil {
		return 0
	}
	return s.agent.restartCount()
}

// Stop stops the agent, the kube-apiserver and kine. Dir stays. The
// ManagedCluster stays on the hub (Available turns Unknown there).
func (s *Spoke) Stop() error {
	s.StopAgent()
	err := s.StopAPIServer()
	if s.kine != nil {
		s.kine.stop(10 * time.Second)
	}
	return err
}

// LeaseRenewTime is when the agent last renewed its Lease
// (managed-cluster-lease in the cluster namespace) on the hub.
func (h *Hub) LeaseRenewTime(ctx context.Context, name string) (time.Time, error) {
	var l coordinationv1.Lease
	if err := h.Client.Get(ctx, client.ObjectKey{Namespace: name, Name: "managed-cluster-lease"}, &l); err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, nil
	}
	return l.Spec.RenewTime.Time, nil
}

// killAPIServer sends SIGKILL to the kube-apiserver whose --cert-dir is
// certDir (the spoke's own).
func killAPIServer(certDir string) {
	procs, _ := procfs.List()
	for _, p := range procs {
		args := p.Cmdline
		if len(args) == 0 || !strings.HasSuffix(args[0], "kube-apiserver") {
			continue
		}
		for _, a := range args {
			if a == "--cert-dir="+certDir {
				_ = syscall.Kill(p.Pid, syscall.SIGKILL)
			}
		}
	}
}
