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

// Package hubtest starts Open Cluster Management (OCM) for tests: a hub (etcd
// and kube-apiserver with nettune's and OCM's CRDs, kube-controller-manager
// signing the agents' certificates, OCM's hub controllers) and spokes, each a
// kube-apiserver on kine (SQLite, k3s's default datastore) with an OCM
// klusterlet agent that registers it to the hub as a ManagedCluster and
// applies the ManifestWorks of its cluster namespace.
//
// Everything runs on 127.0.0.1 from the binaries `make tools` builds into
// bin/ (kube-apiserver, etcd, kube-controller-manager, ocm, kine; the CRDs in
// bin/crds/ocm). Logs go to <dir>/logs/<process>.log. docs/hub-harness.md
// says which flags are set and why, and the timings measured.
package hubtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nettune/nettune/internal/localcp"
)

const (
	// HubNamespace is where the hub controllers record their events.
	HubNamespace = "open-cluster-management-hub"
	// AgentNamespace is the klusterlet agent's namespace on a spoke: its
	// leader-election lock, its events and the hub-kubeconfig-secret with the
	// client certificate the hub issued live there.
	AgentNamespace = "open-cluster-management-agent"
	// BootstrapUser is the hub identity of the agents' bootstrap kubeconfig:
	// bound to OCM's bootstrap ClusterRole, and the one user whose CSRs the
	// hub approves by itself (--auto-approved-csr-users).
	BootstrapUser = "system:open-cluster-management:nettune-bootstrap"
	bootstrapRole = "open-cluster-management:bootstrap"
)

// Options tune the hub and its spokes. The zero value means the defaults.
type Options struct {
	// LeaseDurationSeconds is each ManagedCluster's spec.leaseDurationSeconds:
	// the agent renews its Lease on the hub that often (plus up to 25 %
	// jitter); the hub's lease controller looks at a cluster again 5 times
	// that after each look (sooner on any change of the cluster or its
	// Lease) and sets ManagedClusterConditionAvailable to Unknown once the
	// Lease is 5 times that old: between 5 and 10 times this after the last
	// renewal. Default 3 (OCM's is 60).
	LeaseDurationSeconds int32
	// StatusSyncInterval is the work agent's --status-sync-interval: how
	// often it reads every applied resource again for the ManifestWork's
	// status feedback (each ManifestWork after 1 to 1.9 times this).
	// Default 2s (OCM's is 10s).
	StatusSyncInterval time.Duration
	// ClusterHealthCheckPeriod is the agent's --cluster-healthcheck-period:
	// how often it checks its own API server's /livez and reports the result
	// as ManagedClusterConditionAvailable. Default 10s (OCM's is 1m).
	ClusterHealthCheckPeriod time.Duration
	// AgentLeaderElection is the agent's lease duration, renew deadline and
	// retry period on its own API server. When the API server stops, the
	// agent loses the lock after the renew deadline and exits (OCM's
	// library-go does os.Exit); the harness starts it again, as a kubelet
	// would. Default 15s, 10s, 2s (OCM's: 137s, 107s, 26s).
	AgentLeaderElection [3]time.Duration
	// AddOnManager runs OCM's add-on manager in the hub process (`ocm hub
	// --addon-manager`): it creates a ManagedClusterAddOn in every cluster a
	// ClusterManagementAddOn's install strategy places. Off by default.
	AddOnManager bool
	// AddOnLeaseSyncInterval is the agent's --addon-lease-sync-interval:
	// how often its registration agent reads every add-on's Lease on the
	// spoke and sets the ManagedClusterAddOn's Available condition (OCM's
	// default, 30s, when 0).
	AddOnLeaseSyncInterval time.Duration
	// AddOnLeaseDurationSeconds is the agent's
	// --addon-lease-duration-seconds: an add-on's Lease counts as renewed
	// for 5 times this after its renewTime (OCM's default, 60, when 0).
	AddOnLeaseDurationSeconds int
	// StartTimeout bounds each wait while starting: the hub's API server, a
	// spoke's API server, a spoke's join. Default 3 minutes.
	StartTimeout time.Duration
	// Logf, when set, receives one line per step (e.g. testing.T.Logf).
	Logf func(format string, args ...any)
}

