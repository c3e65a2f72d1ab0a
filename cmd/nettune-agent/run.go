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

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/httpauth"
	"github.com/nettune/nettune/node-agent/agent"
	"github.com/nettune/nettune/node-agent/gate"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/latency"
	"github.com/nettune/nettune/node-agent/lokipush"
)

type runOptions struct {
	node        string
	metricsAddr string
	healthAddr  string
	probePort   int
	heartbeat   time.Duration
	resync      time.Duration
	rtoPoll     time.Duration
	leaseNS     string
	leaseRenew  time.Duration

	vehicle            string
	vehicleLabel       string
	host               string
	hostLabel          string
	lokiURL            string
	lokiBufferDir      string
	lokiBufferMaxBytes int64
	lokiCredsDir       string
	lokiInsecure       bool
	clockSkew          time.Duration
	probeTopics        topicFlags
	gateFile           string
	location           *time.Location
}

// gatePoll is how often the apply gate file is read.
const gatePoll = 250 * time.Millisecond

// topicFlags is the repeatable --probe-topic name:size:rate.
type topicFlags []latency.Topic

func (f *topicFlags) String() string {
	parts := make([]string, len(*f))
	for i, t := range *f {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}

func (f *topicFlags) Set(s string) error {
	t, err := latency.ParseTopic(s)
	if err != nil {
		return err
	}
	for _, have := range *f {
		if have.Name == t.Name {
			return fmt.Errorf("topic %q given twice", t.Name)
		}
	}
	*f = append(*f, t)
	return nil
}

func (o *runOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.node, "node", "", "name of this node (its NodeNetTuning has the same name)")
	fs.DurationVar(&o.clockSkew, "clock-skew", 0, "for fault testing: shift every time the agent writes (Lease renewals, status heartbeats, journal and last-known-good times) by this much, as a vehicle whose clock is wrong would")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9101", "Prometheus /metrics address (\"0\" disables)")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", "0", "healthz/readyz address: 200 while connected to the API server, 503 while it is out of reach (\"0\" disables)")
	fs.IntVar(&o.probePort, "probe-port", 9102, "TCP port peers connect to for post-apply probes (0 disables)")
	fs.DurationVar(&o.heartbeat, "heartbeat", v1alpha1.DefaultStatusRefresh, "rewrite an unchanged status (lastHeartbeatTime) this often; liveness is the Lease (--lease-renew), so this only bounds how stale a status looks")
	fs.StringVar(&o.leaseNS, "lease-namespace", defaultLeaseNamespace(), "namespace of the agent's Lease (named after the node; the controller's namespace), default $POD_NAMESPACE or nettune-system")
	fs.DurationVar(&o.leaseRenew, "lease-renew", v1alpha1.DefaultAgentLeaseRenew, "renew the agent's Lease this often (keep it well below the profiles' unreachableAfter, default 2m); 0 keeps no Lease and heartbeats through the status instead (set --heartbeat below unreachableAfter then)")
	fs.DurationVar(&o.resync, "resync", 30*time.Second, "re-check the host for drift at least this often")
	fs.DurationVar(&o.rtoPoll, "rto-poll-interval", agent.DefaultRTOPollInterval, "poll sock_diag and TcpExt TCPTimeouts this often for nettune_tcp_rto_episodes_total, the per-peer estimate of retransmission timeouts on kernels without tcpi_total_rto (before 6.7); 0 disables it (docs/kernels.md)")
	fs.StringVar(&o.vehicle, "vehicle", "", "the vehicle this node belongs to: the vehicle label of the probe's metrics and of everything shipped to Loki")
	fs.StringVar(&o.vehicleLabel, "vehicle-from-node-label", "", "when --vehicle is not set, read the vehicle from this label of the node's Node object (e.g. nettune.io/vehicle), remembered in the state directory for starts without the API server")
	fs.StringVar(&o.host, "host", "", "this node's host name inside its vehicle (value of the host label, e.g. xavier-b): the host label of the probe's metrics and samples, so analyses compare host pairs (host -> peer) across vehicles")
	fs.StringVar(&o.hostLabel, "host-from-node-label", "", "when --host is not set, read the host from this label of the node's Node object (e.g. nettune.io/host), remembered in the state directory for starts without the API server")
	fs.StringVar(&o.lokiURL, "loki-url", "", "Loki base URL (e.g. http://loki:3100) to ship probe samples and apply events to; empty ships nothing")
	fs.StringVar(&o.lokiBufferDir, "loki-buffer-dir", "", "directory buffering what Loki has not taken yet (default <state-dir>/loki-buffer)")
	fs.Int64Var(&o.lokiBufferMaxBytes, "loki-buffer-max-bytes", lokipush.DefaultMaxBytes, "bound of the Loki buffer on disk; the oldest data is dropped beyond it")
	fs.StringVar(&o.lokiCredsDir, "loki-credentials-dir", "", "directory of the Loki push's credentials, one file per key (a mounted Secret, or files Ansible put on the vehicle): tenant (X-Scope-OrgID), username and password (basic auth) or token (bearer), ca.crt (CA trusted instead of the system's), tls.crt and tls.key (client certificate), header.NAME (an extra header); read again at every push, so a rotation needs no restart")
	fs.BoolVar(&o.lokiInsecure, "loki-insecure-skip-verify", false, "do not verify Loki's TLS certificate (a test installation only: anyone on the path could read the credentials)")
	fs.StringVar(&o.gateFile, "apply-gate-file", "", "the vehicle's apply gate: a file the autonomy stack writes \"open\" or \"closed <reason>\" to; a new revision starts to apply only while it says open (missing or unreadable: closed). Empty: no gate (docs/apply-gates.md)")
	fs.Func("time-zone", "the vehicle's IANA time zone (e.g. Asia/Shanghai), in which maintenance windows without a zone of their own are read (default: the host's local time)", func(v string) error {
		loc, err := time.LoadLocation(v)
		if err != nil {
			return fmt.Errorf("unknown time zone %q: %w", v, err)
		}
		o.location = loc
		return nil
	})
	fs.Var(&o.probeTopics, "probe-topic", "emulate a middleware topic towards every peer with a probe port, as name:size:rate (bytes, messages/s), e.g. planning:4096:100; repeatable; none turns the latency probe off")
}

