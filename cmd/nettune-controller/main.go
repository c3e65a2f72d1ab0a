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

// Command nettune-controller rolls NetTuningProfiles out to the fleet: it
// renders every node's NodeNetTuning, moves vehicles through the canary steps,
// runs the Loki/Prometheus analyses and rolls back on a regression. All of its
// state lives in the API objects; run two replicas with --leader-elect.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/controllers"
	"github.com/nettune/nettune/controllers/addon"
	"github.com/nettune/nettune/controllers/analysis"
	"github.com/nettune/nettune/controllers/fleetcache"
	"github.com/nettune/nettune/controllers/hub"
	"github.com/nettune/nettune/controllers/noderender"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/internal/scheme"
	"github.com/nettune/nettune/node-agent/lokipush"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "nettune-controller:", err)
		os.Exit(1)
	}
}

// Options are the controller's flags.
type Options struct {
	MetricsAddr string
	// PprofAddr serves net/http/pprof ("" or "0" disables).
	PprofAddr         string
	ProbeAddr         string
	LeaderElect       bool
	LeaderElectionNS  string
	Namespace         string
	LokiAddress       string
	PrometheusAddress string
	// LokiSecret and PrometheusSecret name Secrets in Namespace with the
	// credentials sent to the default addresses (docs/observability.md).
	LokiSecret       string
	PrometheusSecret string
	QueryTimeout     time.Duration
	// LokiPushCredentialsDir is a mounted Secret's directory with the
	// credentials of the event push (re-read at every push).
	LokiPushCredentialsDir string
	// LokiPushURL, when set, is where the rollout events are shipped as
	// {job="nettune-controller", profile} lines, buffered on disk in
	// LokiBufferDir (at most LokiBufferMaxBytes) while Loki is out of reach.
	LokiPushURL        string
	LokiBufferDir      string
	LokiBufferMaxBytes int64
	// KubeAPIQPS and KubeAPIBurst bound the controller's requests to the
	// API server (client-go's token bucket).
	KubeAPIQPS   float64
	KubeAPIBurst int
	// RenderWorkers is how many nodes' NodeNetTunings are rendered at once.
	RenderWorkers int
	// Hub runs the hub's reconciler (docs/hub.md) instead of a cluster's;
	// ClusterNamespace is nettune's namespace in the managed clusters.
	Hub              bool
	ClusterNamespace string
	// WorkStatusSync is the managed clusters' work agents'
	// --status-sync-interval.
	WorkStatusSync time.Duration
	// WorkWriters is how many ManifestWorks a hub's reconcile writes at
	// once.
	WorkWriters int
	// AddOn runs, with Hub, nettune's Open Cluster Management add-on
	// manager (docs/hub-addon.md).
	AddOn AddOnOptions
}

