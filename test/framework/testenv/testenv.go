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

// Package testenv starts real backing services for tests: the observability
// stack of internal/stack (a single-binary Loki, Debian's Prometheus and the
// nginx TLS and basic-auth gateway in front of Loki), each tied to a test.
//
// Every service runs on 127.0.0.1 on free ports with its state in a fresh
// temporary directory; t.Cleanup kills it and removes the directory. Its
// last log lines are logged when the test failed. The helpers of Loki,
// Prometheus and Gateway fail the test instead of returning an error.
package testenv

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/stack"
)

// logTailLines is how many lines of a service's log are logged when the
// test failed.
const logTailLines = 50

// Names of internal/stack, so that tests need only this package.
type (
	// LokiEntry is one log line and its timestamp.
	LokiEntry = stack.LokiEntry
	// LokiOptions configures StartLokiOpts.
	LokiOptions = stack.LokiOptions
	// PrometheusOptions configures StartPrometheusOpts.
	PrometheusOptions = stack.PrometheusOptions
	// GatewayOptions configures StartGateway.
	GatewayOptions = stack.GatewayOptions
	// GatewayUser is a user of the gateway.
	GatewayUser = stack.GatewayUser
)

const (
	// DefaultLokiTenant is the Tenant of a Loki started with Auth and no
	// Tenant.
	DefaultLokiTenant = stack.DefaultLokiTenant
	// PrometheusJob is the job label of every target StartPrometheus
	// scrapes.
	PrometheusJob = stack.PrometheusJob
)

// service is what the cleanup needs of a service of internal/stack.
type service interface {
	Close() error
	LogPath() string
	LogTail(n int) string
}

// tempDir is a fresh temporary directory for a service, named after it.
func tempDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nettune-"+name+"-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return dir
}