// runAgent boots from the last-known-good state first (no API server
// needed), then watches the node's NodeNetTuning, retrying the API server
// forever while the vehicle is offline. Drift repair runs throughout.
func runAgent(ctx context.Context, c *common, o *runOptions, out io.Writer) error {
	if o.node == "" {
		return errors.New("--node is required")
	}
	if o.rtoPoll < 0 {
		return fmt.Errorf("--rto-poll-interval (%s) must be at least 0", o.rtoPoll)
	}
	if o.heartbeat <= 0 || o.resync <= 0 || o.leaseRenew < 0 {
		return fmt.Errorf("--heartbeat (%s) and --resync (%s) must be above 0, --lease-renew (%s) at least 0", o.heartbeat, o.resync, o.leaseRenew)
	}
	if err := checkLokiURL(o.lokiURL); err != nil {
		return err
	}
	log := c.logger(out).WithValues("node", o.node)
	e, err := c.engine(log)
	if err != nil {
		return err
	}
	now := func() time.Time { return time.Now().Add(o.clockSkew) }
	e.Now = now
	// What the kernel provides, learned once by trying it: the status
	// carries it, so that analyses skip a counter a vehicle's kernel lacks.
	features, err := e.Host.ProbeFeatures()
	if err != nil {
		log.Error(err, "probing the kernel's features: reporting what was learned")
	}
	log.Info("kernel features", "release", features.Release, "machine", features.Machine,
		"tcpInfoBytes", features.TCPInfoBytes, "tcpInfoCounters", features.TCPInfoCounters,
		"congestionControls", features.CongestionControls)

	// What is started below ends with runCtx, and runAgent waits for it;
	// the Loki shipper ends last (shipCtx), pushing or writing to disk what
	// it still holds, the emulator's last samples included.
	runCtx, cancel := context.WithCancel(ctx)
	shipCtx, cancelShip := context.WithCancel(context.Background())
	var background []chan struct{}
	shipped := make(chan struct{})
	defer func() {
		cancel()
		for _, done := range background {
			<-done
		}
		cancelShip()
		<-shipped
	}()
	goBackground := func(f func()) {
		done := make(chan struct{})
		background = append(background, done)
		go func() {
			defer close(done)
			f()
		}()
	}

	// The probe port listens before anything else: peers probing after
	// their own apply must find it while this agent still resolves its
	// labels or boots from its last-known-good state.
	if o.probePort > 0 {
		if err := serveProbe(runCtx, e, o.probePort, log); err != nil {
			close(shipped)
			return err
		}
	}
	// Metrics and health are served for the agent's whole life (the
	// metrics also while the API server is out of reach); /healthz and
	// /readyz answer 200 only while the agent is connected to it.
	registry := newRegistry()
	connected := &atomic.Bool{}
	for _, srv := range []struct {
		addr string
		h    http.Handler
	}{{o.metricsAddr, metricsHandler(registry)}, {o.healthAddr, healthHandler(connected)}} {
		if srv.addr == "0" || srv.addr == "" {
			continue
		}
		done, err := serveHTTP(runCtx, srv.addr, srv.h, log)
		if err != nil {
			close(shipped)
			return err
		}
		background = append(background, done)
	}

	if o.vehicle == "" && o.vehicleLabel != "" {
		o.vehicle = resolveVehicle(ctx, c.stateDir, o.node, o.vehicleLabel, 10*time.Second, log)
	}
	if o.host == "" && o.hostLabel != "" {
		o.host = resolveHost(ctx, c.stateDir, o.node, o.hostLabel, 10*time.Second, log)
	}

	var shipper *lokipush.Shipper
	if o.lokiURL != "" {
		dir := o.lokiBufferDir
		if dir == "" {
			dir = filepath.Join(c.stateDir, "loki-buffer")
		}
		if o.vehicle == "" {
			log.Info("--vehicle is not set: what is shipped to Loki has no vehicle label")
		}
		client, redact, err := lokiClient(o, log.WithName("loki"))
		if err != nil {
			close(shipped)
			return err
		}
		shipper, err = lokipush.New(lokipush.Options{URL: o.lokiURL, Dir: dir, MaxBytes: o.lokiBufferMaxBytes,
			Client: client, Redact: redact, Log: log.WithName("loki"), Registerer: registry})
		if err != nil {
			close(shipped)
			return err
		}
		go func() {
			defer close(shipped)
			_ = shipper.Run(shipCtx)
		}()
	} else {
		close(shipped)
	}
	// The latency probe's targets follow the applied spec: re-read it after
	// every apply event (and every resync).
	retarget := make(chan struct{}, 1)
	events := &agentEvents{shipper: shipper, vehicle: o.vehicle, node: o.node, changed: func() {
		select {
		case retarget <- struct{}{}:
		default:
		}
	}}

	boot, err := e.Boot(ctx)
	if err != nil {
		return fmt.Errorf("booting from last-known-good: %w", err)
	}
	log.Info("booted", "revision", boot.Revision, "committed", boot.Committed, "reason", boot.Reason)
	switch {
	case boot.Committed:
		events.Event(agent.EventApplied, boot.Revision, "boot: last-known-good revision re-applied and read back as desired")
	case boot.RolledBack:
		events.Event(agent.EventReverted, boot.Revision, "boot: re-applying the last-known-good revision failed and was undone: "+boot.Reason)
	}

	if len(o.probeTopics) > 0 {
		emu, err := startEmulator(e, o, shipper, registry, log.WithName("probe"))
		if err != nil {
			return err
		}
		goBackground(func() {
			followTargets(runCtx, e, emu, retarget, o.resync, log.WithName("probe"))
			emu.Close()
		})
	}

	if o.rtoPoll > 0 {
		features.EstimatedCounters = []kernel.NodeCounter{{Name: agent.EstimateRTOEpisodes, Meaning: agent.RTOEpisodesMeaning(o.rtoPoll, features.Release)}}
	}
	r := &agent.Reconciler{Engine: e, NodeName: o.node, Heartbeat: o.heartbeat, Resync: o.resync, Kick: make(chan struct{}, 1), Events: events, Now: now, Kernel: &features}
	if shipper != nil {
		r.Logs = shipper // the LogsShipped condition
	}
	if o.gateFile != "" {
		r.Gate = &gate.File{Path: o.gateFile, Now: now}
	}
	r.Location = o.location
	// The agent's own metrics carry the vehicle as well as the node, and its
	// TCP metrics the host too, like the probe's: dashboards select them by
	// vehicle with or without the latency probe, and analyses group the TCP
	// guard counters by host pair (host, peer) as they do the probe's.
	r.Metrics = agent.NewMetricsFor(registry, agent.MetricLabels{Node: o.node, Vehicle: o.vehicle, Host: o.host}, e)
	if o.rtoPoll > 0 {
		goBackground(func() { r.Metrics.RunRTOEpisodes(runCtx, e, o.rtoPoll) })
	}
	go func() {
		if err := e.WatchDrift(ctx, o.resync, 50*time.Millisecond, func(n int) {
			r.Metrics.DriftRepairs.Add(float64(n))
			r.DriftRepaired(n)
		}); err != nil {
			log.Error(err, "drift watcher stopped")
		}
	}()

	if r.Gate != nil {
		// The gate is read here and again before every apply: a change
		// wakes the reconciler, so a held revision starts within a poll of
		// the gate opening.
		goBackground(func() {
			r.Gate.Watch(runCtx, gatePoll, func(s gate.State) {
				log.Info("apply gate", "state", s.State, "reason", s.Reason)
				r.GateChanged()
			})
		})
	}

	// The API server may be out of reach (vehicle offline): keep the host as
	// booted and retry with backoff until it answers. A connection lists
	// again by itself (within agent.WatchRetryMax) for as long as it runs;
	// it ends when no list succeeded for agent.DefaultSyncTimeout, and the
	// next one starts after at most reconnectMax.
	backoff := time.Second
	for {
		err := connect(ctx, r, o, connected, log)
		if ctx.Err() != nil {
			return nil
		}
		log.Error(err, "control plane unreachable; keeping the last-known-good state", "retryIn", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, reconnectMax)
	}
}