// AddOnOptions are the add-on's flags: at a hub, the add-on manager and
// the profile gate; in a cluster, the add-on's Lease.
type AddOnOptions struct {
	Manager        bool
	Name           string
	Placements     stringList
	Rollout        string
	MaxConcurrency string
	ValuesFile     string
	// Gate: "auto" (on with Manager), "true" or "false".
	Gate       string
	MinVersion string
	// Lease, in a cluster, is the add-on Lease the controller renews in
	// --namespace ("" renews none).
	Lease         string
	LeaseInterval time.Duration
}

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (o *Options) register(fs *flag.FlagSet) {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "nettune-system"
	}
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of the Go profiler's /debug/pprof endpoints (0 disables)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 disables)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader so that only one replica acts")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 200, "requests per second to the API server, sustained (client-go's default of 20 writes 5,000 NodeNetTunings in over 4 minutes)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 400, "requests to the API server in a burst")
	fs.IntVar(&o.RenderWorkers, "render-workers", noderender.DefaultWorkers, "NodeNetTunings rendered and written at once: each waits for the API server's answer to its write, so a loaded API server needs more in flight (at 5,000 nodes on 2 cores, 16 moved 2,500 nodes back in 19.5 s against 25.0 s with 4; docs/bench-scale-notes.md)")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", ns, "namespace of the leader election lease")
	fs.StringVar(&o.Namespace, "namespace", ns, "namespace holding the profiles' revisions (ControllerRevisions)")
	fs.BoolVar(&o.Hub, "hub", false, "run as a hub on Open Cluster Management (docs/hub.md): profiles applied here are rolled out across the vehicles of the managed clusters their clusterSelector picks, through one ManifestWork per cluster; the cluster reconcilers do not run")
	fs.StringVar(&o.ClusterNamespace, "cluster-namespace", "nettune-system", "with --hub: nettune's namespace in every managed cluster (where the hub places the revisions it names)")
	fs.DurationVar(&o.WorkStatusSync, "work-status-sync-interval", hub.DefaultWorkStatusSync, "with --hub: the managed clusters' OCM work agents' --status-sync-interval; the clusters' controllers rewrite their vehicle report every (unreachableAfter - 2 x this)/4 so that a live one is never taken for a stopped one (docs/hub.md)")
	fs.IntVar(&o.WorkWriters, "work-writers", hub.DefaultWorkWriters, "with --hub: ManifestWorks a reconcile writes at once (each waits for the API server's answer; one at a time, a step over 3,500 clusters waited 26 ms a work, docs/bench-hub.md); the profile's status is still patched once, after them")
	fs.BoolVar(&o.AddOn.Manager, "addon-manager", false, "with --hub: run nettune's Open Cluster Management add-on manager (docs/hub-addon.md): keep the ClusterManagementAddOn --addon-name and install the chart built into this binary in every cluster that has its ManagedClusterAddOn, one ManifestWork each")
	fs.StringVar(&o.AddOn.Name, "addon-name", addon.DefaultName, "the add-on's name (ClusterManagementAddOn, ManagedClusterAddOns, the Lease of its health)")
	fs.Var(&o.AddOn.Placements, "addon-placement", "with --addon-manager: NAMESPACE/NAME of a Placement whose clusters get the add-on (repeatable; none: the install strategy is Manual, a ManagedClusterAddOn per cluster made by hand)")
	fs.StringVar(&o.AddOn.Rollout, "addon-rollout", "Progressive", "with --addon-placement: how a new chart version goes out, All or Progressive")
	fs.StringVar(&o.AddOn.MaxConcurrency, "addon-max-concurrency", "1", "with --addon-rollout=Progressive: clusters upgrading at once, a count or a percentage")
	fs.StringVar(&o.AddOn.ValuesFile, "addon-values", "", "with --addon-manager: a YAML file of chart values for every cluster (an AddOnDeploymentConfig's customizedVariables go over them per cluster)")
	fs.StringVar(&o.AddOn.Gate, "addon-gate", "auto", "with --hub: place profiles only in clusters whose add-on is Available at --addon-min-version or later (true, false, or auto: on with --addon-manager)")
	fs.StringVar(&o.AddOn.MinVersion, "addon-min-version", "0.1.0", "with the add-on gate: the oldest chart version a profile may be placed on")
	fs.StringVar(&o.AddOn.Lease, "addon-lease", "", "in a cluster: the Lease (in --namespace) to renew for Open Cluster Management's add-on health check; empty renews none")
	fs.DurationVar(&o.AddOn.LeaseInterval, "addon-lease-interval", addon.DefaultLeaseInterval, "how often --addon-lease is renewed")
	fs.StringVar(&o.LokiAddress, "loki-address", "", "Loki base URL for analyses without an address (e.g. http://loki.monitoring:3100)")
	fs.StringVar(&o.PrometheusAddress, "prometheus-address", "", "Prometheus base URL for analyses without an address")
	fs.StringVar(&o.LokiSecret, "loki-secret", "", "Secret in --namespace with the credentials (tenant, username/password or token, ca.crt, tls.crt/tls.key, header.NAME) sent with queries to --loki-address; read at every measurement (docs/observability.md)")
	fs.StringVar(&o.PrometheusSecret, "prometheus-secret", "", "Secret in --namespace with the credentials sent with queries to --prometheus-address")
	fs.StringVar(&o.LokiPushCredentialsDir, "loki-push-credentials-dir", "", "directory of a mounted Secret with the credentials of --loki-push-url (same keys as --loki-secret), re-read at every push")
	fs.DurationVar(&o.QueryTimeout, "query-timeout", 30*time.Second, "timeout of one analysis query")
	fs.StringVar(&o.LokiPushURL, "loki-push-url", "", `Loki base URL (e.g. http://loki.monitoring:3100) to ship the rollout events to, as JSON lines in the stream {job="nettune-controller", profile}; empty ships nothing`)
	fs.StringVar(&o.LokiBufferDir, "loki-buffer-dir", "", "directory buffering the events Loki has not taken yet (default "+defaultLokiBufferDir()+")")
	fs.Int64Var(&o.LokiBufferMaxBytes, "loki-buffer-max-bytes", lokipush.DefaultMaxBytes, "bound of the Loki buffer on disk; the oldest events are dropped beyond it")
}

func defaultLokiBufferDir() string {
	return filepath.Join(os.TempDir(), "nettune-controller-loki-buffer")
}

// newEventShipper is the Loki shipper of the rollout events, nil without
// --loki-push-url.
func newEventShipper(o Options, reg prometheus.Registerer, log logr.Logger) (*lokipush.Shipper, error) {
	if o.LokiPushURL == "" {
		return nil, nil
	}
	dir := o.LokiBufferDir
	if dir == "" {
		dir = defaultLokiBufferDir()
	}
	if err := noUserinfo("--loki-push-url", o.LokiPushURL); err != nil {
		return nil, err
	}
	var hc *http.Client
	if o.LokiPushCredentialsDir != "" {
		if _, err := httpauth.ReadDir(o.LokiPushCredentialsDir); err != nil {
			return nil, fmt.Errorf("--loki-push-credentials-dir: %w", err)
		}
		hc = httpauth.DirClient(o.LokiPushCredentialsDir, false, 10*time.Second)
	}
	s, err := lokipush.New(lokipush.Options{URL: o.LokiPushURL, Dir: dir, MaxBytes: o.LokiBufferMaxBytes, Log: log, Registerer: reg, Client: hc})
	if err != nil {
		return nil, fmt.Errorf("loki event shipper: %w", err)
	}
	return s, nil
}