func (o *Options) defaults() {
	if o.LeaseDurationSeconds == 0 {
		o.LeaseDurationSeconds = 3
	}
	if o.StatusSyncInterval == 0 {
		o.StatusSyncInterval = 2 * time.Second
	}
	if o.ClusterHealthCheckPeriod == 0 {
		o.ClusterHealthCheckPeriod = 10 * time.Second
	}
	if o.AgentLeaderElection == [3]time.Duration{} {
		o.AgentLeaderElection = [3]time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second}
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Hub is a running OCM hub.
type Hub struct {
	// Dir holds the hub's and the spokes' state; Dir/logs the logs.
	Dir string
	// ControlPlane is the hub's etcd and kube-apiserver (nettune's CRDs
	// installed, OCM's too).
	ControlPlane *localcp.ControlPlane
	// Config and Client are the hub's admin (system:masters) connection;
	// Client's Scheme knows nettune's and OCM's types.
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	// Kubeconfig is the path of the hub's admin kubeconfig.
	Kubeconfig string

	opts      Options
	root      string
	bootstrap []byte // the agents' bootstrap kubeconfig
	kcm, ocm  *proc

	mu     sync.Mutex
	spokes map[string]*Spoke
}

// StartHub starts a hub with the default Options.
func StartHub(dir string) (*Hub, error) { return StartHubWithOptions(dir, Options{}) }

// StartHubWithOptions starts the hub's etcd and kube-apiserver (through
// localcp), installs OCM's hub CRDs from bin/crds/ocm/hub, starts
// kube-controller-manager with only the CSR signing controller and OCM's hub
// controllers (`ocm hub`: registration, placement, work), and returns once the
// registration controller has made the default ManagedClusterSets.
func StartHubWithOptions(dir string, opts Options) (h *Hub, err error) {
	opts.defaults()
	root, err := localcp.RepoRoot()
	if err != nil {
		return nil, err
	}
	if m := MissingTools(root); len(m) > 0 {
		return nil, fmt.Errorf("missing %v in %s: run 'make tools' first", m, filepath.Join(root, "bin"))
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, "logs"), filepath.Join(dir, "hub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	h = &Hub{Dir: dir, opts: opts, root: root, spokes: map[string]*Spoke{}}
	defer func() {
		if err != nil {
			_ = h.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), opts.StartTimeout)
	defer cancel()

	start := time.Now()
	if h.ControlPlane, err = localcp.Start(filepath.Join(dir, "hub")); err != nil {
		return nil, fmt.Errorf("starting the hub's etcd and kube-apiserver: %w", err)
	}
	h.Config, h.Kubeconfig = h.ControlPlane.Config, h.ControlPlane.Kubeconfig
	if h.Scheme, err = Scheme(); err != nil {
		return nil, err
	}
	if h.Client, err = client.New(h.Config, client.Options{Scheme: h.Scheme}); err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(h.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "bin", "crds", "ocm", "hub")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, fmt.Errorf("installing OCM's hub CRDs: %w", err)
	}
	opts.Logf("hub: etcd and kube-apiserver up, OCM CRDs installed in %s", time.Since(start).Round(time.Millisecond))

	// The CSR signer, trusted by the API server for client certificates.
	sig, err := newSigner(filepath.Join(dir, "hub", "pki"))
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(h.ControlPlane.Env.ControlPlane.APIServer.CertDir, "client-cert-auth-ca.crt")
	if err := sig.trustIn(bundle); err != nil {
		return nil, err
	}
	if err := h.waitSignerTrusted(ctx, sig); err != nil {
		return nil, err
	}

	if err := h.bootstrapAccess(ctx); err != nil {
		return nil, err
	}

	bin := func(name string) string { return filepath.Join(root, "bin", name) }
	if h.kcm, err = startProc("kube-controller-manager", bin("kube-controller-manager"), []string{
		"--kubeconfig=" + h.Kubeconfig,
		"--controllers=csrsigning",
		"--cluster-signing-cert-file=" + sig.CertFile,
		"--cluster-signing-key-file=" + sig.KeyFile,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
	}, h.logPath("hub-kube-controller-manager"), true); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if h.ocm, err = startProc("ocm-hub", bin("ocm"), append([]string{
		"hub",
		"--kubeconfig=" + h.Kubeconfig,
		"--namespace=" + HubNamespace,
		"--disable-leader-election",
		fmt.Sprintf("--listen=127.0.0.1:%d", port),
		"--feature-gates=ManagedClusterAutoApproval=true",
		"--auto-approved-csr-users=" + BootstrapUser,
	}, addOnManagerArgs(opts)...), h.logPath("ocm-hub"), true); err != nil {
		return nil, err
	}
	// The registration controller makes the "default" and "global"
	// ManagedClusterSets as soon as it runs (feature gate DefaultClusterSet).
	if err := poll(ctx, time.Second, func() error {
		var set clusterv1beta2.ManagedClusterSet
		return h.Client.Get(ctx, client.ObjectKey{Name: "global"}, &set)
	}); err != nil {
		return nil, fmt.Errorf("waiting for OCM's registration controller (%s): %w\n%s", h.logPath("ocm-hub"), err, tailFile(h.logPath("ocm-hub"), 20))
	}
	opts.Logf("hub: kube-controller-manager (csrsigning) and ocm hub up in %s", time.Since(start).Round(time.Millisecond))
	return h, nil
}

// MissingTools lists what StartHub and StartSpoke need from bin/ and is not there.
func MissingTools(root string) []string {
	var missing []string
	for _, f := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "ocm", "kine", "crds/ocm/VERSION"} {
		if _, err := os.Stat(filepath.Join(root, "bin", f)); err != nil {
			missing = append(missing, "bin/"+f)
		}
	}
	return missing
}