// reconnectMax bounds the wait between two connections: no longer than
// the watch's own retries (agent.WatchRetryMax), so that the agent lists
// within that bound of the API server's return whether or not a
// connection is running.
const reconnectMax = agent.WatchRetryMax

// connect watches the node's NodeNetTuning and renews its Lease until ctx
// ends (nil) or the API server is out of reach (an error; runAgent calls
// it again). The Lease is renewed while the watch is listed and runs.
func connect(ctx context.Context, r *agent.Reconciler, o *runOptions, connected *atomic.Bool, log logr.Logger) error {
	cfg, err := agent.LoadConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	kube, err := agent.NewKube(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var leased chan struct{}
	if o.leaseRenew > 0 {
		keeper := &agent.LeaseKeeper{Client: kube, Namespace: o.leaseNS, Node: o.node, Renew: o.leaseRenew, Log: log.WithName("lease"), Now: r.Now}
		leased = make(chan struct{})
		go func() {
			defer close(leased)
			_ = keeper.Start(ctx)
		}()
	}
	defer func() {
		connected.Store(false)
		cancel()
		if leased != nil {
			<-leased
		}
	}()
	connected.Store(true)
	r.Recorder = kube.EventRecorder(ctx, "nettune-agent", log.WithName("events"))
	log.Info("watching NodeNetTuning", "name", o.node, "apiServer", cfg.Host)
	return r.Run(ctx, kube, agent.DefaultSyncTimeout, log)
}

// newRegistry is the agent's Prometheus registry, with the Go runtime's
// and the process' own metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return reg
}