func run(args []string) error {
	var o Options
	fs := flag.NewFlagSet("nettune-controller", flag.ContinueOnError)
	o.register(fs)
	zopts := zap.Options{}
	zopts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.WorkWriters < 1 {
		return fmt.Errorf("--work-writers %d: at least 1 ManifestWork must be written at a time", o.WorkWriters)
	}
	for name, v := range map[string]string{"--loki-address": o.LokiAddress, "--prometheus-address": o.PrometheusAddress} {
		if err := noUserinfo(name, v); err != nil {
			return err
		}
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zopts)))
	setMemoryLimit(ctrl.Log.WithName("setup"), "/sys/fs/cgroup")
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		return fmt.Errorf("--kube-api-qps (%g) and --kube-api-burst (%d) must be above 0", o.KubeAPIQPS, o.KubeAPIBurst)
	}
	cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	return Run(ctrl.SetupSignalHandler(), cfg, o)
}

// Run starts the manager and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	newScheme := scheme.New
	if o.Hub {
		newScheme = scheme.NewHub
	}
	s, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        s,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "nettune-controller.nettune.io",
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(o),
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	setup := controllers.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("nettune-controller"),
		Namespace: o.Namespace, RenderWorkers: o.RenderWorkers, WorkStatusSync: o.WorkStatusSync, WorkWriters: o.WorkWriters,
		Backends: analysis.Backends{Queriers: analysis.HTTPQueriers(o.QueryTimeout), LokiAddress: o.LokiAddress, PrometheusAddress: o.PrometheusAddress,
			LokiSecret: o.LokiSecret, PrometheusSecret: o.PrometheusSecret},
	}
	shipper, err := newEventShipper(o, metrics.Registry, ctrl.Log.WithName("loki"))
	if err != nil {
		return err
	}
	if shipper != nil {
		// The shipper outlives the manager: the events of the last
		// reconciles are pushed (or written to the buffer) after every
		// controller has stopped.
		shipCtx, cancelShip := context.WithCancel(context.Background())
		shipped := make(chan struct{})
		go func() {
			defer close(shipped)
			_ = shipper.Run(shipCtx)
		}()
		defer func() {
			cancelShip()
			<-shipped
		}()
		setup.EventLog = shipper
	}
	if o.Hub {
		if err := setupAddOnManager(mgr, o); err != nil {
			return err
		}
		setup.AddOnGate, err = addOnGate(o)
		if err != nil {
			return err
		}
		err = controllers.SetupHub(mgr, setup, o.ClusterNamespace)
	} else {
		err = controllers.Setup(mgr, setup)
	}
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if !o.Hub && o.AddOn.Lease != "" {
		// Past the cache: the controller watches no Leases.
		c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return err
		}
		if err := mgr.Add(&addon.Lease{Client: c, Name: o.AddOn.Lease, Namespace: o.Namespace, Interval: o.AddOn.LeaseInterval}); err != nil {
			return err
		}
	}
	// The revisions' namespace must exist; say so early rather than at the
	// first rollout.
	if err := mgr.Add(nsCheck{c: mgr.GetAPIReader(), ns: o.Namespace}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

type nsCheck struct {
	c  client.Reader
	ns string
}

func (n nsCheck) Start(ctx context.Context) error {
	err := n.c.Get(ctx, client.ObjectKey{Name: n.ns}, &corev1.Namespace{})
	switch {
	case apierrors.IsNotFound(err):
		ctrl.Log.Error(err, "the revisions namespace does not exist; create it (kubectl create namespace "+n.ns+")", "namespace", n.ns)
	case err != nil:
		ctrl.Log.Error(err, "cannot check the revisions namespace", "namespace", n.ns)
	}
	return nil
}

// cacheOptions: a cluster's controller caches Nodes and NodeNetTunings
// trimmed (fleetcache); a hub caches none of them.
func cacheOptions(o Options) cache.Options {
	if o.Hub {
		return cache.Options{}
	}
	return fleetcache.Options(o.Namespace)
}

// noUserinfo refuses a URL carrying user:password@: a credential there
// would be in the Deployment and in ps; it belongs in a Secret.
func noUserinfo(flagName, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%s: not a URL", flagName)
	}
	if u.User != nil {
		return fmt.Errorf("%s must not carry credentials (user:password@): anyone who can read the Deployment or ps would see them; give them in a Secret (--loki-secret, --loki-push-credentials-dir)", flagName)
	}
	return nil
}
