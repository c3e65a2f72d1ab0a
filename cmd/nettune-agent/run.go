package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nettune/nettune/internal/scheme"
	"github.com/nettune/nettune/node-agent/agent"
)

type runOptions struct {
	node        string
	metricsAddr string
	healthAddr  string
	probePort   int
	heartbeat   time.Duration
	resync      time.Duration
	itemDelay   time.Duration
}

func (o *runOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.node, "node", "", "name of this node (its NodeNetTuning has the same name)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":9101", "Prometheus /metrics address (\"0\" disables)")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", "0", "healthz/readyz address (\"0\" disables)")
	fs.IntVar(&o.probePort, "probe-port", 9102, "TCP port peers connect to for post-apply probes (0 disables)")
	fs.DurationVar(&o.heartbeat, "heartbeat", 5*time.Minute, "rewrite status at least this often even when unchanged")
	fs.DurationVar(&o.resync, "resync", 30*time.Second, "re-check the host for drift at least this often")
	fs.DurationVar(&o.itemDelay, "test-apply-item-delay", 0, "slow every applied item down (crash-recovery tests only)")
}

// runAgent boots from the last-known-good state first (no API server
// needed), then watches the node's NodeNetTuning, retrying the API server
// forever while the vehicle is offline. Drift repair runs throughout.
func runAgent(ctx context.Context, c *common, o *runOptions, out io.Writer) error {
	if o.node == "" {
		return errors.New("--node is required")
	}
	log := c.logger(out).WithValues("node", o.node)
	ctrl.SetLogger(log)
	e, err := c.engine(log)
	if err != nil {
		return err
	}
	e.ItemDelay = o.itemDelay

	boot, err := e.Boot(ctx)
	if err != nil {
		return fmt.Errorf("booting from last-known-good: %w", err)
	}
	log.Info("booted", "revision", boot.Revision, "committed", boot.Committed, "reason", boot.Reason)

	if o.probePort > 0 {
		if err := serveProbe(ctx, e, o.probePort, log); err != nil {
			return err
		}
	}

	r := &agent.Reconciler{Engine: e, NodeName: o.node, Heartbeat: o.heartbeat, Resync: o.resync, Kick: make(chan event.GenericEvent, 1)}
	r.Metrics = agent.NewMetrics(metrics.Registry, o.node, e)
	go func() {
		if err := e.WatchDrift(ctx, o.resync, 50*time.Millisecond, func(n int) {
			r.Metrics.DriftRepairs.Add(float64(n))
			r.DriftRepaired(n)
		}); err != nil {
			log.Error(err, "drift watcher stopped")
		}
	}()

	// The API server may be out of reach (vehicle offline): keep the host as
	// booted and retry with backoff until it answers.
	backoff := time.Second
	for {
		err := runManager(ctx, r, o, log)
		if ctx.Err() != nil {
			return nil
		}
		log.Error(err, "control plane unreachable; keeping the last-known-good state", "retryIn", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

func runManager(ctx context.Context, r *agent.Reconciler, o *runOptions, log logr.Logger) error {
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	sch, err := scheme.New()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 sch,
		Cache:                  agent.CacheOptions(o.node),
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.healthAddr,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if o.healthAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return err
		}
	}
	r.Client = mgr.GetClient()
	r.Recorder = mgr.GetEventRecorder("nettune-agent")
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up reconciler: %w", err)
	}
	log.Info("watching NodeNetTuning", "name", o.node, "apiServer", cfg.Host)
	return mgr.Start(ctx)
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
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return nil
}