// metricsHandler serves /metrics.
func metricsHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	return mux
}

// healthHandler serves /healthz and /readyz (and /healthz/ping, ...):
// 200 while connected, else 503.
func healthHandler(connected *atomic.Bool) http.Handler {
	check := func(w http.ResponseWriter, _ *http.Request) {
		if !connected.Load() {
			http.Error(w, "not connected to the API server", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/healthz/", "/readyz", "/readyz/"} {
		mux.HandleFunc(p, check)
	}
	return mux
}

// serveHTTP serves h on addr until ctx ends; done is closed when the
// server stopped.
func serveHTTP(ctx context.Context, addr string, h http.Handler, log logr.Logger) (done chan struct{}, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done = make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "serving", "address", addr)
		}
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	return done, nil
}

// lokiPushTimeout bounds one push to Loki.
const lokiPushTimeout = 10 * time.Second

// checkLokiURL refuses a --loki-url that is not an http(s) URL or that
// carries credentials (user:password@): they would show in the process
// list, the logs and the DaemonSet's spec. The error never repeats them.
func checkLokiURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which may hold a password
		}
		return fmt.Errorf("--loki-url is not a URL: %v", err)
	}
	if u.User != nil {
		return errors.New("--loki-url carries a user name or password (user:password@): remove them from the URL and give the credentials with --loki-credentials-dir instead (a directory with the keys username and password, or token, and tenant)")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--loki-url %q is not an http:// or https:// URL with a host", u.Redacted())
	}
	return nil
}