// cleanup stops s and removes dir when the test ends, first logging the tail
// of s's log (and of more, e.g. the gateway's access log) if the test failed.
func cleanup(t testing.TB, name string, s service, dir string, more func()) {
	t.Cleanup(func() {
		_ = s.Close()
		if t.Failed() {
			t.Logf("last %d lines of %s log (%s):\n%s", logTailLines, name, s.LogPath(), s.LogTail(logTailLines))
			if more != nil {
				more()
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing %s: %v", dir, err)
		}
	})
}

// logf makes a service's notes (a stop, a reload) lines of t's log.
func logf(t testing.TB) func(format string, args ...any) {
	return func(format string, args ...any) {
		t.Helper()
		t.Logf("testenv: "+format, args...)
	}
}

// Loki is a real single-binary Loki (stack.Loki) whose helpers fail the
// test.
type Loki struct{ *stack.Loki }

// StartLoki starts Loki and waits until /ready answers 200. It fails the test
// if bin/loki is missing (`make tools` builds it). The process is killed and
// its directory removed when the test ends.
func StartLoki(t testing.TB) *Loki {
	t.Helper()
	return StartLokiOpts(t, LokiOptions{})
}

// StartLokiOpts is StartLoki with options, e.g. LokiOptions{Auth: true} for
// a multi-tenant Loki.
func StartLokiOpts(t testing.TB, opts LokiOptions) *Loki {
	t.Helper()
	dir := tempDir(t, "loki")
	began := time.Now()
	l, err := stack.RunLokiOpts(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("testenv: starting Loki: %v", err)
	}
	l.Logf = logf(t)
	cleanup(t, "loki", l, dir, nil)
	t.Logf("testenv: Loki ready at %s in %v (dir %s, auth %t, tenant %q)", l.URL, time.Since(began).Round(time.Millisecond), dir, opts.Auth, l.Tenant)
	return &Loki{l}
}

// WithTenant returns a copy of l whose helpers send X-Scope-OrgID tenant
// (several joined by "|" for queries). Use it for helper calls only: Stop and
// Restart belong to the Loki StartLoki returned.
func (l Loki) WithTenant(tenant string) *Loki {
	return &Loki{l.Loki.WithTenant(tenant)}
}

// Push sends entries as one stream with labels to /loki/api/v1/push and fails
// the test unless Loki answers 2xx.
func (l Loki) Push(t testing.TB, labels map[string]string, entries []LokiEntry) {
	t.Helper()
	if err := l.Loki.Push(labels, entries); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// WaitForCount polls Loki until the count of logql is at least want, and
// fails the test after timeout (stack.Loki.WaitForCount says what logql may
// be).
func (l Loki) WaitForCount(t testing.TB, logql string, want int, timeout time.Duration) {
	t.Helper()
	if err := l.Loki.WaitForCount(logql, want, timeout); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Stop shuts Loki down gracefully and waits until it is gone
// (stack.Loki.Stop); Restart brings it back.
func (l Loki) Stop(t testing.TB) {
	t.Helper()
	l.Loki.Stop()
}

// Restart starts Loki again after Stop with the same configuration, ports
// and directory, and waits until /ready answers 200. It fails the test if
// Loki is still running or does not become ready (e.g. another process took
// one of its ports meanwhile). The new process is killed when t ends (and,
// as before, the directory removed when the test that started Loki ends).
func (l Loki) Restart(t testing.TB) {
	t.Helper()
	if err := l.Loki.Restart(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
}

// Prometheus is Debian's Prometheus (stack.Prometheus) whose helpers fail
// the test.
type Prometheus struct{ *stack.Prometheus }

// StartPrometheus starts Prometheus scraping targets (host:port, plain HTTP,
// path /metrics) every second and waits until /-/ready answers 200. It fails
// the test if Prometheus is not installed (Debian package `prometheus`). The
// process is killed and its TSDB removed when the test ends.
func StartPrometheus(t testing.TB, targets ...string) *Prometheus {
	t.Helper()
	return StartPrometheusOpts(t, PrometheusOptions{Targets: targets})
}

// StartPrometheusOpts is StartPrometheus with options: TLS, basic auth (it
// fails the test if htpasswd, Debian's apache2-utils, is missing), a client
// certificate requirement.
func StartPrometheusOpts(t testing.TB, opts PrometheusOptions) *Prometheus {
	t.Helper()
	dir := tempDir(t, "prometheus")
	began := time.Now()
	p, err := stack.RunPrometheusOpts(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("testenv: starting Prometheus: %v", err)
	}
	cleanup(t, "prometheus", p, dir, nil)
	t.Logf("testenv: Prometheus ready at %s in %v (dir %s)", p.URL, time.Since(began).Round(time.Millisecond), dir)
	return &Prometheus{p}
}

// WaitForQuery polls /api/v1/query (at the current time) until promql has at
// least one sample and returns the first one's value. It fails the test on a
// query Prometheus rejects (HTTP 400) and after timeout.
func (p Prometheus) WaitForQuery(t testing.TB, promql string, timeout time.Duration) float64 {
	t.Helper()
	v, err := p.Prometheus.WaitForQuery(promql, timeout)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return v
}

// ClientCert signs a client certificate for commonName with p's CA and
// returns it and its key, PEM-encoded. It fails the test without TLS.
func (p Prometheus) ClientCert(t testing.TB, commonName string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := p.Prometheus.ClientCert(commonName)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return certPEM, keyPEM
}

// Gateway is the TLS and basic-auth gateway (stack.Gateway) whose controls
// fail the test.
type Gateway struct{ *stack.Gateway }

// StartGateway starts nginx in front of opts.Upstream and waits until it
// answers with its configuration. It fails the test if nginx (Debian's
// nginx-light) or htpasswd (apache2-utils) is missing: hack/deps.sh installs
// them. nginx is killed and its directory removed when the test ends.
func StartGateway(t testing.TB, opts GatewayOptions) *Gateway {
	t.Helper()
	dir := tempDir(t, "gateway")
	began := time.Now()
	g, err := stack.RunGateway(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("testenv: starting the gateway: %v", err)
	}
	g.Logf = logf(t)
	cleanup(t, "the gateway's error", g, dir, func() {
		t.Logf("last %d lines of the gateway's access log:\n%s", logTailLines, g.AccessLog(logTailLines))
	})
	t.Logf("testenv: gateway ready at %s in front of %s in %v (dir %s)", g.URL, opts.Upstream, time.Since(began).Round(time.Millisecond), dir)
	return &Gateway{g}
}

// SetMode changes how the gateway answers and waits until the change is in
// effect: "" is normal, an HTTP status from 400 to 599 ("429", "503") makes
// every request answer it. On a stopped gateway, Start applies it.
func (g Gateway) SetMode(t testing.TB, mode string) {
	t.Helper()
	if err := g.Gateway.SetMode(mode); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// SetPassword rotates user's password and waits until the new one is in
// effect: the old one gets 401 from then on.
func (g Gateway) SetPassword(t testing.TB, user, password string) {
	t.Helper()
	if err := g.Gateway.SetPassword(user, password); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Stop shuts the gateway down and returns once its port refuses
// connections. Start brings it back on the same port.
func (g Gateway) Stop(t testing.TB) {
	t.Helper()
	if err := g.Gateway.Stop(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Start starts the gateway again after Stop, on the same port with the same
// files (and any mode or password set meanwhile), and waits until it answers.
// It fails the test if the gateway is running or its port was taken.
func (g Gateway) Start(t testing.TB) {
	t.Helper()
	if err := g.Gateway.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// ClientCert signs a client certificate for commonName with the gateway's
// CA and returns it and its key, PEM-encoded (for RequireClientCert).
func (g Gateway) ClientCert(t testing.TB, commonName string) (certPEM, keyPEM []byte) {
	t.Helper()
	certPEM, keyPEM, err := g.Gateway.ClientCert(commonName)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return certPEM, keyPEM
}

// Client returns an HTTP client that trusts only the gateway's CA and, when
// the gateway requires one, presents a client certificate signed by it. It
// sends no credentials.
func (g Gateway) Client(t testing.TB) *http.Client {
	t.Helper()
	c, err := g.Gateway.Client()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return c
}