func (h *Hub) logPath(name string) string { return filepath.Join(h.Dir, "logs", name+".log") }

// LogPath is the log file of a process: "hub-kube-controller-manager",
// "ocm-hub", or a spoke's "<name>-kine", "<name>-kube-apiserver",
// "<name>-agent".
func (h *Hub) LogPath(process string) string { return h.logPath(process) }

// waitSignerTrusted waits until the API server has reloaded its client CA
// bundle: a client certificate from the signer authenticates.
func (h *Hub) waitSignerTrusted(ctx context.Context, sig *signer) error {
	const probe = "nettune-hubtest-signer-probe"
	certPEM, keyPEM, err := sig.clientCert(probe, nil)
	if err != nil {
		return err
	}
	cfg := rest.AnonymousClientConfig(h.Config)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	err = poll(ctx, 250*time.Millisecond, func() error {
		r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if r.Status.UserInfo.Username != probe {
			return fmt.Errorf("authenticated as %q", r.Status.UserInfo.Username)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to trust the CSR signer: %w", err)
	}
	h.opts.Logf("hub: API server trusts the CSR signer after %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// bootstrapAccess creates the hub namespace, OCM's bootstrap ClusterRole
// (the rules of open-cluster-management:bootstrap in OCM's cluster-manager
// chart, deploy/cluster-manager/chart/cluster-manager/templates/
// bootstrap_cluster_role.yaml) bound to BootstrapUser, and the bootstrap
// kubeconfig the agents join with.
func (h *Hub) bootstrapAccess(ctx context.Context) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: HubNamespace}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapRole},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
				{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
				{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "create", "list", "watch"}},
				{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets/join"}, Verbs: []string{"create"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: bootstrapRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: bootstrapRole},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: BootstrapUser}},
		},
	}
	for _, o := range objs {
		if err := h.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	user, err := h.ControlPlane.Env.AddUser(envtest.User{Name: BootstrapUser, Groups: []string{"system:bootstrappers:managedcluster"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the bootstrap user: %w", err)
	}
	if h.bootstrap, err = kubeconfigFor(user.Config()); err != nil {
		return err
	}
	return nil
}

// ClusterAvailable returns the status of a ManagedCluster's
// ManagedClusterConditionAvailable ("" when it has none).
func (h *Hub) ClusterAvailable(ctx context.Context, name string) (metav1.ConditionStatus, error) {
	var mc clusterv1.ManagedCluster
	if err := h.Client.Get(ctx, client.ObjectKey{Name: name}, &mc); err != nil {
		return "", err
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
		return c.Status, nil
	}
	return "", nil
}

// WaitClusterAvailable polls (every 250 ms) until the ManagedCluster's
// ManagedClusterConditionAvailable has status want.
func (h *Hub) WaitClusterAvailable(ctx context.Context, name string, want metav1.ConditionStatus) error {
	err := poll(ctx, 250*time.Millisecond, func() error {
		s, err := h.ClusterAvailable(ctx, name)
		if err != nil {
			return err
		}
		if s != want {
			return fmt.Errorf("condition ManagedClusterConditionAvailable is %q", s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for ManagedCluster %s Available=%s: %w", name, want, err)
	}
	return nil
}

// Spoke returns a started spoke by name, nil if there is none.
func (h *Hub) Spoke(name string) *Spoke {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.spokes[name]
}

// Stop stops every spoke, then the hub's controllers, kube-apiserver and
// etcd. The state in Dir stays (the logs with it).
func (h *Hub) Stop() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	spokes := make([]*Spoke, 0, len(h.spokes))
	for _, s := range h.spokes {
		spokes = append(spokes, s)
	}
	h.mu.Unlock()
	var errs []error
	for _, s := range spokes {
		errs = append(errs, s.Stop())
	}
	h.ocm.stop(10 * time.Second)
	h.kcm.stop(10 * time.Second)
	if h.ControlPlane != nil {
		errs = append(errs, h.ControlPlane.Stop())
	}
	return errors.Join(errs...)
}

// kubeconfigFor renders a kubeconfig with everything embedded.
func kubeconfigFor(cfg *rest.Config) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user"}
	kc.CurrentContext = "default"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig: %w", err)
	}
	return b, nil
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

// stopPolling wraps an error that ends a poll at once.
type stopPolling struct{ error }

// poll calls f every interval until it returns nil or a stopPolling, or ctx
// ends.
func poll(ctx context.Context, interval time.Duration, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

func addOnManagerArgs(opts Options) []string {
	if opts.AddOnManager {
		return []string{"--addon-manager"}
	}
	return nil
}