// lokiClient is the Loki push's HTTP client: with --loki-credentials-dir an
// httpauth.DirClient (the directory read again at every push; a directory
// that cannot be read keeps the lines on disk, reported as
// CredentialsInvalid, rather than stopping the agent, whose first job is
// the host's tuning), else a plain client. redact scrubs the directory's
// current secret values from what the shipper reports.
func lokiClient(o *runOptions, log logr.Logger) (*http.Client, func(string) string, error) {
	if o.lokiCredsDir == "" {
		if !o.lokiInsecure {
			return &http.Client{Timeout: lokiPushTimeout}, nil, nil
		}
		log.Info("TLS verification of Loki's certificate is off (--loki-insecure-skip-verify)")
		c, err := httpauth.NewTransports().Client(&httpauth.Credentials{Source: "--loki-insecure-skip-verify", InsecureSkipVerify: true}, lokiPushTimeout)
		return c, nil, err
	}
	dir := o.lokiCredsDir
	if creds, err := httpauth.ReadDir(dir); err != nil {
		// Errors name the directory and the key, never a value.
		log.Error(err, "Loki credentials cannot be used yet; lines are kept on disk until they can", "dir", dir)
	} else {
		creds.InsecureSkipVerify = o.lokiInsecure
		log.Info("Loki credentials", "dir", dir, "sending", creds.Describe())
	}
	redact := func(s string) string {
		if c, err := httpauth.ReadDir(dir); err == nil {
			return c.Redact(s)
		}
		return s
	}
	return httpauth.DirClient(dir, o.lokiInsecure, lokiPushTimeout), redact, nil
}

// defaultLeaseNamespace is $POD_NAMESPACE (the chart sets it to the
// release namespace) or nettune-system.
func defaultLeaseNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return "nettune-system"
}

// serveProbe listens on the probe port inside the host's namespace: peers'
// post-apply connect probes and tcp_metrics priming land here.
func serveProbe(ctx context.Context, e *agent.Engine, port int, log logr.Logger) error {
	var ln net.Listener
	err := e.Host.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", ":"+strconv.Itoa(port))
		return err
	})
	if err != nil {
		return fmt.Errorf("listening on probe port %d: %w", port, err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() == nil {
					log.Error(err, "probe listener")
				}
				return
			}
			// Latency clients (the peers' topic emulators) get an ack per
			// message; connect probes and priming are read and discarded.
			go latency.Serve(c)
		}
	}()
	return nil
}

// startEmulator creates the topic emulator: its connections are opened
// inside the host's namespace, its samples go to Prometheus and, with
// --loki-url, to Loki.
func startEmulator(e *agent.Engine, o *runOptions, shipper *lokipush.Shipper, reg prometheus.Registerer, log logr.Logger) (*latency.Emulator, error) {
	constLabels := prometheus.Labels{"node": o.node}
	if o.vehicle != "" {
		constLabels["vehicle"] = o.vehicle
	}
	if o.host != "" {
		constLabels["host"] = o.host
	}
	prom, err := latency.NewPrometheusSink(reg, constLabels)
	if err != nil {
		return nil, fmt.Errorf("registering the probe's metrics: %w", err)
	}
	sinks := latency.Sinks{prom}
	if shipper != nil {
		sinks = append(sinks, &latency.LokiSink{Shipper: shipper, Vehicle: o.vehicle, Node: o.node, Host: o.host})
	}
	return latency.NewEmulator(latency.Options{
		Topics: o.probeTopics,
		Sink:   sinks,
		Log:    log,
		Dial: func(ctx context.Context, addr string) (net.Conn, error) {
			var conn net.Conn
			err := e.Host.Do(func() error {
				var d net.Dialer
				var err error
				conn, err = d.DialContext(ctx, "tcp", addr)
				return err
			})
			return conn, err
		},
	}), nil
}

// followTargets points the emulator at the peers of the applied
// (last-known-good) spec, labeled with the profile revision on the route to
// each: now, on every retarget signal (an apply event) and every resync,
// until ctx ends.
func followTargets(ctx context.Context, e *agent.Engine, emu *latency.Emulator, retarget <-chan struct{}, resync time.Duration, log logr.Logger) {
	tick := time.NewTicker(resync)
	defer tick.Stop()
	var last []latency.Target
	first := true
	for {
		spec, err := e.CommittedSpec()
		if err != nil {
			log.Error(err, "reading the applied spec for the latency probe")
		} else if targets := latency.Targets(spec); first || !slices.Equal(targets, last) {
			log.Info("latency probe targets", "revision", spec.Revision, "targets", targetNames(targets))
			emu.Update(targets)
			last, first = targets, false
		}
		select {
		case <-ctx.Done():
			return
		case <-retarget:
		case <-tick.C:
		}
	}
}

func targetNames(ts []latency.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = fmt.Sprintf("%s@%s (%s)", t.Peer, t.Addr(), orNone(t.Revision))
	}
	return out
}

// agentEvents ships the agent's events to Loki as JSON lines
// {"event":"applied","revision":"...","message":"..."} in the stream
// {job="nettune-agent", vehicle, node}, and signals changed on each (the
// applied spec may have changed).
type agentEvents struct {
	shipper       *lokipush.Shipper // nil: not shipped
	vehicle, node string
	changed       func()
}

// AgentJob is the job label of the agent's event stream in Loki.
const AgentJob = "nettune-agent"

func (a *agentEvents) Event(kind, revision, message string) {
	if a.changed != nil {
		a.changed()
	}
	if a.shipper == nil {
		return
	}
	line, err := json.Marshal(struct {
		Event    string `json:"event"`
		Revision string `json:"revision"`
		Message  string `json:"message"`
	}{kind, revision, message})
	if err != nil {
		return
	}
	a.shipper.Add(map[string]string{"job": AgentJob, "vehicle": a.vehicle, "node": a.node}, time.Now(), string(line))
}
